package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

const small = `
name: small
seed: 7
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
  - {name: export, isolation_class: heavy, query: export, rate: 4, senders: dominant, batch: 100}
  - {name: sleep, isolation_class: interactive, query: sleep, sleep: 2ms, rate: 20, senders: quiet}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 1s}
configurations:
  - {name: isolated, mode: isolated}
assertions: {quiet_p99: {min_samples: 1000000}}
`

// TestRunSmall runs a small scenario end to end, open and closed loop, on a
// cluster the test starts itself.
func TestRunSmall(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	for _, model := range []string{"", "load: {model: closed, users: 10, think_time: 20ms}\n"} {
		name := "open"
		if model != "" {
			name = "closed"
		}
		t.Run(name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte(small+model), "small.yaml")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Configurations) != 1 {
				t.Fatalf("%d configurations, want 1", len(rep.Configurations))
			}
			cfg := rep.Configurations[0]
			counts := map[string]int64{}
			for _, row := range cfg.Tenants {
				counts[row.Class] += row.Count
				if row.Class == "export" && row.Tenant != "1" {
					t.Errorf("export sent by tenant %s, want the dominant tenant only", row.Tenant)
				}
				if row.Class == "sleep" && row.Count > 0 && row.P50 < 2 {
					t.Errorf("tenant %s: sleep p50 %.2f ms, below the 2 ms pg_sleep", row.Tenant, row.P50)
				}
			}
			for _, class := range []string{"lookup", "export", "sleep"} {
				if counts[class] == 0 {
					t.Errorf("no %s requests measured", class)
				}
			}
			if len(cfg.SoloQuietAll) == 0 || len(cfg.QuietAll) == 0 {
				t.Error("no merged quiet rows")
			}
			var clean int
			for _, a := range rep.Assertions {
				switch a.Name {
				case harness.AssertCleanInFlight, harness.AssertCleanBorrowed, harness.AssertCleanTagged:
					clean++
					if !a.Passed {
						t.Errorf("%s: observed %v", a.Name, a.Observed)
					}
				case harness.AssertQuietP99:
					if !a.Skipped {
						t.Errorf("quiet_p99 %s/%s evaluated with min_samples 1e6", a.Tenant, a.Class)
					}
				}
			}
			if clean != 3 {
				t.Errorf("%d clean-after assertions, want 3", clean)
			}
			if rep.ScheduleHash == "" || rep.Seed != 7 {
				t.Errorf("seed %d hash %q", rep.Seed, rep.ScheduleHash)
			}
		})
	}
}
