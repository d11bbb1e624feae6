package harness

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// Assertion names of the verdicts over windows.
const (
	AssertSkew         = "skew"
	AssertHarmBefore   = "harm_before"
	AssertDetectWithin = "detect_within"
)

// verdicts evaluates the assertions that judge a remedy over the windows
// of one configuration's timeline: skew (per-worker load in a window) and
// harm_before (the quiet tenants' p99 in the window before the remedy
// must fail quiet_p99's bound over baseline).
func (r *runner) verdicts(c *scenario.Configuration, tr *timelineRun, rule p99Rule, baseline string) []reports.Assertion {
	a := r.sc.Assertions
	var out []reports.Assertion
	if a.Skew.Window != "" {
		as := reports.Assertion{Name: AssertSkew, Configuration: c.Name, Window: a.Skew.Window, Limit: a.Skew.Max, Unit: "x", Op: "<="}
		if skew, ok := r.windowSkew(tr, a.Skew.Window); ok {
			as.Observed, as.Passed = skew, skew <= a.Skew.Max
			as.Detail = "per-worker load (ledger DB time through the placements) max / median over the workers that take shards"
			if skew == math.MaxFloat64 {
				as.Detail = "one worker busy while most are idle: " + as.Detail
			}
		} else {
			as.Detail = "no per-worker load: the window's placements could not be read"
		}
		out = append(out, as)
	}
	if w := a.HarmBefore.Window; w != "" {
		out = append(out, r.harmBefore(c, tr, rule, baseline)...)
	}
	if d := a.DetectWithin.Duration(); d > 0 {
		out = append(out, r.detectWithin(c, tr, d))
	}
	return r.planOnly(tr, out)
}

// harmBefore asserts, per quiet class, that the judged quiet tenants'
// merged p99 in harm_before's window is above the harm bar over the
// baseline: quiet_p99's bound (factor × baseline + slack), or
// harm_before.factor × baseline when it is set. tenants: hot_worker judges
// the quiet tenants on the dominant tenant's worker (topology citus).
func (r *runner) harmBefore(c *scenario.Configuration, tr *timelineRun, rule p99Rule, baseline string) []reports.Assertion {
	hb := r.sc.Assertions.HarmBefore
	w := hb.Window
	win, ok1 := tr.window(w)
	base, ok2 := tr.window(baseline)
	if !ok1 || !ok2 {
		return nil
	}
	group, judged := quietAll, "every quiet tenant"
	if hb.Tenants == scenario.HarmHotWorker {
		group = reports.QuietHotWorker
		n, worker := 0, ""
		if r.citus != nil {
			n, worker = len(r.citus.hotQuiet), r.citus.hotWorker
		}
		judged = fmt.Sprintf("the quiet tenants whose shard was on %s (%d), the dominant tenant's worker when it started sending",
			cmp.Or(worker, "its worker"), n)
	}
	bar := rule
	if hb.Factor > 0 {
		bar = p99Rule{Factor: hb.Factor, MinSamples: rule.MinSamples}
	}
	solo := map[string]p99Sample{}
	for _, s := range r.p99Samples(base.rec) {
		if s.Tenant == group {
			solo[s.Class] = s
		}
	}
	var out []reports.Assertion
	seen := map[string]bool{}
	for _, s := range r.p99Samples(win.rec) {
		if s.Tenant != group {
			continue
		}
		seen[s.Class] = true
		b := solo[s.Class]
		as := reports.Assertion{Name: AssertHarmBefore, Configuration: c.Name, Window: w, Baseline: baseline,
			Tenant: group, Class: s.Class, Observed: ms(s.P99), Limit: ms(limitFor(bar, b.P99)), Unit: "ms", Op: ">"}
		if s.Count < bar.MinSamples || b.Count < bar.MinSamples {
			// Too few samples cannot show the harm: fail, not skip.
			as.Detail = fmt.Sprintf("too few samples to show the harm (%s %d, %s %d, need %d)", baseline, b.Count, w, s.Count, bar.MinSamples)
		} else {
			as.Passed = as.Observed > as.Limit
			how := fmt.Sprintf("%.2f ms × %.2f + %.2f ms", ms(b.P99), bar.Factor, ms(bar.Slack))
			if hb.Factor > 0 {
				how = fmt.Sprintf("%.2f ms × %.2f (harm_before.factor)", ms(b.P99), bar.Factor)
			}
			as.Detail = fmt.Sprintf("the harm the remedy is judged on: %s p99 must exceed %s p99 %s (%.1f× %s); judged: %s",
				w, baseline, how, ratio(s.P99.Seconds(), b.P99.Seconds()), baseline, judged)
		}
		out = append(out, as)
	}
	if group != quietAll {
		// No quiet tenant on the hot worker (or the worker unknown): the
		// harm cannot be shown, which fails it.
		for _, class := range r.quietClasses() {
			if !seen[class] {
				out = append(out, reports.Assertion{Name: AssertHarmBefore, Configuration: c.Name, Window: w, Baseline: baseline,
					Tenant: group, Class: class, Unit: "ms", Op: ">",
					Detail: fmt.Sprintf("no quiet tenant's %s requests on the dominant tenant's worker in %s: the harm cannot be shown", class, w)})
			}
		}
	}
	return out
}

// detectWithin asserts that the first detection of a policy came at most
// d (+ its watch's every) after the start of the phase it watched.
func (r *runner) detectWithin(c *scenario.Configuration, tr *timelineRun, d time.Duration) reports.Assertion {
	as := reports.Assertion{Name: AssertDetectWithin, Configuration: c.Name, Unit: "s", Op: "<="}
	for _, p := range r.sc.Steps() {
		if p.Watch != nil {
			if _, ok := p.Watch.Config.(*scenario.HotShardLadder); ok {
				as.Window = p.Name
				as.Limit = (d + p.Watch.Every.Duration()).Seconds()
				break
			}
		}
	}
	for _, res := range tr.actions {
		if res.Type == ResultDetect && res.Phase == as.Window {
			as.Observed = res.Before["phase_elapsed_s"]
			as.Passed = as.Observed <= as.Limit
			as.Detail = res.Detail
			return as
		}
	}
	as.Detail = fmt.Sprintf("no alert in %s", as.Window)
	return as
}

// planOnly marks as skipped the assertions on windows after a phase whose
// policy only planned (no --apply): they would judge a remedy not run.
func (r *runner) planOnly(tr *timelineRun, as []reports.Assertion) []reports.Assertion {
	steps := r.sc.Steps()
	after := -1
	for i, p := range steps {
		if p.Watch != nil {
			if h, ok := p.Watch.Config.(*scenario.HotShardLadder); ok && h.PlanOnly() {
				after = i
				break
			}
		}
	}
	if after < 0 {
		return as
	}
	for i := range as {
		a := &as[i]
		if a.Name != AssertQuietP99 && a.Name != AssertSkew {
			continue
		}
		if j := r.sc.PhaseIndex(a.Window); j > after && !a.Skipped {
			a.Skipped, a.Passed = true, true
			a.Detail = fmt.Sprintf("plan only: %s's %s policy did not act (noisysim run --apply acts); %s", steps[after].Name, steps[after].Watch.Policy, a.Detail)
		}
	}
	return as
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}
