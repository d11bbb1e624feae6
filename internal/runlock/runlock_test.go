package runlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary run with RUNLOCK_HOLD=path takes the lock, says so and
// holds it until killed; run with RUNLOCK_WAIT=path, it waits for the lock,
// says "waiting N" with its place in line and goes on waiting; run with
// RUNLOCK_LEAVE=path, it takes the lock, starts a sleep that keeps the
// lock file open, says "left PID" with the sleep's pid and exits.
func TestMain(m *testing.M) {
	if p := os.Getenv("RUNLOCK_LEAVE"); p != "" {
		l, err := Acquire(context.Background(), p, Options{What: "leaver"})
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		sleep := exec.Command("sleep", "60")
		sleep.ExtraFiles = []*os.File{l.f}
		if err := sleep.Start(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		os.Stdout.WriteString("left " + strconv.Itoa(sleep.Process.Pid) + "\n")
		os.Exit(0)
	}
	if p := os.Getenv("RUNLOCK_WAIT"); p != "" {
		_, err := Acquire(context.Background(), p, Options{What: "waiter", Poll: 10 * time.Millisecond,
			OnWait: func(w Wait) { os.Stdout.WriteString("waiting " + strconv.Itoa(w.Place) + "\n") }})
		os.Stderr.WriteString(fmt.Sprintf("Acquire returned %v while it should wait until killed\n", err))
		os.Exit(3)
	}
	if p := os.Getenv("RUNLOCK_HOLD"); p != "" {
		l, err := Acquire(context.Background(), p, Options{What: "holder"})
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Minute)
		l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// killHolder kills the holder h with SIGKILL and waits until the waiting
// Acquire, whose result got receives, has the lock.
func killHolder(t *testing.T, h *exec.Cmd, got <-chan error) {
	t.Helper()
	h.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waits 10 s after the holder was killed")
	}
}

// nextTold returns what a waiting Acquire told its OnWait next; the test
// fails if Acquire returned instead (the lock is held) or nothing came in
// 10 s.
func nextTold[T any](t *testing.T, told <-chan T, got <-chan error) T {
	t.Helper()
	select {
	case w := <-told:
		return w
	case err := <-got:
		t.Fatalf("Acquire returned %v while the lock was held", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not told of its wait in 10 s")
	}
	var zero T
	return zero
}

// waitFor acquires the lock at path in the background, polling every
// 10 ms: waited receives each holder OnWait is told of, got Acquire's
// error once it returns (the lock is released at once).
func waitFor(path string) (waited chan Holder, got chan error) {
	waited, got = make(chan Holder, 4), make(chan error, 1)
	go func() {
		l, err := Acquire(context.Background(), path, Options{Poll: 10 * time.Millisecond, OnWait: func(w Wait) { waited <- w.Holder }})
		if err == nil {
			defer l.Release()
		}
		got <- err
	}()
	return waited, got
}

// hold starts another process holding the lock at path.
func hold(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	return child(t, "RUNLOCK_HOLD="+path, "held\n")
}

// child starts the test binary with env and returns once it printed want.
func child(t *testing.T, env, want string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != want {
		t.Fatalf("child with %s: %q, %v; want %q", env, line, err, want)
	}
	return cmd
}

// tickets lists what the queue directory of the lock at path holds.
func tickets(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(QueueDir(path))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestNoWaitNamesTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	h := hold(t, path)
	_, err := Acquire(t.Context(), path, Options{NoWait: true})
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire with the lock held = %v, want *HeldError", err)
	}
	if he.Holder.PID != h.Process.Pid || he.Holder.What != "holder" || he.Holder.Since.IsZero() {
		t.Errorf("holder %+v, want pid %d, what holder, a start time", he.Holder, h.Process.Pid)
	}
	if got, held := Held(path); !held || got.PID != h.Process.Pid {
		t.Errorf("Held = %+v, %v; want pid %d", got, held, h.Process.Pid)
	}
	if left := tickets(t, path); len(left) != 0 {
		t.Errorf("Acquire with NoWait left %v in the queue", left)
	}
}

// A waiting run gets the lock once the holder dies, even by SIGKILL.
func TestWaitThenAcquireAfterKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	h := hold(t, path)
	waited, got := waitFor(path)
	select {
	case w := <-waited:
		if w.PID != h.Process.Pid {
			t.Errorf("waiting on %+v, want pid %d", w, h.Process.Pid)
		}
	case err := <-got:
		t.Fatalf("Acquire returned %v while the lock was held", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not report waiting")
	}
	h.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire after the holder died: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waits 10 s after the holder was killed")
	}
}

func TestWaitCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	hold(t, path)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := Acquire(ctx, path, Options{Poll: 10 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with ctx ending = %v, want DeadlineExceeded", err)
	}
	if left := tickets(t, path); len(left) != 0 {
		t.Errorf("a cancelled wait left %v in the queue", left)
	}
}

func TestReleaseFrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	l, err := Acquire(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	l.Release()
	l2, err := Acquire(t.Context(), path, Options{NoWait: true})
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
	if _, held := Held(path); held {
		t.Error("Held after Release")
	}
	if left := tickets(t, path); len(left) != 0 {
		t.Errorf("Acquire and Release left %v in the queue", left)
	}
}

// A lock held while its recorded holder has exited (a process it started
// kept the file open) is named as such.
func TestHolderGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	leaver := exec.Command(os.Args[0], "-test.run=^$")
	leaver.Env = append(os.Environ(), "RUNLOCK_LEAVE="+path)
	leaver.Stderr = os.Stderr
	out, err := leaver.Output()
	var sleep int
	if _, serr := fmt.Sscanf(string(out), "left %d\n", &sleep); err != nil || serr != nil {
		t.Fatalf("the holder that leaves: %q, %v", out, err)
	}
	t.Cleanup(func() { syscall.Kill(sleep, syscall.SIGKILL) })
	_, err = Acquire(t.Context(), path, Options{NoWait: true})
	var he *HeldError
	if !errors.As(err, &he) || !he.Holder.Gone || he.Holder.Unknown || he.Holder.PID != leaver.Process.Pid || he.Holder.What != "leaver" ||
		!strings.Contains(err.Error(), "has exited, but a process it started still holds the lock file open") {
		t.Fatalf("Acquire = %v (%+v), want pid %d (leaver) named as exited", err, he, leaver.Process.Pid)
	}
}

// A lock held by a process that is not noisysim (the shell's flock(1)) is
// named as such, with its pid and command, whether the lock file holds the
// record of a noisysim holder killed earlier or nothing: never that past
// holder as one that "has exited".
func TestHolderNotNoisysim(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skipf("skipping: no /proc/locks to tell the holding process by: %v", err)
	}
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("skipping: flock(1) not installed (Debian: util-linux)")
	}
	path := filepath.Join(t.TempDir(), "lock")
	killed := exec.Command("true")
	if err := killed.Run(); err != nil {
		t.Fatal(err)
	}
	stale := "pid " + strconv.Itoa(killed.Process.Pid) + "\nwhat ci-gate\nsince 2026-12-03T10:00:00Z\n"
	for _, record := range []string{stale, ""} {
		if err := os.WriteFile(path, []byte(record), 0o666); err != nil {
			t.Fatal(err)
		}
		fl := exec.Command("flock", "-o", path, "sleep", "60") // -o: the sleep does not keep the lock once flock is killed
		if err := fl.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fl.Process.Kill(); fl.Wait() })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, held := Held(path); held {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("flock(1) did not take the lock in 10 s")
			}
		}
		_, err := Acquire(t.Context(), path, Options{NoWait: true})
		var he *HeldError
		if !errors.As(err, &he) || !he.Holder.Unknown || he.Holder.PID != fl.Process.Pid || he.Holder.What != "flock" || he.Holder.Gone {
			t.Errorf("record %q: Acquire = %v (%+v), want pid %d (flock) as the unknown holder", record, err, he, fl.Process.Pid)
		}
		msg := fmt.Sprint(err)
		if want := fmt.Sprintf("pid %d (flock), not a noisysim run", fl.Process.Pid); !strings.Contains(msg, want) ||
			strings.Contains(msg, "has exited") || strings.Contains(msg, "ci-gate") || strings.Contains(msg, strconv.Itoa(killed.Process.Pid)+" ") {
			t.Errorf("record %q: %q; want it to say %q and nothing of the past holder", record, msg, want)
		}
		// A waiter is told the same.
		waited, got := waitFor(path)
		if w := nextTold(t, waited, got); !w.Unknown || w.PID != fl.Process.Pid {
			t.Errorf("record %q: the waiter was told %+v, want pid %d as the unknown holder", record, w, fl.Process.Pid)
		}
		fl.Process.Kill()
		fl.Wait()
		if err := <-got; err != nil {
			t.Fatalf("record %q: Acquire once flock(1) was killed: %v", record, err)
		}
	}
}

