package harness

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/reports"
)

// Assertion names, as they appear in reports.
const (
	AssertQuietP99          = "quiet_p99"
	AssertNoisyRejections   = "noisy_rejections"
	AssertRejectionsCounted = "noisy_rejections_counted"
	AssertNoUnexpectedError = "no_unexpected_errors"
	AssertQuietNotRejected  = "quiet_not_rejected"
	AssertCleanInFlight     = "clean_after_limiter_in_flight"
	AssertCleanBorrowed     = "clean_after_borrowed_connections"
	AssertCleanTagged       = "clean_after_tagged_sessions"
	AssertControlFails      = "control_fails"
	AssertActionsOK         = "actions_ok"
)

// quietAll is the tenant label of the aggregate over all quiet tenants.
const quietAll = reports.QuietAll

// p99Sample is one tenant × class latency figure.
type p99Sample struct {
	Tenant string
	Class  string
	Count  int64
	P99    time.Duration
	CI     metrics.QuantileCI // P99's 95% confidence interval
}

// p99Rule is the quiet-tenant latency assertion's parameters.
type p99Rule struct {
	Factor     float64
	Slack      time.Duration
	MinSamples int64
}

// quietP99 compares each quiet tenant × class's p99 in window (run) with
// factor × its p99 in baseline (solo) + slack. Pairs with fewer than
// MinSamples in either window are reported as skipped, never as passed;
// so is every pair when window and baseline are the same phase.
func quietP99(config string, rule p99Rule, window, baseline string, solo, run []p99Sample) []reports.Assertion {
	soloBy := make(map[[2]string]p99Sample, len(solo))
	for _, s := range solo {
		soloBy[[2]string{s.Tenant, s.Class}] = s
	}
	var out []reports.Assertion
	for _, r := range run {
		s, ok := soloBy[[2]string{r.Tenant, r.Class}]
		a := reports.Assertion{
			Name: AssertQuietP99, Window: window, Baseline: baseline, Configuration: config, Tenant: r.Tenant, Class: r.Class,
			Observed: ms(r.P99), Unit: "ms", Op: "<=", CI: ciOf(r.CI),
		}
		if window == baseline {
			// The same phase against itself: its p99 is always within
			// factor ≥ 1 of itself, so no such check could fail.
			a.Skipped, a.Passed = true, true
			a.Detail = fmt.Sprintf("window and baseline are the same phase (%s): nothing to compare it with", window)
		} else if !ok || s.Count < rule.MinSamples || r.Count < rule.MinSamples {
			a.Skipped = true
			a.Passed = true
			a.Detail = fmt.Sprintf("too few samples (%s %d, %s %d, need %d)", baseline, s.Count, window, r.Count, rule.MinSamples)
			if ok {
				a.Limit = ms(limitFor(rule, s.P99))
			}
		} else {
			a.Limit = ms(limitFor(rule, s.P99))
			a.Passed = a.Observed <= a.Limit
			a.Detail = fmt.Sprintf("%s p99 %.2f ms × %.2f + %.2f ms", baseline, ms(s.P99), rule.Factor, ms(rule.Slack))
			if a.CI != nil && a.CI.Contains(a.Limit) {
				a.Marginal = true
				a.Detail += "; marginal: the limit lies inside the p99's 95% CI " + fmtCI(*a.CI)
			}
		}
		out = append(out, a)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Tenant == quietAll || out[j].Tenant == quietAll {
			return out[i].Tenant == quietAll && out[j].Tenant != quietAll
		}
		if out[i].Class != out[j].Class {
			return out[i].Class < out[j].Class
		}
		return tenantLess(out[i].Tenant, out[j].Tenant)
	})
	return out
}

func limitFor(rule p99Rule, solo time.Duration) time.Duration {
	return time.Duration(rule.Factor*float64(solo)) + rule.Slack
}

