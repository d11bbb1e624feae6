package harness

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// TestCitusLayoutLoad: DB time counts on the worker holding each tenant's
// shard; skew is over the workers that take shards; the hot worker and the
// quiet tenants sharing it follow tenant 1's shard.
func TestCitusLayoutLoad(t *testing.T) {
	l := &citusLayout{
		Layout: citus.Layout{Workers: []citus.Worker{{Name: "w1", ShouldHaveShards: true}, {Name: "w2", ShouldHaveShards: true},
			{Name: "w3", ShouldHaveShards: true}, {Name: "w4"}},
			Placements: map[int64]string{10: "w1", 11: "w2", 12: "w3", 13: "w4"}},
		shardOf: map[string]int64{"1": 10, "2": 10, "3": 11, "4": 12, "5": 13},
	}
	wl := l.load(map[string]time.Duration{"1": 6 * time.Second, "2": time.Second, "3": time.Second, "4": 2 * time.Second, "5": 10 * time.Second},
		2*time.Second, "1")
	if wl.Workers["w1"] != 3.5 || wl.Workers["w2"] != 0.5 || wl.Workers["w3"] != 1 || wl.Workers["w4"] != 5 {
		t.Errorf("workers = %v, want w1 3.5, w2 0.5, w3 1, w4 5 busy backends", wl.Workers)
	}
	if wl.Skew != 3.5 { // max 3.5 / median 1 of w1..w3: w4 takes no shards
		t.Errorf("skew = %v, want 3.5", wl.Skew)
	}
	if wl.Hot != "w1" || wl.HotShare != 0.35 {
		t.Errorf("hot worker %s at %v, want w1 at 0.35 of 10", wl.Hot, wl.HotShare)
	}
	if on := l.tenantsOn("w1", "1", []string{"1", "2", "3", "4", "5"}); len(on) != 1 || !on[2] {
		t.Errorf("quiet tenants on w1 = %v, want tenant 2", on)
	}
	idle := l.load(map[string]time.Duration{"1": time.Second}, time.Second, "1")
	if idle.Skew != finiteSkew(citus.Skew([]float64{1, 0, 0})) || idle.Skew <= 1e300 {
		t.Errorf("skew over idle workers = %v, want the largest float64", idle.Skew)
	}
}

// TestCitusTextKeys: with tenants.keys the layout, the quiet tenants on
// the hot worker and the ladder's actions go by the tenants' keys, mapped
// back to their numbers.
func TestCitusTextKeys(t *testing.T) {
	keys := []string{"org-1", "org-2", "org-3"}
	l := &citusLayout{
		Layout:  citus.Layout{Workers: []citus.Worker{{Name: "w1", ShouldHaveShards: true}, {Name: "w2", ShouldHaveShards: true}}, Placements: map[int64]string{10: "w1", 11: "w2"}},
		shardOf: map[string]int64{"org-1": 10, "org-2": 11, "org-3": 10},
	}
	if on := l.tenantsOn("w1", "org-1", keys); len(on) != 1 || !on[3] {
		t.Errorf("quiet tenants on w1 = %v, want tenant 3 (org-3)", on)
	}
	p := &ladderPolicy{cfg: &scenario.HotShardLadder{}}
	a, key, ok := p.action(citus.Step{Action: citus.ActionIsolate, Tenant: "org-2"}, keys)
	if it, _ := a.Config.(*scenario.IsolateTenant); !ok || it == nil || it.Tenant != 2 || key != scenario.ActionIsolateTenant+"org-2" {
		t.Errorf("action of isolating org-2 = %+v %q %v, want isolate_tenant of tenant 2", a, key, ok)
	}
	a, _, _ = p.action(citus.Step{Action: citus.ActionIsolate, Tenant: "7"}, nil)
	if it, _ := a.Config.(*scenario.IsolateTenant); it == nil || it.Tenant != 7 {
		t.Errorf("action of isolating 7 without keys = %+v, want tenant 7", a)
	}
}

