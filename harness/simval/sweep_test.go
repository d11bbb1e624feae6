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
	if all := (Tally{Judged: 2, Within: 2}); len(res.Rows) != 2 || res.QuietP99 != all || res.Throughput != all || res.Trials != 6 {
		t.Fatalf("sim = real: %d rows, quiet p99 %+v, throughput %+v, %d trials; want 2 rows, 2 of 2 within each, 6 trials", len(res.Rows), res.QuietP99, res.Throughput, res.Trials)
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
	if res.QuietP99.Outside() != 2 || res.Throughput.Outside() != 2 || len(res.Excluded) != 1 || res.Excluded[0].Seed != 3 || res.Excluded[0].Values["rate"] != 20 {
		t.Errorf("off by 1.3x: quiet p99 %+v, throughput %+v, excluded %+v; want 2 outside each, seed 3 at 20", res.QuietP99, res.Throughput, res.Excluded)
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
		"quiet p99: 0 of 2 within 25%", "throughput: 0 of 2 within 25%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	// 1.2x is within.
	res, _ = CompareSweep(d, simOf(d, 1.2), "", DefaultTolerance)
	if res.Outside() != 0 {
		t.Errorf("1.2x: %d outside, want 0", res.Outside())
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

// TestCompareSweepCounts: the quiet p99 and the throughput are counted
// apart (an open loop's throughput matches by construction and must not
// carry a quiet p99 that misses), and a point whose every real trial is
// DISTURBED is unjudged: listed, in neither count.
func TestCompareSweepCounts(t *testing.T) {
	d := sweepDoc()
	// The throughput as real, the quiet p99 twice it.
	sims := simOf(d, 1)
	for i := range sims {
		f := sims[i].Figures["c"]
		f.QuietP99 = map[string]float64{"lookup": 2 * f.QuietP99["lookup"]}
		sims[i].Figures["c"] = f
	}
	res, err := CompareSweep(d, sims, "", DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	if res.QuietP99 != (Tally{Judged: 2, Within: 0}) || res.Throughput != (Tally{Judged: 2, Within: 2}) {
		t.Errorf("quiet p99 %+v, throughput %+v; want 0 of 2 and 2 of 2 within", res.QuietP99, res.Throughput)
	}
	var text bytes.Buffer
	if err := WriteSweepText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quiet p99: 0 of 2 within 25%", "throughput: 2 of 2 within 25%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "figures within") {
		t.Errorf("text still counts quiet p99 and throughput together:\n%s", text.String())
	}

	// Every trial at 20 DISTURBED: that row is unjudged, not outside.
	for j := range d.Points[1].Trials {
		d.Points[1].Trials[j].Disturbed = true
	}
	res, err = CompareSweep(d, simOf(d, 1.3), "", DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Tally{Judged: 1, Unjudged: 1}); res.QuietP99 != want || res.Throughput != want || res.Outside() != 2 {
		t.Errorf("at 20 all DISTURBED: quiet p99 %+v, throughput %+v, outside %d; want %+v each, 2 outside", res.QuietP99, res.Throughput, res.Outside(), want)
	}
	text.Reset()
	if err := WriteSweepText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quiet p99: 0 of 1 within 25%", "unjudged (no undisturbed trial)",
		"unjudged (every real trial DISTURBED; in neither count): 1 of 2 points and configurations\n  c rate=20\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var md bytes.Buffer
	if err := WriteSweepMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "\nquiet p99: 0 of 1 within 25%") || !strings.Contains(md.String(), "- c rate=20\n") {
		t.Errorf("markdown lacks the counts or the unjudged list:\n%s", md.String())
	}
}

// TestCompareSweepErrors: a trial is named "points[i].trials[j] (values,
// seed S)", or "(seed S)" at a point without values; a simulation without
// the real trial's quiet class is an error, not a 0 ms figure.
func TestCompareSweepErrors(t *testing.T) {
	d := sweepDoc()
	sims := simOf(d, 1)
	sims[0].Figures["c"] = Figures{QuietP99: map[string]float64{"page": 1}, Throughput: 10}
	if _, err := CompareSweep(d, sims, "", DefaultTolerance); err == nil ||
		!strings.Contains(err.Error(), `points[0].trials[0].configurations[0].quiet_class "lookup" (rate=10, seed 1): the simulation has no quiet p99 of that class`) {
		t.Errorf("a simulation without the quiet class: %v", err)
	}
	d.Points = d.Points[:1]
	d.Points[0].Values = nil
	_, err := CompareSweep(d, nil, "", DefaultTolerance)
	if err == nil || !strings.Contains(err.Error(), "points[0].trials[0] (seed 1): ") {
		t.Errorf("a point without values: %v", err)
	}
}

// TestCompareSweepQuietUnjudged: a real trial whose quiet figure quiet_p99
// did not judge (quiet_unjudged) is left out of the quiet p99 medians and
// count with its simulation, as a DISTURBED one, but its throughput is
// compared; the table, the list and the count say so, and a row with no
// judged quiet figure is unjudged for the quiet p99 alone.
func TestCompareSweepQuietUnjudged(t *testing.T) {
	d := sweepDoc()
	// Seed 3 at 10: unjudged and far off; the simulation as the others.
	d.Points[0].Trials[2].Configurations[0].QuietUnjudged = true
	sims := simOf(d, 1)
	d.Points[0].Trials[2].Configurations[0].QuietP99 = 1000
	res, err := CompareSweep(d, sims, "", DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rows[0]
	if r.QuietUnjudged != 1 || r.QuietP99.Real != (Spread{Median: 11.5, Min: 11, Max: 12, N: 2}) || r.QuietP99.Sim.N != 2 || !r.QuietP99.Within ||
		r.Throughput.Real.N != 3 || r.QuietOverSolo.Real.N != 2 {
		t.Errorf("row at 10 with seed 3 unjudged: %+v", r)
	}
	if want := (Tally{Judged: 2, Within: 2}); res.QuietP99 != want || res.Throughput != want {
		t.Errorf("quiet p99 %+v, throughput %+v; want %+v each", res.QuietP99, res.Throughput, want)
	}
	if len(res.QuietUnjudged) != 1 || res.QuietUnjudged[0].Seed != 3 || res.QuietUnjudged[0].Values["rate"] != 10 || res.QuietUnjudged[0].Configuration != "c" {
		t.Errorf("quiet_unjudged %+v, want c rate=10 seed 3", res.QuietUnjudged)
	}
	var text bytes.Buffer
	if err := WriteSweepText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"yes (1 unjudged left out)", "quiet figure unjudged (quiet_p99 judged no class", ": 1 real trials and configurations\n  c rate=10 seed 3\n",
		"quiet p99: 2 of 2 within 25% (per point and configuration; 1 real quiet figures unjudged by quiet_p99 left out)", "throughput: 2 of 2 within 25%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	// Every trial at 20 unjudged too: that row's quiet p99 is unjudged, in
	// neither quiet p99 count, its throughput still judged.
	for j := range d.Points[1].Trials {
		d.Points[1].Trials[j].Configurations[0].QuietUnjudged = true
	}
	res, err = CompareSweep(d, sims, "", DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	if res.QuietP99 != (Tally{Judged: 1, Within: 1, Unjudged: 1}) || res.Throughput != (Tally{Judged: 2, Within: 2}) || len(res.QuietUnjudged) != 4 {
		t.Errorf("at 20 all unjudged: quiet p99 %+v, throughput %+v, %d quiet_unjudged", res.QuietP99, res.Throughput, len(res.QuietUnjudged))
	}
	var md bytes.Buffer
	if err := WriteSweepMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| unjudged (quiet_p99 judged no class) |", "4 real quiet figures unjudged by quiet_p99 left out",
		"quiet p99 unjudged (every real quiet figure not DISTURBED unjudged by quiet_p99; not in the quiet p99 count): 1 of 2 points and configurations\n- c rate=20\n",
		"- c rate=20 seed 2\n"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "every real trial DISTURBED") {
		t.Errorf("markdown calls the unjudged row DISTURBED:\n%s", md.String())
	}
}

// TestSweepAddCalibration: the calibration runs at a point of the sweep
// set their own real quiet p99 beside that point's (DISTURBED or unjudged
// runs left out); a row outside the tolerance whose real groups lie as far
// apart is named; calibration runs at no point of the sweep are said so.
func TestSweepAddCalibration(t *testing.T) {
	d := sweepDoc() // real quiet p99 at 20: 21, 22, 23 (median 22)
	res, err := CompareSweep(d, simOf(d, 1.4), "", DefaultTolerance)
	if err != nil {
		t.Fatal(err)
	}
	run := func(rate, p99 float64, disturbed, unjudged bool) CalibrationTrial {
		return CalibrationTrial{Values: map[string]float64{"rate": rate}, Trial: sweep.Trial{Disturbed: disturbed,
			Configurations: []sweep.ConfigTrial{{Name: "c", QuietClass: "lookup", QuietP99: p99, QuietUnjudged: unjudged}}}}
	}
	res.AddCalibration([]CalibrationTrial{
		run(20.000000000001, 30, false, false), run(20, 31, false, false), run(20, 1000, true, false), run(20, 2000, false, true),
	})
	if res.Rows[0].Calibration != nil {
		t.Errorf("row at 10: calibration %+v; want none (the runs ran at 20)", *res.Rows[0].Calibration)
	}
	r := res.Rows[1]
	if r.Calibration == nil || *r.Calibration != (Spread{Median: 30.5, Min: 30, Max: 31, N: 2}) || r.CalibrationRatio == nil || *r.CalibrationRatio != 30.5/22 {
		t.Fatalf("row at 20: calibration %v ratio %v; want median 30.5 of 2 runs, ratio %v", r.Calibration, r.CalibrationRatio, 30.5/22)
	}
	var b bytes.Buffer
	if err := WriteSweepText(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"calibration runs' own real quiet p99 at their point", "30.50 ms", "1.39x",
		"not within 25% between the real runs themselves either: c rate=20 (simulated 1.40x, calibration runs 1.39x the real median)"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteSweepMarkdown(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| c | rate=20 | 30.50 ms |") {
		t.Errorf("markdown lacks the calibration row:\n%s", b.String())
	}

	// Calibration runs as close as the simulation's target: nothing named.
	res, _ = CompareSweep(d, simOf(d, 1.4), "", DefaultTolerance)
	res.AddCalibration([]CalibrationTrial{run(20, 22, false, false)})
	b.Reset()
	WriteSweepText(&b, res)
	if strings.Contains(b.String(), "themselves either") {
		t.Errorf("calibration at the real median: a row named as apart:\n%s", b.String())
	}

	// Runs at two points: each set beside its own, the title says so.
	res, _ = CompareSweep(d, simOf(d, 1), "", DefaultTolerance)
	res.AddCalibration([]CalibrationTrial{run(10, 11, false, false), run(20, 22, false, false)})
	b.Reset()
	WriteSweepText(&b, res)
	if !strings.Contains(b.String(), "own real quiet p99 at each one's point against") || res.Rows[0].Calibration == nil || res.Rows[1].Calibration == nil ||
		res.Rows[0].Calibration.Median != 11 || res.Rows[1].Calibration.Median != 22 {
		t.Errorf("calibration at 10 and 20: rows %v, %v:\n%s", res.Rows[0].Calibration, res.Rows[1].Calibration, b.String())
	}

	// At no point of the sweep.
	res, _ = CompareSweep(d, simOf(d, 1), "", DefaultTolerance)
	res.AddCalibration([]CalibrationTrial{run(15, 22, false, false)})
	b.Reset()
	WriteSweepText(&b, res)
	if !strings.Contains(b.String(), "the calibration runs ran at rate=15, not a point of this sweep") {
		t.Errorf("calibration at 15: %s", b.String())
	}
	// At a point of the sweep, but every run DISTURBED or unjudged.
	res, _ = CompareSweep(d, simOf(d, 1), "", DefaultTolerance)
	res.AddCalibration([]CalibrationTrial{run(20, 22, true, false), run(20, 22, false, true)})
	b.Reset()
	WriteSweepText(&b, res)
	if !strings.Contains(b.String(), "the calibration runs at rate=20 have no quiet figure to set beside the sweep's") || strings.Contains(b.String(), "not a point") {
		t.Errorf("calibration at 20, none usable: %s", b.String())
	}
}
