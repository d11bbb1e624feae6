package reports

import (
	"cmp"
	"fmt"
	"slices"
)

// tally counts assertion outcomes.
type tally struct {
	total, passed, failed, expectedFailures, skipped int
}

func countAssertions(r *Report, as []Assertion) tally {
	var t tally
	for _, a := range as {
		t.total++
		switch {
		case a.Skipped:
			t.skipped++
		case a.Passed:
			t.passed++
		default:
			t.failed++
			if expectsFailure(r, a) {
				t.expectedFailures++
			}
		}
	}
	return t
}

func (t tally) String() string {
	s := fmt.Sprintf("%d assertions: %d passed, %d failed", t.total, t.passed, t.failed)
	if t.expectedFailures > 0 {
		s += fmt.Sprintf(" (%d in configurations expected to fail)", t.expectedFailures)
	}
	return s + fmt.Sprintf(", %d skipped", t.skipped)
}

func assertionSummary(r *Report) string {
	return countAssertions(r, r.Assertions).String() + "."
}

// expectsFailure reports whether a's configuration is a control expected to
// fail.
func expectsFailure(r *Report, a Assertion) bool {
	for _, c := range r.Configurations {
		if c.Name == a.Configuration {
			return c.expectsFailure()
		}
	}
	return false
}

// outcomeRank orders outcomes for reading: failures that break the run,
// expected failures, skipped, passed.
func outcomeRank(r *Report, a Assertion) int {
	switch {
	case a.failed() && !expectsFailure(r, a):
		return 0
	case a.failed():
		return 1
	case a.Skipped:
		return 2
	default:
		return 3
	}
}

// failuresFirst returns r's (normalized) assertions ordered by outcomeRank,
// otherwise in their canonical order.
func failuresFirst(r *Report) []Assertion {
	out := slices.Clone(r.Assertions)
	slices.SortStableFunc(out, func(a, b Assertion) int {
		return cmp.Compare(outcomeRank(r, a), outcomeRank(r, b))
	})
	return out
}
