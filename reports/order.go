package reports

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// normalized returns a copy of r whose slices are in a canonical order, so
// the same results always render to the same bytes whatever order the
// harness collected them in: rows by tenant (natural order: t2 before t10)
// and class, merged quiet rows by class, rankings by share descending,
// intervals by time, assertions by configuration (report order), name,
// tenant and class. Configurations and notes keep their order: it is
// meaningful.
func normalized(r *Report) *Report {
	n := *r
	n.SchemaVersion = SchemaVersion
	n.StartedAt = r.StartedAt.UTC()
	n.Notes = slices.Clone(r.Notes)
	n.Configurations = make([]Configuration, len(r.Configurations))
	for i, c := range r.Configurations {
		c.Tenants = sortedRows(c.Tenants)
		c.Solo = sortedRows(c.Solo)
		c.QuietAll = sortedRows(c.QuietAll)
		c.SoloQuietAll = sortedRows(c.SoloQuietAll)
		c.Stats = clonedStats(c.Stats)
		c.TopDBTime = rankedShares(c.TopDBTime)
		c.Windows = slices.Clone(c.Windows)
		for j, w := range c.Windows {
			w.Tenants = sortedRows(w.Tenants)
			w.QuietAll = sortedRows(w.QuietAll)
			w.Stats = clonedStats(w.Stats)
			w.TopDBTime = rankedShares(w.TopDBTime)
			c.Windows[j] = w
		}
		c.Intervals = slices.Clone(c.Intervals)
		slices.SortStableFunc(c.Intervals, func(a, b Interval) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), natural(a.Tenant, b.Tenant), natural(a.Class, b.Class))
		})
		n.Configurations[i] = c
	}
	order := configOrder(&n)
	byOrder := func(a, b Assertion) int {
		return cmp.Or(
			cmp.Compare(order[a.Configuration], order[b.Configuration]),
			strings.Compare(a.Name, b.Name),
			strings.Compare(a.Window, b.Window),
			natural(a.Tenant, b.Tenant),
			natural(a.Class, b.Class),
		)
	}
	n.Assertions = slices.Clone(r.Assertions)
	slices.SortStableFunc(n.Assertions, byOrder)
	n.Marginal = slices.Clone(r.Marginal)
	slices.SortStableFunc(n.Marginal, byOrder)
	return &n
}

// clonedStats returns s with its maps copied.
func clonedStats(s RunStats) RunStats {
	s.RejectedByReason = maps.Clone(s.RejectedByReason)
	s.ErrorsByClass = maps.Clone(s.ErrorsByClass)
	return s
}

// rankedShares returns a copy of shares, largest share first.
func rankedShares(shares []Share) []Share {
	out := slices.Clone(shares)
	slices.SortStableFunc(out, func(a, b Share) int {
		return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(b.DBTime, a.DBTime), natural(a.Tenant, b.Tenant))
	})
	return out
}

func sortedRows(rows []TenantRow) []TenantRow {
	if rows == nil {
		return nil
	}
	out := make([]TenantRow, len(rows))
	for i, t := range rows {
		t.ErrorsByClass = maps.Clone(t.ErrorsByClass)
		out[i] = t
	}
	slices.SortStableFunc(out, func(a, b TenantRow) int {
		return cmp.Or(natural(a.Tenant, b.Tenant), natural(a.Class, b.Class))
	})
	return out
}

// configOrder maps configuration names to their index in the report.
func configOrder(r *Report) map[string]int {
	m := make(map[string]int, len(r.Configurations))
	for i, c := range r.Configurations {
		m[c.Name] = i
	}
	return m
}

