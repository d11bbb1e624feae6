package harness

import (
	"strconv"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/reports"
)

func TestQuietP99(t *testing.T) {
	rule := p99Rule{Factor: 1.5, Slack: 5 * time.Millisecond, MinSamples: 50}
	solo := []p99Sample{
		{Tenant: "2", Class: "lookup", Count: 100, P99: 2 * time.Millisecond},
		{Tenant: "3", Class: "lookup", Count: 100, P99: 2 * time.Millisecond},
		{Tenant: "4", Class: "lookup", Count: 10, P99: 2 * time.Millisecond},
		{Tenant: quietAll, Class: "lookup", Count: 210, P99: 2 * time.Millisecond},
	}
	run := []p99Sample{
		{Tenant: "2", Class: "lookup", Count: 100, P99: 8 * time.Millisecond},                  // limit 8 ms: pass (equal)
		{Tenant: "3", Class: "lookup", Count: 100, P99: 8*time.Millisecond + time.Microsecond}, // just over: fail
		{Tenant: "4", Class: "lookup", Count: 100, P99: 500 * time.Millisecond},                // too few solo samples: skipped
		{Tenant: "5", Class: "lookup", Count: 100, P99: time.Millisecond},                      // no solo at all: skipped
		{Tenant: quietAll, Class: "lookup", Count: 400, P99: 7 * time.Millisecond},             // pass
	}
	got := quietP99("isolated", rule, "run", "solo", solo, run)
	want := map[string]struct{ passed, skipped bool }{
		"2": {true, false}, "3": {false, false}, "4": {true, true}, "5": {true, true}, quietAll: {true, false},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d assertions, want %d", len(got), len(want))
	}
	if got[0].Tenant != quietAll {
		t.Errorf("the aggregate should come first, got %q", got[0].Tenant)
	}
	for _, a := range got {
		w := want[a.Tenant]
		if a.Passed != w.passed || a.Skipped != w.skipped {
			t.Errorf("tenant %s: passed %v skipped %v, want %v %v (%+v)", a.Tenant, a.Passed, a.Skipped, w.passed, w.skipped, a)
		}
		if a.Tenant == "2" && a.Limit != 8 {
			t.Errorf("tenant 2: limit %.3f ms, want 8 (1.5 × 2 ms + 5 ms)", a.Limit)
		}
		if a.Name != AssertQuietP99 || a.Configuration != "isolated" || a.Unit != "ms" {
			t.Errorf("tenant %s: bad labels %+v", a.Tenant, a)
		}
	}
}

// TestQuietP99SamePhase: a window judged against itself could never fail
// (factor >= 1): every pair is skipped and says why, none passed.
func TestQuietP99SamePhase(t *testing.T) {
	rule := p99Rule{Factor: 1.5, Slack: 5 * time.Millisecond, MinSamples: 50}
	run := []p99Sample{
		{Tenant: "2", Class: "lookup", Count: 100, P99: 8 * time.Millisecond},
		{Tenant: quietAll, Class: "lookup", Count: 400, P99: 7 * time.Millisecond},
	}
	for _, a := range quietP99("isolated", rule, "run", "run", run, run) {
		if !a.Skipped || a.Detail != "window and baseline are the same phase (run): nothing to compare it with" {
			t.Errorf("tenant %s: skipped %v, detail %q; want skipped, saying the phase is its own baseline", a.Tenant, a.Skipped, a.Detail)
		}
	}
}

func TestCountAssert(t *testing.T) {
	for _, tc := range []struct {
		op             string
		observed, want int64
		passed         bool
	}{
		{">", 1, 0, true}, {">", 0, 0, false},
		{"==", 3, 3, true}, {"==", 3, 4, false},
		{"<=", 0, 0, true}, {"<=", 1, 0, false},
	} {
		a := countAssert("x", "c", "", "", tc.op, tc.observed, tc.want, "")
		if a.Passed != tc.passed {
			t.Errorf("%d %s %d: passed %v, want %v", tc.observed, tc.op, tc.want, a.Passed, tc.passed)
		}
	}
}

func TestExpectations(t *testing.T) {
	r := &runner{}
	rep := &reports.Report{
		Configurations: []reports.Configuration{{Name: "naive", Expect: "fail"}, {Name: "isolated", Expect: "pass"}},
		Assertions: []reports.Assertion{
			{Name: AssertQuietP99, Configuration: "naive", Passed: false},
			{Name: AssertQuietP99, Configuration: "naive", Passed: false, Skipped: true},
			{Name: AssertQuietP99, Configuration: "isolated", Passed: false},
		},
	}
	got := r.expectations(rep)
	if len(got) != 1 || got[0].Configuration != "naive" || !got[0].Passed || got[0].Observed != 1 {
		t.Fatalf("a control with one real failure: got %+v", got)
	}
	rep.Assertions = rep.Assertions[1:]
	if got := r.expectations(rep); got[0].Passed {
		t.Errorf("a control with only skipped failures must not count as failing: %+v", got[0])
	}
	r.opts.Only = "naive"
	if got := r.expectations(rep); len(got) != 0 {
		t.Errorf("--only applies the assertions themselves, no expectation: got %+v", got)
	}
}

func TestQuietRejections(t *testing.T) {
	sums := []metrics.Summary{
		{Tenant: 1, Class: "lookup", ErrorsByClass: map[string]int64{"queue_full": 50}},
		{Tenant: 2, Class: "lookup", ErrorsByClass: map[string]int64{"statement_timeout": 3}},
		{Tenant: 3, Class: "page", ErrorsByClass: map[string]int64{"queue_full": 1, "wait_exceeded": 2}},
	}
	got := quietRejections("isolated", sums, strconv.Itoa)
	if len(got) != 2 {
		t.Fatalf("got %d assertions, want tenant 3's and the aggregate: %+v", len(got), got)
	}
	if got[0].Tenant != "3" || got[0].Observed != 3 || got[0].Passed {
		t.Errorf("tenant 3: %+v", got[0])
	}
	if got[1].Tenant != quietAll || got[1].Observed != 3 || got[1].Passed {
		t.Errorf("aggregate: %+v (the dominant tenant's rejections must not count)", got[1])
	}
	if ok := quietRejections("isolated", sums[:2], strconv.Itoa); len(ok) != 1 || !ok[0].Passed {
		t.Errorf("no quiet rejections must pass: %+v", ok)
	}
}
