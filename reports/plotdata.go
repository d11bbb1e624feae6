package reports

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
)

// A figure is one plot of report.html: one panel per configuration, side
// by side, on the same scale. What each panel draws is plain data, built
// from the report model alone (figures), so that it can be golden-tested
// apart from the SVG that draws it.
type figure struct {
	// ID names the figure in the page (its element id): latency,
	// distribution, db_time, limiter, rejections, writer, nodes.
	ID    string `json:"id"`
	Title string `json:"title"`
	// YLabel is the y axis's label with its unit; LogY a log scale.
	YLabel string `json:"y_label"`
	LogY   bool   `json:"log_y,omitempty"`
	// PercentileX: the x values are percentiles (0..100), drawn on
	// HdrHistogram's percentile axis (1 / (1 - p), log scale); otherwise
	// x is seconds from the timeline's start.
	PercentileX bool `json:"percentile_x,omitempty"`
	// ClipY, when above 0, is the top of the y axis, below the highest
	// point: the points above it are drawn on it, marked (clipY).
	ClipY float64 `json:"clip_y,omitempty"`
	// Panels are the configurations', in run order.
	Panels []panel `json:"panels"`
}

// panel is one configuration's part of a figure.
type panel struct {
	Configuration string `json:"configuration"`
	// Empty says why the panel has no lines (e.g. "no limiter"); Lines is
	// then empty.
	Empty string `json:"empty,omitempty"`
	Lines []line `json:"lines,omitempty"`
	// Phases are the timeline's windows, shaded; Actions the actions,
	// marked where they started.
	Phases  []span `json:"phases,omitempty"`
	Actions []mark `json:"actions,omitempty"`
}

// line is one series of a panel: x in seconds from the timeline's start.
type line struct {
	Label  string       `json:"label"`
	Points [][2]float64 `json:"points"`
	// Dashed draws a line dashed (a p50 beside its p99), Dotted dotted
	// (a limiter's rejections beside its in-flight requests).
	Dashed bool `json:"dashed,omitempty"`
	Dotted bool `json:"dotted,omitempty"`
	// Steps draws the points in pairs, each pair a segment of its own (a
	// value held over a phase), not joined to the next.
	Steps bool `json:"steps,omitempty"`
	// Fill fills the area under the line: a band of a stack, whose
	// points are the running sum of the bands below it and its own.
	Fill bool `json:"fill,omitempty"`
	// Color is the line's colour, an index into the page's palette.
	Color int `json:"color"`
}

type span struct {
	Name     string  `json:"name"`
	From     float64 `json:"from_s"`
	To       float64 `json:"to_s"`
	Measured bool    `json:"measured"`
}

// mark is an action: where it started and how long it ran, in seconds.
type mark struct {
	Label string  `json:"label"`
	At    float64 `json:"at_s"`
	Took  float64 `json:"took_s,omitempty"`
}

// topSeriesTenants is how many tenants the DB-time figure draws: those
// with the most DB time over the configuration's series.
const topSeriesTenants = 5

// figures returns report.html's figures: latency over time, the top
// tenants' DB-time shares, the limiters, and the checked writer's
// acknowledgements (when a configuration has a writer). A figure none of
// whose configurations has its data is left out.
func figures(r *Report) []figure {
	r = normalized(r)
	figs := []figure{
		{ID: "latency", Title: "Latency per second: quiet tenants (all), the dominant tenant, and the busiest quiet tenants' p99 (dotted) in the busiest quiet class", YLabel: "latency (ms)", LogY: true},
		{ID: "db_time", Title: dbTimeTitle(r), YLabel: "share of DB time (stacked)"},
		{ID: "limiter", Title: "Limiter per class: in flight and queued at each second", YLabel: "requests"},
		{ID: "rejections", Title: "Limiter per class: requests rejected in each second, by reason (queue_full: the tenant's queue was full; wait_exceeded: waited max_wait without a slot)", YLabel: "rejected per second"},
		{ID: "writer", Title: "Checked writer: writes acknowledged and failed per second, its longest write (the write pause) shaded", YLabel: "writes per second"},
		nodesFigure(r),
	}
	builders := []func(*Report, Configuration) panel{latencyPanel, dbTimePanel, limiterPanel, rejectionsPanel, writerPanel, nodesPanel}
	var out []figure
	for i := range figs {
		if i == 1 {
			if d := distributionFigure(r); len(d.Panels) > 0 {
				out = append(out, d)
			}
		}
		any := false
		for _, c := range r.Configurations {
			p := builders[i](r, c)
			p.Configuration = c.Name
			if len(p.Lines) > 0 {
				any = true
				p.Phases, p.Actions = phaseSpans(c), actionMarks(c)
				if figs[i].ID == "writer" {
					p.Actions = append(p.Actions, longestWriteMark(c)...)
				}
				if id := figs[i].ID; id != "latency" && id != "limiter" && id != "rejections" {
					for j := range p.Lines {
						p.Lines[j].Color = j // one colour a line
					}
				}
			}
			figs[i].Panels = append(figs[i].Panels, p)
		}
		if any {
			if id := figs[i].ID; id == "nodes" || id == "writer" {
				clipY(&figs[i]) // a burst (a backlog answered at once) flattens the rest
			}
			out = append(out, figs[i])
		}
	}
	return out
}

