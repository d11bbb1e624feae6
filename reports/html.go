package reports

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// HTMLFile is the page WriteDir writes beside the others.
const HTMLFile = "report.html"

//go:embed html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New("report.html").Funcs(template.FuncMap{
	"ms":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"num": func(v float64) string { return fmt.Sprintf("%.4g", v) },
	// details are a configuration's service, activity and recovery lines.
	"details": func(c Configuration) []string {
		out := serviceLines(c)
		if l := recoveryLine(c); l != "" {
			out = append(out, l)
		}
		return out
	},
	"verdict": func(a Assertion) string {
		switch {
		case a.Skipped:
			return "skipped"
		case a.Passed && a.Marginal:
			return "pass (marginal)"
		case a.Passed:
			return "pass"
		case a.Marginal:
			return "FAIL (marginal)"
		}
		return "FAIL"
	},
}).Parse(htmlSource))

// htmlPage is what html.tmpl renders.
type htmlPage struct {
	R       *Report
	Figures []htmlFigure
	// Verdict is the run's one-line verdict.
	Verdict string
	// Simulated and SimulatedClasses say where a simulated report's
	// figures come from; empty for a real run's.
	Simulated        string
	SimulatedClasses []string
	// Disturbed says which measured windows others disturbed and why;
	// empty when none was.
	Disturbed string
}

type htmlFigure struct {
	figure
	SVGs []htmlPanel
}

type htmlPanel struct {
	Configuration string
	Empty         string
	SVG           template.HTML
	// Legend names the panel's lines, in their colours.
	Legend []legendItem
}

type legendItem struct {
	Label          string
	Color          template.CSS
	Dashed, Dotted bool
}

// WriteHTML writes r to w as one self-contained HTML page (report.html):
// the run's verdict and identity, one figure per kind of series, each
// configuration side by side on the same scale (figures), drawn as inline
// SVG with gonum/plot, then the assertions. The page loads nothing: no
// script, style sheet, font or image from elsewhere. It returns an error
// wrapping ErrInvalid if r does not pass Validate, or the writer's error.
func WriteHTML(w io.Writer, r *Report) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	n := normalized(r)
	page := htmlPage{R: n, Verdict: verdictLine(n), Simulated: simulatedLine(n), SimulatedClasses: simulatedClassLines(n),
		Disturbed: n.Machine.DisturbedWhy()}
	for _, f := range figures(n) {
		hf := htmlFigure{figure: f}
		ymin, ymax := yRange(f)
		for _, p := range f.Panels {
			hp := htmlPanel{Configuration: p.Configuration, Empty: p.Empty}
			if p.Empty == "" {
				svg, err := drawPanel(f, p, ymin, ymax)
				if err != nil {
					return fmt.Errorf("write html: figure %s of %s: %w", f.ID, p.Configuration, err)
				}
				hp.SVG = template.HTML(svg)
				for _, l := range p.Lines {
					r, g, b, _ := lineColor(l).RGBA()
					hp.Legend = append(hp.Legend, legendItem{Label: l.Label, Dashed: l.Dashed, Dotted: l.Dotted,
						Color: template.CSS(fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8))})
				}
			}
			hf.SVGs = append(hf.SVGs, hp)
		}
		page.Figures = append(page.Figures, hf)
	}
	if err := htmlTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}

func verdictLine(r *Report) string {
	if r.Simulated != nil {
		return verdictWord(r) + " (SIMULATED)"
	}
	return verdictWord(r)
}

// verdictWord is verdictLine without the simulation.
func verdictWord(r *Report) string {
	switch {
	case r.Incomplete != "":
		return "INCOMPLETE: " + r.Incomplete
	case r.Passed && len(r.Marginal) > 0:
		return fmt.Sprintf("PASSED, %d marginal verdicts", len(r.Marginal))
	case r.Passed:
		return "PASSED"
	}
	return "FAILED"
}

