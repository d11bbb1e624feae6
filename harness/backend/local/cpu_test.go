package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/internal/affinity"
)

// needCgroups skips t with one line where CPU budgets cannot be written.
func needCgroups(t *testing.T) cgroup.Hierarchy {
	t.Helper()
	h, err := cgroup.Detect()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	return h
}

// cpuGroupOf returns pid's group in the cpu hierarchy, relative to its root.
func cpuGroupOf(t *testing.T, h cgroup.Hierarchy, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if (h.Version == cgroup.V1 && slices.Contains(strings.Split(f[1], ","), "cpu")) || (h.Version == cgroup.V2 && f[0] == "0") {
			return f[2]
		}
	}
	return ""
}

func TestCPUBudgets(t *testing.T) {
	needPostgres(t)
	h := needCgroups(t)
	base := privateBase(t)
	spec := backend.Spec{Topology: backend.TopologyReplica, CPU: backend.CPUBudget{Node: 0.3, Roles: map[backend.Role]float64{backend.RoleReplica: 0.42}}}
	c, err := local.Start(t.Context(), spec, local.WithBaseDir(base))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := c.CPUBudgets()
	want := []backend.NodeCPU{{Node: "primary", CPUs: 0.3}, {Node: "replica1", CPUs: 0.42}}
	if !slices.Equal(st.Nodes, want) || st.Skipped != "" || !strings.Contains(st.Mechanism, "cgroup v") {
		t.Fatalf("CPUBudgets() = %+v, want %v", st, want)
	}
	top := "/noisysim/" + filepath.Base(c.Dir())
	var groups []string
	for _, n := range c.Stat().Nodes {
		kids := childrenOf(n.PID)
		if len(kids) == 0 {
			t.Fatalf("postmaster of %s has no children", n.Name)
		}
		// The postmaster and every child it forked (the backends of
		// connections too) are in the node's group.
		conn := connect(t, n.DSN())
		var backendPID int
		if err := conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&backendPID); err != nil {
			t.Fatal(err)
		}
		for _, pid := range append([]int{n.PID, backendPID}, kids...) {
			if !processAlive(pid) {
				continue // a short-lived child that has exited
			}
			if got := cpuGroupOf(t, h, pid); got != top+"/"+n.Name {
				t.Errorf("%s: pid %d is in cpu group %q, want %q", n.Name, pid, got, top+"/"+n.Name)
			}
		}
		g := h.Group(strings.TrimPrefix(top+"/"+n.Name, "/"))
		lim, err := g.Limit()
		if err != nil {
			t.Fatal(err)
		}
		if w := map[string]float64{"primary": 0.3, "replica1": 0.42}[n.Name]; lim.CPUs() != w {
			t.Errorf("%s: the kernel holds %v, want %g CPU", n.Name, lim, w)
		}
		groups = append(groups, g.Path)
	}
	if got := cpuGroupOf(t, h, os.Getpid()); strings.HasPrefix(got, top) {
		t.Errorf("the test process itself is in %s", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, g := range append(groups, filepath.Dir(groups[0])) {
		if _, err := os.Stat(g); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left after Close (%v)", g, err)
		}
	}
}

func TestCPUBudgetBadInput(t *testing.T) {
	needPostgres(t)
	for _, tc := range []struct {
		name string
		cpu  backend.CPUBudget
	}{
		{"below the kernel's minimum", backend.CPUBudget{Node: 0.005}},
		{"negative role budget", backend.CPUBudget{Roles: map[backend.Role]float64{backend.RoleReplica: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := privateBase(t)
			_, err := local.Start(t.Context(), backend.Spec{CPU: tc.cpu}, local.WithBaseDir(base))
			var ce *local.CPUBudgetError
			if !errors.As(err, &ce) || !errors.Is(err, backend.ErrBadInput) || !errors.Is(err, cgroup.ErrBadBudget) {
				t.Fatalf("Start = %v, want a *CPUBudgetError that is bad input", err)
			}
			if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
				t.Errorf("left: dirs %v, processes %v", dirs, procs)
			}
		})
	}
}

// A start that fails after the groups were made removes them.
func TestCPUBudgetFailedStartRemovesGroups(t *testing.T) {
	needPostgres(t)
	h := needCgroups(t)
	base := privateBase(t)
	before := cgroupsUnder(h)
	_, err := local.Start(t.Context(), backend.Spec{CPU: backend.CPUBudget{Node: 0.5}, Settings: map[string]string{"shared_buffers": "lots"}}, local.WithBaseDir(base))
	if !errors.Is(err, backend.ErrBadInput) {
		t.Fatalf("Start with a bad setting = %v, want bad input", err)
	}
	if after := cgroupsUnder(h); !slices.Equal(after, before) {
		t.Errorf("cpu groups before %v, after a failed start %v", before, after)
	}
	if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
		t.Errorf("left: dirs %v, processes %v", dirs, procs)
	}
}

