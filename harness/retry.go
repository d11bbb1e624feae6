package harness

import "github.com/noisysim/noisysim/reports"

// Retry is what a finished run's report says about running it again on a
// machine that disturbed it (noisysim run --retry-disturbed): the failed
// checks that decided its verdict and the disturbed windows they were
// judged over.
type Retry struct {
	// Failed are the failed assertions that failed the verdict (a
	// control's own failures do not, its control_fails does), in report
	// order; empty when the run passed.
	Failed []reports.Assertion
	// Disturbed are the disturbed windows (Machine.Disturbed) a check of
	// Failed was judged over, in run order (see RetryOf).
	Disturbed []reports.WindowLoad
	// Marginal is true when every check of Failed is marginal: its limit
	// lies inside its observed value's confidence interval, so another
	// run could as well pass it (noisysim run --retry-marginal).
	Marginal bool
}

// Again reports whether the run failed on a disturbed window: a check that
// failed the verdict was judged over a window the machine disturbed, so
// the failure may be the machine's. A failure judged over undisturbed
// windows only is the system's own, and a passed run is never run again.
func (r Retry) Again() bool { return len(r.Failed) > 0 && len(r.Disturbed) > 0 }

// AgainMarginal reports whether the run failed on marginal verdicts only:
// each failed check could have gone either way, and no failure was clear.
// A single clear failure, however small the others, makes the verdict
// final.
func (r Retry) AgainMarginal() bool { return len(r.Failed) > 0 && r.Marginal }

// RetryOf returns the failed checks of rep, a completed run's report, and
// the disturbed windows they were judged over; only is Options.Only of
// the run (with it a control's own failures fail the verdict).
//
// A check was judged over its window and its baseline (the windows a
// stall is weighed against, judgedOver); control_fails was judged over
// the windows of its control's own checks, whose passing failed it. When
// a failed check names no window the guard measured (a count over the
// whole timeline, such as no_unexpected_errors, or a window of another
// name), which windows it rests on cannot be told, and every disturbed
// window counts.
func RetryOf(rep *reports.Report, only string) Retry {
	var r Retry
	control := map[string]bool{}
	for _, c := range rep.Configurations {
		control[c.Name] = c.Expect == reports.ExpectFail
	}
	for _, a := range rep.Assertions {
		if failsVerdict(a, control[a.Configuration], only) {
			r.Failed = append(r.Failed, a)
		}
	}
	r.Marginal = len(r.Failed) > 0
	for _, a := range r.Failed {
		r.Marginal = r.Marginal && a.Marginal
	}
	disturbed := rep.Machine.Disturbed()
	if len(r.Failed) == 0 || len(disturbed) == 0 {
		return r
	}
	judged := map[string]bool{}
	for _, a := range r.Failed {
		names, known := judgedWindows(a, rep.Assertions, rep.Machine.Windows)
		if !known {
			r.Disturbed = disturbed
			return r
		}
		for _, n := range names {
			judged[n] = true
		}
	}
	for _, w := range disturbed {
		if judged[w.Window] {
			r.Disturbed = append(r.Disturbed, w)
		}
	}
	return r
}

// judgedWindows returns the names of the guard's windows a, a failed check
// among as, was judged over, and whether they can be told: every window
// and baseline it (or, for control_fails, each of its control's checks)
// names is one of the measured windows.
func judgedWindows(a reports.Assertion, as []reports.Assertion, measured []reports.WindowLoad) (names []string, known bool) {
	over := []reports.Assertion{a}
	if a.Name == AssertControlFails {
		over = over[:0]
		for _, b := range as {
			if b.Configuration == a.Configuration && b.Name != AssertControlFails && !b.Skipped {
				over = append(over, b)
			}
		}
	}
	if len(over) == 0 {
		return nil, false
	}
	for _, b := range over {
		var inWindow, inBaseline bool
		for _, w := range measured {
			window, baseline := judgedOver(b, w.Window, windowName)
			if window || baseline {
				names = append(names, w.Window)
			}
			inWindow, inBaseline = inWindow || window, inBaseline || baseline
		}
		if b.Window == "" && b.Baseline == "" || b.Window != "" && !inWindow || b.Baseline != "" && !inBaseline {
			return nil, false
		}
	}
	return names, true
}