// Clipping: a figure whose highest point is above clipFactor × the
// clipPercentile-th percentile of its positive values has its y axis end
// there.
const (
	clipPercentile = 95
	clipFactor     = 1.5
)

// clipY sets f.ClipY where a few points (a burst, e.g. while a tenant's
// shard is being isolated) would set the y axis so high that the rest of
// the figure reads flat: clipFactor × the clipPercentile-th percentile of
// the positive values of every panel's lines (nearest rank), when some
// point is above it. The title says so, with how many points are clipped.
func clipY(f *figure) {
	var vs []float64
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			for _, pt := range l.Points {
				if pt[1] > 0 {
					vs = append(vs, pt[1])
				}
			}
		}
	}
	if len(vs) == 0 {
		return
	}
	slices.Sort(vs)
	rank := max(int(math.Ceil(clipPercentile/100.0*float64(len(vs))))-1, 0)
	clip := clipFactor * vs[rank]
	above := len(vs) - sort.SearchFloat64s(vs, math.Nextafter(clip, math.Inf(1)))
	if above == 0 {
		return
	}
	f.ClipY = clip
	f.Title += fmt.Sprintf("; y axis clipped at %.3g (%g × the %dth percentile of the values): %d points above it are drawn on it, marked ▲",
		clip, clipFactor, clipPercentile, above)
	f.YLabel += " (▲ clipped)"
}

// phaseSpans are c's windows and, when its series run on past the last
// window (the requests left draining), a span "drain" to their end.
func dbTimeTitle(r *Report) string {
	t := fmt.Sprintf("DB-time share per second of the top %d tenants, stacked", topSeriesTenants)
	for _, c := range r.Configurations {
		for _, w := range c.Windows {
			if w.ShareAlert != nil {
				return t + " (the watched tenant at the bottom), with the share alert's threshold"
			}
		}
	}
	return t + " (the dominant tenant at the bottom)"
}

func phaseSpans(c Configuration) []span {
	var out []span
	end := 0.0
	for _, w := range c.Windows {
		out = append(out, span{Name: w.Name, From: w.Start, To: w.End, Measured: w.Measured})
		end = max(end, w.End)
	}
	last := 0.0
	for _, pt := range c.Series {
		last = max(last, pt.At)
	}
	for _, iv := range c.Intervals {
		last = max(last, iv.End)
	}
	if len(out) > 0 && last > end {
		out = append(out, span{Name: "drain", From: end, To: last})
	}
	return out
}

// actionMarks marks the configuration's actions and its node faults
// (from injection to restore), in time order.
func actionMarks(c Configuration) []mark {
	var out []mark
	for _, a := range c.Actions {
		if a.NotStarted {
			continue
		}
		l := a.Type
		if a.FiredBy != "" {
			l += " (" + a.FiredBy + ")"
		}
		if a.Error != "" {
			l += " failed"
		}
		out = append(out, mark{Label: l, At: a.At, Took: a.Took})
	}
	for _, f := range c.Faults {
		start := 0.0
		for _, w := range c.Windows {
			if w.Name == f.Phase {
				start = w.Start
			}
		}
		out = append(out, mark{Label: "fault: " + f.Action + " " + f.Node, At: start + f.At, Took: max(f.Restored-f.At, 0)})
	}
	slices.SortStableFunc(out, func(a, b mark) int { return cmp.Compare(a.At, b.At) })
	return out
}

// longestWriteMark marks the checked writer's longest write, from its
// intended start to its answer: a move's write pause shows there.
func longestWriteMark(c Configuration) []mark {
	w := c.Writer
	if w == nil || w.LongestWrite <= 0 {
		return nil
	}
	return []mark{{Label: fmt.Sprintf("longest write %.0f ms", w.LongestWrite), At: w.LongestWriteAt, Took: w.LongestWrite / 1000}}
}

