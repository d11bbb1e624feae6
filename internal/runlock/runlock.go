// Package runlock is the machine-wide lock a measured run holds, so that two
// runs measuring latency on one machine do not measure each other.
//
//	l, err := runlock.Acquire(ctx, runlock.Path(), runlock.Options{What: "ci-gate"})
//	if err != nil { … } // *HeldError with NoWait, ctx.Err() while waiting
//	defer l.Release()
//
// The lock is an flock(2) on a file (DefaultPath, or $NOISYSIM_LOCK_FILE):
// the kernel releases it when its holder exits, however it exits (kill -9
// included), so a lock is never left stale. The holder writes its pid, what
// it runs and since when into the file, for the runs that find it taken. A
// holder killed leaves its record behind, and a process that is not
// noisysim (the shell's flock(1) on the file) writes none: on Linux the
// record is checked against the process /proc/locks says holds the lock,
// and a holder with no record of its own is named as not a noisysim run
// (Holder.Unknown), never as the one the file last recorded.
//
// Waiters take the lock in the order they began to wait. Each waiter holds
// an flock on a ticket of its own in the queue directory beside the lock
// file (QueueDir), named by the time it began to wait, so that tickets sort
// by arrival; only the waiter whose ticket comes first tries the lock. A
// ticket whose flock can be taken belongs to a waiter that died (the kernel
// freed its flock), and whoever finds it removes it, so a dead waiter never
// blocks the line. A waiter removes its own ticket once it holds the lock,
// or when its wait ends (ctx). A waiter that cannot take a ticket (the queue
// directory is another user's and not writable, or is not a directory)
// still waits, without a place: it takes the lock when it is free and no
// ticket it can read is ahead of it, and is told why (Wait.NoTicket). A
// ticket it cannot open or lock (another user's, left with mode 000) is
// judged by /proc/locks: with no flock on it, its waiter is dead and the
// ticket is passed over (left for a user who can open it to remove);
// without /proc/locks, by whether the pid in its name still runs.
package runlock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultPath is the lock file shared by every user of the machine.
const DefaultPath = "/tmp/noisysim-measure.lock"

// EnvPath names the environment variable that overrides DefaultPath.
const EnvPath = "NOISYSIM_LOCK_FILE"

// Path returns $NOISYSIM_LOCK_FILE, or DefaultPath.
func Path() string {
	if p := os.Getenv(EnvPath); p != "" {
		return p
	}
	return DefaultPath
}

// ErrHeld marks a lock another run holds.
var ErrHeld = errors.New("another measured run holds the machine")

// Holder is who holds the lock.
type Holder struct {
	PID   int
	What  string
	Since time.Time
	// Gone is true when no process PID runs any more while the lock is
	// held: a process the holder started (a server, a test binary) kept
	// the lock file open, and holds the lock until it exits.
	Gone bool
	// Unknown is true when the process holding the lock is not the one
	// the lock file records, or the file records none: a process that is
	// not noisysim holds it (the shell's flock(1) on the lock file), and
	// what the file holds is a past holder's record, or nothing. PID and
	// What are then the holding process's pid and command name, as Linux's
	// /proc/locks and /proc/PID/comm tell them ("" when not), and Since
	// is zero.
	Unknown bool
}

func (h Holder) String() string {
	if h.Unknown {
		s := "pid " + strconv.Itoa(h.PID)
		if h.What != "" {
			s += " (" + h.What + ")"
		}
		s += ", not a noisysim run (the lock file holds no record of it)"
		if h.Gone {
			s += "; it has exited, but a process it started still holds the lock file open (fuser -v on the lock file names it)"
		}
		return s
	}
	if h.PID == 0 {
		return "a run whose pid is not recorded yet"
	}
	s := "pid " + strconv.Itoa(h.PID)
	if h.What != "" {
		s += " (" + h.What + ")"
	}
	if !h.Since.IsZero() {
		s += " since " + h.Since.UTC().Format(time.RFC3339)
	}
	if h.Gone {
		s += "; pid " + strconv.Itoa(h.PID) + " has exited, but a process it started still holds the lock file open (fuser -v on the lock file names it): the lock is free when that process exits"
	}
	return s
}