// tenantLess orders numeric tenant labels numerically, others after them.
func tenantLess(a, b string) bool {
	var x, y int
	_, ea := fmt.Sscanf(a, "%d", &x)
	_, eb := fmt.Sscanf(b, "%d", &y)
	switch {
	case ea == nil && eb == nil:
		return x < y
	case ea == nil:
		return true
	case eb == nil:
		return false
	}
	return a < b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// countAssert builds an assertion over a count.
func countAssert(name, config, tenant, class, op string, observed, limit int64, detail string) reports.Assertion {
	a := reports.Assertion{
		Name: name, Configuration: config, Tenant: tenant, Class: class,
		Observed: float64(observed), Limit: float64(limit), Op: op, Detail: detail,
	}
	switch op {
	case ">":
		a.Passed = observed > limit
	case "==":
		a.Passed = observed == limit
	case "<=":
		a.Passed = observed <= limit
	default:
		panic("harness: unknown assertion op " + op)
	}
	return a
}

// verdict says whether every assertion passed, and how many failed.
func verdict(as []reports.Assertion) (passed bool, failed int) {
	for _, a := range as {
		if !a.Passed {
			failed++
		}
	}
	return failed == 0, failed
}

// ciOf converts a p99's confidence interval for a report; nil when it has
// no samples.
func ciOf(ci metrics.QuantileCI) *reports.CI {
	if !ci.LoBounded && !ci.HiBounded && ci.Hi == 0 {
		return nil
	}
	return &reports.CI{Low: ms(ci.Lo), High: ms(ci.Hi), LowBounded: ci.LoBounded, HighBounded: ci.HiBounded}
}

// fmtCI writes an interval in ms, an unbounded side as "∞" or "0".
func fmtCI(c reports.CI) string {
	lo, hi := "0", "∞"
	if c.LowBounded {
		lo = fmt.Sprintf("%.2f", c.Low)
	}
	if c.HighBounded {
		hi = fmt.Sprintf("%.2f", c.High)
	}
	return "[" + lo + ", " + hi + "] ms"
}

// quietChecks counts what quiet_p99 judged among as (one configuration's
// assertions) out of pairs quiet tenant × class pairs (0: those asserted).
func quietChecks(as []reports.Assertion, pairs int) *reports.QuietChecks {
	qc := &reports.QuietChecks{}
	seen := 0
	for _, a := range as {
		if a.Name != AssertQuietP99 || a.Tenant == quietAll {
			continue
		}
		seen++
		if a.Skipped {
			if a.Limit > 0 && a.Observed > a.Limit {
				qc.SkippedOverLimit++
			}
			continue
		}
		qc.Checked++
	}
	qc.Pairs = max(pairs, seen)
	qc.Skipped = qc.Pairs - qc.Checked
	return qc
}

// marginal returns the assertions whose verdict is marginal.
func marginal(as []reports.Assertion) []reports.Assertion {
	var out []reports.Assertion
	for _, a := range as {
		if a.Marginal {
			out = append(out, a)
		}
	}
	return out
}

// AssertQuietP99AB is the matched A/B blocks check's name.
const AssertQuietP99AB = "quiet_p99_ab"

// abBlock is one A/B pair's quiet (all) samples, one per quiet class.
type abBlock struct {
	a, b []p99Sample
}

// quietP99AB compares, per quiet class, the quiet tenants' merged p99 in
// each B block with factor × their p99 in its A block + slack, and judges
// the median ratio over the pairs (<= 1 passes): a disturbance that hits
// one pair moves one ratio, not the verdict. A pair with fewer than
// MinSamples in either block is left out; with fewer than two pairs left
// the check is skipped.
func quietP99AB(config string, rule p99Rule, blocks []abBlock, window, baseline string) []reports.Assertion {
	find := func(ss []p99Sample, class string) (p99Sample, bool) {
		for _, s := range ss {
			if s.Class == class {
				return s, true
			}
		}
		return p99Sample{}, false
	}
	var classes []string
	for _, bl := range blocks {
		for _, s := range bl.a {
			if !slices.Contains(classes, s.Class) {
				classes = append(classes, s.Class)
			}
		}
	}
	sort.Strings(classes)
	var out []reports.Assertion
	for _, class := range classes {
		var ratios []float64
		var parts []string
		over := 0
		for i, bl := range blocks {
			a, okA := find(bl.a, class)
			b, okB := find(bl.b, class)
			if !okA || !okB || a.Count < rule.MinSamples || b.Count < rule.MinSamples {
				parts = append(parts, fmt.Sprintf("%d: too few samples (a %d, b %d)", i+1, a.Count, b.Count))
				continue
			}
			r := ms(b.P99) / ms(limitFor(rule, a.P99))
			if r > 1 {
				over++
			}
			ratios = append(ratios, r)
			parts = append(parts, fmt.Sprintf("%d: %.2f", i+1, r))
		}
		as := reports.Assertion{Name: AssertQuietP99AB, Window: window, Baseline: baseline, Configuration: config,
			Tenant: quietAll, Class: class, Unit: "x", Op: "<=", Limit: 1}
		if len(ratios) < 2 {
			as.Skipped, as.Passed = true, true
			as.Detail = fmt.Sprintf("fewer than 2 pairs with %d samples in both blocks; %s", rule.MinSamples, strings.Join(parts, ", "))
		} else {
			as.Observed = median(ratios)
			as.Passed = as.Observed <= 1
			as.Detail = fmt.Sprintf("median over %d pairs of b p99 / (%.2f × a p99 + %.2f ms); %d over 1; per pair %s",
				len(ratios), rule.Factor, ms(rule.Slack), over, strings.Join(parts, ", "))
		}
		out = append(out, as)
	}
	return out
}

// median returns the median of vs (not empty), the mean of the middle two
// for an even count.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
