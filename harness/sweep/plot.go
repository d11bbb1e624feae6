package sweep

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"

	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// HTMLFile is the page noisysim sweep --out writes beside sweep.json.
const HTMLFile = "sweep.html"

// Curve is one line of the sweep plot: a configuration's quiet p99 / solo
// p99 (the median over the trials, with their min and max) at each value
// of the first varied key, the other keys at Others.
type Curve struct {
	Configuration string `json:"configuration"`
	// Others are the other varied keys' values, "key=value" (grid sweeps
	// of several keys); empty with one key.
	Others string       `json:"others,omitempty"`
	Points []CurvePoint `json:"points"`
}

// CurvePoint is one point of a Curve.
type CurvePoint struct {
	X float64 `json:"x"`
	// Median, Min and Max are quiet p99 / solo p99 over the trials.
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Held is true when every trial held the configuration's assertions.
	Held bool `json:"held"`
	// Unjudged is true when quiet_p99 judged no class in a trial of the
	// point (ConfigSummary.QuietUnjudged): the ratio is of a class no
	// verdict rests on.
	Unjudged bool `json:"unjudged,omitempty"`
}

// Curves returns the sweep plot's data: one Curve per configuration (and
// combination of the other keys' values), its points in x order. A point
// whose trials have no quiet p99 / solo p99 (no solo phase) is left out.
func Curves(d *Doc) []Curve {
	if len(d.Vary) == 0 {
		return nil
	}
	x := d.Vary[0].Key
	byKey := map[[2]string]*Curve{}
	var order [][2]string
	for _, p := range d.Points {
		var others []string
		for _, v := range d.Vary[1:] {
			others = append(others, v.Key+"="+strconv.FormatFloat(p.Values[v.Key], 'g', -1, 64))
		}
		for _, s := range p.Summary {
			if p.Only != "" && s.Name != p.Only || s.QuietOverSolo.N == 0 {
				continue
			}
			k := [2]string{s.Name, strings.Join(others, " ")}
			c, ok := byKey[k]
			if !ok {
				c = &Curve{Configuration: s.Name, Others: k[1]}
				byKey[k] = c
				order = append(order, k)
			}
			pt := CurvePoint{X: p.Values[x], Median: s.QuietOverSolo.Median, Min: s.QuietOverSolo.Min, Max: s.QuietOverSolo.Max,
				Held: s.Held == s.Trials, Unjudged: s.QuietUnjudged > 0}
			i, found := slices.BinarySearchFunc(c.Points, pt.X, func(a CurvePoint, x float64) int {
				return cmpFloat(a.X, x)
			})
			if found {
				c.Points[i] = pt // a knee search probing a value twice
			} else {
				c.Points = slices.Insert(c.Points, i, pt)
			}
		}
	}
	out := make([]Curve, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// errPoints is a Curve's points for gonum's error bars.
type errPoints []CurvePoint

func (e errPoints) Len() int                    { return len(e) }
func (e errPoints) XY(i int) (float64, float64) { return e[i].X, e[i].Median }
func (e errPoints) YError(i int) (float64, float64) {
	return e[i].Median - e[i].Min, e[i].Max - e[i].Median
}

var _ plotter.YErrorer = errPoints(nil)

// PlotSVG draws the sweep as an SVG document with gonum/plot: quiet p99 /
// solo p99 against the first varied key, a line per Curve with its trials'
// min–max as error bars, a filled dot where every trial held and a cross
// where one did not, a hollow square around a point whose quiet figure
// quiet_p99 did not judge (CurvePoint.Unjudged), and each configuration's
// knee as a dashed vertical line. The x axis is logarithmic when the key spans a factor of 100 or more.
// It returns an error when no point has the ratio (no solo phase).
func PlotSVG(d *Doc) (string, error) {
	curves := Curves(d)
	if len(curves) == 0 {
		return "", fmt.Errorf("plot sweep: no point has a quiet p99 / solo p99 (the scenario needs a solo phase)")
	}
	plt := plot.New()
	plt.Title.Text = fmt.Sprintf("%s: quiet p99 / solo p99 against %s", d.Scenario, d.Vary[0].Key)
	plt.X.Label.Text = d.Vary[0].Key
	plt.Y.Label.Text = "quiet p99 / solo p99"
	plt.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, c := range curves {
		for _, p := range c.Points {
			lo, hi = min(lo, p.X), max(hi, p.X)
			ylo, yhi = min(ylo, p.Min), max(yhi, p.Max)
		}
	}
	if lo > 0 && hi/lo >= 100 {
		plt.X.Scale = plot.LogScale{}
		plt.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	names := map[string]int{}
	for _, c := range curves {
		if _, ok := names[c.Configuration]; !ok {
			names[c.Configuration] = len(names)
		}
	}
	var unjudged plot.Thumbnailer
	for i, c := range curves {
		col := plotutil.Color(names[c.Configuration])
		pts := errPoints(c.Points)
		ln, err := plotter.NewLine(pts)
		if err != nil {
			return "", err
		}
		ln.Color = col
		ln.Width = vg.Points(1.4)
		if c.Others != "" {
			ln.Dashes = plotutil.Dashes(i)
		}
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return "", err
		}
		bars.Color = col
		var held, failed, unj plotter.XYs
		for _, p := range c.Points {
			if p.Unjudged {
				unj = append(unj, plotter.XY{X: p.X, Y: p.Median})
			}
			if p.Held {
				held = append(held, plotter.XY{X: p.X, Y: p.Median})
			} else {
				failed = append(failed, plotter.XY{X: p.X, Y: p.Median})
			}
		}
		plt.Add(ln, bars)
		label := c.Configuration
		if c.Others != "" {
			label += " (" + c.Others + ")"
		}
		plt.Legend.Add(label, ln)
		for _, set := range []struct {
			xys    plotter.XYs
			shape  draw.GlyphDrawer
			radius float64
		}{{held, draw.CircleGlyph{}, 4}, {failed, draw.CrossGlyph{}, 4}, {unj, draw.SquareGlyph{}, 7}} {
			if len(set.xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(set.xys)
			if err != nil {
				return "", err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(set.radius), Shape: set.shape}
			plt.Add(sc)
			if set.radius == 7 && unjudged == nil {
				unjudged = sc
			}
		}
	}
	if unjudged != nil {
		plt.Legend.Add("square: quiet p99 unjudged (quiet_p99 judged no class)", unjudged)
	}
	if math.IsInf(ylo, 0) {
		ylo, yhi = 0, 1
	}
	ylo, yhi = min(ylo, 1)*0.9, yhi*1.1
	plt.Y.Min, plt.Y.Max = ylo, yhi
	for _, k := range d.Knees {
		if !k.Found {
			continue
		}
		i, ok := names[k.Configuration]
		if !ok {
			continue
		}
		kl, err := plotter.NewLine(plotter.XYs{{X: k.Knee, Y: ylo}, {X: k.Knee, Y: yhi}})
		if err != nil {
			return "", err
		}
		kl.Color = plotutil.Color(i)
		kl.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		kl.Width = vg.Points(1)
		plt.Add(kl)
		what := "knee"
		if k.AboveRange {
			what = "held to the top"
		}
		plt.Legend.Add(fmt.Sprintf("%s of %s: %s", what, k.Configuration, strconv.FormatFloat(k.Knee, 'g', 4, 64)), kl)
	}
	plt.Legend.Top, plt.Legend.Left = true, true
	plt.Legend.XOffs = vg.Points(10)
	var buf bytes.Buffer
	wt, err := plt.WriterTo(8*vg.Inch, 4.5*vg.Inch, "svg")
	if err != nil {
		return "", fmt.Errorf("plot sweep: %w", err)
	}
	if _, err := wt.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("plot sweep: %w", err)
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:]
	}
	return svg, nil
}

//go:embed sweep.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New(HTMLFile).Parse(htmlSource))

// WriteHTML writes the sweep as one self-contained page (sweep.html): the
// plot (PlotSVG), the knees in words and the table of points. A sweep
// without the ratio gets the page without the plot, saying why.
func WriteHTML(w io.Writer, d *Doc) error {
	page := struct {
		D       *Doc
		SVG     template.HTML
		NoPlot  string
		Knees   []string
		Columns []string
		Rows    [][]string
		Specs   string
		// Unjudged is UnjudgedNote when a row carries the mark.
		Unjudged string
	}{D: d, Specs: strings.Join(d.specs(), ", ")}
	if anyUnjudged(d) {
		page.Unjudged = UnjudgedNote
	}
	svg, err := PlotSVG(d)
	if err != nil {
		page.NoPlot = err.Error()
	}
	page.SVG = template.HTML(svg)
	for _, k := range d.Knees {
		page.Knees = append(page.Knees, KneeSentence(k))
	}
	page.Columns = columns
	page.Rows = rows(d)
	if err := htmlTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("write sweep html: %w", err)
	}
	return nil
}
