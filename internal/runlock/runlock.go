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
// it runs and since when into the file, for the runs that find it taken.
package runlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
}

func (h Holder) String() string {
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
// lock. It unwraps to ErrHeld.
type HeldError struct {
	Path   string
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("another measured run holds the machine: %s (lock %s); wait for it (leave out --no-wait) or measure beside it with --allow-concurrent", e.Holder, e.Path)
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
	// each time another process holds the lock.
	OnWait func(Holder)
	// Poll is how often a waiting Acquire tries again; 0 means 200 ms.
	Poll time.Duration
}

// Lock is a held lock.
type Lock struct {
	f *os.File
}

// Acquire takes the lock at path, waiting for its holder unless
// opts.NoWait. It returns ctx.Err() (wrapped) if ctx ends while waiting.
func Acquire(ctx context.Context, path string, opts Options) (*Lock, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	waited := false
	var last Holder // the holder OnWait was last told of
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if opts.NoWait {
			h := readHolder(path)
			f.Close()
			return nil, &HeldError{Path: path, Holder: h}
		}
		if opts.OnWait != nil {
			// Once when the wait begins, and again each time another
			// process takes the lock first: a wait behind a test suite
			// names the package that holds it now.
			h := readHolder(path)
			if !waited || h.PID != 0 && h.PID != last.PID {
				opts.OnWait(h)
				last = h
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
	content := fmt.Sprintf("pid %d\nwhat %s\nsince %s\n", os.Getpid(), strings.ReplaceAll(opts.What, "\n", " "), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(content), 0)
	}
	return &Lock{f: f}, nil
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

// readHolder reads what the holder wrote; it retries briefly, as the holder
// writes right after taking the lock.
func readHolder(path string) Holder {
	var h Holder
	for range 10 {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
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
			if h.PID != 0 {
				h.Gone = errors.Is(syscall.Kill(h.PID, 0), syscall.ESRCH)
				return h
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return h
}
