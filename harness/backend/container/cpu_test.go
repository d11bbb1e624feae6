package container_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
)

func TestCPUBudgets(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("skipping: no docker command to inspect containers with")
	}
	c := start(t, backend.Spec{Topology: backend.TopologyReplica,
		CPU: backend.CPUBudget{Node: 0.4, Roles: map[backend.Role]float64{backend.RoleReplica: 0.25}}})
	want := map[string]string{"primary": "400000000", "replica1": "250000000"}
	for node, nano := range want {
		out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.NanoCpus}}", c.ContainerName(node)).CombinedOutput()
		if err != nil {
			t.Fatalf("docker inspect %s: %v\n%s", node, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != nano {
			t.Errorf("%s: NanoCpus %s, want %s", node, got, nano)
		}
	}
	st := c.CPUBudgets()
	if !slices.Equal(st.Nodes, []backend.NodeCPU{{Node: "primary", CPUs: 0.4}, {Node: "replica1", CPUs: 0.25}}) {
		t.Errorf("CPUBudgets() = %+v", st)
	}
}
