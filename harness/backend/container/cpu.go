package container

import (
	"fmt"
	"math"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
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
	if !c.cpu.Any() {
		return backend.CPUStat{}
	}
	st := backend.CPUStat{Mechanism: "docker cpu quota (--cpus)"}
	for _, n := range c.Nodes() {
		st.Nodes = append(st.Nodes, backend.NodeCPU{Node: n.Name, CPUs: c.cpu.For(n.Role)})
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
