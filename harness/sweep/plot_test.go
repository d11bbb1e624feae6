package sweep_test

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/sweep"
)

// kneeDoc is a knee search of isolated over classes.report.rate: probes at
// 6 and 17 held, at 48 and 28 not (in probe order), knee 17.
func kneeDoc() *sweep.Doc {
	d := &sweep.Doc{Version: sweep.Version, Scenario: "capacity", File: "c.yaml", Trials: 2, Search: "knee", Complete: true,
		Vary: []sweep.VaryDoc{{Spec: "classes.report.rate=6..48", Key: "classes.report.rate", Value: 12}}}
	for _, p := range []struct {
		x, med, lo, hi float64
		held           int
	}{{6, 1.1, 1.0, 1.2, 2}, {48, 9, 7, 12, 0}, {17, 1.4, 1.3, 1.6, 2}, {28, 3.5, 1.4, 5, 1}} {
		d.Points = append(d.Points, sweep.Point{Values: map[string]float64{"classes.report.rate": p.x}, Only: "isolated",
			Summary: []sweep.ConfigSummary{{Name: "isolated", Held: p.held, Trials: 2,
				QuietOverSolo: sweep.Spread{Median: p.med, Min: p.lo, Max: p.hi, N: 2}}}})
	}
	d.Knees = []sweep.Knee{{Configuration: "isolated", Key: "classes.report.rate", Baseline: 12, Lo: 6, Hi: 48, Found: true,
		Knee: 17, KneePasses: 2, FailAt: 28, FailPasses: 1, Trials: 2, Headroom: 17.0 / 12}}
	return d
}

// TestCurves pins the data behind the sweep plot: the probes in x order,
// each with its ratio's spread and whether every trial held.
func TestCurves(t *testing.T) {
	got := sweep.Curves(kneeDoc())
	want := []sweep.Curve{{Configuration: "isolated", Points: []sweep.CurvePoint{
		{X: 6, Median: 1.1, Min: 1.0, Max: 1.2, Held: true},
		{X: 17, Median: 1.4, Min: 1.3, Max: 1.6, Held: true},
		{X: 28, Median: 3.5, Min: 1.4, Max: 5, Held: false},
		{X: 48, Median: 9, Min: 7, Max: 12, Held: false},
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Curves =\n%+v\nwant\n%+v", got, want)
	}
	// A grid of two keys: one curve per configuration and value of the
	// second key.
	d := &sweep.Doc{Vary: []sweep.VaryDoc{{Key: "a"}, {Key: "b"}}}
	for _, v := range [][2]float64{{1, 10}, {1, 20}, {2, 10}, {2, 20}} {
		d.Points = append(d.Points, sweep.Point{Values: map[string]float64{"a": v[0], "b": v[1]},
			Summary: []sweep.ConfigSummary{{Name: "naive", QuietOverSolo: sweep.Spread{Median: v[0], N: 1}},
				{Name: "isolated", QuietOverSolo: sweep.Spread{Median: v[1], N: 1}}}})
	}
	var names []string
	for _, c := range sweep.Curves(d) {
		names = append(names, c.Configuration+" "+c.Others)
		if len(c.Points) != 2 {
			t.Errorf("curve %s %s: %d points, want 2", c.Configuration, c.Others, len(c.Points))
		}
	}
	if strings.Join(names, ",") != "naive b=10,isolated b=10,naive b=20,isolated b=20" {
		t.Errorf("curves %q", names)
	}
}

// TestWriteHTML: sweep.html holds the plot (a drawn line, the knee in the
// legend, a cross for the failed probes), the knee sentence and the
// points, and refers to nothing outside itself; a sweep without a solo
// phase says why it has no plot.
func TestWriteHTML(t *testing.T) {
	var b strings.Builder
	if err := sweep.WriteHTML(&b, kneeDoc()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, "<svg"); n != 1 {
		t.Errorf("%d svg elements, want 1", n)
	}
	if !regexp.MustCompile(`<path d="M[^"Z]*(?:L[^"Z]*){3,}"`).MatchString(page) {
		t.Errorf("no line through the 4 probes")
	}
	for _, s := range []string{"knee of isolated: 17", "isolated holds classes.report.rate to 17", "quiet p99 / solo p99", `id="points"`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	for _, s := range []string{"src=", "href=", "url(", "<script"} {
		if strings.Contains(page, s) {
			t.Errorf("page refers to something outside itself: %q", s)
		}
	}
	d := kneeDoc()
	for i := range d.Points {
		d.Points[i].Summary[0].QuietOverSolo = sweep.Spread{}
	}
	b.Reset()
	if err := sweep.WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<svg") || !strings.Contains(b.String(), "needs a solo phase") {
		t.Errorf("a sweep without ratios: want no plot and the reason")
	}
}
