package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/internal/affinity"
)

// cgroupParent is the group under the cpu hierarchy's root that holds one
// group per cluster (named like the cluster's directory), which holds one
// group per node.
const cgroupParent = "noisysim"

// CPUBudgetError reports a CPU budget the local backend cannot enforce. It
// unwraps to its cause and to backend.ErrBadInput (a budget out of range or
// above the limit noisysim itself runs under) or backend.ErrNotInstalled
// (no writable cgroup cpu controller).
type CPUBudgetError struct {
	// Node is the node whose budget failed; empty for the whole cluster.
	Node string
	Err  error
}

func (e *CPUBudgetError) Error() string {
	if e.Node == "" {
		return "CPU budgets: " + e.Err.Error()
	}
	return "CPU budget of node " + e.Node + ": " + e.Err.Error()
}

// Unwrap returns the cause and the backend sentinel it maps to.
func (e *CPUBudgetError) Unwrap() []error {
	errs := []error{e.Err}
	switch {
	case errors.Is(e.Err, cgroup.ErrBadBudget):
		errs = append(errs, backend.ErrBadInput)
	case errors.Is(e.Err, cgroup.ErrUnavailable):
		errs = append(errs, backend.ErrNotInstalled)
	}
	return errs
}

// checkCPU returns a *CPUBudgetError for a budget out of range.
func checkCPU(b backend.CPUBudget) error {
	if err := cgroup.CheckCPU(b.Node); err != nil {
		return &CPUBudgetError{Err: err}
	}
	for _, r := range slicesSorted(b.Roles) {
		if err := cgroup.CheckCPU(b.Roles[r]); err != nil {
			return &CPUBudgetError{Err: fmt.Errorf("role %s: %w", r, err)}
		}
	}
	return nil
}

