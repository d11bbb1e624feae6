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

// leadsFirst reorders each run of as (ordered by failuresFirst) that shares
// an outcome rank and a configuration so that each assertion name's lead
// row comes before the rest of the run, the rest keeping their order. The
// lead is the name's row over the quiet tenants merged, else its row over
// no one tenant, else its first row. A listing cut after a few rows then
// names every kind of failure (quiet_p99 of the quiet tenants merged,
// write_pause) before ten tenants' rows of one kind.
func leadsFirst(r *Report, as []Assertion) []Assertion {
	out := make([]Assertion, 0, len(as))
	for start := 0; start < len(as); {
		end := start + 1
		for end < len(as) && outcomeRank(r, as[end]) == outcomeRank(r, as[start]) &&
			as[end].Configuration == as[start].Configuration {
			end++
		}
		run := as[start:end]
		lead := map[string]int{} // name → index in run of its lead
		for i, a := range run {
			j, seen := lead[a.Name]
			if !seen || leadRank(a) < leadRank(run[j]) {
				lead[a.Name] = i
			}
		}
		var rest []Assertion
		for i, a := range run {
			if lead[a.Name] == i {
				out = append(out, a)
			} else {
				rest = append(rest, a)
			}
		}
		out = append(out, rest...)
		start = end
	}
	return out
}

// leadRank orders the rows of one assertion name for leadsFirst: the quiet
// tenants merged, then a row of no one tenant, then the others.
func leadRank(a Assertion) int {
	switch a.Tenant {
	case QuietAll:
		return 0
	case "", "-":
		return 1
	default:
		return 2
	}
}