// yRange is the y range shared by a figure's panels, so that
// configurations compare at a glance. On a log scale it starts at the
// smallest positive value (at least 0.01).
func yRange(f figure) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range f.Panels {
		for _, l := range p.Lines {
			for _, pt := range l.Points {
				y := pt[1]
				if f.LogY && y <= 0 {
					continue
				}
				lo, hi = min(lo, y), max(hi, y)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if f.LogY {
		lo = max(lo, 0.01)
		hi = max(hi, lo*10)
		return lo / 1.2, hi * 1.2
	}
	if f.ClipY > 0 {
		hi = min(hi, f.ClipY)
	}
	return min(lo, 0), max(hi*1.05, 1)
}

// panelWidth and panelHeight are one panel's size.
const (
	panelWidth  = 6 * vg.Inch
	panelHeight = 3.6 * vg.Inch
)

// drawPanel draws p as an SVG document with gonum/plot, its y axis from
// ymin to ymax.
func drawPanel(f figure, p panel, ymin, ymax float64) (string, error) {
	plt, _, err := panelPlot(f, p, ymin, ymax)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	wt, err := plt.WriterTo(panelWidth, panelHeight, "svg")
	if err != nil {
		return "", err
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", err
	}
	svg := buf.String()
	// Inline in the page: from the <svg> element on (no XML prolog).
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:]
	}
	return svg, nil
}

