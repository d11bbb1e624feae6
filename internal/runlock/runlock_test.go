package runlock

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary run with RUNLOCK_HOLD=path takes the lock, says so and
// holds it until killed.
func TestMain(m *testing.M) {
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

// waitFor acquires the lock at path in the background, polling every
// 10 ms: waited receives each holder OnWait is told of, got Acquire's
// error once it returns (the lock is released at once).
func waitFor(path string) (waited chan Holder, got chan error) {
	waited, got = make(chan Holder, 4), make(chan error, 1)
	go func() {
		l, err := Acquire(context.Background(), path, Options{Poll: 10 * time.Millisecond, OnWait: func(h Holder) { waited <- h }})
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
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RUNLOCK_HOLD="+path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("holder: %q, %v", line, err)
	}
	return cmd
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
}

// A lock held while its recorded holder has exited (a process it started
// kept the file open) is named as such.
func TestHolderGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	f, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("pid " + strconv.Itoa(dead.Process.Pid) + "\nwhat go test ./harness\n"); err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(t.Context(), path, Options{NoWait: true})
	var he *HeldError
	if !errors.As(err, &he) || !he.Holder.Gone || !strings.Contains(err.Error(), "has exited, but a process it started still holds the lock file open") {
		t.Fatalf("Acquire = %v, want the holder named as exited", err)
	}
}

// A waiter is told of each holder in turn: when another process takes the
// lock first, OnWait names it.
func TestWaitNamesEachHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	h := hold(t, path)
	waited, got := waitFor(path)
	next := func() Holder {
		select {
		case w := <-waited:
			return w
		case err := <-got:
			t.Fatalf("Acquire returned %v while the lock was held", err)
		case <-time.After(10 * time.Second):
			t.Fatal("Acquire did not report its wait")
		}
		return Holder{}
	}
	if w := next(); w.PID != h.Process.Pid {
		t.Fatalf("waiting on %+v, want pid %d", w, h.Process.Pid)
	}
	// Another holder's record, as a process that took the lock writes it.
	other := os.Getppid()
	if err := os.WriteFile(path, []byte("pid "+strconv.Itoa(other)+"\nwhat other\nsince 2026-01-02T03:04:05Z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if w := next(); w.PID != other || w.What != "other" {
		t.Errorf("after the holder changed: %+v, want pid %d, what other", w, other)
	}
	h.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waits 10 s after the holder was killed")
	}
	if len(waited) != 0 {
		t.Errorf("OnWait called again with the same holder: %+v", <-waited)
	}
}
