package reports

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// seriesReport is sampleReport(4) with a timeline: windows warmup, solo
// and run, per-second intervals, series with limiters and a checked
// writer on isolated, and one action fired by a watcher.
func seriesReport() *Report {
	r := sampleReport(4)
	for ci := range r.Configurations {
		c := &r.Configurations[ci]
		c.Windows = []Window{
			{Name: "warmup", Start: 0, End: 2, Senders: "all"},
			{Name: "solo", Start: 2, End: 5, Senders: "quiet", Measured: true},
			{Name: "run", Start: 5, End: 8, Senders: "all", Measured: true},
		}
		for s := 0; s < 8; s++ {
			win := c.Windows[0].Name
			for _, w := range c.Windows {
				if float64(s) >= w.Start && float64(s) < w.End {
					win = w.Name
				}
			}
			noisy := s >= 5
			f := 1.0
			if noisy && c.Name == "naive" {
				f = 20
			}
			c.Intervals = append(c.Intervals,
				Interval{Window: win, Start: float64(s), End: float64(s + 1), Tenant: QuietAll, Class: "interactive",
					Count: 40, P50: 1 * f, P99: 3 * f, Max: 4 * f})
			if s != 3 { // one second without a quiet heavy request
				c.Intervals = append(c.Intervals, Interval{Window: win, Start: float64(s), End: float64(s + 1), Tenant: QuietAll,
					Class: "heavy", Count: 4, P50: 150, P99: 200 * f, Max: 210 * f})
			}
			if noisy {
				c.Intervals = append(c.Intervals, Interval{Window: win, Start: float64(s), End: float64(s + 1), Tenant: "t1",
					Class: "interactive", Count: 200, P50: 5, P99: 60, Max: 80})
			}
			// Two of the busiest quiet tenants, t3 the busier: drawn
			// after the dominant tenant, t3 first, p99 only, in the
			// quiet tenants' busiest class (interactive; t3's heavy
			// second left out).
			c.Intervals = append(c.Intervals,
				Interval{Window: win, Start: float64(s), End: float64(s + 1), Tenant: "t3", Class: "heavy", Count: 1, P50: 100, P99: 100, Max: 100},
				Interval{Window: win, Start: float64(s), End: float64(s + 1), Tenant: "t2", Class: "interactive", Count: 10, P50: 1, P99: 2 * f, Max: 3 * f},
				Interval{Window: win, Start: float64(s), End: float64(s + 1), Tenant: "t3", Class: "interactive", Count: 12, P50: 1, P99: 4 * f, Max: 5 * f})
			pt := Point{Window: win, At: float64(s + 1), Rate: 100,
				TopDBTime: []Share{{Tenant: "t2", DBTime: 300, Share: 0.3}, {Tenant: "t3", DBTime: 200, Share: 0.2}}}
			if noisy {
				pt.TopDBTime = []Share{{Tenant: "t1", DBTime: 1800, Share: 0.6}, {Tenant: "t2", DBTime: 600, Share: 0.2}, {Tenant: "t4", DBTime: 300, Share: 0.1}}
			}
			if c.Name == "isolated" {
				// interactive rejects with both reasons, heavy with none.
				pt.Limiters = []LimiterPoint{{Class: "heavy", InFlight: 1}, {Class: "interactive", InFlight: int64(s), Queued: int64(s / 2), Rejected: int64(s % 3)}}
				if n := pt.Limiters[1].Rejected; n > 0 {
					pt.Limiters[1].RejectedByReason = map[string]int64{"queue_full": n - int64(s%2), "wait_exceeded": int64(s % 2)}
				}
				pt.Writer = &WriterPoint{Acked: 10, Errors: int64(s / 7)}
			}
			c.Series = append(c.Series, pt)
		}
		if c.Name == "naive" {
			// A backlog drained after the last phase: a span "drain".
			c.Series = append(c.Series, Point{Window: "run", At: 9.5, TopDBTime: []Share{{Tenant: "t1", DBTime: 900, Share: 0.9}}})
		}
		// A percentile plot per merged quiet row: p50 at the row's p50,
		// p99 at its p99; naive's noisy phase 20 × its solo tail.
		spectrum := func(t TenantRow, tail float64) []Percentile {
			return []Percentile{{P: 0, Ms: t.P50 / 4}, {P: 50, Ms: t.P50}, {P: 90, Ms: (t.P50 + t.P99) / 2}, {P: 99, Ms: t.P99 * tail}, {P: 99.9, Ms: t.Max * tail}}
		}
		for i := range c.QuietAll {
			tail := 1.0
			if c.Name == "naive" {
				tail = 20
			}
			c.QuietAll[i].Percentiles = spectrum(c.QuietAll[i], tail)
		}
		for i := range c.SoloQuietAll {
			c.SoloQuietAll[i].Percentiles = spectrum(c.SoloQuietAll[i], 1)
		}
		if c.Name == "isolated" {
			// The watcher of the run phase acts on t4's share above 0.15:
			// t4 has the least DB time of the top tenants, yet it is the
			// stack's bottom band (naive's is the dominant t1).
			c.Windows[2].ShareAlert = &ShareAlert{Policy: "share_over", Tenant: "t4", Threshold: 0.15}
			c.Writer = &WriterCheck{Tenant: "t1", Rate: 10, Inserts: 40, Updates: 40, LongestWrite: 450, LongestWriteAt: 6.6, LongestWriteWindow: "run"}
			c.Faults = []Fault{{Node: "replica1", Action: "stop", Phase: "run", At: 2, Restored: 2.5, Recovered: true}}
			c.Actions = []ActionResult{{Phase: "run", Type: "isolate_tenant", At: 6.5, Took: 0.4, FiredBy: "share_over",
				Before: map[string]float64{"share": 0.6}, After: map[string]float64{"share": 0.2}}}
		}
	}
	return r
}