// HeldError is returned by Acquire with NoWait when another run holds the
// lock, or when the lock is free but other runs wait for it. It unwraps to
// ErrHeld.
type HeldError struct {
	Path   string
	Holder Holder
	// Next is true when the lock was free but runs wait in line for it:
	// Holder is then the first of them, which takes it next.
	Next bool
}

func (e *HeldError) Error() string {
	who := e.Holder.String()
	if e.Next {
		who += ", first in line, taking the lock its last holder released"
	}
	return fmt.Sprintf("another measured run holds the machine: %s (lock %s); wait for it (leave out --no-wait) or measure beside it with --allow-concurrent", who, e.Path)
}

// Unwrap returns ErrHeld.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Options tunes Acquire.
type Options struct {
	// What says what the holder runs, e.g. the scenario's name.
	What string
	// NoWait returns a *HeldError at once when the lock is taken, instead
	// of waiting.
	NoWait bool
	// OnWait, when not nil, is called when Acquire has to wait, and again
	// each time another process holds the lock or the waiter's place in
	// line changes.
	OnWait func(Wait)
	// Poll is how often a waiting Acquire looks at the line and the lock
	// again; 0 means 200 ms.
	Poll time.Duration
}

// Wait is what OnWait is told: who holds the lock, and the waiter's place
// in line.
type Wait struct {
	Holder Holder
	// Place is 1 for the waiter that takes the lock next, 2 for the one
	// behind it, and so on.
	Place int
	// NoTicket, when not nil, is why the waiter could not join the line:
	// it waits behind every ticket it can read, without a place of its own.
	NoTicket error
	// Next is true when no process holds the lock but runs wait ahead in
	// line (they take it first): Holder is then the first of them, as its
	// ticket tells (the pid in the ticket's name when it cannot be read).
	// Where /proc/locks cannot be read, Next is false and Holder is read
	// from the lock file as when it is held.
	Next bool
}

// InLine says the place, e.g. "2nd in line".
func (w Wait) InLine() string {
	suffix := "th"
	switch {
	case w.Place%100 >= 11 && w.Place%100 <= 13:
	case w.Place%10 == 1:
		suffix = "st"
	case w.Place%10 == 2:
		suffix = "nd"
	case w.Place%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(w.Place) + suffix + " in line"
}

// QueueDir is the directory of the tickets of the runs waiting for the lock
// at path: path with ".queue" added.
func QueueDir(path string) string { return path + ".queue" }

// Lock is a held lock.
type Lock struct {
	f *os.File
}

// Acquire takes the lock at path, waiting for its holder and for the runs
// that began to wait before it, unless opts.NoWait. It returns ctx.Err()
// (wrapped) if ctx ends while waiting, and then leaves no ticket behind.
func Acquire(ctx context.Context, path string, opts Options) (*Lock, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	if opts.NoWait {
		return tryNow(f, path, opts.What)
	}
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	// A ticket orders the waiters; a run that cannot take one (the queue
	// is not writable, or not a directory) must not fail for it, as the
	// lock itself is what keeps runs apart: it waits without a place.
	t, noTicket := enqueue(QueueDir(path), opts.What)
	mine := ""
	if noTicket == nil {
		defer t.remove()
		mine = t.name
	}
	waited := false
	var last Wait // what OnWait was last told
	for {
		ahead, err := line(QueueDir(path), mine)
		if err != nil && noTicket == nil {
			f.Close()
			return nil, err
		}
		if len(ahead) == 0 {
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				break
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				f.Close()
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
		}
		if opts.OnWait != nil {
			// Once when the wait begins, and again each time another
			// process takes the lock or a waiter ahead leaves the line:
			// a wait behind a test suite names the package that holds it
			// now.
			w := Wait{Place: len(ahead) + 1, NoTicket: noTicket}
			if len(ahead) > 0 && free(path) {
				// The lock file holds the last holder's record, or none.
				w.Holder, w.Next = ticketHolder(filepath.Join(QueueDir(path), ahead[0])), true
			} else {
				w.Holder = readHolder(path)
			}
			if !waited || w.Place != last.Place || w.Holder.PID != 0 && w.Holder.PID != last.Holder.PID {
				opts.OnWait(w)
				last = w
			}
		}
		waited = true
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for the measured run holding %s: %w", path, ctx.Err())
		case <-time.After(opts.Poll):
		}
	}
	// The record is written before the ticket goes (deferred), so that the
	// waiters behind, told of their new place, read the new holder.
	writeHolder(f, opts.What)
	return &Lock{f: f}, nil
}