// latencyPanel draws, per class, the p99 and p50 of each second of the
// quiet tenants merged and of the dominant tenant, and the p99 (dotted)
// of each busiest quiet tenant the report has a series of, in the class
// with the most quiet requests (Configuration.Intervals); a second
// without a request has no point.
func latencyPanel(r *Report, c Configuration) panel {
	type key struct{ tenant, class string }
	byKey := map[key][]Interval{}
	for _, iv := range c.Intervals {
		if iv.Count == 0 {
			continue
		}
		k := key{iv.Tenant, iv.Class}
		byKey[k] = append(byKey[k], iv)
	}
	rank := func(t string) int {
		switch t {
		case QuietAll:
			return 0
		case r.Dominant:
			return 1
		}
		return 2
	}
	// quiet (all) first, then the dominant tenant, then the busiest quiet
	// tenants by their requests; classes in order.
	count, quietClass := map[string]int64{}, map[string]int64{}
	for k, ivs := range byKey {
		for _, iv := range ivs {
			count[k.tenant] += iv.Count
			if k.tenant == QuietAll {
				quietClass[k.class] += iv.Count
			}
		}
	}
	// The busiest quiet tenants are drawn in the quiet tenants' busiest
	// class only: a line per tenant, not per tenant and class.
	busiest := ""
	for class, n := range quietClass {
		if busiest == "" || n > quietClass[busiest] || n == quietClass[busiest] && class < busiest {
			busiest = class
		}
	}
	for k := range byKey {
		if rank(k.tenant) == 2 && busiest != "" && k.class != busiest {
			delete(byKey, k)
		}
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		return cmp.Or(cmp.Compare(rank(a.tenant), rank(b.tenant)), cmp.Compare(count[b.tenant], count[a.tenant]),
			cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.class, b.class))
	})
	var p panel
	for i, k := range keys {
		ivs := byKey[k]
		slices.SortFunc(ivs, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
		who := k.tenant
		switch rank(k.tenant) {
		case 1:
			who = "tenant " + who + " (dominant)"
		case 2:
			who = "tenant " + who + " (quiet)"
		}
		p99 := line{Label: fmt.Sprintf("%s %s p99", who, k.class), Color: i}
		p50 := line{Label: fmt.Sprintf("%s %s p50", who, k.class), Dashed: true, Color: i}
		for _, iv := range ivs {
			p99.Points = append(p99.Points, [2]float64{iv.End, iv.P99})
			p50.Points = append(p50.Points, [2]float64{iv.End, iv.P50})
		}
		if rank(k.tenant) == 2 {
			p99.Dotted = true // one quiet tenant: its p99 only, apart from the merged lines
			p.Lines = append(p.Lines, p99)
			continue
		}
		p.Lines = append(p.Lines, p99, p50)
	}
	if len(p.Lines) == 0 {
		p.Empty = "no per-second latencies in the report"
	}
	return p
}

// dbTimePanel draws the DB-time share of each second of the tenants with
// the most DB time over the series (a second where a tenant was not among
// the series' top 5 counts as 0 for it), stacked: the tenant a share
// alert watches (else the dominant tenant) at the bottom, so that its
// band's top is its own share, then the others by DB time. The alert's
// threshold is a dashed step over each phase it watches
// (Window.ShareAlert).
func dbTimePanel(r *Report, c Configuration) panel {
	total := map[string]float64{}
	for _, pt := range c.Series {
		for _, s := range pt.TopDBTime {
			total[s.Tenant] += s.DBTime
		}
	}
	var alert *ShareAlert
	for _, w := range c.Windows {
		if w.ShareAlert != nil && alert == nil {
			alert = w.ShareAlert
		}
	}
	bottom := r.Dominant
	if alert != nil {
		bottom = alert.Tenant
	}
	tenants := slices.SortedFunc(maps.Keys(total), func(a, b string) int {
		return cmp.Or(cmp.Compare(total[b], total[a]), cmp.Compare(a, b))
	})
	tenants = tenants[:min(len(tenants), topSeriesTenants)]
	if i := slices.Index(tenants, bottom); i > 0 {
		tenants = append([]string{bottom}, slices.Delete(tenants, i, i+1)...)
	}
	var p panel
	below := make([]float64, len(c.Series))
	for _, t := range tenants {
		l := line{Label: "tenant " + t, Fill: true}
		if t == r.Dominant {
			l.Label += " (dominant)"
		}
		for i, pt := range c.Series {
			for _, s := range pt.TopDBTime {
				if s.Tenant == t {
					below[i] += s.Share
				}
			}
			l.Points = append(l.Points, [2]float64{pt.At, below[i]})
		}
		p.Lines = append(p.Lines, l)
	}
	if len(p.Lines) == 0 {
		p.Empty = "no DB time in the series"
		return p
	}
	for _, w := range c.Windows {
		a := w.ShareAlert
		if a == nil {
			continue
		}
		label := fmt.Sprintf("share alert: %s acts on tenant %s above %g", a.Policy, a.Tenant, a.Threshold)
		if n := len(p.Lines); p.Lines[n-1].Label != label {
			p.Lines = append(p.Lines, line{Label: label, Dashed: true, Steps: true})
		}
		l := &p.Lines[len(p.Lines)-1]
		l.Points = append(l.Points, [2]float64{w.Start, a.Threshold}, [2]float64{w.End, a.Threshold})
	}
	return p
}

