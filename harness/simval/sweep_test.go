package simval

import (
	"bytes"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/sweep"
)

// sweepDoc returns a real sweep of rate over points 10 and 20, three trials
// (seeds 1..3) each, of configuration "c": trial seed s at point x has
// throughput x*s, quiet p99 x+s ms of class lookup and quiet/solo 2.
func sweepDoc() *sweep.Doc {
	d := &sweep.Doc{Version: sweep.Version, Scenario: "s", File: "s.yaml", Trials: 3, Search: "grid", Complete: true,
		Vary: []sweep.VaryDoc{{Spec: "rate=10..20:2", Key: "rate"}}}
	for _, x := range []float64{10, 20} {
		p := sweep.Point{Values: map[string]float64{"rate": x}}
		for s := int64(1); s <= 3; s++ {
			p.Trials = append(p.Trials, sweep.Trial{Seed: s, Configurations: []sweep.ConfigTrial{{Name: "c", QuietClass: "lookup",
				QuietP99: x + float64(s), SoloP99: (x + float64(s)) / 2, QuietOverSolo: 2, Throughput: x * float64(s)}}})
		}
		d.Points = append(d.Points, p)
	}
	return d
}

// simOf returns the simulations of d's trials with each real figure times
// f; page's p99 is far off, and no trial of the real sweep is of page.
func simOf(d *sweep.Doc, f float64) []SweepTrial {
	var out []SweepTrial
	for _, p := range d.Points {
		for _, t := range p.Trials {
			c := t.Configurations[0]
			out = append(out, SweepTrial{Values: p.Values, Seed: t.Seed, Figures: map[string]Figures{"c": {
				QuietP99:   map[string]float64{"lookup": c.QuietP99 * f, "page": 1000},
				SoloP99:    map[string]float64{"lookup": c.SoloP99},
				Throughput: c.Throughput * f}}})
		}
	}
	return out
}

// TestCompareSweep: per point and configuration, medians over the trials
// not DISTURBED (and their simulations), the simulated p99 of each real
// trial's class, the ratio and the 25% verdict; quiet/solo is not judged.
func TestCompareSweep(t *testing.T) {
	d := sweepDoc()
	res, err := CompareSweep(d, simOf(d, 1), "", DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || res.Figures != 4 || res.Outside != 0 || res.Trials != 6 {
		t.Fatalf("sim = real: %d rows, %d figures, %d outside, %d trials; want 2, 4, 0, 6", len(res.Rows), res.Figures, res.Outside, res.Trials)
	}
	r := res.Rows[1]
	if r.Values["rate"] != 20 || r.QuietP99.Real != (Spread{Median: 22, Min: 21, Max: 23, N: 3}) || r.QuietP99.Sim != r.QuietP99.Real ||
		*r.QuietP99.Ratio != 1 || !r.QuietP99.Within || r.Throughput.Real.Median != 40 || *r.QuietOverSolo.Ratio != 1 {
		t.Errorf("row at 20: %+v", r)
	}

	// Off by 1.3x: every figure outside; a DISTURBED trial is in no median.
	d.Points[1].Trials[2].Disturbed = true
	d.Points[1].Trials[2].Configurations[0].Throughput = 1e9
	sims := simOf(d, 1.3)
	res, err = CompareSweep(d, sims, "", DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outside != 4 || len(res.Excluded) != 1 || res.Excluded[0].Seed != 3 || res.Excluded[0].Values["rate"] != 20 {
		t.Errorf("off by 1.3x: outside %d, excluded %+v; want 4, seed 3 at 20", res.Outside, res.Excluded)
	}
	r = res.Rows[1]
	if r.Trials != 3 || r.Excluded != 1 || r.Throughput.Real != (Spread{Median: 30, Min: 20, Max: 40, N: 2}) || r.Throughput.Sim.Median != 39 ||
		*r.Throughput.Ratio != 1.3 || r.Throughput.Within {
		t.Errorf("row at 20 with seed 3 DISTURBED: %+v", r)
	}
	// quiet/solo is informational: sim 2.6 against 2, not counted.
	if q := r.QuietOverSolo; q.Real.Median != 2 || q.Sim.Median != 2.6 {
		t.Errorf("quiet/solo %+v", q)
	}
	var text bytes.Buffer
	if err := WriteSweepText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"configuration c:", "rate  trials  quiet class", "20    2 of 3  lookup", "1.30x", "NO",
		"excluded as DISTURBED (real trial and its simulation out of the medians): 1 of 6 real trials", "  rate=20 seed 3",
		"0 of 4 figures within 25%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	// 1.2x is within.
	res, _ = CompareSweep(d, simOf(d, 1.2), "", DefaultTolerance)
	if res.Outside != 0 {
		t.Errorf("1.2x: %d outside, want 0", res.Outside)
	}

	// A real trial with no simulation, a simulation without the
	// configuration: errors naming the trial.
	if _, err := CompareSweep(d, sims[:5], "", DefaultTolerance); err == nil || !strings.Contains(err.Error(), "points[1].trials[2] (rate=20, seed 3)") {
		t.Errorf("a trial not simulated: %v", err)
	}
	sims[0].Figures = map[string]Figures{"other": {}}
	if _, err := CompareSweep(d, sims, "", DefaultTolerance); err == nil || !strings.Contains(err.Error(), `points[0].trials[0] (rate=10, seed 1): the simulation has no configuration "c"`) {
		t.Errorf("a configuration not simulated: %v", err)
	}
}