func slicesSorted(m map[backend.Role]float64) []backend.Role {
	var out []backend.Role
	for r := range m {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// cpuGroups are a cluster's cgroups: one per budgeted node.
type cpuGroups struct {
	h       cgroup.Hierarchy
	top     *cgroup.Group
	nodes   map[string]*cgroup.Group
	stat    backend.CPUStat
	skipped string
}

// setupCPU creates a group per node of plans with the node's budget, under
// noisysim/<cluster dir name>. Where cgroups cannot be written it returns
// a *CPUBudgetError, or with spec.Optional records why and returns nil.
func (c *Cluster) setupCPU(spec backend.CPUBudget, plans []nodePlan) error {
	if !spec.Any() {
		return nil
	}
	cg := &cpuGroups{nodes: map[string]*cgroup.Group{}}
	h, err := cgroup.Detect()
	if err == nil {
		cg.h = h
		cg.top, err = h.Create(cgroupParent + "/" + filepath.Base(c.dir))
	}
	if err != nil {
		if spec.Optional && errors.Is(err, cgroup.ErrUnavailable) {
			c.cpu = &cpuGroups{skipped: err.Error(), stat: backend.CPUStat{Skipped: err.Error()}}
			c.log.Warn("running without CPU budgets", "reason", err)
			return nil
		}
		return &CPUBudgetError{Err: err}
	}
	c.cpu = cg
	cg.stat.Mechanism = fmt.Sprintf("cgroup v%d %s", h.Version, cg.top.Path)
	for _, p := range plans {
		cpus := spec.For(p.role)
		if cpus == 0 {
			cg.stat.Nodes = append(cg.stat.Nodes, backend.NodeCPU{Node: p.name})
			continue
		}
		lim, err := cgroup.LimitFor(cpus, 0)
		if err != nil {
			return &CPUBudgetError{Node: p.name, Err: err}
		}
		g, err := h.Create(cgroupParent + "/" + filepath.Base(c.dir) + "/" + p.name)
		if err != nil {
			return &CPUBudgetError{Node: p.name, Err: err}
		}
		if err := g.Set(lim); err != nil {
			return &CPUBudgetError{Node: p.name, Err: err}
		}
		got, err := g.Limit()
		if err != nil {
			return &CPUBudgetError{Node: p.name, Err: err}
		}
		cg.nodes[p.name] = g
		cg.stat.Nodes = append(cg.stat.Nodes, backend.NodeCPU{Node: p.name, CPUs: got.CPUs()})
	}
	return nil
}

// cpuGroup returns the group node runs in, nil for none.
func (c *Cluster) cpuGroup(node string) *cgroup.Group {
	if c.cpu == nil {
		return nil
	}
	return c.cpu.nodes[node]
}

// removeCPU removes the cluster's groups (its servers have stopped).
func (c *Cluster) removeCPU() error {
	if c.cpu == nil || c.cpu.top == nil {
		return nil
	}
	if err := c.cpu.top.RemoveTree(); err != nil {
		return &CPUBudgetError{Err: err}
	}
	removeParentIfEmpty(c.cpu.h)
	return nil
}

// removeParentIfEmpty removes the noisysim group once no cluster uses it;
// another cluster's group in it keeps it (rmdir fails, harmlessly).
func removeParentIfEmpty(h cgroup.Hierarchy) {
	os.Remove(h.Group(cgroupParent).Path)
}

// CPUBudgets implements backend.CPUReporter. A node pinned to cores has
// them read back from its postmaster.
func (c *Cluster) CPUBudgets() backend.CPUStat {
	var st backend.CPUStat
	if c.cpu != nil {
		st = c.cpu.stat
		st.Nodes = slices.Clone(st.Nodes)
	}
	if len(c.cores) == 0 {
		return st
	}
	for _, n := range c.nodes {
		cores, ok := c.cores[n.Name]
		if !ok {
			continue
		}
		list := affinity.Format(cores)
		n.mu.Lock()
		if n.pid > 0 {
			if got, err := affinity.Of(n.pid); err == nil {
				list = affinity.Format(got)
			}
		}
		n.mu.Unlock()
		i := slices.IndexFunc(st.Nodes, func(nc backend.NodeCPU) bool { return nc.Node == n.Name })
		if i < 0 {
			st.Nodes = append(st.Nodes, backend.NodeCPU{Node: n.Name})
			i = len(st.Nodes) - 1
		}
		st.Nodes[i].Cores = list
	}
	if st.Mechanism == "" {
		st.Mechanism = "CPU affinity"
	} else {
		st.Mechanism += ", CPU affinity"
	}
	return st
}

// cgroupState records the cluster's cpu groups in its state file, for
// StopKept and the sweep.
type cgroupState struct {
	Root    string `json:"root"`
	Version int    `json:"version"`
	// Group is the cluster's group, relative to Root.
	Group string `json:"group"`
}

func (c *Cluster) cgroupState() *cgroupState {
	if c.cpu == nil || c.cpu.top == nil {
		return nil
	}
	return &cgroupState{Root: c.cpu.h.Root, Version: int(c.cpu.h.Version), Group: cgroupParent + "/" + filepath.Base(c.dir)}
}

// removeRecorded removes the groups recorded in a state file.
func (s *cgroupState) remove() error {
	if s == nil {
		return nil
	}
	h := cgroup.Hierarchy{Root: s.Root, Version: cgroup.Version(s.Version)}
	if err := h.Group(s.Group).RemoveTree(); err != nil {
		return &CPUBudgetError{Err: err}
	}
	removeParentIfEmpty(h)
	return nil
}

// leftoverAge is how old an empty cluster group without a cluster directory
// must be before a sweep removes it (a cluster creates its directory first,
// then its groups, and removes them in the other order).
const leftoverAge = time.Minute

// sweepCPU removes the groups of clusters under base whose directory is
// gone: left by a noisysim killed between removing one and the other.
func sweepCPU(base string) {
	h, err := cgroup.Detect()
	if err != nil {
		return
	}
	entries, err := os.ReadDir(h.Group(cgroupParent).Path)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(base, e.Name())); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < leftoverAge {
			continue
		}
		g := h.Group(cgroupParent + "/" + e.Name())
		if busy(g) {
			continue
		}
		g.RemoveTree()
	}
	removeParentIfEmpty(h)
}

// busy reports whether a process runs in g or a group under it.
func busy(g *cgroup.Group) bool {
	found := false
	filepath.WalkDir(g.Path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			if b, _ := os.ReadFile(p); len(b) > 0 {
				found = true
			}
		}
		return nil
	})
	return found
}
