package suitelock

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/internal/runlock"
)

// The child side of TestHoldWaitsForTheHolder: it holds the machine, says
// so with the lock file its own runs would use, and exits.
func TestHelperHold(t *testing.T) {
	if os.Getenv("SUITELOCK_CHILD") == "" {
		t.Skip("skipping: the child side of TestHoldWaitsForTheHolder")
	}
	os.Setenv(runlock.EnvPath, os.Getenv("SUITELOCK_CHILD"))
	maxIdleWait = time.Second // the machine's load is not what this checks
	Hold("internal/suitelock")
	os.Stdout.WriteString("held " + os.Getenv(runlock.EnvPath) + "\n")
	// The lock must outlive garbage collections: a lock file closed by a
	// finalizer frees the machine while the tests still run.
	runtime.GC()
	runtime.GC()
	// (flock locks belong to open files: a second open in this process
	// finds the lock taken as long as Hold's file is open.)
	if _, ok := runlock.Held(os.Getenv("SUITELOCK_CHILD")); !ok {
		os.Stdout.WriteString("released by a garbage collection\n")
		t.Error("the lock was released by a garbage collection while the tests run")
	}
}

// A second test binary waits for the first, says whom it waits for, and
// goes on once the first lets go.
func TestHoldWaitsForTheHolder(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock")
	first, err := runlock.Acquire(context.Background(), lock, runlock.Options{What: "go test ./first"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperHold$", "-test.v")
	cmd.Env = append(os.Environ(), "SUITELOCK_CHILD="+lock)
	out, _ := cmd.StdoutPipe()
	errOut, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // on a failure, not left waiting for the lock
	held := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "held ") {
				held <- sc.Text()
			}
			if strings.HasPrefix(sc.Text(), "released ") {
				t.Error(sc.Text())
			}
		}
		close(held)
	}()
	// errText is read once errDone is closed: the child's stderr ended.
	var errText strings.Builder
	waiting, errDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(errDone)
		sc := bufio.NewScanner(errOut)
		for told := false; sc.Scan(); {
			errText.WriteString(sc.Text() + "\n")
			if !told && strings.Contains(sc.Text(), "waiting for the machine: pid") {
				told = true
				close(waiting)
			}
		}
	}()
	// The second binary says it waits once it runs, which on a busy
	// machine can take a while for a binary built with -race: no fixed
	// time is enough for it to get there, so its word is waited for.
	select {
	case line, ok := <-held:
		if ok {
			t.Fatalf("the second binary went on while the first held the machine: %q", line)
		}
		<-errDone
		t.Fatalf("the second binary ended without saying it waits:\n%s", errText.String())
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the second binary did not say it waits within 30 s")
	}
	// Waiting, it stays so while the first holds the machine.
	select {
	case line := <-held:
		t.Fatalf("the second binary went on while the first held the machine: %q", line)
	case <-time.After(time.Second):
	}
	first.Release()
	select {
	case line, ok := <-held:
		if !ok {
			<-errDone
			t.Fatalf("the second binary ended without holding the machine:\n%s", errText.String())
		}
		if line != "held "+InnerPath(lock) {
			t.Errorf("the binary's own runs must take a lock file of their own, not the one it holds: %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second binary did not go on after the first let go")
	}
	<-errDone // all read before Wait closes the pipes
	if err := cmd.Wait(); err != nil {
		t.Errorf("the second binary failed (%v): the lock did not last while it ran", err)
	}
	if !strings.Contains(errText.String(), "go test ./first") || !strings.Contains(errText.String(), "(1st in line)") {
		t.Errorf("the waiting binary did not say whom it waits for:\n%s", errText.String())
	}
}

// A process burning a core beside the test keeps the machine from counting
// as idle.
func TestWaitIdleSeesABurner(t *testing.T) {
	burner := exec.Command("sh", "-c", "while :; do :; done")
	if err := burner.Start(); err != nil {
		t.Skipf("skipping: cannot start a shell: %v", err)
	}
	defer func() { burner.Process.Kill(); burner.Wait() }()
	if _, _, ok := readCPU(); !ok {
		t.Skip("skipping: no /proc/stat")
	}
	busy, idle := waitIdle(2 * time.Second)
	if idle {
		t.Fatalf("a burner beside the test counted as idle (%.2f other cores busy)", busy)
	}
	if busy < 0.5 {
		t.Errorf("a burner's core read as %.2f cores", busy)
	}
}