// A ticket another user's waiter cannot open (root's, mode 000) does not
// stop the line: dead (no flock on it), it is passed over and left in
// place; live, it keeps its place until its waiter leaves.
func TestUnreadableTicket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to leave a ticket another user cannot open")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("skipping: no user nobody to wait as: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// A directory and a copy of this test binary the other user can reach.
	dir, err := os.MkdirTemp("", "runlock-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "runlock.test")
	b, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lock")
	queue := QueueDir(path)
	if err := os.Mkdir(queue, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(queue, 0o777)
	// A dead waiter's ticket, first in line, that only root can open.
	dead := filepath.Join(queue, fmt.Sprintf("%020d-%d-1%s", 1, os.Getpid(), ticketExt))
	if err := os.WriteFile(dead, []byte("pid 1\nwhat root's run\n"), 0o000); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 8)
	asNobody := func(env string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = []string{"PATH=/usr/bin:/bin", env}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		go func() {
			r := bufio.NewReader(out)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				lines <- env[:strings.Index(env, "=")] + " " + line
			}
		}()
		return cmd
	}
	next := func(want string) {
		t.Helper()
		select {
		case line := <-lines:
			if line != want {
				t.Fatalf("the other user's process said %q, want %q", line, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the other user's process did not say %q in 10 s (the queue holds %v)", want, tickets(t, path))
		}
	}
	holder := asNobody("RUNLOCK_HOLD=" + path)
	next("RUNLOCK_HOLD held\n")
	if _, err := os.Stat(dead); err != nil {
		t.Errorf("the dead waiter's ticket another user cannot open was removed: %v", err)
	}

	// A live waiter's ticket (root's, flocked, then mode 000) keeps its
	// place: the other user's waiter is 2nd in line, and 1st once it goes.
	live, err := enqueue(queue, "root's waiter")
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	if err := os.Chmod(filepath.Join(queue, live.name), 0o000); err != nil {
		t.Fatal(err)
	}
	asNobody("RUNLOCK_WAIT=" + path)
	next("RUNLOCK_WAIT waiting 2\n")
	live.remove()
	next("RUNLOCK_WAIT waiting 1\n")
	holder.Process.Kill()
}

// A waiter is told of each holder in turn: when another process takes the
// lock first (here a waiter ahead of it in line), OnWait names it.
func TestWaitNamesEachHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	h := hold(t, path)
	// Another process waits first; it says "held" once it has the lock.
	ahead := exec.Command(os.Args[0], "-test.run=^$")
	ahead.Env = append(os.Environ(), "RUNLOCK_HOLD="+path)
	ahead.Stderr = os.Stderr
	aheadOut, _ := ahead.StdoutPipe()
	if err := ahead.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ahead.Process.Kill(); ahead.Wait() })
	for deadline := time.Now().Add(10 * time.Second); len(tickets(t, path)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process ahead took no ticket in 10 s")
		}
	}
	waited, got := waitFor(path)
	next := func() Holder { t.Helper(); return nextTold(t, waited, got) }
	if w := next(); w.PID != h.Process.Pid {
		t.Fatalf("waiting on %+v, want pid %d", w, h.Process.Pid)
	}
	h.Process.Kill()
	h.Wait()
	if line, err := bufio.NewReader(aheadOut).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the process ahead: %q, %v; want it to take the lock", line, err)
	}
	if w := next(); w.PID != ahead.Process.Pid || w.What != "holder" || w.Unknown {
		t.Errorf("after the holder changed: %+v, want pid %d, what holder", w, ahead.Process.Pid)
	}
	killHolder(t, ahead, got)
	// Told once more at most: when its place went from 2nd to 1st, if
	// it saw the new holder before the process ahead left the line.
	if n := len(waited); n > 1 || n == 1 && (<-waited).PID != ahead.Process.Pid {
		t.Errorf("OnWait called %d more times, want at most once more for the place, naming pid %d", n, ahead.Process.Pid)
	}
}