// tryNow takes the lock open in f at once, or returns a *HeldError: when
// another process holds it, or when it is free but runs wait for it (they
// go first).
func tryNow(f *os.File, path, what string) (*Lock, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		h := readHolder(path)
		f.Close()
		return nil, &HeldError{Path: path, Holder: h}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	ahead, err := line(QueueDir(path), "")
	if err != nil {
		// A queue that cannot be read holds no waiter that could be
		// told of the lock: the free lock is this run's.
		ahead, err = nil, nil
	}
	if len(ahead) > 0 {
		b, _ := os.ReadFile(filepath.Join(QueueDir(path), ahead[0]))
		f.Close() // releases the lock
		return nil, &HeldError{Path: path, Holder: parseHolder(b), Next: true}
	}
	writeHolder(f, what)
	return &Lock{f: f}, nil
}

// writeHolder records the holder in the lock file it holds.
func writeHolder(f *os.File, what string) {
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(record(what)), 0)
	}
}

// record is what a holder writes in the lock file and a waiter in its
// ticket (parseHolder reads both): this process's pid, what it runs, since
// now.
func record(what string) string {
	return fmt.Sprintf("pid %d\nwhat %s\nsince %s\n", os.Getpid(), strings.ReplaceAll(what, "\n", " "), time.Now().UTC().Format(time.RFC3339))
}

// ticketExt ends the name of every ticket in a queue directory.
const ticketExt = ".ticket"

// ticketSeq orders the tickets one process takes within a nanosecond.
var ticketSeq atomic.Uint64

// A ticket is a waiter's place in line: a file in the queue directory,
// flocked by its waiter for as long as it waits.
type ticket struct {
	f    *os.File
	dir  string
	name string
}

// enqueue puts a ticket for a waiter that runs what at the end of the line
// in dir, making dir when missing. Tickets are named by the wall-clock time
// they are taken (nanoseconds, zero-padded), then pid and a sequence
// number, so that they sort by arrival.
func enqueue(dir, what string) (*ticket, error) {
	if err := os.Mkdir(dir, 0o777); err == nil {
		os.Chmod(dir, 0o777) // the umask took bits away; every user's waiters write here
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("make lock queue %s: %w", dir, err)
	}
	name := fmt.Sprintf("%020d-%d-%d%s", time.Now().UnixNano(), os.Getpid(), ticketSeq.Add(1), ticketExt)
	p := filepath.Join(dir, name)
	for range 10 {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err != nil {
			return nil, fmt.Errorf("take a ticket in lock queue %s: %w", dir, err)
		}
		if st, err := f.Stat(); err == nil && st.Mode().Perm() != 0o666 {
			f.Chmod(0o666)
		}
		// Blocking: another waiter that listed the line between the
		// create and this flock holds it for an instant, takes it for a
		// dead waiter's and removes it.
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			os.Remove(p)
			return nil, fmt.Errorf("lock ticket %s: %w", p, err)
		}
		if sameFile(f, p) {
			f.WriteString(record(what))
			return &ticket{f: f, dir: dir, name: name}, nil
		}
		f.Close() // removed as dead before it was locked: take it again
	}
	return nil, fmt.Errorf("take a ticket in lock queue %s: removed 10 times before it could be locked", dir)
}

// sameFile reports whether path still names the file open in f.
func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// remove takes the ticket out of the line. It is idempotent.
func (t *ticket) remove() {
	if t.f == nil {
		return
	}
	os.Remove(filepath.Join(t.dir, t.name))
	t.f.Close()
	t.f = nil
}

