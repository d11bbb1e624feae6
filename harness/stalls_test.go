package harness

import (
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestSettleStalls: a window disturbed only by a stall of noisysim's
// process stays disturbed exactly when a verdict may rest on the stall.
func TestSettleStalls(t *testing.T) {
	name := func(phase, config string) string { return phase + " (" + config + ")" }
	quiet := func(config string, observed, limit float64) reports.Assertion {
		return reports.Assertion{Name: "quiet_p99", Window: "run", Baseline: "solo", Configuration: config,
			Observed: observed, Limit: limit, Unit: "ms", Op: "<=", Passed: observed <= limit}
	}
	stalled := func(window string, stallMs, foreign float64) reports.WindowLoad {
		return reports.WindowLoad{Window: window, Stalls: 3, StallMaxMs: stallMs, ForeignCPU: foreign, Disturbed: true}
	}
	for _, tc := range []struct {
		name          string
		window        reports.WindowLoad
		as            []reports.Assertion
		wantDisturbed bool
	}{
		{"control misses by seconds", stalled("run (naive)", 330, 0), []reports.Assertion{quiet("naive", 14000, 6.3)}, false},
		{"control misses by less than twice the stall", stalled("run (naive)", 330, 0), []reports.Assertion{quiet("naive", 600, 6.3)}, true},
		{"bound holds despite the stall", stalled("run (isolated)", 330, 0), []reports.Assertion{quiet("isolated", 2.1, 6.3)}, false},
		{"the window is a baseline", stalled("solo (isolated)", 330, 0), []reports.Assertion{quiet("isolated", 2.1, 6.3)}, true},
		{"other work beside the stall", stalled("run (naive)", 330, 0.9), []reports.Assertion{quiet("naive", 14000, 6.3)}, true},
		{"steal beside the stall", reports.WindowLoad{Window: "run (naive)", Stalls: 3, StallMaxMs: 330, OwnCPU: 0.5, StealCPU: 0.2, Disturbed: true},
			[]reports.Assertion{quiet("naive", 14000, 6.3)}, true},
		{"the bound is another configuration's", stalled("run (naive)", 330, 0), []reports.Assertion{quiet("isolated", 600, 6.3)}, false},
		{"a lower bound that holds by less than twice the stall", stalled("run (naive)", 330, 0),
			[]reports.Assertion{{Window: "run", Configuration: "naive", Observed: 500, Limit: 100, Unit: "ms", Op: ">=", Passed: true}}, true},
		{"counts are not moved by a stall", stalled("run (naive)", 330, 0),
			[]reports.Assertion{{Name: "no_unexpected_errors", Window: "run", Configuration: "naive", Observed: 12, Op: "<="}}, false},
		{"a ratio of p99s judged over the window", stalled("run (isolated)", 330, 0),
			[]reports.Assertion{{Name: AssertQuietP99AB, Window: "run", Baseline: "solo", Configuration: "isolated", Observed: 0.8, Limit: 1, Unit: "x", Op: "<=", Passed: true}}, true},
		{"a ratio of p99s takes the window as its baseline", stalled("solo (isolated)", 330, 0),
			[]reports.Assertion{{Name: AssertQuietP99AB, Window: "run", Baseline: "solo", Configuration: "isolated", Observed: 0.8, Limit: 1, Unit: "x", Op: "<=", Passed: true}}, true},
		{"a time to detect judged over the window", stalled("noisy (isolated)", 330, 0),
			[]reports.Assertion{{Name: AssertDetectWithin, Window: "noisy", Configuration: "isolated", Observed: 4.9, Limit: 5, Unit: "s", Op: "<=", Passed: true}}, true},
		{"skipped checks decide nothing", stalled("run (naive)", 330, 0),
			[]reports.Assertion{{Window: "run", Configuration: "naive", Observed: 500, Limit: 400, Unit: "ms", Op: "<=", Skipped: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &reports.Machine{MaxForeignCPU: 0.5, MaxStealShare: 0.05, MaxStallMs: 250, Windows: []reports.WindowLoad{tc.window}}
			settleStalls(m, tc.as, name)
			w := m.Windows[0]
			if w.Disturbed != tc.wantDisturbed || w.StallMoot == tc.wantDisturbed && tc.window.ForeignCPU <= 0.5 {
				t.Errorf("disturbed %v, stall_moot %v; want disturbed %v", w.Disturbed, w.StallMoot, tc.wantDisturbed)
			}
			if w.StallMoot && len(m.Disturbed()) != 0 {
				t.Errorf("Disturbed() lists a window whose stall is moot")
			}
		})
	}
	// A stall below the threshold was never disturbed and stays so.
	m := &reports.Machine{MaxForeignCPU: 0.5, MaxStallMs: 250, Windows: []reports.WindowLoad{{Window: "run (naive)", Stalls: 1, StallMaxMs: 120}}}
	settleStalls(m, []reports.Assertion{quiet("naive", 300, 6.3)}, name)
	if m.Windows[0].Disturbed || m.Windows[0].StallMoot {
		t.Errorf("a stall under the threshold: %+v", m.Windows[0])
	}
}

// TestSettleMergedStalls: a stall an agent found moot disturbs its window
// in the merged report when the verdict evaluated on the merged figures
// rests on it, and stays moot when it does not.
func TestSettleMergedStalls(t *testing.T) {
	r := &runner{}
	moot := func(window string) reports.WindowLoad {
		return reports.WindowLoad{Window: window, Stalls: 2, StallMaxMs: 330, StallMoot: true}
	}
	into := mergeMachine(nil, &reports.Machine{MaxForeignCPU: 0.5, MaxStallMs: 250,
		Windows: []reports.WindowLoad{moot("run (naive)"), moot("run (isolated)")}}, "1/2")
	into = mergeMachine(into, &reports.Machine{MaxForeignCPU: 0.5, MaxStallMs: 250,
		Windows: []reports.WindowLoad{moot("run (naive)")}}, "2/2")
	if into.MaxStallMs != 250 {
		t.Errorf("merged max_stall_ms %v, want the agents' 250", into.MaxStallMs)
	}
	// Merged, the control misses its bound by 300 ms, less than twice the
	// stall; isolated holds.
	as := []reports.Assertion{
		{Name: "quiet_p99", Window: "run", Baseline: "solo", Configuration: "naive", Observed: 306, Limit: 6.3, Unit: "ms", Op: "<="},
		{Name: "quiet_p99", Window: "run", Baseline: "solo", Configuration: "isolated", Observed: 2.1, Limit: 6.3, Unit: "ms", Op: "<=", Passed: true},
	}
	r.settleMergedStalls(into, as)
	want := map[string]bool{"segment 1/2: run (naive)": true, "segment 1/2: run (isolated)": false, "segment 2/2: run (naive)": true}
	for _, w := range into.Windows {
		if w.Disturbed != want[w.Window] || w.StallMoot == want[w.Window] {
			t.Errorf("%s: disturbed %v, stall_moot %v; want disturbed %v", w.Window, w.Disturbed, w.StallMoot, want[w.Window])
		}
	}
}
