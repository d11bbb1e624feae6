package cgroup

import (
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

// realHierarchy returns the machine's cpu hierarchy, or skips with one line.
func realHierarchy(t *testing.T) Hierarchy {
	t.Helper()
	h, err := Detect()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	return h
}

func TestRealGroup(t *testing.T) {
	h := realHierarchy(t)
	rel := "noisysim-test-" + strconv.Itoa(os.Getpid())
	top, err := h.Create(rel)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := top.RemoveTree(); err != nil {
			t.Errorf("remove: %v", err)
		}
		if _, err := os.Stat(top.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after RemoveTree", top.Path)
		}
	})
	one, _ := LimitFor(1, 0)
	if err := top.Set(one); err != nil {
		t.Fatal(err)
	}
	child, err := h.Create(rel + "/node")
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Set(one); err != nil {
		t.Fatalf("child equal to its parent: %v", err)
	}
	// (vi) on the real kernel: 100000/100000 to 5000/10000. Quota first
	// works; the period first would have passed through 10 CPU.
	next := Limit{5_000, 10_000}
	if err := child.Set(next); err != nil {
		t.Fatalf("Set(%v): %v", next, err)
	}
	if got, _ := child.Limit(); got != next {
		t.Fatalf("read back %v, want %v", got, next)
	}
	if h.Version == V1 {
		// The kernel does refuse a child above its parent: the order
		// matters.
		if err := child.Set(one); err != nil {
			t.Fatal(err)
		}
		err := os.WriteFile(filepath.Join(child.Path, "cpu.cfs_period_us"), []byte("10000"), 0)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("period first to 100000/10000 under 1 CPU: %v, want EINVAL", err)
		}
	}
	if err := child.Set(Limit{10_000, 100_000}); err != nil { // 0.1 CPU
		t.Fatal(err)
	}

	// A process started in the group is in it, and so are its children;
	// the starting thread is not left in it.
	cmd := exec.Command("sh", "-c", `sleep 30 & echo $!; wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(cmd, (*exec.Cmd).Start); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	kid, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	for _, pid := range []int{cmd.Process.Pid, kid} {
		if !inGroup(t, h, pid, child.Path) {
			t.Errorf("pid %d is not in %s", pid, child.Path)
		}
	}
	if inGroup(t, h, os.Getpid(), child.Path) {
		t.Errorf("noisysim's own process is in %s", child.Path)
	}
	procs, _ := child.Procs()
	if len(procs) != 2 {
		t.Errorf("group holds %v, want the shell and its sleep", procs)
	}

	// The budget holds: a busy loop in the group gets throttled.
	burn := exec.Command("sh", "-c", `end=$(($(date +%s)+1)); while [ $(date +%s) -lt $end ]; do :; done`)
	if err := child.Start(burn, (*exec.Cmd).Start); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	burn.Wait()
	if throttled := stat(t, child, "nr_throttled"); throttled == 0 {
		t.Errorf("a busy loop at 0.1 CPU for %v was never throttled", time.Since(began))
	}
}

func inGroup(t *testing.T, h Hierarchy, pid int, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(h.Root, dir)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if (h.Version == V1 && strings.Contains(","+f[1]+",", ",cpu,")) || (h.Version == V2 && f[0] == "0") {
			return filepath.Clean(f[2]) == filepath.Clean("/"+filepath.ToSlash(rel))
		}
	}
	return false
}

func stat(t *testing.T, g *Group, key string) int64 {
	b, err := os.ReadFile(filepath.Join(g.Path, "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatalf("cpu.stat has no %s: %s", key, b)
	return 0
}