// line returns the names of the live tickets in dir that sort before mine
// (all of them when mine is ""), in order, and removes the tickets of dead
// waiters on its way. A missing dir is an empty line.
func line(dir, mine string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lock queue %s: %w", dir, err)
	}
	var ahead []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ticketExt) {
			continue
		}
		if mine != "" && n >= mine {
			break
		}
		if !removeIfDead(filepath.Join(dir, n)) {
			ahead = append(ahead, n)
		}
	}
	return ahead, nil
}

// removeIfDead removes the ticket at p if no waiter holds its flock, and
// reports whether the ticket is out of the line. A ticket this process
// cannot open or lock (another user's, mode 000) is out of the line when
// its waiter is dead (lockedTicket), but stays where it is: a live
// waiter's ticket is never removed, and this one cannot be told apart
// from it by taking its flock.
func removeIfDead(p string) bool {
	// O_NONBLOCK: a FIFO in the queue must not stop the line in open.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return !lockedTicket(p)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false
	}
	if err != nil {
		return !lockedTicket(p)
	}
	os.Remove(p)
	return true
}

// lockedTicket reports whether a waiter holds the ticket at p, which this
// process cannot lock to find out: whether /proc/locks lists an flock on
// it, or where it cannot be read, whether the pid in the ticket's name
// (enqueue's) still runs.
func lockedTicket(p string) bool {
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err == nil {
		if pids, ok := flockers(fi); ok {
			return len(pids) > 0
		}
	}
	// "<nanoseconds>-<pid>-<seq>.ticket"
	parts := strings.Split(strings.TrimSuffix(filepath.Base(p), ticketExt), "-")
	if len(parts) != 3 {
		return true // not enqueue's name: whose it is cannot be told
	}
	pid, err := strconv.Atoi(parts[1])
	return err != nil || pid <= 0 || !exited(pid)
}

// Held returns the lock's holder and true when another process holds it.
func Held(path string) (Holder, bool) {
	f, err := open(path)
	if err != nil {
		return Holder{}, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return readHolder(path), true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return Holder{}, false
}

// Release frees the lock. It is idempotent.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// open opens (creating) the lock file, writable by every user so that
// runs of different users share it.
func open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if st, err := f.Stat(); err == nil && st.Mode().Perm() != 0o666 {
		f.Chmod(0o666) // the umask took bits away; best effort (another user's file stays as it is)
	}
	return f, nil
}

// readHolder returns who holds the lock at path: the record in the file,
// when it is the holding process's (on Linux, the pid /proc/locks names;
// elsewhere, or when /proc/locks lists no holder, any record), or the
// holding process as Unknown. It retries briefly, as a holder writes its
// record right after taking the lock.
func readHolder(path string) Holder {
	var h Holder
	var locker int
	for range 10 {
		b, _ := os.ReadFile(path)
		h = parseHolder(b)
		locker = 0
		if fi, err := os.Stat(path); err == nil {
			if pids, ok := flockers(fi); ok && len(pids) > 0 {
				locker = pids[0]
			}
		}
		if h.PID != 0 && (locker == 0 || locker == h.PID) {
			h.Gone = exited(h.PID)
			return h
		}
		time.Sleep(10 * time.Millisecond)
	}
	if locker != 0 {
		return Holder{PID: locker, What: command(locker), Unknown: true, Gone: exited(locker)}
	}
	return h
}

// free reports whether /proc/locks lists no flock on the lock file at path;
// false where it cannot tell.
func free(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	pids, ok := flockers(fi)
	return ok && len(pids) == 0
}

// ticketHolder reads the waiter of the ticket at p as its record tells, or
// by the pid in the ticket's name (enqueue's) when it cannot be read.
func ticketHolder(p string) Holder {
	b, _ := os.ReadFile(p)
	h := parseHolder(b)
	if h.PID == 0 {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(p), ticketExt), "-")
		if len(parts) == 3 {
			h.PID, _ = strconv.Atoi(parts[1])
		}
	}
	return h
}

// exited reports whether no process pid runs.
func exited(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// parseHolder reads a record as writeHolder and enqueue write it.
func parseHolder(b []byte) Holder {
	var h Holder
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			h.PID, _ = strconv.Atoi(v)
		case "what":
			h.What = v
		case "since":
			h.Since, _ = time.Parse(time.RFC3339, v)
		}
	}
	return h
}