// TestFigures pins the data behind each plot of report.html (not the SVG
// bytes): testdata/figures.json.golden.
func TestFigures(t *testing.T) {
	golden(t, "figures.txt", []byte(dumpFigures(figures(seriesReport()))))
}

// dumpFigures writes the data behind figs as text, one line per series.
func dumpFigures(figs []figure) string {
	var b strings.Builder
	for _, f := range figs {
		fmt.Fprintf(&b, "figure %s %q y=%q log=%v\n", f.ID, f.Title, f.YLabel, f.LogY)
		for _, p := range f.Panels {
			fmt.Fprintf(&b, "  panel %s empty=%q\n", p.Configuration, p.Empty)
			for _, s := range p.Phases {
				fmt.Fprintf(&b, "    phase %s %g..%g measured=%v\n", s.Name, s.From, s.To, s.Measured)
			}
			for _, m := range p.Actions {
				fmt.Fprintf(&b, "    action %q at %g took %g\n", m.Label, m.At, m.Took)
			}
			for _, l := range p.Lines {
				fmt.Fprintf(&b, "    line %q color=%d dashed=%v dotted=%v:", l.Label, l.Color, l.Dashed, l.Dotted)
				if l.Steps {
					b.WriteString(" (steps)")
				}
				if l.Fill {
					b.WriteString(" (fill)")
				}
				for _, pt := range l.Points {
					fmt.Fprintf(&b, " %g,%g", pt[0], pt[1])
				}
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// TestNodesFigure pins the load-per-node figure's data: connections in
// use per node on directory shards (a move from primary1 to primary3),
// and on Citus each worker's load per second with the skew limit over the
// workers that take shards, or, from a report without per-second worker
// loads, per measured phase, drawn as steps (testdata/nodes.txt.golden).
func TestNodesFigure(t *testing.T) {
	shards := seriesReport()
	shards.Configurations = shards.Configurations[:1]
	shards.Assertions = nil
	c := &shards.Configurations[0]
	c.Name = "sharded"
	for i := range c.Series {
		on := "primary1"
		if c.Series[i].At > 6.5 {
			on = "primary3"
		}
		c.Series[i].Pools = []PoolPoint{{Name: "shared", Node: "primary1", Borrowed: 1, Max: 4, Busy: 0.5}, {Name: "shared", Node: "primary2", Borrowed: 1, Max: 4, Busy: 0.25},
			{Name: "shared", Node: "primary3", Max: 4}}
		for j := range c.Series[i].Pools {
			if pl := &c.Series[i].Pools[j]; pl.Node == on && c.Series[i].At > 5 {
				pl.Borrowed, pl.Busy = 4, 3.5
			}
		}
	}
	c.Actions = []ActionResult{{Phase: "run", Type: "move_tenant", At: 6.5, Took: 0.8, FiredBy: "promote"}}

	citus := seriesReport()
	citus.Configurations = citus.Configurations[:1]
	c = &citus.Configurations[0]
	c.Name = "citus"
	citus.Assertions = []Assertion{{Name: "skew", Configuration: "citus", Window: "run", Observed: 1.2, Op: "<=", Limit: 1.5, Passed: true}}
	// The warm-up is not measured: left out.
	c.Windows[0].Workers, c.Windows[0].Skew = map[string]float64{"worker1": 5, "worker2": 5, "worker3": 5}, 1
	c.Windows[1].Workers, c.Windows[1].Skew = map[string]float64{"worker1": 0.2, "worker2": 0.25, "worker3": 0.2}, 1.25
	c.Windows[2].Workers, c.Windows[2].Skew = map[string]float64{"worker1": 0.9, "worker2": 0.25, "worker3": 0.2}, 3.6

	// Per second: worker1 hot from 5 s, dedicated after the ladder's
	// dedicate_worker at 6.5 (then out of the skew's median); every
	// worker idle in the first second (no skew limit point then);
	// worker10 after worker2.
	perSecond := seriesReport()
	perSecond.Configurations = perSecond.Configurations[:1]
	c = &perSecond.Configurations[0]
	c.Name = "citus"
	perSecond.Assertions = []Assertion{{Name: "skew", Configuration: "citus", Window: "run", Observed: 1.2, Op: "<=", Limit: 1.5, Passed: true}}
	c.Actions = []ActionResult{{Phase: "run", Type: "dedicate_worker", At: 6.5, Took: 0.8, FiredBy: "hot_shard_ladder"}}
	for i := range c.Series {
		pt := &c.Series[i]
		hot, dedicated := 0.3, false
		if pt.At > 5 {
			hot = 0.9
		}
		if pt.At > 6.5 {
			dedicated = true
		}
		pt.Workers = []WorkerPoint{{Worker: "worker10", Load: 0.1}, {Worker: "worker1", Load: hot, Dedicated: dedicated}, {Worker: "worker2", Load: 0.2}}
		if i == 0 {
			pt.Workers = []WorkerPoint{{Worker: "worker1", Load: 0}, {Worker: "worker2", Load: 0}, {Worker: "worker10", Load: 0}}
		}
	}

	single := seriesReport()
	var figs []figure
	for _, r := range []*Report{shards, citus, perSecond, single} {
		for _, f := range figures(r) {
			if f.ID == "nodes" {
				figs = append(figs, f)
			}
		}
	}
	if len(figs) != 3 {
		t.Fatalf("%d nodes figures, want 3 (shards, citus per phase and per second; none on one node)", len(figs))
	}
	golden(t, "nodes.txt", []byte(dumpFigures(figs)))
}

func TestFiguresLeaveOutWhatNoConfigurationHas(t *testing.T) {
	figs := figures(sampleReport(3))
	if len(figs) != 0 {
		t.Errorf("a report without series or intervals: got figures %v, want none", figs)
	}
	r := seriesReport()
	for i := range r.Configurations {
		for j := range r.Configurations[i].Series {
			r.Configurations[i].Series[j].Writer = nil
		}
	}
	for _, f := range figures(r) {
		if f.ID == "writer" {
			t.Errorf("no configuration has a writer, yet the writer figure is drawn")
		}
	}
}

// TestWriteHTML checks the page holds one SVG per configuration and
// figure (an empty panel says why), the assertions and the identity, and
// refers to nothing outside itself.
func TestWriteHTML(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, seriesReport()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, id := range []string{"fig-latency", "fig-distribution", "fig-db_time", "fig-limiter", "fig-rejections", "fig-writer", "assertions", "identity"} {
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("page has no element %s", id)
		}
	}
	// 5 figures × 2 configurations, of which naive has no limiter (2
	// figures) and no writer, and the distribution's 2 classes.
	if got := strings.Count(page, "<svg"); got != 9 {
		t.Errorf("page has %d svg elements, want 9", got)
	}
	if !strings.Contains(page, "naive: no limiter in this configuration") {
		t.Errorf("naive's limiter panel does not say it has no limiter")
	}
	for _, s := range []string{"9f2c4e1ab37d05c8", "local single (PostgreSQL 15.18)", "quiet_p99", "isolate_tenant (share_over)"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	for _, s := range []string{"src=", "href=", "url(", "@import", "<script"} {
		if strings.Contains(page, s) {
			t.Errorf("page refers to something outside itself: %q", s)
		}
	}
}

func TestWriteHTMLInvalid(t *testing.T) {
	r := seriesReport()
	r.Scenario = ""
	err := WriteHTML(&bytes.Buffer{}, r)
	if err == nil || !strings.Contains(fmt.Sprint(err), "scenario") {
		t.Errorf("got %v, want an invalid report naming scenario", err)
	}
}

// TestLimiterFiguresLeaveOutAService: a configuration whose service runs
// its own queries has no limiter or rejections panel drawn from
// noisysim's idle limiters, but says why.
func TestLimiterFiguresLeaveOutAService(t *testing.T) {
	r := seriesReport()
	for i := range r.Configurations {
		r.Configurations[i].Service = &ServiceRun{Instances: []string{"http://127.0.0.1:1"}}
	}
	for _, f := range figures(r) {
		if f.ID == "limiter" || f.ID == "rejections" {
			t.Errorf("figure %s drawn for configurations whose service has its own limiter: %+v", f.ID, f.Panels)
		}
	}
	r.Configurations[0].Service = nil // naive: no limiter; isolated: the service's
	for _, f := range figures(r) {
		if f.ID == "limiter" {
			t.Errorf("figure limiter drawn, yet no configuration has noisysim's limiter in its path: %+v", f.Panels)
		}
	}
	p := limiterLines(r.Configurations[1], true)
	if !strings.Contains(p.Empty, "not in the service's path") || len(p.Lines) != 0 {
		t.Errorf("the service's panel: %+v, want empty, saying why", p)
	}
}

// TestDistributionNamesTheBaseline: the distribution's baseline line is
// named after the phase quiet_p99 compared with ("before"), not "solo",
// and the configuration's line after the window it compared ("run").
func TestDistributionNamesTheBaseline(t *testing.T) {
	r := seriesReport()
	r.Assertions = append(r.Assertions, Assertion{Name: "quiet_p99", Configuration: "naive", Window: "run", Baseline: "before",
		Tenant: QuietAll, Class: "heavy", Observed: 1, Op: "<=", Limit: 2, Passed: true})
	d := distributionFigure(normalized(r))
	if len(d.Panels) == 0 || len(d.Panels[0].Lines) < 2 || d.Panels[0].Lines[0].Label != "before (naive)" || d.Panels[0].Lines[1].Label != "run (naive)" {
		t.Errorf("distribution panels %+v: want the baseline line named \"before (naive)\" and naive's compared window \"run (naive)\"", d.Panels)
	}
}

func TestLabelRows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		boxes []labelBox
		want  []int
	}{
		{"apart", []labelBox{{X: 0, W: 10}, {X: 20, W: 10}}, []int{0, 0}},
		{"overlapping", []labelBox{{X: 0, W: 10}, {X: 5, W: 10}}, []int{0, 1}},
		{"within the gap", []labelBox{{X: 0, W: 10}, {X: 12, W: 10}}, []int{0, 1}},
		{"back to the first row", []labelBox{{X: 0, W: 10}, {X: 5, W: 10}, {X: 16, W: 3}}, []int{0, 1, 0}},
		{"three at one place", []labelBox{{X: 5, W: 10}, {X: 5, W: 10}, {X: 5, W: 10}}, []int{0, 1, 2}},
		{"given right to left", []labelBox{{X: 30, W: 10}, {X: 0, W: 35}}, []int{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := labelRows(tc.boxes, labelGap); !slices.Equal(got, tc.want) {
				t.Errorf("labelRows(%v) = %v, want %v", tc.boxes, got, tc.want)
			}
		})
	}
}

// TestPanelLabelsDoNotOverlap draws a hot-shard panel, short phases
// before a long ladder and its actions a second or two apart, and checks
// that no two of the labels drawn (phase names, action marks) overlap and
// that each is inside the panel.
func TestPanelLabelsDoNotOverlap(t *testing.T) {
	p := panel{Configuration: "citus",
		Phases: []span{{Name: "solo_warmup", From: 0, To: 1}, {Name: "solo", From: 1, To: 4, Measured: true}, {Name: "before", From: 4, To: 9, Measured: true},
			{Name: "ladder", From: 9, To: 70}, {Name: "after_warmup", From: 70, To: 71}, {Name: "after", From: 71, To: 76, Measured: true}},
		Actions: []mark{{Label: "detect (hot_shard_ladder)", At: 4.6}, {Label: "isolate_tenant (hot_shard_ladder)", At: 9.5, Took: 2.1},
			{Label: "longest write 1633 ms", At: 10.2, Took: 1.6}, {Label: "dedicate_worker (hot_shard_ladder)", At: 12.1, Took: 40},
			{Label: "balance (hot_shard_ladder)", At: 52.6, Took: 17}},
		Lines: []line{{Label: "worker1", Points: [][2]float64{{1, 0.1}, {76, 0.3}}}}}
	f := figure{ID: "nodes", YLabel: "mean busy backends"}
	plt, bands, err := panelPlot(f, p, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := draw.New(vgimg.New(panelWidth, panelHeight))
	plt.Draw(c)
	if len(bands.placed) != len(p.Phases)+len(p.Actions) {
		t.Fatalf("%d labels drawn, want %d", len(bands.placed), len(p.Phases)+len(p.Actions))
	}
	for i, a := range bands.placed {
		if a.Min.X < c.Min.X || a.Max.X > c.Max.X || a.Min.Y < c.Min.Y || a.Max.Y > c.Max.Y {
			t.Errorf("label %d at %v is outside the canvas %v", i, a, c.Rectangle)
		}
		for j, b := range bands.placed[:i] {
			if a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y {
				t.Errorf("labels %d %v and %d %v overlap", j, b, i, a)
			}
		}
	}
}

// TestNodesFigureClipsABurst: one second of 12 busy backends on worker2
// (a burst while a shard is isolated) among 40 loads under 1 does not set
// the y axis: it ends at 1.5 × the 95th percentile of the loads, the
// title and the axis say so, and the point is drawn on the axis's top,
// marked. Loads without a burst are not clipped.
func TestNodesFigureClipsABurst(t *testing.T) {
	nodes := func(burst float64) figure {
		r := seriesReport()
		r.Configurations = r.Configurations[:1]
		c := &r.Configurations[0]
		c.Series = nil
		for i := range 20 {
			pt := Point{Window: "run", At: float64(i + 1), Workers: []WorkerPoint{{Worker: "worker1", Load: 0.5 + 0.02*float64(i)}, {Worker: "worker2", Load: 0.25}}}
			if i == 3 {
				pt.Workers[1].Load = burst
			}
			c.Series = append(c.Series, pt)
		}
		for _, f := range figures(r) {
			if f.ID == "nodes" {
				return f
			}
		}
		t.Fatal("no nodes figure")
		return figure{}
	}
	if f := nodes(0.3); f.ClipY != 0 || strings.Contains(f.Title, "clipped") {
		t.Errorf("loads without a burst: clip %g, title %q; want no clipping", f.ClipY, f.Title)
	}
	f := nodes(12)
	top := 0.0
	for _, l := range f.Panels[0].Lines {
		for _, pt := range l.Points {
			if pt[1] < 12 {
				top = max(top, pt[1])
			}
		}
	}
	if f.ClipY < top || f.ClipY >= 12 {
		t.Fatalf("clip at %g, want between the highest other load %g and the burst 12", f.ClipY, top)
	}
	if !strings.Contains(f.Title, "1 points above it") || !strings.Contains(f.YLabel, "clipped") {
		t.Errorf("title %q, y label %q: want the clipping and its 1 point named", f.Title, f.YLabel)
	}
	lo, hi := yRange(f)
	plt, _, err := panelPlot(f, f.Panels[0], lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if plt.Y.Max > f.ClipY*1.06 {
		t.Errorf("y axis up to %g, want it to end near the clip %g", plt.Y.Max, f.ClipY)
	}
	var marked plotter.XYs
	for _, l := range f.Panels[0].Lines {
		xys, clipped := linePoints(f, l, func(x float64) float64 { return x })
		for _, xy := range xys {
			if xy.Y > f.ClipY {
				t.Errorf("%s drawn at %g, above the clip %g", l.Label, xy.Y, f.ClipY)
			}
		}
		marked = append(marked, clipped...)
	}
	if len(marked) != 1 || marked[0].X != 4 || marked[0].Y != f.ClipY {
		t.Errorf("marked %v, want the burst's second (4 s) on the clip %g", marked, f.ClipY)
	}
}

// A disturbed run's page says so under the verdict, with why, and a run
// measured beside others names them: the page is what people look at.
func TestWriteHTMLDisturbed(t *testing.T) {
	r := seriesReport()
	var clean bytes.Buffer
	if err := WriteHTML(&clean, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(clean.String(), "DISTURBED") {
		t.Errorf("an undisturbed run's page says DISTURBED")
	}
	r.Machine = &Machine{MaxForeignCPU: 0.5, Concurrent: "pid 4242 (noisysim run other)", Windows: []WindowLoad{
		{Window: "solo", Seconds: 6, ForeignCPU: 1.87, Disturbed: true},
		{Window: "run (naive)", Seconds: 10, ForeignCPU: 0.1},
	}}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`id="disturbed">DISTURBED: solo: 1.87 CPU used outside the run (above 0.50); the figures may not be the system's own`,
		"<td>concurrent</td><td>pid 4242 (noisysim run other)</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "run (naive): ") {
		t.Errorf("page calls the undisturbed window disturbed")
	}
}
