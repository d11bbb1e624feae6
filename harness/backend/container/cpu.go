package container

import (
	"fmt"
	"math"
	"strings"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/internal/affinity"
)

// checkCPU returns an error wrapping backend.ErrBadInput for a budget out
// of range.
func checkCPU(b backend.CPUBudget) error {
	if err := cgroup.CheckCPU(b.Node); err != nil {
		return fmt.Errorf("CPU budgets: %w: %w", err, backend.ErrBadInput)
	}
	for r, v := range b.Roles {
		if err := cgroup.CheckCPU(v); err != nil {
			return fmt.Errorf("CPU budget of role %s: %w: %w", r, err, backend.ErrBadInput)
		}
	}
	return nil
}

// nanoCPUs returns Docker's NanoCPUs (--cpus × 1e9) for a budget; 0 is
// none.
func nanoCPUs(cpus float64) int64 {
	return int64(math.Round(cpus * 1e9))
}

// CPUBudgets implements backend.CPUReporter: the budgets the containers
// were created with.
func (c *Cluster) CPUBudgets() backend.CPUStat {
	if !c.cpu.Any() && len(c.cpu.Cores) == 0 {
		return backend.CPUStat{}
	}
	var how []string
	if c.cpu.Any() {
		how = append(how, "docker cpu quota (--cpus)")
	}
	if len(c.cpu.Cores) > 0 {
		how = append(how, "docker cpuset (--cpuset-cpus)")
	}
	st := backend.CPUStat{Mechanism: strings.Join(how, ", ")}
	for _, n := range c.Nodes() {
		nc := backend.NodeCPU{Node: n.Name, CPUs: c.cpu.For(n.Role)}
		if cores := c.cpu.CoresFor(n.Role); len(cores) > 0 {
			nc.Cores = affinity.Format(cores)
		}
		st.Nodes = append(st.Nodes, nc)
	}
	return st
}

// ContainerIDs returns the ids of the cluster's containers, in node order:
// the disturbance guard counts the processes in them as the run's own.
func (c *Cluster) ContainerIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		if n.id != "" {
			out = append(out, n.id)
		}
	}
	return out
}
