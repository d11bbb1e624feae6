package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend/cgroup"
)

// needCgroups skips t with one line where CPU budgets cannot be written.
func needCgroups(t *testing.T) {
	t.Helper()
	if _, err := cgroup.Detect(); err != nil {
		t.Skipf("skipping: %v", err)
	}
}

// cpuGroupDir returns the directory of the cluster's CPU budget group, from
// its state file.
func cpuGroupDir(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Cgroup *struct{ Root, Group string } `json:"cgroup"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Cgroup == nil {
		t.Fatalf("%s/state.json records no cpu group", dir)
	}
	g := filepath.Join(st.Cgroup.Root, st.Cgroup.Group)
	if _, err := os.Stat(filepath.Join(g, "primary")); err != nil {
		t.Fatalf("the primary's cpu group: %v", err)
	}
	return g
}

func assertGone(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists (%v)", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterUpCPUSignals(t *testing.T) {
	needPostgres(t)
	needCgroups(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			base := privateBase(t)
			c := startCLI(t, nil, "cluster", "up", "--topology", "replica", "--node-cpu", "0.4", "--role-cpu", "replica=0.25", "--base-dir", base)
			c.waitLine(t, "Press Ctrl-C")
			out, _ := c.output()
			if !strings.Contains(out, "primary 0.4 CPU, replica1 0.25 CPU") {
				t.Errorf("output does not show the budgets:\n%s", out)
			}
			dir := c.clusterDir(t)
			g := cpuGroupDir(t, dir)
			pids := clusterPIDs(t, dir)
			c.cmd.Process.Signal(sig)
			if code := c.wait(t); code != 0 {
				_, e := c.output()
				t.Fatalf("exit %d after %v; stderr:\n%s", code, sig, e)
			}
			assertNothingLeft(t, base, []string{dir}, pids)
			assertGone(t, g)
		})
	}
}

// killedClusterUp starts `cluster up --node-cpu 0.4` in a private base
// directory and SIGKILLs it once the cluster is up: its base, the
// cluster's directory, its cpu group and its servers' pids.
func killedClusterUp(t *testing.T) (base, dir, group string, pids []int) {
	t.Helper()
	needPostgres(t)
	needCgroups(t)
	base = privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--node-cpu", "0.4", "--base-dir", base)
	c.waitLine(t, "Press Ctrl-C")
	dir = c.clusterDir(t)
	group = cpuGroupDir(t, dir)
	pids = clusterPIDs(t, dir)
	c.cmd.Process.Kill()
	c.wait(t)
	return base, dir, group, pids
}

// A SIGKILLed noisysim leaves its directory and its (empty) cpu groups;
// `cluster down` removes both.
func TestClusterUpCPUSIGKILLThenDown(t *testing.T) {
	base, dir, g, pids := killedClusterUp(t)
	deadline := time.Now().Add(5 * time.Second)
	for len(procs(func(pid, _ int, _ string) bool { return contains(pids, pid) })) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("servers of a SIGKILLed noisysim still run after 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(g); err != nil {
		t.Fatalf("expected the cpu group to remain until cluster down: %v", err)
	}
	down := startCLI(t, nil, "cluster", "down", "--base-dir", base)
	if code := down.wait(t); code != 0 {
		o, e := down.output()
		t.Fatalf("cluster down after SIGKILL: exit %d\n%s%s", code, o, e)
	}
	if o, _ := down.output(); !strings.Contains(o, "did not tear down") {
		t.Errorf("cluster down does not say what it removed:\n%s", o)
	}
	assertNothingLeft(t, base, []string{dir}, pids)
	assertGone(t, g)
}

// cluster down right after a SIGKILL, while the dead noisysim's servers
// are still ending, waits for them and removes the cluster; it left the
// directory and the cpu groups for a later start.
func TestClusterUpCPUSIGKILLThenDownAtOnce(t *testing.T) {
	base, dir, g, pids := killedClusterUp(t)
	var out, errOut bytes.Buffer
	if code := realMain([]string{"cluster", "down", "--base-dir", base}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "removed "+dir) {
		t.Errorf("cluster down at once after SIGKILL: exit %d, stdout %q, stderr %q; want exit 0 removing %s", code, out.String(), errOut.String(), dir)
	}
	assertNothingLeft(t, base, []string{dir}, pids)
	assertGone(t, g)
}

func TestClusterKeepCPUDown(t *testing.T) {
	needPostgres(t)
	needCgroups(t)
	base := privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--keep", "--node-cpu", "0.3", "--base-dir", base)
	if code := c.wait(t); code != 0 {
		_, e := c.output()
		t.Fatalf("cluster up --keep: exit %d\n%s", code, e)
	}
	dir := c.clusterDir(t)
	g := cpuGroupDir(t, dir)
	pids := clusterPIDs(t, dir)
	down := startCLI(t, nil, "cluster", "down", "--base-dir", base)
	if code := down.wait(t); code != 0 {
		_, e := down.output()
		t.Fatalf("cluster down: exit %d\n%s", code, e)
	}
	assertNothingLeft(t, base, []string{dir}, pids)
	assertGone(t, g)
}

func TestClusterUpCPUBadInput(t *testing.T) {
	needPostgres(t)
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"below the minimum", []string{"--node-cpu", "0.005"}, "--node-cpu"},
		{"not a number", []string{"--node-cpu", "NaN"}, "--node-cpu"},
		{"unknown role", []string{"--role-cpu", "leader=1"}, "unknown role"},
		{"role below the minimum", []string{"--role-cpu", "replica=0.001"}, "--role-cpu replica"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := privateBase(t)
			c := startCLI(t, nil, append([]string{"cluster", "up", "--base-dir", base}, tc.args...)...)
			code := c.wait(t)
			_, errOut := c.output()
			if code != 2 || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d, want 2 with %q; stderr:\n%s", code, tc.msg, errOut)
			}
			assertNothingLeft(t, base, nil, nil)
		})
	}
}

// Run as an unprivileged user, noisysim cannot write cgroups: budgets exit
// 2 with one line, or with --node-cpu-optional the cluster starts without
// them and says so.
func TestClusterUpCPUUnprivileged(t *testing.T) {
	needPostgres(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to run noisysim as another user")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("skipping: no postgres user to run as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// A copy of the binary and a base dir the user can reach.
	dir := privateBase(t)
	bin := filepath.Join(dir, "noisysim")
	copyFile(t, noisysimBinary(t), bin)
	base := filepath.Join(dir, "base")
	cache := filepath.Join(dir, "cache")
	for _, d := range []string{base, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(d, uid, gid)
	}
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, append([]string{"cluster", "up", "--base-dir", base}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "XDG_CACHE_HOME=" + cache}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		var out, errOut lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if len(args) > 0 && args[len(args)-1] == "--node-cpu-optional" {
			// It starts: stop it once it says so.
			for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "Press Ctrl-C") && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			cmd.Process.Signal(syscall.SIGINT)
		}
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return code, out.String(), errOut.String()
	}
	code, _, errOut := run("--node-cpu", "0.4")
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code != 2 || len(lines) != 1 || !strings.Contains(errOut, "cannot give nodes CPU budgets") {
		t.Errorf("unprivileged --node-cpu: exit %d, want 2 with one line; stderr:\n%s", code, errOut)
	}
	assertNothingLeft(t, base, nil, nil)

	code, out, errOut := run("--node-cpu", "0.4", "--node-cpu-optional")
	if code != 0 || !strings.Contains(out, "running WITHOUT CPU budgets") {
		t.Errorf("unprivileged --node-cpu-optional: exit %d, want 0 and a line saying it runs without budgets; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	assertNothingLeft(t, base, nil, nil)
}

// lockedBuffer is a strings.Builder safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// cluster down removes the cpu group of a run --priority killed by SIGKILL
// (noisysim-gen-<pid> of a pid that no longer runs), as the next run
// --priority would, and leaves the group of a noisysim that runs.
func TestClusterDownSweepsPriorityGroups(t *testing.T) {
	needCgroups(t)
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(h.Root, "noisysim-gen-"+strconv.Itoa(gone.Process.Pid))
	live := filepath.Join(h.Root, "noisysim-gen-"+strconv.Itoa(os.Getpid()))
	for _, d := range []string{dead, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Skipf("skipping: cannot create a cpu group: %v", err)
		}
		t.Cleanup(func() { os.Remove(d) })
	}
	var out, errOut bytes.Buffer
	code := realMain([]string{"cluster", "down", "--base-dir", t.TempDir()}, &out, &errOut)
	if code != exitOK || !strings.Contains(out.String(), "removed cpu group "+dead) {
		t.Errorf("cluster down: exit %d, stdout %q, stderr %q; want exit 0 naming %s", code, out.String(), errOut.String(), dead)
	}
	assertGone(t, dead)
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the group of a noisysim that runs: %v", err)
	}
}
