package reports

import (
	"fmt"
	"strings"
)

// maxFailedListed bounds the failed checks an attempt's line names.
const maxFailedListed = 3

// Line returns the attempt in one line, e.g. "attempt 1 (seed 42): FAIL
// on a disturbed machine: failed isolated quiet_p99 quiet (all)/lookup
// (observed 9.10 ms, want <= 3.20 ms); disturbed run (isolated): the
// hypervisor took 0.12 CPU, 9% of the CPU the machine ran (above 5%)",
// or "attempt 1 (seed 45): FAIL on marginal verdicts only: failed …".
// The windows no failed check was judged over are marked "(not judged by
// a failed check)".
func (a Attempt) Line() string {
	s := fmt.Sprintf("attempt %d (seed %d): %s", a.Attempt, a.Seed, passFail(a.Passed))
	if a.FailedDisturbed() {
		s += " on a disturbed machine"
	}
	if a.Marginal && !a.Passed {
		if a.FailedDisturbed() {
			s += ","
		}
		s += " on marginal verdicts only"
	}
	if len(a.Failed) > 0 {
		var failed []string
		for _, f := range a.Failed[:min(maxFailedListed, len(a.Failed))] {
			failed = append(failed, joinNonEmpty(" ", f.Configuration, f.Name, subject(f))+" ("+check(f)+")")
		}
		if more := len(a.Failed) - len(failed); more > 0 {
			failed = append(failed, fmt.Sprintf("and %d more", more))
		}
		s += ": failed " + strings.Join(failed, ", ")
	}
	if len(a.Disturbed) > 0 {
		var ws []string
		for _, w := range a.Disturbed {
			x := w.Window + ": " + w.Why
			if !w.Judged {
				x += " (not judged by a failed check)"
			}
			ws = append(ws, x)
		}
		s += "; disturbed " + strings.Join(ws, "; ")
	}
	return s
}

// writeAttempts writes the Markdown list of r's attempts, if any.
func writeAttempts(p func(string, ...any), r *Report) {
	if len(r.Attempts) == 0 {
		return
	}
	p("Attempts (a run that fails on a window the machine disturbed, with --retry-disturbed, or on marginal verdicts only, with --retry-marginal, is run again with the same seed):\n\n")
	for _, a := range r.Attempts {
		where := ""
		if a.Reports != "" {
			where = "; reports in " + md(a.Reports)
		}
		retried := ""
		switch {
		case a.RetriedMarginal:
			retried = "; retried (--retry-marginal)"
		case a.Retried:
			retried = "; retried (--retry-disturbed)"
		}
		p("- %s%s%s\n", md(a.Line()), retried, where)
	}
	p("\n")
}