// TestHotShardVerdicts: detect_within reads the policy's first detection
// in the phase it watches; without --apply the assertions on the windows
// after the plan are skipped, with it they stand.
func TestHotShardVerdicts(t *testing.T) {
	sc, err := scenario.Load("../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{sc: sc}
	c := &sc.Configurations[0]
	tr := &timelineRun{actions: []reports.ActionResult{
		{Phase: "before", Type: ResultDetect, Before: map[string]float64{"phase_elapsed_s": 0.5}, Detail: "first alert"},
		{Phase: "ladder", Type: ResultDetect, Before: map[string]float64{"phase_elapsed_s": 9}},
	}}
	a := r.detectWithin(c, tr, 3*time.Second)
	if !a.Passed || a.Window != "before" || a.Observed != 0.5 || a.Limit != 3.5 {
		t.Errorf("detect_within = %+v, want 0.5 s in before <= 3.5 s", a)
	}
	tr.actions = tr.actions[1:]
	if a := r.detectWithin(c, tr, 3*time.Second); a.Passed || !strings.Contains(a.Detail, "no alert in before") {
		t.Errorf("detect_within without an alert in before = %+v, want a failure", a)
	}
	as := []reports.Assertion{{Name: AssertQuietP99, Window: "after", Passed: false}, {Name: AssertSkew, Window: "after", Passed: false},
		{Name: AssertHarmBefore, Window: "before", Passed: true}}
	got := r.planOnly(tr, append([]reports.Assertion(nil), as...))
	if !got[0].Skipped || !got[1].Skipped || got[2].Skipped || !strings.Contains(got[0].Detail, "plan only") {
		t.Errorf("plan only: %+v, want quiet_p99 and skew on after skipped", got)
	}
	sc.SetApply()
	if got := r.planOnly(tr, append([]reports.Assertion(nil), as...)); got[0].Skipped || got[1].Skipped {
		t.Errorf("with --apply: %+v, want the assertions standing", got)
	}
}

// TestHarmBeforeHotWorker: harm_before with tenants: hot_worker judges the
// quiet tenants on the dominant tenant's worker, not the merged quiet
// tenants, and with a factor its bar is factor × baseline p99 (no slack).
func TestHarmBeforeHotWorker(t *testing.T) {
	sc, err := scenario.Load("../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Assertions.HarmBefore = scenario.HarmBefore{Window: "before", Tenants: scenario.HarmHotWorker, Factor: 5}
	r := &runner{sc: sc, citus: &citusRun{hotQuiet: map[int]bool{2: true}, hotWorker: "worker2"}}
	origin := time.Now()
	// record gives tenant n n samples of latency d each in a new window.
	win := func(name string, lat map[int]time.Duration) *window {
		rec, err := metrics.New(metrics.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for tenant, d := range lat {
			for i := 0; i < 200; i++ {
				rec.Record(workload.Result{Op: workload.Op{Tenant: tenant, Class: "page"}, Intended: origin, Start: origin, End: origin.Add(d)})
			}
		}
		return &window{step: &step{Phase: scenario.Phase{Name: name}}, rec: rec}
	}
	rule := p99Rule{Factor: 1.5, Slack: 5 * time.Millisecond, MinSamples: 100}
	c := &sc.Configurations[0]
	for _, tc := range []struct {
		name     string
		hot      time.Duration // tenant 2's p99 in before (solo: 2 ms)
		passed   bool
		observed float64
	}{
		{"harm 6x on the hot worker", 12 * time.Millisecond, true, 12},
		{"harm 4x on the hot worker: under the factor", 8 * time.Millisecond, false, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Tenant 3 (another worker) is unharmed: quiet (all) alone would
			// pass quiet_p99's bound 1.5 × 2 ms + 5 ms only at the hot tenant's.
			tr := &timelineRun{windows: []*window{
				win("solo", map[int]time.Duration{2: 2 * time.Millisecond, 3: 2 * time.Millisecond}),
				win("before", map[int]time.Duration{2: tc.hot, 3: 2 * time.Millisecond}),
			}}
			got := r.harmBefore(c, tr, rule, "solo")
			if len(got) != 1 {
				t.Fatalf("harm_before = %+v, want one row (class page)", got)
			}
			a := got[0]
			if a.Tenant != reports.QuietHotWorker || a.Passed != tc.passed || math.Abs(a.Observed-tc.observed) > 0.1 || math.Abs(a.Limit-10) > 0.1 {
				t.Errorf("harm_before = %+v, want %s observed %.0f ms against 10 ms (5 × 2 ms), passed %v", a, reports.QuietHotWorker, tc.observed, tc.passed)
			}
			// The row says which tenants it judged and the bar's make-up.
			for _, want := range []string{"the quiet tenants whose shard was on worker2 (1)", "× 5.00 (harm_before.factor)"} {
				if !strings.Contains(a.Detail, want) {
					t.Errorf("harm_before detail %q, want it to contain %q", a.Detail, want)
				}
			}
		})
	}
	// No quiet tenant on the hot worker: the harm cannot be shown.
	r.citus.hotQuiet = map[int]bool{}
	tr := &timelineRun{windows: []*window{win("solo", map[int]time.Duration{3: time.Millisecond}), win("before", map[int]time.Duration{3: time.Second})}}
	if got := r.harmBefore(c, tr, rule, "solo"); len(got) != 1 || got[0].Passed || !strings.Contains(got[0].Detail, "cannot be shown") {
		t.Errorf("harm_before without hot-worker tenants = %+v, want one failure", got)
	}
}