// panelPlot is p's plot, and its phases' and actions' plotter (nil on a
// percentile axis).
func panelPlot(f figure, p panel, ymin, ymax float64) (*plot.Plot, *phaseBands, error) {
	plt := plot.New()
	plt.Title.Text = p.Configuration
	plt.X.Label.Text = "time (s)"
	plt.X.Tick.Marker = plainTicks{}
	xOf := func(x float64) float64 { return x }
	if f.PercentileX {
		plt.X.Label.Text = "percentile"
		plt.X.Scale = plot.LogScale{}
		plt.X.Tick.Marker = percentileTicks{}
		plt.X.Min, plt.X.Max = 1, percentileX(99.995) // room for the 99.99% label
		xOf = percentileX
	}
	plt.Y.Label.Text = f.YLabel
	plt.Y.Min, plt.Y.Max = ymin, ymax
	plt.Y.Tick.Marker = plainTicks{}
	if f.LogY {
		plt.Y.Scale = plot.LogScale{}
		plt.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	plt.Add(plotter.NewGrid())
	var bands *phaseBands
	if !f.PercentileX {
		bands = &phaseBands{spans: p.Phases, marks: p.Actions}
		plt.Add(bands)
	}
	// A stack's bands top first, each over the one above it: the band
	// under each line shows in the stack's order.
	order := make([]int, 0, len(p.Lines))
	for i := len(p.Lines) - 1; i >= 0; i-- {
		if p.Lines[i].Fill {
			order = append(order, i)
		}
	}
	for i, l := range p.Lines {
		if !l.Fill {
			order = append(order, i)
		}
	}
	var marks []plot.Plotter // the clipped points' marks, over every line
	for _, i := range order {
		l := p.Lines[i]
		xys, clipped := linePoints(f, l, xOf)
		if len(clipped) > 0 {
			// A point above the axis's top: on it, marked ▲ in the
			// line's colour.
			sc, err := plotter.NewScatter(clipped)
			if err != nil {
				return nil, nil, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: lineColor(l), Radius: vg.Points(3.5), Shape: draw.TriangleGlyph{}}
			marks = append(marks, sc)
		}
		if len(xys) == 0 {
			continue
		}
		segments := []plotter.XYs{xys}
		if l.Steps {
			segments = nil
			for j := 0; j+1 < len(xys); j += 2 {
				segments = append(segments, xys[j:j+2])
			}
		}
		for _, seg := range segments {
			if err := addLine(plt, l, seg); err != nil {
				return nil, nil, err
			}
		}
	}
	plt.Add(marks...)
	if !f.PercentileX {
		plt.X.Min = 0
		for _, s := range p.Phases {
			plt.X.Max = max(plt.X.Max, s.To)
		}
	}
	return plt, bands, nil
}

// linePoints are l's points on f's axes (x through xOf): a point at or
// under 0 left out on a log scale, one above f.ClipY drawn at it and
// returned in clipped too, to be marked.
func linePoints(f figure, l line, xOf func(float64) float64) (xys, clipped plotter.XYs) {
	xys = make(plotter.XYs, 0, len(l.Points))
	for _, pt := range l.Points {
		if f.LogY && pt[1] <= 0 {
			continue // no point for an empty second on a log scale
		}
		y := pt[1]
		if f.ClipY > 0 && y > f.ClipY {
			y = f.ClipY
			clipped = append(clipped, plotter.XY{X: xOf(pt[0]), Y: y})
		}
		xys = append(xys, plotter.XY{X: xOf(pt[0]), Y: y})
	}
	return xys, clipped
}

// lineColor is the colour of line l.
func lineColor(l line) color.Color { return palette[l.Color%len(palette)] }

// fillColor is the colour of the band under line l: its colour, lighter.
func fillColor(l line) color.Color {
	r, g, b, _ := lineColor(l).RGBA()
	light := func(v uint32) uint8 { return uint8(0xff - (0xff-v>>8)*55/100) }
	return color.RGBA{R: light(r), G: light(g), B: light(b), A: 0xff}
}

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// phaseBands is a plot.Plotter that shades the timeline's phases
// (measured ones darker) with their names along the top, and marks each
// action with a vertical line at its start and its run (start to end)
// shaded, one action's tint apart from the next's, its label beside the
// line. Labels go in rows (labelRows): a name that would overlap the one
// before it in a row goes to the next row, the actions' rows under the
// phases'.
type phaseBands struct {
	spans []span
	marks []mark
	// placed are the labels' boxes as last drawn (for tests).
	placed []vg.Rectangle
}

var _ plot.Plotter = (*phaseBands)(nil)

// labelRow is the height of one row of labels; labelGap the least space
// between two labels in a row; labelSlack the part a label's width is
// taken larger than gonum's font metrics say: a browser without the SVG's
// font draws it in a wider one (Chromium on Debian: about 20% wider).
const (
	labelRow   = vg.Length(9)
	labelGap   = vg.Length(4)
	labelSlack = 1.3
)

func (b *phaseBands) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	sty := draw.TextStyle{Color: color.Gray{Y: 0x40}, Font: plot.DefaultFont, Handler: plt.Title.TextStyle.Handler,
		XAlign: draw.XLeft, YAlign: draw.YTop}
	sty.Font.Size = vg.Points(7)
	b.placed = b.placed[:0]
	var names []labelBox
	for i, s := range b.spans {
		x0, x1 := trX(s.From), trX(s.To)
		if x1 <= x0 {
			continue
		}
		shade := color.Gray{Y: 0xf4}
		if s.Measured {
			shade = color.Gray{Y: 0xe4}
		}
		if i%2 == 1 {
			shade.Y -= 6
		}
		c.FillPolygon(shade, c.ClipPolygonXY([]vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}))
		names = append(names, labelBox{X: x0 + 2, W: sty.Width(s.Name) * labelSlack, Text: s.Name})
	}

	ls := draw.LineStyle{Color: color.RGBA{R: 0x80, A: 0xff}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}}
	asty := sty
	asty.Color = color.RGBA{R: 0x80, A: 0xff}
	tints := []color.NRGBA{{R: 0xd0, G: 0x30, B: 0x30, A: 0x28}, {R: 0xe0, G: 0x90, B: 0x10, A: 0x30}}
	var labels []labelBox
	for i, m := range b.marks {
		x := trX(m.At)
		if x < c.Min.X || x > c.Max.X {
			continue
		}
		if m.Took > 0 {
			// The action's run, shaded from its start to its end.
			x1 := min(trX(m.At+m.Took), c.Max.X)
			c.FillPolygon(tints[i%len(tints)],
				c.ClipPolygonXY([]vg.Point{{X: x, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x, Y: c.Max.Y}}))
		}
		c.StrokeLine2(ls, x, c.Min.Y, x, c.Max.Y)
		labels = append(labels, labelBox{X: x + 2, W: asty.Width(m.Label) * labelSlack, Text: m.Label})
	}
	// The labels over every band and line: the phases' rows, the
	// actions' under them.
	top := b.labels(c, sty, names, c.Max.Y-2)
	b.labels(c, asty, labels, top-2)
}

