package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/internal/suitelock"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	suitelock.Hold("cmd/noisysim") // the tests start PostgreSQL and measure: they take their turn
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// noisysimBinary builds cmd/noisysim once per test run, without -race (its
// overhead would be measured as latency), and returns its path.
func noisysimBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		binDir, buildErr = os.MkdirTemp("", "nstest-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "noisysim")
		out, err := exec.Command(goCmd, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := local.FindBinaries(context.Background(), ""); err != nil {
		t.Skip("skipping: PostgreSQL server binaries not found")
	}
}

// privateBase returns a base dir for this test's clusters that the server
// user can traverse; what ends up under it is this test's alone.
func privateBase(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nstest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// cli is a running noisysim process.
type cli struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout strings.Builder
	stderr strings.Builder
	lines  chan string
	done   chan struct{}
	code   int
}

func startCLI(t *testing.T, env []string, args ...string) *cli {
	t.Helper()
	c := &cli{cmd: exec.Command(noisysimBinary(t), args...), lines: make(chan string, 100), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), env...)
	out, _ := c.cmd.StdoutPipe()
	errPipe, _ := c.cmd.StderrPipe()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.mu.Lock()
			c.stdout.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			select {
			case c.lines <- sc.Text():
			default:
			}
		}
	})
	wg.Go(func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			c.mu.Lock()
			c.stderr.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
		}
	})
	go func() {
		wg.Wait()
		err := c.cmd.Wait()
		c.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.code = ee.ExitCode()
		}
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

func (c *cli) output() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout.String(), c.stderr.String()
}

// waitLine waits for a stdout line containing s.
func (c *cli) waitLine(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-c.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-c.done:
			out, errOut := c.output()
			t.Fatalf("noisysim exited %d before printing %q\nstdout:\n%s\nstderr:\n%s", c.code, s, out, errOut)
		case <-timeout:
			t.Fatalf("no line %q within 60 s", s)
		}
	}
}

// waitStderr waits until stderr holds s at least n times.
func (c *cli) waitStderr(t *testing.T, s string, n int) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		if _, e := c.output(); strings.Count(e, s) >= n {
			return
		}
		select {
		case <-c.done:
			if _, e := c.output(); strings.Count(e, s) >= n {
				return
			}
			out, errOut := c.output()
			t.Fatalf("noisysim exited %d before writing %q %d times to stderr\nstdout:\n%s\nstderr:\n%s", c.code, s, n, out, errOut)
		case <-timeout:
			_, errOut := c.output()
			t.Fatalf("stderr did not hold %q %d times within 60 s:\n%s", s, n, errOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// openLoopStarted is what noisysim -v logs as a run's open loop starts:
// the run is past its start and load, in its measured timeline.
const openLoopStarted = `msg="open loop started"`

func (c *cli) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(60 * time.Second):
		t.Fatal("noisysim did not exit within 60 s")
		return -1
	}
}

var dirRE = regexp.MustCompile(`dir (\S+)`)

// clusterDir returns the cluster dir printed by `cluster up`.
func (c *cli) clusterDir(t *testing.T) string {
	t.Helper()
	out, _ := c.output()
	m := dirRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no cluster dir in output:\n%s", out)
	}
	return m[1]
}

