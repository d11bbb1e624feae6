package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stateFile is the file in a cluster directory recording its processes, for
// StopKept, for the sweep of leftovers and for people.
const stateFile = "state.json"

type clusterState struct {
	Format   int  `json:"format"`
	OwnerPID int  `json:"owner_pid"`
	Keep     bool `json:"keep"`
	// PIDNamespace tells apart processes of other containers sharing /tmp.
	PIDNamespace string      `json:"pid_namespace"`
	BinDir       string      `json:"bin_dir"`
	ServerUser   string      `json:"server_user"`
	Nodes        []nodeState `json:"nodes"`
	// Cgroup is where the nodes' CPU budgets live; nil for none.
	Cgroup *cgroupState `json:"cgroup,omitempty"`
}

type nodeState struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Port    int    `json:"port"`
	PID     int    `json:"pid"`
	DataDir string `json:"data_dir"`
}

func pidNamespace() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return ns
}

// writeState records the cluster's processes in its directory, atomically.
func (c *Cluster) writeState() error {
	st := clusterState{
		Format: 1, OwnerPID: os.Getpid(), Keep: c.keep, PIDNamespace: pidNamespace(),
		BinDir: c.bin.Dir, ServerUser: c.user.name, Cgroup: c.cgroupState(),
	}
	c.mu.Lock()
	for _, n := range c.nodes {
		s := n.stat()
		st.Nodes = append(st.Nodes, nodeState{Name: s.Name, Role: string(s.Role), Port: s.Port, PID: s.PID, DataDir: s.DataDir})
	}
	c.mu.Unlock()
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	tmp := filepath.Join(c.dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, stateFile)); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

func readState(dir string) (clusterState, error) {
	var st clusterState
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, fmt.Errorf("read state: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("read state: %w", err)
	}
	return st, nil
}

// isPostmasterOf reports whether pid is a live postgres process serving
// dataDir (guarding against a recycled pid): started with -D dataDir, or a
// postgres process working in dataDir (a server restarted by hand with
// another spelling of the path).
func isPostmasterOf(pid int, dataDir string) bool {
	if pid <= 0 {
		return false
	}
	proc := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	for i, a := range args {
		if a == "-D" && i+1 < len(args) && args[i+1] == dataDir {
			return true
		}
	}
	comm, _ := os.ReadFile(proc + "/comm")
	cwd, err := os.Readlink(proc + "/cwd")
	return err == nil && strings.TrimSpace(string(comm)) == "postgres" && sameDir(cwd, dataDir)
}

func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// postmastersOf returns the live postmasters serving dataDir: the one
// recorded at start and the one its postmaster.pid names (a node restarted
// by hand, e.g. by pg_ctl restart, has a new pid).
func postmastersOf(recorded int, dataDir string) []int {
	var out []int
	if isPostmasterOf(recorded, dataDir) {
		out = append(out, recorded)
	}
	if data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid")); err == nil {
		first, _, _ := strings.Cut(string(data), "\n")
		if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid != recorded && isPostmasterOf(pid, dataDir) {
			out = append(out, pid)
		}
	}
	return out
}