// limiterPanel draws each limited class's in-flight and queued requests
// at each point.
func limiterPanel(r *Report, c Configuration) panel { return limiterLines(c, false) }

// rejectionsPanel draws each limited class's rejections in each second,
// apart from limiterPanel: hundreds per second would flatten a handful in
// flight.
func rejectionsPanel(r *Report, c Configuration) panel { return limiterLines(c, true) }

func limiterLines(c Configuration, rejections bool) panel {
	if c.Service != nil {
		// The service runs its own queries: noisysim's limiters, idle,
		// would draw a flat zero that reads as "nothing rejected".
		return panel{Empty: "noisysim's limiter is not in the service's path (the service's own rejections are its HTTP 429 answers)"}
	}
	classes := map[string]bool{}
	reasons := map[string]map[string]bool{} // per class, the reasons with rejections
	for _, pt := range c.Series {
		for _, l := range pt.Limiters {
			classes[l.Class] = true
			for reason, n := range l.RejectedByReason {
				if n > 0 {
					if reasons[l.Class] == nil {
						reasons[l.Class] = map[string]bool{}
					}
					reasons[l.Class][reason] = true
				}
			}
		}
	}
	var p panel
	for ci, class := range slices.Sorted(maps.Keys(classes)) {
		if !rejections {
			in := line{Label: class + " in flight", Color: ci}
			q := line{Label: class + " queued", Dashed: true, Color: ci}
			for _, pt := range c.Series {
				for _, l := range pt.Limiters {
					if l.Class == class {
						in.Points = append(in.Points, [2]float64{pt.At, float64(l.InFlight)})
						q.Points = append(q.Points, [2]float64{pt.At, float64(l.Queued)})
					}
				}
			}
			p.Lines = append(p.Lines, in, q)
			continue
		}
		// One line per reason; the total alone where no point splits it
		// (no rejection, or a report without reasons).
		byReason := slices.Sorted(maps.Keys(reasons[class]))
		if len(byReason) == 0 {
			byReason = []string{""}
		}
		for ri, reason := range byReason {
			rej := line{Label: class + " rejected", Color: ci, Dashed: ri == 1, Dotted: ri > 1}
			if reason != "" {
				rej.Label += ": " + reason
			}
			for _, pt := range c.Series {
				for _, l := range pt.Limiters {
					if l.Class == class {
						n := l.Rejected
						if reason != "" {
							n = l.RejectedByReason[reason]
						}
						rej.Points = append(rej.Points, [2]float64{pt.At, float64(n)})
					}
				}
			}
			p.Lines = append(p.Lines, rej)
		}
	}
	if len(p.Lines) == 0 {
		p.Empty = "no limiter in this configuration"
	}
	return p
}

// writerPanel draws the checked writer's acknowledged and failed writes
// per second (Point.Writer).
func writerPanel(r *Report, c Configuration) panel {
	var p panel
	ack, fail := line{Label: "acknowledged"}, line{Label: "failed"}
	for _, pt := range c.Series {
		if pt.Writer == nil {
			continue
		}
		ack.Points = append(ack.Points, [2]float64{pt.At, float64(pt.Writer.Acked)})
		fail.Points = append(fail.Points, [2]float64{pt.At, float64(pt.Writer.Errors)})
	}
	if len(ack.Points) == 0 {
		p.Empty = "no checked writer in this configuration"
		return p
	}
	p.Lines = []line{ack, fail}
	return p
}