// natural compares strings so that runs of digits compare as numbers:
// "t2" < "t10". Ties fall back to a plain comparison, so it is a total order.
func natural(a, b string) int {
	x, y := a, b
	for x != "" && y != "" {
		dx, dy := digitRun(x), digitRun(y)
		if dx > 0 && dy > 0 {
			nx, ny := strings.TrimLeft(x[:dx], "0"), strings.TrimLeft(y[:dy], "0")
			if c := cmp.Or(cmp.Compare(len(nx), len(ny)), strings.Compare(nx, ny)); c != 0 {
				return c
			}
			x, y = x[dx:], y[dy:]
			continue
		}
		if x[0] != y[0] {
			return cmp.Compare(x[0], y[0])
		}
		x, y = x[1:], y[1:]
	}
	return cmp.Or(cmp.Compare(len(x), len(y)), strings.Compare(a, b))
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// dominantTenant returns r.Dominant, or else the tenant with the most
// requests in the first configuration that has rows.
func dominantTenant(r *Report) string {
	if r.Dominant != "" {
		return r.Dominant
	}
	for _, c := range r.Configurations {
		if len(c.Tenants) == 0 {
			continue
		}
		totals := tenantTotals(c.Tenants)
		return slices.MinFunc(slices.Collect(maps.Keys(totals)), func(a, b string) int {
			return cmp.Or(cmp.Compare(totals[b], totals[a]), natural(a, b))
		})
	}
	return ""
}

func tenantTotals(rows []TenantRow) map[string]int64 {
	m := make(map[string]int64)
	for _, t := range rows {
		m[t.Tenant] += t.Count
	}
	return m
}

// displayOrder sorts rows for reading: the dominant tenant first, then
// tenants by their total count (all classes) descending, each tenant's
// classes together.
func displayOrder(rows []TenantRow, dominant string) []TenantRow {
	totals := tenantTotals(rows)
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b TenantRow) int {
		return cmp.Or(
			trueFirst(a.Tenant == dominant, b.Tenant == dominant),
			cmp.Compare(totals[b.Tenant], totals[a.Tenant]),
			natural(a.Tenant, b.Tenant),
			natural(a.Class, b.Class),
		)
	})
	return out
}

// trueFirst orders true before false.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

// sortedKeys returns m's keys in natural order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), natural)
}

// fmtMS formats a duration in ms with two decimals.
func fmtMS(v float64) string { return strconv.FormatFloat(zero(v), 'f', 2, 64) }

// fmtShare formats a 0..1 share as a percentage with one decimal.
func fmtShare(v float64) string { return strconv.FormatFloat(zero(v*100), 'f', 1, 64) + "%" }

// fmtSeconds formats seconds with one decimal.
func fmtSeconds(v float64) string { return strconv.FormatFloat(zero(v), 'f', 1, 64) + " s" }

// fmtValue formats an assertion value with its unit: two decimals for
// durations, whole numbers as integers, three decimals otherwise.
func fmtValue(v float64, unit string) string {
	v = zero(v)
	var s string
	switch {
	case unit == "ms" || unit == "s":
		s = strconv.FormatFloat(v, 'f', 2, 64)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 3, 64)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

// zero turns -0 into 0 so it never prints as "-0.00".
func zero(v float64) float64 {
	if v == 0 {
		return 0
	}
	return v
}

func fmtCounts(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+" "+strconv.FormatInt(m[k], 10))
	}
	return strings.Join(parts, ", ")
}

// verdict is the word for an assertion's outcome. A failure in a
// configuration expected to fail is XFAIL.
func verdict(a Assertion, expectFail bool) string {
	switch {
	case a.Skipped:
		return "SKIP"
	case a.Passed:
		return "PASS"
	case expectFail:
		return "XFAIL"
	default:
		return "FAIL"
	}
}

// observed formats a's observed value, or "-" if it was skipped (the
// value with MarkOverLimit when it is over its limit all the same).
func observed(a Assertion) string {
	if overLimit(a) {
		return fmtValue(a.Observed, a.Unit) + " " + MarkOverLimit
	}
	if a.Skipped {
		return "-"
	}
	return fmtValue(a.Observed, a.Unit)
}

// check says in words what an assertion compared: "observed 52.30 ms, want <= 9.50 ms".
func check(a Assertion) string {
	if overLimit(a) {
		return "skipped, observed " + fmtValue(a.Observed, a.Unit) + " over the limit " + fmtValue(a.Limit, a.Unit) + " on too few samples"
	}
	if a.Skipped {
		return "skipped, want " + a.Op + " " + fmtValue(a.Limit, a.Unit)
	}
	return "observed " + fmtValue(a.Observed, a.Unit) + ", want " + a.Op + " " + fmtValue(a.Limit, a.Unit)
}

// subject is "tenant/class", "tenant", "class" or "" for an assertion.
func subject(a Assertion) string {
	switch {
	case a.Tenant != "" && a.Class != "":
		return a.Tenant + "/" + a.Class
	default:
		return a.Tenant + a.Class
	}
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func expectation(c Configuration) string {
	if c.expectsFailure() {
		return ExpectFail
	}
	return ExpectPass
}