// postmasters returns the postmasters recorded in dir's state file.
func postmasters(t *testing.T, dir string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Nodes []struct{ PID int } `json:"nodes"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, n := range st.Nodes {
		pids = append(pids, n.PID)
	}
	return pids
}

// clusterPIDs returns the postmasters recorded in dir's state file and their
// children.
func clusterPIDs(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for _, pm := range postmasters(t, dir) {
		pids = append(pids, pm)
		pids = append(pids, procs(func(_ int, ppid int, _ string) bool { return ppid == pm })...)
	}
	if len(pids) < 2 {
		t.Fatalf("found only processes %v for %s", pids, dir)
	}
	return pids
}

// procs returns the live processes for which keep(pid, ppid, cmdline) holds.
func procs(keep func(pid, ppid int, cmdline string) bool) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err1 := os.ReadFile("/proc/" + e.Name() + "/stat")
		cmdline, err2 := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err1 != nil || err2 != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if keep(pid, ppid, strings.ReplaceAll(string(cmdline), "\x00", " ")) {
			out = append(out, pid)
		}
	}
	return out
}

// mentioning returns live processes whose command line (or title) holds s.
func mentioning(s string) []int {
	return procs(func(_, _ int, cmdline string) bool { return strings.Contains(cmdline, s) })
}

// assertNothingLeft checks that pids are gone and nothing of the clusters
// under base remains: no entry, no process mentioning base or a cluster dir.
func assertNothingLeft(t *testing.T, base string, clusterDirs []string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var live []int
		for _, p := range pids {
			if len(procs(func(pid, _ int, _ string) bool { return pid == p })) > 0 {
				live = append(live, p)
			}
		}
		live = append(live, mentioning(base)...)
		for _, d := range clusterDirs {
			live = append(live, mentioning(filepath.Base(d)+"/")...)
		}
		entries, _ := os.ReadDir(base)
		if len(live) == 0 && len(entries) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("left behind: processes %v, entries %v", live, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterUpSIGTERM(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--topology", "replica", "--base-dir", base)
	c.waitLine(t, "Press Ctrl-C")
	dir := c.clusterDir(t)
	pids := clusterPIDs(t, dir)
	if len(mentioning(filepath.Base(dir)+"/")) < 4 {
		t.Fatalf("expected the cluster's processes to be visible, got %v", mentioning(dir))
	}
	// The password is masked, and the output says where it is.
	out, _ := c.output()
	for _, want := range []string{"xxxxx", "PGPASSFILE=" + dir + "/pgpass psql", "--show-password"} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster up output lacks %q:\n%s", want, out)
		}
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.wait(t); code != 0 {
		_, e := c.output()
		t.Fatalf("exit %d after SIGTERM, want 0; stderr:\n%s", code, e)
	}
	assertNothingLeft(t, base, []string{dir}, pids)
}

func TestClusterUpSecondSignalStopsImmediately(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--topology", "replica", "--base-dir", base)
	c.waitLine(t, "Press Ctrl-C")
	dir := c.clusterDir(t)
	pids := clusterPIDs(t, dir)
	c.cmd.Process.Signal(syscall.SIGINT)
	// Signals sent back to back may merge; send the second once the first
	// has been seen.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, e := c.output(); strings.Contains(e, "send it again") || time.Now().After(deadline) {
			break
		}
	}
	c.cmd.Process.Signal(syscall.SIGINT)
	code := c.wait(t)
	_, errOut := c.output()
	if strings.Contains(errOut, "stopping immediately") {
		if code != 1 {
			t.Errorf("exit %d after an immediate stop, want 1", code)
		}
	} else {
		t.Logf("the graceful stop finished before the second signal (exit %d)", code)
	}
	assertNothingLeft(t, base, []string{dir}, pids)
}

func TestClusterUpShowPassword(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--show-password", "--base-dir", base)
	c.waitLine(t, "Press Ctrl-C")
	dir := c.clusterDir(t)
	pgpass, err := os.ReadFile(filepath.Join(dir, "pgpass"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(strings.TrimSpace(string(pgpass)), ":")
	if out, _ := c.output(); !strings.Contains(out, ":"+fields[len(fields)-1]+"@127.0.0.1:") {
		t.Errorf("--show-password output lacks the password:\n%s", out)
	}
	pids := clusterPIDs(t, dir)
	c.cmd.Process.Signal(syscall.SIGINT)
	c.wait(t)
	assertNothingLeft(t, base, []string{dir}, pids)
}

func TestClusterUpPanicTearsDown(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c := startCLI(t, []string{envTestPanicAfterUp + "=1"}, "cluster", "up", "--topology", "replica", "--base-dir", base)
	code := c.wait(t)
	out, errOut := c.output()
	if code != 1 || !strings.Contains(errOut, "panic: test hook") {
		t.Fatalf("exit %d, want 1 with the panic on stderr:\n%s", code, errOut)
	}
	dir := dirRE.FindStringSubmatch(out)
	if dir == nil {
		t.Fatalf("cluster never came up:\n%s\n%s", out, errOut)
	}
	assertNothingLeft(t, base, []string{dir[1]}, nil)
}

// A SIGKILLed noisysim cannot clean up; the kernel stops its servers
// (parent-death signal) and the next start removes the directory.
func TestClusterUpSIGKILL(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--topology", "replica", "--base-dir", base)
	c.waitLine(t, "Press Ctrl-C")
	dir := c.clusterDir(t)
	pids := clusterPIDs(t, dir)
	c.cmd.Process.Kill()
	c.wait(t)

	deadline := time.Now().Add(5 * time.Second)
	for len(procs(func(pid, _ int, _ string) bool { return contains(pids, pid) })) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("servers of a SIGKILLed noisysim still run after 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("expected the dir to remain until the next start: %v", err)
	}
	c2 := startCLI(t, nil, "cluster", "up", "--base-dir", base)
	c2.waitLine(t, "Press Ctrl-C")
	dir2 := c2.clusterDir(t)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover %s not swept by the next start: %v", dir, err)
	}
	pids2 := clusterPIDs(t, dir2)
	c2.cmd.Process.Signal(syscall.SIGINT)
	c2.wait(t)
	assertNothingLeft(t, base, []string{dir, dir2}, append(pids, pids2...))
}

// After kill -9 of noisysim, cluster down --dir removes the directory it
// left (its owner is dead); one whose owner runs stays its owner's.
func TestClusterDownDeadOwner(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--base-dir", base)
	c.waitLine(t, "Press Ctrl-C")
	dir := c.clusterDir(t)
	pids := clusterPIDs(t, dir)

	// While its owner runs, the directory is not cluster down's.
	busy := startCLI(t, nil, "cluster", "down", "--dir", dir)
	if code := busy.wait(t); code != exitUsage {
		t.Errorf("cluster down --dir of a running cluster: exit %d, want 2", code)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("cluster down removed a running cluster's dir: %v", err)
	}

	c.cmd.Process.Kill()
	c.wait(t)
	down := startCLI(t, nil, "cluster", "down", "--dir", dir)
	if code := down.wait(t); code != 0 {
		_, e := down.output()
		t.Fatalf("cluster down --dir after kill -9: exit %d\n%s", code, e)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after cluster down: %v", dir, err)
	}
	assertNothingLeft(t, base, []string{dir}, pids)
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func TestClusterKeepAndDown(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c := startCLI(t, nil, "cluster", "up", "--keep", "--topology", "replica", "--base-dir", base)
	if code := c.wait(t); code != 0 {
		_, e := c.output()
		t.Fatalf("cluster up --keep: exit %d\n%s", code, e)
	}
	out, _ := c.output()
	dir := c.clusterDir(t)
	for _, want := range []string{"PGPASSFILE=" + dir + "/pgpass", "noisysim cluster down --dir " + dir, "xxxxx"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	pgpass, err := os.ReadFile(filepath.Join(dir, "pgpass"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(strings.TrimSpace(string(pgpass)), ":")
	password := fields[len(fields)-1]
	if len(password) < 24 || strings.Contains(out, password) {
		t.Errorf("output shows the password (or pgpass has none):\n%s", out)
	}
	pids := clusterPIDs(t, dir)
	for _, p := range postmasters(t, dir) {
		if len(procs(func(pid, _ int, _ string) bool { return pid == p })) == 0 {
			t.Fatalf("kept cluster's postmaster %d is not running", p)
		}
	}
	down := startCLI(t, nil, "cluster", "down", "--base-dir", base)
	if code := down.wait(t); code != 0 {
		_, e := down.output()
		t.Fatalf("cluster down: exit %d\n%s", code, e)
	}
	// cluster down returns once every server process is gone.
	if live := procs(func(pid, _ int, _ string) bool { return contains(pids, pid) }); len(live) > 0 {
		t.Errorf("server processes %v still there when cluster down returned", live)
	}
	assertNothingLeft(t, base, []string{dir}, pids)
	again := startCLI(t, nil, "cluster", "down", "--base-dir", base)
	if code := again.wait(t); code != 2 {
		t.Errorf("cluster down with nothing kept: exit %d, want 2", code)
	}
}

func TestClusterUpBadInput(t *testing.T) {
	needPostgres(t)
	emptyBin := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		name string
		env  []string
		args []string
		msg  string
	}{
		{"unknown topology", nil, []string{"--topology", "ring"}, "unknown topology"},
		{"bindir flag without postgres", nil, []string{"--bindir", emptyBin}, "server package"},
		{"bindir env without postgres", []string{local.EnvBinDir + "=" + emptyBin}, nil, "server package"},
		{"occupied port", nil, []string{"--port", busy}, "already in use"},
		{"setting PostgreSQL rejects", nil, []string{"--setting", "shared_buffers=lots"}, "shared_buffers"},
		{"base dir missing", nil, []string{"--base-dir", filepath.Join(emptyBin, "missing")}, "--base-dir"},
		{"nodes without topology primaries", nil, []string{"--nodes", "3"}, "--nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := privateBase(t)
			c := startCLI(t, tc.env, append([]string{"cluster", "up", "--base-dir", base}, tc.args...)...)
			code := c.wait(t)
			_, errOut := c.output()
			if code != 2 || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d, want 2 with %q; stderr:\n%s", code, tc.msg, errOut)
			}
			assertNothingLeft(t, base, nil, nil)
		})
	}
}

// The connect hint of cluster up names a node that takes connections: a
// Citus cluster has a coordinator and workers, no primary.
func TestEntryNode(t *testing.T) {
	citus := []backend.Node{{Name: "worker1", Role: backend.RoleWorker}, {Name: "coordinator", Role: backend.RoleCoordinator}}
	replica := []backend.Node{{Name: "replica", Role: backend.RoleReplica}, {Name: "primary", Role: backend.RolePrimary}}
	shards := []backend.Node{{Name: "shard1", Role: backend.RoleShard}}
	for _, tc := range []struct {
		nodes []backend.Node
		want  string
	}{{citus, "coordinator"}, {replica, "primary"}, {shards, "shard1"}} {
		if got := entryNode(tc.nodes).Name; got != tc.want {
			t.Errorf("entryNode(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}