// labelBox is one label: its left edge and width on the canvas.
type labelBox struct {
	X, W vg.Length
	Text string
}

// labels draws boxes in rows from y down (labelRows), each on a light
// background so that it reads over the lines, a label that would run
// past the canvas's right edge moved left to end there; it returns the
// bottom of its last row (y without labels).
func (b *phaseBands) labels(c draw.Canvas, sty draw.TextStyle, boxes []labelBox, y vg.Length) vg.Length {
	for i := range boxes {
		boxes[i].X = max(min(boxes[i].X, c.Max.X-boxes[i].W-1), c.Min.X)
	}
	rows := labelRows(boxes, labelGap)
	bottom := y
	for i, l := range boxes {
		ty := y - vg.Length(rows[i])*labelRow
		r := vg.Rectangle{Min: vg.Point{X: l.X - 1, Y: ty - labelRow + 1}, Max: vg.Point{X: l.X + l.W + 1, Y: ty}}
		c.FillPolygon(color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xb0},
			[]vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
		c.FillText(sty, vg.Point{X: l.X, Y: ty}, l.Text)
		b.placed = append(b.placed, r)
		bottom = min(bottom, r.Min.Y)
	}
	return bottom
}

// labelRows gives each label the first row in which it starts at least
// gap after the end of the label placed last in that row, labels taken
// from the left (ties in their order): no two labels of a row overlap.
func labelRows(boxes []labelBox, gap vg.Length) []int {
	order := make([]int, len(boxes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(boxes[a].X, boxes[b].X) })
	rows := make([]int, len(boxes))
	var ends []vg.Length // per row, the right edge of its last label
	for _, i := range order {
		r := 0
		for r < len(ends) && boxes[i].X < ends[r]+gap {
			r++
		}
		if r == len(ends) {
			ends = append(ends, 0)
		}
		ends[r] = boxes[i].X + boxes[i].W
		rows[i] = r
	}
	return rows
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("25", not "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// percentileX places percentile p (0..100) on HdrHistogram's percentile
// axis: 1 / (1 - p/100), so that 90, 99, 99.9 and 99.99 are evenly
// spaced on a log scale.
func percentileX(p float64) float64 { return 1 / (1 - p/100) }

// percentileTicks labels the percentile axis at 0, 90, 99, 99.9 and 99.99.
type percentileTicks struct{}

func (percentileTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, p := range []float64{0, 50, 90, 99, 99.9, 99.99} {
		if x := percentileX(p); x >= lo && x <= hi {
			out = append(out, plot.Tick{Value: x, Label: strconv.FormatFloat(p, 'g', -1, 64) + "%"})
		}
	}
	return out
}

// addLine adds line l through xys to plt, in its colour and dash, its
// band filled for a stack.
func addLine(plt *plot.Plot, l line, xys plotter.XYs) error {
	ln, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	ln.Color = lineColor(l)
	if l.Fill {
		ln.FillColor = fillColor(l)
	}
	ln.Width = vg.Points(1.2)
	if l.Dashed {
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		ln.Width = vg.Points(0.8)
	}
	if l.Dotted {
		ln.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		ln.Width = vg.Points(1.6)
	}
	plt.Add(ln)
	return nil
}
