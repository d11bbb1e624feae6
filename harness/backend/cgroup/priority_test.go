package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Prioritize moves the whole process (every thread) into its group with
// the weight asked for; StartChild forks children in the group the process
// came from, even from many goroutines at once, with a parent-death signal
// that does not fire while the process lives; a plain fork would inherit
// the group; Close brings the process back and removes the group.
func TestPrioritize(t *testing.T) {
	h := realHierarchy(t)
	home, err := processGroup(h)
	if err != nil {
		t.Fatal(err)
	}
	rel := "noisysim-test-prio-" + strconv.Itoa(os.Getpid())
	p, err := h.Prioritize(rel, DefaultWeight)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			p.Close()
		}
	})
	if Current() != p {
		t.Fatalf("Current() = %v, want the Priority in force", Current())
	}
	if _, err := h.Prioritize(rel+"-2", 2); err == nil {
		t.Errorf("a second Prioritize in force at once: no error")
	}
	file, want := "cpu.shares", "8192"
	if h.Version == V2 {
		file, want = "cpu.weight", "800"
	}
	if b, _ := os.ReadFile(filepath.Join(p.Group().Path, file)); strings.TrimSpace(string(b)) != want {
		t.Errorf("%s = %q, want %s", file, strings.TrimSpace(string(b)), want)
	}
	if !strings.Contains(p.String(), p.Group().Path) || !strings.Contains(p.String(), want) {
		t.Errorf("String() = %q: want the group and its weight", p.String())
	}
	// Every thread moved (v1 groups threads one by one).
	runtime.GC() // some runtime threads are busy
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/cgroup")
		if !strings.Contains(string(b), strings.TrimPrefix(p.Group().Path, h.Root)) {
			t.Errorf("thread %s is not in %s: %s", task.Name(), p.Group().Path, b)
		}
	}

	// Children: through StartChild outside, from 8 goroutines at once.
	var wg sync.WaitGroup
	kids := make([]*exec.Cmd, 8)
	errs := make([]error, 8)
	for i := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kids[i] = exec.Command("sleep", "30")
			kids[i].SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			errs[i] = StartChild(kids[i], (*exec.Cmd).Start)
		}()
	}
	wg.Wait()
	for i, k := range kids {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer func() { k.Process.Kill(); k.Wait() }()
		if !inGroup(t, h, k.Process.Pid, home.Path) {
			t.Errorf("child %d (pid %d) started through StartChild is not in %s", i, k.Process.Pid, home.Path)
		}
	}
	// The control: a plain fork inherits the group.
	plain := exec.Command("sleep", "30")
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait() }()
	if !inGroup(t, h, plain.Process.Pid, p.Group().Path) {
		t.Errorf("a plain fork (pid %d) is not in %s: the check cannot tell", plain.Process.Pid, p.Group().Path)
	}
	// The forking thread lives on: the parent-death signal has not fired.
	time.Sleep(200 * time.Millisecond)
	for i, k := range kids {
		if err := k.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("child %d died: %v", i, err)
		}
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if !inGroup(t, h, os.Getpid(), home.Path) {
		t.Errorf("after Close the process is not back in %s", home.Path)
	}
	if _, err := os.Stat(p.Group().Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Close", p.Group().Path)
	}
	if Current() != nil {
		t.Errorf("Current() after Close = %v, want nil", Current())
	}
	// Nothing in force: StartChild is a plain start.
	after := exec.Command("true")
	if err := StartChild(after, (*exec.Cmd).Start); err != nil {
		t.Fatal(err)
	}
	after.Wait()
}

func TestPrioritizeBadWeight(t *testing.T) {
	if _, err := (Hierarchy{Root: t.TempDir(), Version: V1}).Prioritize("x", 0); err == nil || !strings.Contains(err.Error(), "weight 0") {
		t.Errorf("weight 0: %v, want an error naming it", err)
	}
}