// serversUnder returns the live postgres processes working in a directory
// under dir (every server process works in its data directory).
func serversUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		if strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err == nil && strings.HasPrefix(cwd, dir+"/") && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// aliveOf returns the pids of pids that are alive.
func aliveOf(pids []int) []int {
	var out []int
	for _, p := range pids {
		if alive(p) {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
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

// StopKept stops the cluster in dir that was started WithKeep and detached
// (what `noisysim cluster down` does), or one whose noisysim died without
// tearing down (kill -9): `pg_ctl stop -m fast`, then `-m immediate`, then
// SIGKILL, for each node; it waits until every server process has exited,
// then removes dir. It returns an error wrapping ErrNotKept when dir holds
// no cluster, or one whose owner still runs.
func (b *Backend) StopKept(ctx context.Context, dir string) error {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	st, err := readState(dir)
	if err != nil {
		return fmt.Errorf("stop kept cluster %s: %w (%w)", dir, ErrNotKept, err)
	}
	if !st.Keep {
		// A cluster of a noisysim that died without tearing down (kill -9)
		// is removed like a kept one; one whose owner runs is its owner's.
		switch {
		case st.PIDNamespace != pidNamespace():
			return fmt.Errorf("stop kept cluster %s: it was not started with --keep and belongs to pid %d of another pid namespace: %w", dir, st.OwnerPID, ErrNotKept)
		case alive(st.OwnerPID):
			return fmt.Errorf("stop kept cluster %s: it was not started with --keep and belongs to pid %d, which still runs: %w", dir, st.OwnerPID, ErrNotKept)
		}
		b.log.Debug("owner of the cluster is gone: removing it", "dir", dir, "owner_pid", st.OwnerPID)
	}
	u, err := serverUser(st.ServerUser)
	if err != nil {
		return err
	}
	var errs []error
	// Every server process, to wait for each to be gone: a postmaster
	// leaves pg_ctl's view (its pid file) before it has exited.
	var procs []int
	for _, n := range st.Nodes {
		for _, p := range postmastersOf(n.PID, n.DataDir) {
			procs = append(append(procs, p), descendants(p)...)
			// A node left paused (its noisysim killed during a fault
			// action's pause) heeds no signal but SIGKILL.
			resumeTree(p)
		}
	}
	// Replicas first, as Close does.
	for i := len(st.Nodes) - 1; i >= 0; i-- {
		n := st.Nodes[i]
		pids := postmastersOf(n.PID, n.DataDir)
		if len(pids) == 0 {
			continue
		}
		running := func() bool {
			for _, p := range pids {
				if isPostmasterOf(p, n.DataDir) {
					return true
				}
			}
			return false
		}
		for _, mode := range []string{"fast", "immediate"} {
			cmd := u.command(exec.CommandContext(ctx, filepath.Join(st.BinDir, "pg_ctl"), "stop", "-D", n.DataDir, "-m", mode, "-w", "-t", "10"), dir)
			out, err := cmd.CombinedOutput()
			if err == nil || !running() {
				break
			}
			b.log.Debug("pg_ctl stop failed", "node", n.Name, "mode", mode, "output", strings.TrimSpace(string(out)))
		}
		for _, p := range pids {
			if isPostmasterOf(p, n.DataDir) {
				killTree(p)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for running() && time.Now().Before(deadline) {
			time.Sleep(pollInterval)
		}
		if running() {
			errs = append(errs, fmt.Errorf("stop node %s: pids %v still run", n.Name, pids))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(aliveOf(procs)) > 0 && time.Now().Before(deadline) {
		time.Sleep(pollInterval)
	}
	if live := aliveOf(procs); len(live) > 0 {
		return fmt.Errorf("stop kept cluster %s: server processes %v still run after 10 s; not removed", dir, live)
	}
	// Never remove the files under a server still running (one started by
	// hand, or a state file that no longer tells the truth).
	deadline = time.Now().Add(5 * time.Second)
	for len(serversUnder(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(pollInterval)
	}
	if live := serversUnder(dir); len(live) > 0 {
		return fmt.Errorf("stop kept cluster %s: postgres processes %v still run in it; not removed", dir, live)
	}
	if err := st.Cgroup.remove(); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove cluster dir: %w", err)
	}
	return nil
}

// Sweep removes what noisysim processes that died without tearing down
// (SIGKILL, a crash) left in the backend's base directory: the directories
// and CPU budget groups of clusters that were not kept, whose owner process
// is gone and none of whose servers still runs. It returns the directories
// removed. Start sweeps too.
func (b *Backend) Sweep() []string { return b.sweep(b.baseDir) }

// leftoverServersWait is how long a sweep waits for the servers of a
// cluster whose noisysim died to end: each got the parent-death signal (an
// immediate shutdown), and a start right after a kill -9 finds them still
// ending.
const leftoverServersWait = 5 * time.Second

// serversEnd reports whether no node's postmaster runs, waiting up to wait
// for them to end.
func serversEnd(nodes []nodeState, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		running := false
		for _, n := range nodes {
			running = running || isPostmasterOf(n.PID, n.DataDir)
		}
		if !running {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *Backend) sweep(base string) (removed []string) {
	defer sweepCPU(base)
	dirs, _ := filepath.Glob(filepath.Join(base, "noisysim-*"))
	ns := pidNamespace()
	for _, d := range dirs {
		st, err := readState(d)
		if err != nil || st.Keep || st.PIDNamespace != ns || st.OwnerPID == os.Getpid() || alive(st.OwnerPID) {
			continue
		}
		running := false
		for _, n := range st.Nodes {
			if isPostmasterOf(n.PID, n.DataDir) {
				running = true
				if procState(n.PID) == 'T' {
					// Paused when its noisysim died: resumed, it heeds
					// the parent-death signal (an immediate shutdown)
					// pending since, and a later sweep removes it.
					resumeTree(n.PID)
				}
			}
		}
		if running && !serversEnd(st.Nodes, leftoverServersWait) {
			continue
		}
		if err := st.Cgroup.remove(); err != nil {
			b.log.Debug("leftover cluster's CPU groups not removed", "dir", d, "err", err)
			continue
		}
		if err := os.RemoveAll(d); err == nil {
			b.log.Debug("removed leftover cluster dir", "dir", d, "owner_pid", st.OwnerPID)
			removed = append(removed, d)
		}
	}
	return removed
}
