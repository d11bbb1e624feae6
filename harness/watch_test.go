package harness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

// fireAfter is a test policy: at its check number Checks it fires
// terminate_sessions of Tenant and is done.
type fireAfter struct {
	Checks int `yaml:"checks"`
	Tenant int `yaml:"tenant"`
}

func (f *fireAfter) Validate(*scenario.Scenario) []scenario.ActionProblem { return nil }

// fireAfterPolicy keeps the samples it was handed.
type fireAfterPolicy struct {
	cfg *fireAfter
}

var (
	samplesMu sync.Mutex
	samples   []harness.Sample
)

func (p fireAfterPolicy) Check(_ context.Context, env harness.ActionEnv, s harness.Sample) ([]scenario.Action, bool, error) {
	samplesMu.Lock()
	samples = append(samples, s)
	samplesMu.Unlock()
	if s.Check < p.cfg.Checks {
		return nil, false, nil
	}
	return []scenario.Action{{Type: scenario.ActionTerminateSessions, Config: &scenario.TerminateSessions{Tenant: p.cfg.Tenant}}}, true, nil
}

func init() {
	scenario.RegisterPolicy("test_fire_after", func() scenario.PolicyConfig { return &fireAfter{} })
	harness.RegisterPolicyRunner("test_fire_after", func(c scenario.PolicyConfig) harness.Policy {
		return fireAfterPolicy{cfg: c.(*fireAfter)}
	})
}

const watchScenario = `
name: watch
seed: 3
tenants: {count: 4}
data: {orders: 1000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
phases: {drain: 1s}
timeline:
  - {name: before, length: 1s}
  - name: watched
    until: actions_done
    max: 20s
    watch: {policy: test_fire_after, every: 200ms, checks: 3, tenant: 1}
  - {name: after, length: 1s}
configurations:
  - {name: shared, mode: shared}
assertions: {quiet_p99: {window: after, baseline: before, min_samples: 1000000}}
`

// TestWatchUntilActionsDone runs a phase that ends when the action its
// watcher fires has ended: the phase is short of its max, the next phase
// starts where it ended and keeps its length, and the action is reported
// as fired by the policy.
func TestWatchUntilActionsDone(t *testing.T) {
	samplesMu.Lock()
	samples = nil // this run's checks only, with -count above 1 too
	samplesMu.Unlock()
	c := localtest.Start(t, backend.Spec{})
	sc, err := scenario.Parse([]byte(watchScenario), "watch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rep.Configurations[0]
	if len(cfg.Windows) != 3 {
		t.Fatalf("%d windows, want 3", len(cfg.Windows))
	}
	before, watched, after := cfg.Windows[0], cfg.Windows[1], cfg.Windows[2]
	if watched.Start != before.End || after.Start != watched.End {
		t.Errorf("windows [%v %v) [%v %v) [%v %v): want each to start where the last ended",
			before.Start, before.End, watched.Start, watched.End, after.Start, after.End)
	}
	// Three checks 200 ms apart, then one action: well short of the 20 s max.
	if d := watched.End - watched.Start; d < 0.6 || d > 10 {
		t.Errorf("watched lasted %.2f s, want from 0.6 s (three checks) to well short of its 20 s max", d)
	}
	if d := after.End - after.Start; d < 0.999 || d > 1.001 {
		t.Errorf("after lasted %.3f s, want its length 1 s", d)
	}
	counts := map[string]int64{}
	for _, w := range cfg.Windows {
		for _, row := range w.Tenants {
			counts[w.Name] += row.Count
		}
	}
	// 100 lookups a second: about 100 in after, and in watched about
	// 100 a second of its span, none past its end.
	if n := counts["after"]; n < 50 || n > 160 {
		t.Errorf("after: %d lookups, want about 100", n)
	}
	if n, want := counts["watched"], 100*(watched.End-watched.Start); float64(n) > want*1.6+10 {
		t.Errorf("watched: %d lookups, want about %.0f (its span, not its max)", n, want)
	}
	if len(cfg.Actions) != 1 {
		t.Fatalf("%d actions, want 1: %+v", len(cfg.Actions), cfg.Actions)
	}
	if a := cfg.Actions[0]; a.Phase != "watched" || a.Type != scenario.ActionTerminateSessions || a.FiredBy != "test_fire_after" || a.Error != "" {
		t.Errorf("action = %+v, want terminate_sessions in watched, fired by test_fire_after", a)
	}
	samplesMu.Lock()
	defer samplesMu.Unlock()
	if len(samples) != 3 {
		t.Fatalf("%d checks, want 3 (done at the third)", len(samples))
	}
	last := samples[2]
	if last.Phase != "watched" || last.Check != 3 || last.Elapsed < 550*time.Millisecond || len(last.SoFar) == 0 {
		t.Errorf("third sample = %+v; want phase watched, check 3, 0.6 s elapsed, DB time so far", last)
	}
}

// blockingPolicy is a test policy whose check waits until its context
// ends: a policy stuck on a slow server.
type blockingPolicy struct{}

func (blockingPolicy) Check(ctx context.Context, _ harness.ActionEnv, _ harness.Sample) ([]scenario.Action, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}

type blockingConfig struct{}

func (*blockingConfig) Validate(*scenario.Scenario) []scenario.ActionProblem { return nil }

func init() {
	scenario.RegisterPolicy("test_block", func() scenario.PolicyConfig { return &blockingConfig{} })
	harness.RegisterPolicyRunner("test_block", func(scenario.PolicyConfig) harness.Policy { return blockingPolicy{} })
}

// TestWatchStopsWithItsPhase: a watcher whose check is still running when
// its phase ends stops then (the check's context ends), as it does between
// checks: the run goes on to its end without waiting for the check, and a
// phase of fixed length reports no failure of its watcher.
func TestWatchStopsWithItsPhase(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	sc, err := scenario.Parse([]byte(`
name: watch-block
seed: 3
tenants: {count: 4}
data: {orders: 1000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 50}
phases: {drain: 1s}
timeline:
  - {name: before, length: 1s, watch: {policy: test_block, every: 100ms}}
  - {name: after, length: 1s}
configurations:
  - {name: shared, mode: shared}
assertions: {quiet_p99: {window: after, baseline: before, min_samples: 1000000}}
`), "block.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatalf("run: %v (the watcher's check held the run past its phase)", err)
	}
	if a := rep.Configurations[0].Actions; len(a) != 0 {
		t.Errorf("actions %+v: want none (a watcher that stopped with its phase has not failed)", a)
	}
}
