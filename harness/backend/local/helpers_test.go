package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend/local"
)

// needPostgres skips t when PostgreSQL's server binaries are missing.
func needPostgres(t testing.TB) {
	t.Helper()
	if _, err := local.FindBinaries(context.Background(), ""); err != nil {
		t.Skipf("skipping: PostgreSQL server binaries not found")
	}
}

// privateBase returns a fresh base directory for clusters that the server
// user can traverse, removed at the end of the test. Counting what is under
// it scopes leak checks to this test.
func privateBase(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nstest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// leftovers returns the entries under base and the processes whose command
// line mentions base.
func leftovers(t testing.TB, base string) (dirs []string, procs []int) {
	t.Helper()
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		dirs = append(dirs, e.Name())
	}
	return dirs, procsMentioning(base)
}

func procsMentioning(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), s) && processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i < 0 || !strings.HasPrefix(string(data[i+1:]), " Z")
}

// childrenOf returns the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(data), ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// waitGone waits up to d for every pid to exit and returns those still alive.
func waitGone(pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var live []int
		for _, p := range pids {
			if processAlive(p) {
				live = append(live, p)
			}
		}
		if len(live) == 0 || time.Now().After(deadline) {
			return live
		}
		time.Sleep(20 * time.Millisecond)
	}
}
