package reports

import (
	"fmt"
	"strconv"
)

// QuietPlan says, before the run, how many quiet tenant × class pairs the
// quiet_p99 check can judge at the scenario's rates and phase lengths: a
// pair is judged when it has at least MinSamples requests in both Window
// and Baseline (fewer, and it is skipped). The counts are the seeded
// schedule's arrivals, what the run sends: a request cut off at the end
// still counts as a sample, one the generator drops (too many in flight)
// does not, so a stalled configuration may judge fewer pairs than planned.
type QuietPlan struct {
	// Window and Baseline are the phases quiet_p99 compares.
	Window   string `json:"window"`
	Baseline string `json:"baseline"`
	// MinSamples is assertions.quiet_p99.min_samples.
	MinSamples int64 `json:"min_samples"`
	// Pairs is the number of quiet tenant × class pairs that send in
	// Window (every quiet tenant × every class the quiet tenants send, by
	// default), and Reaching those planned to reach MinSamples in both
	// phases.
	Pairs    int `json:"pairs"`
	Reaching int `json:"reaching"`
	// CheckTop is assertions.quiet_p99.check_top ("5", "all"); empty when
	// not set. Lengthened lists the phases it lengthened, with their
	// lengths before and after.
	CheckTop   string        `json:"check_top,omitempty"`
	Lengthened []PhaseLength `json:"lengthened,omitempty"`
	// TooFew are the pairs that will not reach MinSamples, busiest tenant
	// first, with their planned arrivals in each phase.
	TooFew []PlannedPair `json:"too_few,omitempty"`
}

// PhaseLength is one phase's length before and after check_top sized it.
type PhaseLength struct {
	Phase string  `json:"phase"`
	From  float64 `json:"from_s"`
	To    float64 `json:"to_s"`
}

// PlannedPair is one quiet tenant × class and its planned arrivals in the
// quiet_p99 window and baseline.
type PlannedPair struct {
	Tenant   string `json:"tenant"`
	Class    string `json:"class"`
	Window   int64  `json:"window"`
	Baseline int64  `json:"baseline"`
}

// QuietChecks is what quiet_p99 judged in one configuration: Checked of
// Pairs quiet tenant × class pairs (QuietPlan.Pairs); Skipped had too few
// samples, and SkippedOverLimit of those had a p99 over their limit all
// the same (too few samples to judge, but a reader should look).
type QuietChecks struct {
	Pairs            int `json:"pairs"`
	Checked          int `json:"checked"`
	Skipped          int `json:"skipped"`
	SkippedOverLimit int `json:"skipped_over_limit"`
}

// CI is a confidence interval of an assertion's observed value (the p99's
// distribution-free 95% interval for quiet_p99), in the assertion's unit.
// A side that is not bounded (too few samples: for a p99 at 95%, fewer
// than 368 give no upper bound) reaches to infinity; Low or High then
// holds the most extreme sample.
type CI struct {
	Low         float64 `json:"low"`
	High        float64 `json:"high"`
	LowBounded  bool    `json:"low_bounded"`
	HighBounded bool    `json:"high_bounded"`
}

// Contains reports whether v lies inside the interval.
func (c CI) Contains(v float64) bool {
	return !(c.LowBounded && v < c.Low) && !(c.HighBounded && v > c.High)
}

// Calibration is how a class's rate was set from its measured service
// time (classes[].load_factor): Rate = LoadFactor × Pool / ServiceMean.
type Calibration struct {
	Class string `json:"class"`
	Query string `json:"query"`
	// Samples is the number of queries measured, one at a time, over
	// Seconds.
	Samples int64   `json:"samples"`
	Seconds float64 `json:"seconds"`
	// ServiceMean and ServiceP50 are the queries' service times in ms.
	ServiceMean float64 `json:"service_mean_ms"`
	ServiceP50  float64 `json:"service_p50_ms"`
	// LoadFactor is the offered concurrency wanted, as a multiple of Pool
	// connections (PoolName says which pool).
	LoadFactor float64 `json:"load_factor"`
	Pool       int     `json:"pool"`
	PoolName   string  `json:"pool_name"`
	// Rate is the class's rate set for the run, per second.
	Rate float64 `json:"rate_per_s"`
}

// Marks beside a p99 in the tables, for the tenant × class's assertions in
// that configuration.
const (
	// MarkFailed: an assertion on the row failed.
	MarkFailed = "*"
	// MarkOverLimit: quiet_p99 skipped the row for too few samples, but its
	// p99 is over its limit all the same.
	MarkOverLimit = "!"
	// MarkMarginal: the row's verdict is marginal (its limit inside the
	// p99's 95% CI).
	MarkMarginal = "?"
)

// overLimit reports whether a skipped assertion's observed value is over
// its limit (ms, op <=): too few samples to judge, but worth a look.
func overLimit(a Assertion) bool {
	return a.Skipped && a.Op == "<=" && a.Limit > 0 && a.Observed > a.Limit
}