// Waiters take the lock in the order they began to wait, however often
// each tries: the later ones here poll 16 times as often as the first,
// which, first come first served, would take the lock before it.
func TestWaitersInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	h := hold(t, path)
	const n = 4
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		told := make(chan Wait, 8)
		poll := time.Duration(80>>i) * time.Millisecond // 80, 40, 20, 10 ms
		go func() {
			l, err := Acquire(context.Background(), path, Options{What: "waiter " + strconv.Itoa(i), Poll: poll,
				OnWait: func(w Wait) {
					select {
					case told <- w:
					default:
					}
				}})
			if err != nil {
				errs <- err
				return
			}
			order <- i
			time.Sleep(50 * time.Millisecond) // long enough for each later waiter to try a few times
			l.Release()
		}()
		// The next waiter starts once this one is in line.
		select {
		case w := <-told:
			if w.Place != i+1 || w.Holder.PID != h.Process.Pid {
				t.Errorf("waiter %d first told %+v (%s), want %s behind pid %d", i, w, w.InLine(), Wait{Place: i + 1}.InLine(), h.Process.Pid)
			}
		case err := <-errs:
			t.Fatalf("waiter %d: %v", i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d did not report its wait", i)
		}
	}
	if got := len(tickets(t, path)); got != n {
		t.Errorf("%d tickets in the queue with %d waiting", got, n)
	}
	h.Process.Signal(syscall.SIGKILL)
	var got []int
	for range n {
		select {
		case i := <-order:
			got = append(got, i)
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatalf("the waiters took the lock in the order %v, then none for 10 s", got)
		}
	}
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Errorf("the waiters took the lock in the order %v, want the order they began to wait, [0 1 2 3]", got)
	}
	if left := tickets(t, path); len(left) != 0 {
		t.Errorf("the queue holds %v once every waiter had the lock", left)
	}
}

// A waiter killed by SIGKILL leaves its ticket, but not its place: the
// waiter behind it moves up and takes the lock once the holder is gone.
func TestKilledWaiterLeavesTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	h := hold(t, path)
	dead := child(t, "RUNLOCK_WAIT="+path, "waiting 1\n")
	told := make(chan Wait, 8)
	got := make(chan error, 1)
	go func() {
		l, err := Acquire(context.Background(), path, Options{Poll: 10 * time.Millisecond, OnWait: func(w Wait) {
			select {
			case told <- w:
			default:
			}
		}})
		if err == nil {
			l.Release()
		}
		got <- err
	}()
	next := func() Wait { t.Helper(); return nextTold(t, told, got) }
	if w := next(); w.Place != 2 {
		t.Fatalf("behind a waiting process: told %s, want 2nd in line", w.InLine())
	}
	dead.Process.Signal(syscall.SIGKILL)
	dead.Wait()
	if w := next(); w.Place != 1 || w.Holder.PID != h.Process.Pid {
		t.Fatalf("after the waiter ahead was killed: told %+v (%s), want 1st in line behind pid %d", w, w.InLine(), h.Process.Pid)
	}
	killHolder(t, h, got)
	if left := tickets(t, path); len(left) != 0 {
		t.Errorf("the killed waiter's ticket is still in the queue: %v", left)
	}
}

// With NoWait, a free lock that others wait for is not taken: they go
// first, and the error names the first of them.
func TestNoWaitYieldsToTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	// A waiter in line whose turn has come but that has not yet tried.
	w, err := enqueue(QueueDir(path), "go test ./harness")
	if err != nil {
		t.Fatal(err)
	}
	defer w.remove()
	_, err = Acquire(t.Context(), path, Options{NoWait: true})
	var he *HeldError
	if !errors.As(err, &he) || !he.Next || he.Holder.PID != os.Getpid() || he.Holder.What != "go test ./harness" {
		t.Fatalf("Acquire with NoWait and a waiter in line = %v (%+v), want *HeldError naming the waiter", err, he)
	}
	if !strings.Contains(err.Error(), "first in line") {
		t.Errorf("the error does not say the run named waits first in line: %v", err)
	}
	if _, held := Held(path); held {
		t.Error("NoWait kept the lock it gave up")
	}
	w.remove()
	l, err := Acquire(t.Context(), path, Options{NoWait: true})
	if err != nil {
		t.Fatalf("Acquire with NoWait once the line is empty: %v", err)
	}
	l.Release()
}