// cgroupsUnder lists the cluster groups under noisysim's parent group.
func cgroupsUnder(h cgroup.Hierarchy) []string {
	entries, _ := os.ReadDir(h.Group("noisysim").Path)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestCPUBudgetsKept(t *testing.T) {
	needPostgres(t)
	h := needCgroups(t)
	base := privateBase(t)
	b := local.New(local.WithBaseDir(base), local.WithKeep(true))
	c, err := b.StartCluster(t.Context(), backend.Spec{CPU: backend.CPUBudget{Node: 0.25}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := c.Stat().Nodes[0]
	group := "/noisysim/" + filepath.Base(c.Dir()) + "/primary"
	if got := cpuGroupOf(t, h, n.PID); got != group {
		t.Errorf("kept postmaster in %q, want %q", got, group)
	}
	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := b.StopKept(t.Context(), c.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.Root, group)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s left after StopKept (%v)", group, err)
	}
}

// TestNodeCores pins the replica to a core of its own: its postmaster, the
// processes it started and a backend forked for a new connection run on
// that core only; the primary keeps every core; CPUBudgets reads it back.
// Affinity needs no root and no cgroup.
func TestNodeCores(t *testing.T) {
	needPostgres(t)
	allowed, err := affinity.Allowed()
	if err != nil || len(allowed) < 2 {
		t.Skipf("skipping: fewer than 2 cores to pin apart (%v)", allowed)
	}
	last := allowed[len(allowed)-1:]
	base := privateBase(t)
	spec := backend.Spec{Topology: backend.TopologyReplica, CPU: backend.CPUBudget{Cores: map[backend.Role][]int{backend.RoleReplica: last}}}
	c, err := local.Start(t.Context(), spec, local.WithBaseDir(base))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := c.CPUBudgets()
	want := []backend.NodeCPU{{Node: "replica1", Cores: affinity.Format(last)}}
	if !slices.Equal(st.Nodes, want) || st.Mechanism != "CPU affinity" {
		t.Errorf("CPUBudgets() = %+v, want %v by CPU affinity", st, want)
	}
	for _, n := range c.Stat().Nodes {
		conn := connect(t, n.DSN())
		var backendPID int
		if err := conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&backendPID); err != nil {
			t.Fatal(err)
		}
		wantCores := allowed
		if n.Role == backend.RoleReplica {
			wantCores = last
		}
		for _, pid := range append([]int{n.PID, backendPID}, childrenOf(n.PID)...) {
			got, err := affinity.Of(pid)
			if err != nil {
				continue // a short-lived child that has exited
			}
			if !slices.Equal(got, wantCores) {
				t.Errorf("%s: pid %d runs on cores %v, want %v", n.Name, pid, got, wantCores)
			}
		}
	}
	// This process keeps its own cores.
	if got, _ := affinity.Of(0); !slices.Equal(got, allowed) {
		t.Errorf("noisysim's thread left on %v, want %v", got, allowed)
	}
}

// TestNodeCoresRefused: a core this machine does not let noisysim use is
// bad input, and nothing is left behind.
func TestNodeCoresRefused(t *testing.T) {
	needPostgres(t)
	allowed, _ := affinity.Allowed()
	base := privateBase(t)
	spec := backend.Spec{CPU: backend.CPUBudget{Cores: map[backend.Role][]int{backend.RolePrimary: {allowed[len(allowed)-1] + 1}}}}
	c, err := local.Start(t.Context(), spec, local.WithBaseDir(base))
	if err == nil {
		c.Close()
		t.Fatal("started with a core past the machine's")
	}
	if !errors.Is(err, backend.ErrBadInput) || !strings.Contains(err.Error(), "core") {
		t.Errorf("err = %v, want bad input naming the core", err)
	}
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), "template") {
			t.Errorf("left %s in the base directory", e.Name())
		}
	}
}

// A cluster started while noisysim is prioritized (cgroup.Prioritize) runs
// its servers outside noisysim's group, with or without a node budget.
func TestStartWhilePrioritized(t *testing.T) {
	needPostgres(t)
	h := needCgroups(t)
	home := cpuGroupOf(t, h, os.Getpid())
	rel := "noisysim-test-prio-" + strconv.Itoa(os.Getpid())
	p, err := h.Prioritize(rel, cgroup.DefaultWeight)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	mine := "/" + rel
	if got := cpuGroupOf(t, h, os.Getpid()); got != mine {
		t.Fatalf("this process is in %q, want %q", got, mine)
	}
	spec := backend.Spec{Topology: backend.TopologyReplica, CPU: backend.CPUBudget{Roles: map[backend.Role]float64{backend.RoleReplica: 0.5}}}
	c, err := local.Start(t.Context(), spec, local.WithBaseDir(privateBase(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range c.Stat().Nodes {
		got := cpuGroupOf(t, h, n.PID)
		switch {
		case n.Role == backend.RoleReplica && !strings.HasSuffix(got, "/replica1"):
			t.Errorf("%s (pid %d) is in %q, want its budget's group", n.Name, n.PID, got)
		case n.Role != backend.RoleReplica && got != home:
			t.Errorf("%s (pid %d) is in %q, want %q where noisysim was before", n.Name, n.PID, got, home)
		}
	}
}
