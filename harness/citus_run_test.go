package harness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// shortHotShard is scenarios/hot-shard.yaml on 2 workers and 8 shards with
// short phases, for tests.
func shortHotShard(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load("../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Backend.Workers, sc.Backend.NodeCPU, sc.Backend.NodeCPURoles = 2, 0, nil
	sc.Data.Citus.Shards, sc.Data.Orders = 8, 5000
	for i := range sc.Timeline {
		p := &sc.Timeline[i]
		switch p.Name {
		case "solo", "before", "after":
			p.Length = scenario.Duration(2 * time.Second)
		case "ladder":
			// Tenant 1's steps only: the quiet tenants (tenant 2 has
			// about 6%) stay where they are.
			p.Max = scenario.Duration(150 * time.Second)
			p.Watch.Config.(*scenario.HotShardLadder).Isolate = 0.15
		}
	}
	return sc
}

// TestRunHotShard runs the hot-shard scenario on a local Citus cluster
// with --apply: the data set is distributed, the before watch detects,
// the ladder isolates tenant 1 and dedicates its worker, one action at a
// time, and the after window's placements show it alone there.
func TestRunHotShard(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: the hot-shard run takes about a minute (-short)")
	}
	sc := shortHotShard(t)
	if !sc.SetApply() {
		t.Fatal("the scenario has no hot_shard_ladder watch to apply")
	}
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c, MaxForeignCPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Validate(); err != nil {
		t.Errorf("invalid report: %v", err)
	}
	cr := rep.Configurations[0]
	var types []string
	for _, a := range cr.Actions {
		if a.Error != "" {
			t.Errorf("action %s in %s failed: %s", a.Type, a.Phase, a.Error)
		}
		types = append(types, a.Phase+":"+a.Type)
	}
	got := strings.Join(types, " ")
	for _, want := range []string{"before:detect", "ladder:isolate_tenant", "ladder:dedicate_worker"} {
		if !strings.Contains(got, want) {
			t.Errorf("actions %q, want %s", got, want)
		}
	}
	if strings.Index(got, "ladder:isolate_tenant") > strings.Index(got, "ladder:dedicate_worker") {
		t.Errorf("actions %q: dedicate before isolate", got)
	}
	if w := cr.Writer; w == nil || w.Inserts == 0 || w.Lost != 0 {
		t.Errorf("writer = %+v, want checked inserts, none lost", w)
	}
	byName := map[string]reports.Window{}
	for _, w := range cr.Windows {
		byName[w.Name] = w
	}
	before, after := byName["before"], byName["after"]
	if len(before.Workers) != 2 || before.HotWorker == "" || len(before.QuietWorkers) == 0 {
		t.Fatalf("before window: workers %v, hot %q, quiet by worker %v: want the load of 2 workers", before.Workers, before.HotWorker, before.QuietWorkers)
	}
	// After the ladder tenant 1's worker holds its shard alone: the
	// quiet tenants' load is all on the other worker.
	var quiet float64
	for w, v := range after.Workers {
		if w != after.HotWorker {
			quiet += v
		}
	}
	if after.HotWorker == "" || quiet == 0 {
		t.Errorf("after window: workers %v, hot %q: want the quiet load on the other worker", after.Workers, after.HotWorker)
	}
	names := map[string]bool{}
	for _, a := range rep.Assertions {
		names[a.Name] = true
	}
	for _, want := range []string{harness.AssertHarmBefore, harness.AssertSkew, harness.AssertDetectWithin, harness.AssertQuietP99, "zero_loss"} {
		if !names[want] {
			t.Errorf("no %s assertion", want)
		}
	}
}
