package harness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// A run with quiet_p99_ab measures each A and B block as a window of its
// own and judges the pairs in one quiet_p99_ab assertion per quiet class;
// its limit of 1 is the ratio to each pair's own A block, whatever the
// machine's load at the time.
func TestRunAB(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	sc, err := scenario.Parse([]byte(`
name: ab
seed: 3
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 150}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 1s}
configurations:
  - {name: isolated, mode: isolated}
assertions:
  quiet_p99: {min_samples: 20, factor: 100, slack: 1s}
  quiet_p99_ab: {blocks: 2, block: 1s, settle: 200ms}
  noisy_rejections: false
`), "ab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	windows := map[string]bool{}
	for _, w := range rep.Configurations[0].Windows {
		windows[w.Name] = w.Measured
	}
	for _, name := range []string{"ab1_a", "ab1_b", "ab2_a", "ab2_b"} {
		if !windows[name] {
			t.Errorf("no measured window %s: %v", name, windows)
		}
	}
	var ab []reports.Assertion
	for _, a := range rep.Assertions {
		if a.Name == harness.AssertQuietP99AB {
			ab = append(ab, a)
		}
	}
	if len(ab) != 1 || ab[0].Class != "lookup" || ab[0].Tenant != reports.QuietAll || ab[0].Skipped || !ab[0].Passed ||
		!(ab[0].Observed > 0) || ab[0].Window != "ab1_b..ab2_b" || !strings.Contains(ab[0].Detail, "median over 2 pairs") {
		t.Errorf("quiet_p99_ab assertions: %+v", ab)
	}
}
