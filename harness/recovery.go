package harness

import (
	"maps"
	"slices"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// RecoveryHold is how long the quiet tenants' per-second p99 must stay
// within its bound, after the dominant tenant stopped sending, to count as
// recovered (the report's recovery).
const RecoveryHold = 3 * time.Second

// dominantSends reports whether the dominant tenant sends in a phase: it is
// among the phase's senders and a class it sends runs there.
func dominantSends(st *step) bool {
	if !st.Senders.Sends(scenario.DominantTenant) {
		return false
	}
	return slices.ContainsFunc(st.specs, func(c workload.ClassSpec) bool { return c.Senders != workload.QuietTenants })
}

// recovery measures, for a configuration's report, how long the quiet
// tenants took to recover after the dominant tenant's last phase: nil when
// no phase follows it (or the dominant tenant never sends), or when the
// quiet tenants send nothing in the phases after it.
func (r *runner) recovery(tr *timelineRun, out *reports.Configuration) *reports.Recovery {
	last := -1
	for i, w := range tr.windows {
		if dominantSends(w.step) {
			last = i
		}
	}
	if last < 0 || last == len(tr.windows)-1 {
		return nil
	}
	_, baseline := r.sc.Assertions.QuietP99.QuietWindows()
	factor, slack := r.sc.Assertions.QuietP99.Factor, ms(r.sc.Assertions.QuietP99.Slack.Duration())
	bounds := map[string]float64{}
	for _, w := range out.Windows {
		if w.Name != baseline {
			continue
		}
		for _, row := range w.QuietAll {
			if row.Count > 0 {
				bounds[row.Class] = factor*row.P99 + slack
			}
		}
	}
	var after []string
	var sent int64
	for _, w := range out.Windows[last+1:] {
		after = append(after, w.Name)
		for _, row := range w.QuietAll {
			sent += row.Count
		}
	}
	if sent == 0 {
		return nil // the quiet tenants send nothing after: nothing to judge
	}
	rec := measureRecovery(tr.windows[last].end.Seconds(), tr.windows[len(tr.windows)-1].end.Seconds(), after,
		out.Intervals, bounds, RecoveryHold.Seconds())
	if rec != nil {
		rec.Baseline = baseline
	}
	return rec
}

// measureRecovery judges the quiet tenants' per-second series after the
// dominant tenant stopped at stopped (s from the timeline's start), over
// the windows after until end: the requests intended in those windows, by
// the second they ended in (a backlog shows as slow seconds). A second is
// within bounds when every quiet class with a bound has its merged p99 at
// most that bound (a class with no request ended in the second is not
// judged). Recovered at the first second whose start s has every second
// starting in [s, s+hold) within bounds, with s+hold no later than end;
// the time is s - stopped (at least 0). Never (no second at all when every
// request was still running): not recovered, the time the span watched.
func measureRecovery(stopped, end float64, after []string, ivs []reports.Interval, bounds map[string]float64, hold float64) *reports.Recovery {
	type second struct {
		ok    bool
		worst float64
		class string
	}
	seconds := map[float64]*second{}
	for _, iv := range ivs {
		b, bounded := bounds[iv.Class]
		if iv.Tenant != quietAll || !bounded || iv.Count == 0 || !slices.Contains(after, iv.Window) {
			continue
		}
		s := seconds[iv.Start]
		if s == nil {
			s = &second{ok: true}
			seconds[iv.Start] = s
		}
		if iv.P99 > b {
			s.ok = false
		}
		if iv.P99 > s.worst {
			s.worst, s.class = iv.P99, iv.Class
		}
	}
	rec := &reports.Recovery{Stopped: stopped, Windows: after, Bounds: bounds, Hold: hold, Seconds: len(seconds), Time: end - stopped}
	starts := slices.Sorted(maps.Keys(seconds))
	for _, at := range starts {
		if s := seconds[at]; s.worst > rec.Worst {
			rec.Worst, rec.WorstClass = s.worst, s.class
		}
	}
	const eps = 1e-9
	for i, at := range starts {
		if at+hold > end+eps {
			break
		}
		held := true
		for _, next := range starts[i:] {
			if next >= at+hold-eps {
				break
			}
			if !seconds[next].ok {
				held = false
				break
			}
		}
		if held {
			rec.Recovered, rec.Time = true, max(at-stopped, 0)
			break
		}
	}
	return rec
}