// rowMarks returns the marks of each tenant × class row of configuration
// cfg (MarkFailed, MarkOverLimit, MarkMarginal, in that order when several
// apply). A QuietAll row of a class also carries the marks of every quiet
// tenant's row of the class, since the table may not show them.
func rowMarks(r *Report, cfg, dominant string) map[rowKey]string {
	set := map[rowKey]map[string]bool{}
	add := func(k rowKey, m string) {
		if set[k] == nil {
			set[k] = map[string]bool{}
		}
		set[k][m] = true
	}
	for _, a := range r.Assertions {
		if a.Configuration != cfg {
			continue
		}
		k := rowKey{a.Tenant, a.Class}
		var ms []string
		if a.failed() {
			ms = append(ms, MarkFailed)
		}
		if overLimit(a) {
			ms = append(ms, MarkOverLimit)
		}
		if a.Marginal {
			ms = append(ms, MarkMarginal)
		}
		for _, m := range ms {
			add(k, m)
			if a.Tenant != QuietAll && a.Tenant != dominant && a.Class != "" {
				add(rowKey{QuietAll, a.Class}, m)
			}
		}
	}
	out := make(map[rowKey]string, len(set))
	for k, ms := range set {
		for _, m := range []string{MarkFailed, MarkOverLimit, MarkMarginal} {
			if ms[m] {
				out[k] += m
			}
		}
	}
	return out
}

// markLegend explains the marks used in marks, one line each.
func markLegend(used map[string]bool) []string {
	var out []string
	if used[MarkFailed] {
		out = append(out, MarkFailed+" an assertion on this tenant and class failed in that configuration")
	}
	if used[MarkOverLimit] {
		out = append(out, MarkOverLimit+" p99 over its limit, but too few samples to judge (quiet_p99 skipped it)")
	}
	if used[MarkMarginal] {
		out = append(out, MarkMarginal+" marginal: the limit lies inside the p99's 95% confidence interval")
	}
	return out
}

// marksUsed adds each mark character of s to used.
func marksUsed(used map[string]bool, s string) {
	for _, c := range s {
		used[string(c)] = true
	}
}

// checkedLine says how many quiet pairs quiet_p99 judged in a
// configuration: "quiet_p99 checked 3 of 98 quiet tenant × class pairs
// (95 skipped: too few samples; 2 of them over their limit)".
func checkedLine(q *QuietChecks) string {
	s := fmt.Sprintf("quiet_p99 checked %d of %d quiet tenant × class pairs", q.Checked, q.Pairs)
	if q.Skipped > 0 {
		s += fmt.Sprintf(" (%d skipped: too few samples", q.Skipped)
		if q.SkippedOverLimit > 0 {
			s += fmt.Sprintf("; %d of them over their limit, marked %s", q.SkippedOverLimit, MarkOverLimit)
		}
		s += ")"
	}
	return s
}

// planLine says what the run planned for quiet_p99: "quiet_p99 samples: 3
// of 98 quiet tenant × class pairs planned to reach min_samples 100 in
// both run and solo".
func planLine(p *QuietPlan) string {
	s := fmt.Sprintf("%d of %d quiet tenant × class pairs planned to reach min_samples %d in both %s and %s",
		p.Reaching, p.Pairs, p.MinSamples, p.Window, p.Baseline)
	if p.CheckTop != "" {
		s += "; check_top " + p.CheckTop
		for _, l := range p.Lengthened {
			s += fmt.Sprintf(", %s lengthened %s → %s", l.Phase, fmtSeconds(l.From), fmtSeconds(l.To))
		}
	}
	return s
}

// calibrationLine says how a class's rate was set.
func calibrationLine(c Calibration) string {
	return fmt.Sprintf("%s (%s): service time %s ms mean (p50 %s ms) over %d queries alone; rate %s/s = load_factor %s × %d (%s) / %s ms",
		c.Class, c.Query, fmtMS(c.ServiceMean), fmtMS(c.ServiceP50), c.Samples, strconv.FormatFloat(c.Rate, 'f', 1, 64),
		strconv.FormatFloat(c.LoadFactor, 'f', -1, 64), c.Pool, c.PoolName, fmtMS(c.ServiceMean))
}

// marginalLine describes one marginal verdict.
func marginalLine(a Assertion) string {
	s := a.Configuration + " " + a.Name
	if sub := subject(a); sub != "" {
		s += " " + sub
	}
	if a.Window != "" {
		s += " in " + a.Window
	}
	s += ": " + check(a)
	if a.CI != nil {
		s += ", 95% CI " + ciText(*a.CI, a.Unit)
	}
	return s
}

// ciText writes an interval, an unbounded side as "0" or "∞".
func ciText(c CI, unit string) string {
	lo, hi := "0", "∞"
	if c.LowBounded {
		lo = fmtMS(c.Low)
	}
	if c.HighBounded {
		hi = fmtMS(c.High)
	}
	if unit != "" {
		return "[" + lo + ", " + hi + "] " + unit
	}
	return "[" + lo + ", " + hi + "]"
}