// The queue directory and the tickets are writable by every user whatever
// the umask: runs of different users wait in one line.
func TestQueueWritableByAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	tk, err := enqueue(QueueDir(path), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer tk.remove()
	for p, want := range map[string]os.FileMode{QueueDir(path): 0o777, filepath.Join(QueueDir(path), tk.name): 0o666} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
}

func TestInLine(t *testing.T) {
	for place, want := range map[int]string{1: "1st in line", 2: "2nd in line", 3: "3rd in line", 4: "4th in line",
		11: "11th in line", 12: "12th in line", 13: "13th in line", 21: "21st in line", 102: "102nd in line", 111: "111th in line"} {
		if got := (Wait{Place: place}).InLine(); got != want {
			t.Errorf("place %d: %q, want %q", place, got, want)
		}
	}
}

// A run that cannot take a ticket (here the queue's path is a file, as a
// queue directory another user left unwritable is to a run) still takes a
// free lock, with or without NoWait, and waits for a held one without a
// place, saying why, then takes it once it is free.
func TestNoTicketStillLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(QueueDir(path), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, noWait := range []bool{false, true} {
		l, err := Acquire(t.Context(), path, Options{NoWait: noWait})
		if err != nil {
			t.Fatalf("Acquire of a free lock (NoWait %v) with no queue to join: %v", noWait, err)
		}
		l.Release()
	}
	holder := hold(t, path)
	waited, got := make(chan Wait, 4), make(chan error, 1)
	go func() {
		l, err := Acquire(context.Background(), path, Options{Poll: 10 * time.Millisecond, OnWait: func(w Wait) { waited <- w }})
		if err == nil {
			defer l.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned %v while the lock was held", err)
	case w := <-waited:
		if w.Holder.PID != holder.Process.Pid || w.NoTicket == nil {
			t.Errorf("waiting for pid %d (no ticket: %v), want the holder %d and why there is no ticket", w.Holder.PID, w.NoTicket, holder.Process.Pid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wait reported")
	}
	holder.Process.Kill()
	holder.Wait()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire once the holder was killed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not take the lock once its holder was killed")
	}
}

// A waiter behind others while no process holds the lock is told so, and
// who takes it next (the first ticket's waiter), not the last holder the
// lock file records nor "a run whose pid is not recorded yet".
func TestWaitBehindTheLineWhileFree(t *testing.T) {
	if _, err := os.ReadFile("/proc/locks"); err != nil || runtime.GOOS != "linux" {
		t.Skip("skipping: no /proc/locks to tell a free lock by")
	}
	path := filepath.Join(t.TempDir(), "lock")
	// A holder killed by SIGKILL left its record.
	if err := os.WriteFile(path, []byte("pid 999999\nwhat killed run\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	ahead, err := enqueue(QueueDir(path), "the run ahead")
	if err != nil {
		t.Fatal(err)
	}
	defer ahead.remove()
	told := make(chan Wait, 4)
	got := make(chan error, 1)
	go func() {
		l, err := Acquire(context.Background(), path, Options{Poll: 10 * time.Millisecond, OnWait: func(w Wait) { told <- w }})
		if err == nil {
			defer l.Release()
		}
		got <- err
	}()
	w := nextTold(t, told, got)
	if !w.Next || w.Place != 2 || w.Holder.PID != os.Getpid() || w.Holder.What != "the run ahead" {
		t.Errorf("told %+v, want Next, 2nd in line, behind pid %d (the run ahead)", w, os.Getpid())
	}
	ahead.remove()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not take the free lock in 10 s once the line ahead left")
	}

	// A ticket that holds no record is named by the pid in its name.
	empty := filepath.Join(t.TempDir(), fmt.Sprintf("%020d-4242-1%s", 1, ticketExt))
	if err := os.WriteFile(empty, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if h := ticketHolder(empty); h.PID != 4242 {
		t.Errorf("ticketHolder of an empty ticket = %+v, want pid 4242 from its name", h)
	}
}