// nodesFigure is the load per node: on topology citus each worker's load
// in each phase (Window.Workers), else the connections in use per node
// (Series.Pools) where the pools reach two nodes or more.
func nodesFigure(r *Report) figure {
	for _, c := range r.Configurations {
		for _, pt := range c.Series {
			if len(pt.Workers) > 0 {
				return figure{ID: "nodes", Title: "Load per Citus worker per second (DB time through the shard placements of the moment), " +
					"the actions marked, with the skew limit (the skew assertion's max × the median load of the workers that take shards)",
					YLabel: "mean busy backends"}
			}
		}
	}
	for _, c := range r.Configurations {
		for _, w := range c.Windows {
			if len(w.Workers) > 0 {
				return figure{ID: "nodes", Title: "Load per Citus worker in each phase (DB time through the shard placements), with the skew limit",
					YLabel: "mean busy backends"}
			}
		}
	}
	for _, c := range r.Configurations {
		for _, pt := range c.Series {
			for _, pl := range pt.Pools {
				if pl.Busy > 0 {
					return figure{ID: "nodes", Title: "Load per node: DB time per second of the calls each node ran", YLabel: "mean busy connections"}
				}
			}
		}
	}
	return figure{ID: "nodes", Title: "Load per node: connections in use at each second", YLabel: "connections in use"}
}

// nodesPanel draws the load per node (see nodesFigure). On topology citus
// each worker's load in each second (Point.Workers), and the skew limit
// dashed: the skew assertion's max × the median load of the workers that
// took shards in that second; a report without per-second worker loads
// draws each worker's load as a step over each measured phase (a
// warm-up's or the ladder's is left out), the skew limit from Window.Skew
// (max / median). Elsewhere each node's load in each second summed over
// its pools, a replica's apart: its mean busy connections
// (PoolPoint.Busy), or in a report without them the connections borrowed
// at the second's end. A single node has no panel.
func nodesPanel(r *Report, c Configuration) panel {
	var p panel
	limit := 0.0
	for _, a := range r.Assertions {
		if a.Configuration == c.Name && a.Name == "skew" && a.Limit > 0 {
			limit = a.Limit
		}
	}
	if lines := workerSeries(c, limit); len(lines) > 0 {
		p.Lines = lines
		return p
	}
	workers := map[string]bool{}
	for _, w := range c.Windows {
		for k := range w.Workers {
			workers[k] = true
		}
	}
	if len(workers) > 0 {
		for _, k := range slices.Sorted(maps.Keys(workers)) {
			l := line{Label: k, Steps: true}
			for _, w := range c.Windows {
				if v, ok := w.Workers[k]; ok && w.Measured {
					l.Points = append(l.Points, [2]float64{w.Start, v}, [2]float64{w.End, v})
				}
			}
			p.Lines = append(p.Lines, l)
		}
		if limit > 0 {
			sk := line{Label: fmt.Sprintf("skew limit (%g × median)", limit), Dashed: true, Steps: true}
			for _, w := range c.Windows {
				if !w.Measured {
					continue
				}
				top := 0.0
				for _, v := range w.Workers {
					top = max(top, v)
				}
				if w.Skew > 0 && w.Skew < 1e300 && top > 0 {
					y := top / w.Skew * limit
					sk.Points = append(sk.Points, [2]float64{w.Start, y}, [2]float64{w.End, y})
				}
			}
			if len(sk.Points) > 0 {
				p.Lines = append(p.Lines, sk)
			}
		}
		return p
	}
	nodes := map[string]bool{}
	name := func(pl PoolPoint) string {
		if pl.Standby {
			return pl.Node + " (replica)"
		}
		return pl.Node
	}
	for _, pt := range c.Series {
		for _, pl := range pt.Pools {
			nodes[name(pl)] = true
		}
	}
	if len(nodes) < 2 {
		p.Empty = "one node"
		return p
	}
	busy := nodesFigure(r).YLabel == "mean busy connections"
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		l := line{Label: n}
		for _, pt := range c.Series {
			sum, seen := 0.0, false
			for _, pl := range pt.Pools {
				if name(pl) == n {
					v := float64(pl.Borrowed)
					if busy {
						v = pl.Busy
					}
					sum += v
					seen = true
				}
			}
			if seen {
				l.Points = append(l.Points, [2]float64{pt.At, sum})
			}
		}
		p.Lines = append(p.Lines, l)
	}
	return p
}

