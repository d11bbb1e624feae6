package harness

import (
	"slices"
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestRetryOf: a failed run is run again exactly when a check that failed
// it was judged over a window the machine disturbed (or which windows it
// rests on cannot be told); a passed run, and a failure on undisturbed
// windows, are final.
func TestRetryOf(t *testing.T) {
	quiet := func(config string, observed, limit float64) reports.Assertion {
		return reports.Assertion{Name: AssertQuietP99, Window: "run", Baseline: "solo", Configuration: config, Tenant: reports.QuietAll,
			Class: "lookup", Observed: observed, Limit: limit, Unit: "ms", Op: "<=", Passed: observed <= limit}
	}
	control := func(failed int64) reports.Assertion {
		return countAssert(AssertControlFails, "naive", "", "", ">", failed, 0, "")
	}
	errs := func(config string, n int64) reports.Assertion {
		return countAssert(AssertNoUnexpectedError, config, "", "", "==", n, 0, "")
	}
	stolen := reports.WindowLoad{OwnCPU: 0.9, StealCPU: 0.2, Disturbed: true} // 18% of the CPU the machine ran
	at := func(w reports.WindowLoad, name string) reports.WindowLoad { w.Window = name; return w }
	quietWindows := func(disturbed ...string) []reports.WindowLoad {
		var ws []reports.WindowLoad
		for _, n := range []string{"solo (naive)", "run (naive)", "solo (isolated)", "run (isolated)"} {
			w := reports.WindowLoad{Window: n, OwnCPU: 0.9}
			if slices.Contains(disturbed, n) {
				w = at(stolen, n)
			}
			ws = append(ws, w)
		}
		return ws
	}
	for _, tc := range []struct {
		name    string
		as      []reports.Assertion
		windows []reports.WindowLoad
		only    string
		want    []string // the disturbed windows it rests on; nil: final
		failed  int
	}{
		{"failed on its disturbed run window", []reports.Assertion{quiet("naive", 900, 6), control(1), quiet("isolated", 9, 6)},
			quietWindows("run (isolated)"), "", []string{"run (isolated)"}, 1},
		{"failed on its disturbed baseline", []reports.Assertion{quiet("naive", 900, 6), control(1), quiet("isolated", 9, 6)},
			quietWindows("solo (isolated)"), "", []string{"solo (isolated)"}, 1},
		{"failed on undisturbed windows", []reports.Assertion{quiet("naive", 900, 6), control(1), quiet("isolated", 9, 6)},
			quietWindows(), "", nil, 1},
		{"disturbed window not used by the failed check", []reports.Assertion{quiet("naive", 900, 6), control(1), quiet("isolated", 9, 6)},
			quietWindows("run (naive)", "solo (naive)"), "", nil, 1},
		{"passed on a disturbed machine", []reports.Assertion{quiet("naive", 900, 6), control(1), quiet("isolated", 2, 6)},
			quietWindows("run (isolated)", "run (naive)"), "", nil, 0},
		{"a control that passed, on its disturbed window", []reports.Assertion{quiet("naive", 5, 6), control(0), quiet("isolated", 2, 6)},
			quietWindows("run (naive)", "run (isolated)"), "", []string{"run (naive)"}, 1},
		{"a control that passed, the isolated window disturbed", []reports.Assertion{quiet("naive", 5, 6), control(0), quiet("isolated", 2, 6)},
			quietWindows("run (isolated)"), "", nil, 1},
		{"a control's own failure does not count", []reports.Assertion{quiet("naive", 900, 6), control(1), quiet("isolated", 2, 6)},
			quietWindows("run (naive)"), "", nil, 0},
		{"--only: the control's failure counts", []reports.Assertion{quiet("naive", 900, 6)},
			quietWindows("run (naive)"), "naive", []string{"run (naive)"}, 1},
		{"a count over the whole timeline: any disturbed window", []reports.Assertion{quiet("naive", 900, 6), control(1), errs("isolated", 3)},
			quietWindows("solo (naive)"), "", []string{"solo (naive)"}, 1},
		{"a count over the whole timeline, nothing disturbed", []reports.Assertion{quiet("naive", 900, 6), control(1), errs("isolated", 3)},
			quietWindows(), "", nil, 1},
		{"a window the guard did not measure: any disturbed window", []reports.Assertion{{Name: AssertSkew, Window: "ladder", Configuration: "isolated", Observed: 3, Limit: 2, Unit: "x", Op: "<="}},
			quietWindows("solo (naive)"), "", []string{"solo (naive)"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configs := []reports.Configuration{{Name: "naive", Expect: reports.ExpectFail}, {Name: "isolated", Expect: reports.ExpectPass}}
			rep := &reports.Report{Configurations: configs, Assertions: tc.as, Machine: &reports.Machine{MaxStealShare: 0.05, Windows: tc.windows}}
			r := RetryOf(rep, tc.only)
			var got []string
			for _, w := range r.Disturbed {
				got = append(got, w.Window)
			}
			if !slices.Equal(got, tc.want) || len(r.Failed) != tc.failed || r.Again() != (tc.want != nil) {
				t.Errorf("RetryOf: failed %d, disturbed %v, again %v; want failed %d, disturbed %v", len(r.Failed), got, r.Again(), tc.failed, tc.want)
			}
		})
	}
	// Without the guard nothing is disturbed: a failure is final.
	rep := &reports.Report{Assertions: []reports.Assertion{quiet("isolated", 9, 6)}}
	if r := RetryOf(rep, ""); r.Again() || len(r.Failed) != 1 {
		t.Errorf("RetryOf without a guard: again %v, failed %d; want final, 1 failed", r.Again(), len(r.Failed))
	}
}

// A run failed on marginal verdicts only may be run again
// (AgainMarginal); one clear failure beside them, or a control's own
// marginal failure, does not make it so.
func TestRetryOfMarginal(t *testing.T) {
	quiet := func(config, class string, observed, limit float64, marginal bool) reports.Assertion {
		return reports.Assertion{Name: AssertQuietP99, Window: "run", Baseline: "solo", Configuration: config, Tenant: reports.QuietAll,
			Class: class, Observed: observed, Limit: limit, Unit: "ms", Op: "<=", Passed: observed <= limit, Marginal: marginal}
	}
	control := countAssert(AssertControlFails, "naive", "", "", ">", 1, 0, "")
	for _, tc := range []struct {
		name     string
		as       []reports.Assertion
		failed   int
		marginal bool
	}{
		{"failed on one marginal verdict", []reports.Assertion{quiet("naive", "lookup", 900, 6, false), control, quiet("isolated", "lookup", 7.3, 6.9, true)}, 1, true},
		{"failed on two marginal verdicts", []reports.Assertion{quiet("naive", "lookup", 900, 6, false), control,
			quiet("isolated", "lookup", 7.3, 6.9, true), quiet("isolated", "page", 8, 7.5, true)}, 2, true},
		{"a clear failure beside a marginal one", []reports.Assertion{quiet("naive", "lookup", 900, 6, false), control,
			quiet("isolated", "lookup", 7.3, 6.9, true), quiet("isolated", "page", 30, 7.5, false)}, 2, false},
		{"a clear failure", []reports.Assertion{quiet("naive", "lookup", 900, 6, false), control, quiet("isolated", "lookup", 30, 6.9, false)}, 1, false},
		{"passed with a marginal verdict", []reports.Assertion{quiet("naive", "lookup", 900, 6, false), control, quiet("isolated", "lookup", 6.5, 6.9, true)}, 0, false},
		{"a control's own marginal failure does not count", []reports.Assertion{quiet("naive", "lookup", 7, 6, true), control, quiet("isolated", "lookup", 2, 6.9, false)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configs := []reports.Configuration{{Name: "naive", Expect: reports.ExpectFail}, {Name: "isolated", Expect: reports.ExpectPass}}
			r := RetryOf(&reports.Report{Configurations: configs, Assertions: tc.as}, "")
			if len(r.Failed) != tc.failed || r.AgainMarginal() != tc.marginal || r.Again() {
				t.Errorf("RetryOf: failed %d, again on marginal %v, again disturbed %v; want failed %d, again on marginal %v, not disturbed",
					len(r.Failed), r.AgainMarginal(), r.Again(), tc.failed, tc.marginal)
			}
		})
	}
}