// workerSeries draws each Citus worker's load in each second of c
// (Point.Workers), worker1 first, and, when limit > 0, the skew limit
// dashed: limit × the median load of the workers that took shards in
// the second (a second where that median is 0 has no point). It returns
// nil when c has no per-second worker loads.
func workerSeries(c Configuration, limit float64) []line {
	names := map[string]bool{}
	for _, pt := range c.Series {
		for _, w := range pt.Workers {
			names[w.Worker] = true
		}
	}
	if len(names) == 0 {
		return nil
	}
	var out []line
	for _, n := range slices.SortedFunc(maps.Keys(names), natural) {
		l := line{Label: n}
		for _, pt := range c.Series {
			for _, w := range pt.Workers {
				if w.Worker == n {
					l.Points = append(l.Points, [2]float64{pt.At, w.Load})
				}
			}
		}
		out = append(out, l)
	}
	if limit <= 0 {
		return out
	}
	sk := line{Label: fmt.Sprintf("skew limit (%g × median)", limit), Dashed: true}
	for _, pt := range c.Series {
		var shared []float64
		for _, w := range pt.Workers {
			if !w.Dedicated {
				shared = append(shared, w.Load)
			}
		}
		if m := median(shared); m > 0 {
			sk.Points = append(sk.Points, [2]float64{pt.At, limit * m})
		}
	}
	if len(sk.Points) > 0 {
		out = append(out, sk)
	}
	return out
}

// median is the median of v, 0 for none (the mean of the middle two of
// an even count, as the skew's: isolation/citus Skew).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	mid := len(s) / 2
	if len(s)%2 == 0 {
		return (s[mid-1] + s[mid]) / 2
	}
	return s[mid]
}

// baselineName is the name of the phase quiet_p99 compared
// configuration with (its baseline, e.g. "before"), "solo" when no
// assertion names it.
func baselineName(r *Report, configuration string) string {
	for _, a := range r.Assertions {
		if a.Name == "quiet_p99" && a.Configuration == configuration && a.Baseline != "" {
			return a.Baseline
		}
	}
	return "solo"
}

// comparedName names configuration's quiet_p99 window, "after
// (citus)", or the configuration alone when no assertion names it.
func comparedName(r *Report, configuration string) string {
	for _, a := range r.Assertions {
		if a.Name == "quiet_p99" && a.Configuration == configuration && a.Window != "" {
			return a.Window + " (" + configuration + ")"
		}
	}
	return configuration
}

// distributionFigure is the quiet tenants' (all) response-time
// distribution, a panel per class: the solo baseline of the first
// configuration and each configuration's quiet_p99 window (QuietAll) on
// one chart, percentile against latency (TenantRow.Percentiles). No panel
// without percentiles.
func distributionFigure(r *Report) figure {
	f := figure{ID: "distribution", Title: "Latency distribution of the quiet tenants (all): solo and each configuration",
		YLabel: "latency (ms)", LogY: true, PercentileX: true}
	if len(r.Configurations) == 0 {
		return f
	}
	rowOf := func(rows []TenantRow, class string) []Percentile {
		for _, t := range rows {
			if t.Class == class {
				return t.Percentiles
			}
		}
		return nil
	}
	classes := map[string]bool{}
	for _, c := range r.Configurations {
		for _, t := range append(slices.Clone(c.QuietAll), c.SoloQuietAll...) {
			if len(t.Percentiles) > 0 {
				classes[t.Class] = true
			}
		}
	}
	toLine := func(label string, ps []Percentile) line {
		l := line{Label: label}
		for _, q := range ps {
			l.Points = append(l.Points, [2]float64{q.P, q.Ms})
		}
		return l
	}
	for _, class := range slices.Sorted(maps.Keys(classes)) {
		p := panel{Configuration: QuietAll + " " + class}

		first := r.Configurations[0]
		if ps := rowOf(first.SoloQuietAll, class); len(ps) > 0 {
			p.Lines = append(p.Lines, toLine(baselineName(r, first.Name)+" ("+first.Name+")", ps))
		}
		for _, c := range r.Configurations {
			if ps := rowOf(c.QuietAll, class); len(ps) > 0 {
				p.Lines = append(p.Lines, toLine(comparedName(r, c.Name), ps))
			}
		}
		for i := range p.Lines {
			p.Lines[i].Color = i
		}
		f.Panels = append(f.Panels, p)
	}
	return f
}
