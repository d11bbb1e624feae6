package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/simval"
	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/reports"
)

// realRunReport is a hand-made real run of ci-gate.yaml at seed: the shape
// writeCalibration writes, both configurations, each with the quiet (all)
// lookup and page p99 p99 ms, the achieved rate rate and rejected calls;
// disturbed names a DISTURBED window ("run (naive)", "calibrate (report)").
func realRunReport(seed int64, p99, rate float64, rejected int64, disturbed string) *reports.Report {
	var ps []reports.Percentile
	for _, p := range []float64{0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.99} {
		ps = append(ps, reports.Percentile{P: p, Ms: 0.5 + 1.5*p/100})
	}
	rep := &reports.Report{Scenario: "ci-gate", Seed: seed, Backend: "local single", ScheduleHash: "x",
		Calibrations: []reports.Calibration{{Class: "report", Query: "report", Samples: 20, ServiceMean: 50, ServiceP50: 48, LoadFactor: 3, Pool: 40, PoolName: "naive shared pool", Rate: 2400}}}
	for _, name := range []string{"naive", "isolated"} {
		c := reports.Configuration{Name: name, Stats: reports.RunStats{AchievedRate: rate, Rejected: rejected}}
		for _, class := range []string{"lookup", "page"} {
			c.SoloQuietAll = append(c.SoloQuietAll, reports.TenantRow{Tenant: reports.QuietAll, Class: class, Count: 500, P50: 1.25, P99: 2, Max: 2, Percentiles: ps})
			c.QuietAll = append(c.QuietAll, reports.TenantRow{Tenant: reports.QuietAll, Class: class, Count: 500, P99: p99})
		}
		rep.Configurations = append(rep.Configurations, c)
	}
	if disturbed != "" {
		rep.Machine = &reports.Machine{MaxStallMs: 250, Windows: []reports.WindowLoad{{Window: disturbed, StallMaxMs: 300, StallAtS: 1, Stalls: 1, Disturbed: true}}}
	}
	return rep
}

func writeReport(t *testing.T, dir string, rep *reports.Report) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := reports.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, reports.JSONFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSimulateAgainst compares ci-gate.yaml's simulations with hand-made
// real runs: calibrated on run-1, each other run simulated at its own seed
// (the simulated figures are harness.Simulate's at that seed), the real
// medians and ratios those of the runs not DISTURBED (per configuration),
// the exclusions counted; --check turns a figure outside 25% into exit 99.
func TestSimulateAgainst(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	writeReport(t, filepath.Join(runs, "run-1"), realRunReport(41, 1, 1000, 0, ""))
	writeReport(t, filepath.Join(runs, "run-2"), realRunReport(42, 1, 1000, 0, "run (naive)"))
	writeReport(t, filepath.Join(runs, "run-3"), realRunReport(43, 3, 3000, 0, ""))
	// Out of both configurations' medians: a window of no configuration.
	writeReport(t, filepath.Join(runs, "run-10"), realRunReport(44, 100, 1, 0, "calibrate (report)"))
	out := filepath.Join(dir, "val")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--against", runs, "--cores", "2", "--out", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, want 0 without --check\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(out, simval.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var res simval.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Runs, []string{"run-2", "run-3", "run-10"}) || res.CalibrationSeed != 41 || res.Calibration != filepath.Join(runs, "run-1", reports.JSONFile) {
		t.Fatalf("runs %v, calibration %s seed %d: want run-2, run-3, run-10 calibrated on run-1 (seed 41)", res.Runs, res.Calibration, res.CalibrationSeed)
	}
	// The simulations, each at its run's seed.
	sc, err := scenario.Load("../../scenarios/ci-gate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cal, err := reports.ReadFile(res.Calibration)
	if err != nil {
		t.Fatal(err)
	}
	sim := map[int64]simval.Figures{}
	for _, seed := range []int64{42, 43, 44} {
		rep, err := harness.Simulate(t.Context(), sc.WithSeed(seed), harness.SimulateOptions{Calibration: cal, CalibrationFile: res.Calibration, Cores: 2})
		if err != nil {
			t.Fatal(err)
		}
		sim[seed] = simval.FiguresOf(rep)["isolated"]
	}
	if sim[42].Throughput == sim[43].Throughput && sim[43].Throughput == sim[44].Throughput {
		t.Fatalf("simulations at seeds 42..44 all reach %v/s: the test cannot tell the seeds apart", sim[42].Throughput)
	}
	byName := map[string]simval.Figure{}
	for _, f := range res.Figures {
		byName[f.Configuration+" "+f.Name()] = f
	}
	// isolated: run-2 and run-3 (run-10 is out): real p99 1 and 3 ms → 2,
	// rates 1000 and 3000 → 2000.
	iso := byName["isolated throughput"]
	wantSim := (sim[42].Throughput + sim[43].Throughput) / 2
	if iso.Real.N != 2 || iso.Real.Median != 2000 || iso.Real.Min != 1000 || iso.Real.Max != 3000 || iso.Sim.Median != wantSim ||
		iso.Ratio == nil || *iso.Ratio != wantSim/2000 {
		t.Errorf("isolated throughput %+v, want real median 2000 of 2, simulated %v, ratio %v", iso, wantSim, wantSim/2000)
	}
	for i, s := range iso.Seeds {
		if want := sim[42+int64(i)].Throughput; s.Sim != want {
			t.Errorf("isolated throughput seed %d: simulated %v, want harness.Simulate's %v", s.Seed, s.Sim, want)
		}
	}
	lookup := byName["isolated quiet p99 lookup"]
	if wantSim := (sim[42].QuietP99["lookup"] + sim[43].QuietP99["lookup"]) / 2; lookup.Real.Median != 2 || lookup.Sim.Median != wantSim || *lookup.Ratio != wantSim/2 {
		t.Errorf("isolated lookup p99 %+v, want real 2 ms, simulated %v", lookup, wantSim)
	}
	// naive: run-2's run (naive) is DISTURBED too: run-3 alone.
	if n := byName["naive quiet p99 page"]; n.Real.N != 1 || n.Real.Median != 3 || len(n.Seeds) != 3 || !n.Seeds[0].Excluded || n.Seeds[1].Excluded {
		t.Errorf("naive page p99 %+v, want run-3's 3 ms alone", n)
	}
	if len(res.Excluded) != 3 {
		t.Errorf("excluded %+v, want run-2 naive, run-10 naive and isolated", res.Excluded)
	}
	text := stdout.String()
	for _, want := range []string{
		"SIMULATED vs REAL: ci-gate, 3 runs of " + runs,
		"excluded as DISTURBED (real run and its simulation out of the medians): naive 2 of 3, isolated 1 of 3",
		"run-2 (seed 42) naive: run (naive): noisysim stood still 300 ms",
		"2000.0/s", "1000.0–3000.0/s (2)", "2.00 ms", "1.00–3.00 ms (2)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("stdout lacks %q:\n%s", want, text)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, simval.MarkdownFile))
	if err != nil || !strings.Contains(string(md), "| isolated | throughput | 2000.0/s | 1000.0–3000.0/s (2) |") {
		t.Errorf("validate.md (err %v):\n%s", err, md)
	}

	// The hand-made rates are far from the simulated ones: --check fails.
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--against", runs, "--cores", "2", "--check", "--no-progress"}, &stdout, &stderr); code != exitAssertion ||
		!strings.Contains(stderr.String(), "not within 25% of the real runs'") {
		t.Errorf("--check: exit %d, stderr %q; want 99", code, stderr.String())
	}
	// --calibrate elsewhere: every run of the directory is compared.
	stdout.Reset()
	stderr.Reset()
	calCopy := filepath.Join(dir, "cal.json")
	writeCalibration(t, calCopy, true)
	if code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--against", runs, "--cores", "2", "--calibrate", calCopy, "--no-progress"}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "4 runs of "+runs) {
		t.Errorf("--calibrate elsewhere: exit %d, stderr %q; want 4 runs compared:\n%s", code, stderr.String(), stdout.String())
	}
}

// TestSimulateAgainstBadInput: each is exit 2 naming what is wrong, and an
// existing validation is left as it was.
func TestSimulateAgainstBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeReport(t, filepath.Join(good, "run-1"), realRunReport(41, 1, 1000, 0, ""))
	writeReport(t, filepath.Join(good, "run-2"), realRunReport(42, 1, 1000, 0, ""))
	one := filepath.Join(dir, "one")
	writeReport(t, filepath.Join(one, "run-1"), realRunReport(41, 1, 1000, 0, ""))
	writeReport(t, filepath.Join(one, "notarun"), realRunReport(41, 1, 1000, 0, ""))
	shape := filepath.Join(dir, "shape")
	writeReport(t, filepath.Join(shape, "run-1"), realRunReport(41, 1, 1000, 0, ""))
	other := realRunReport(42, 1, 1000, 0, "")
	other.Calibrations = nil
	writeReport(t, filepath.Join(shape, "run-2"), other)
	simulated := filepath.Join(dir, "simulated")
	writeReport(t, filepath.Join(simulated, "run-1"), realRunReport(41, 1, 1000, 0, ""))
	s := realRunReport(42, 1, 1000, 0, "")
	s.Simulated = &reports.Simulation{Calibration: "x"}
	writeReport(t, filepath.Join(simulated, "run-2"), s)
	named := filepath.Join(dir, "named")
	writeReport(t, filepath.Join(named, "run-1"), realRunReport(41, 1, 1000, 0, ""))
	n := realRunReport(42, 1, 1000, 0, "")
	n.Scenario = "noisy-neighbor"
	writeReport(t, filepath.Join(named, "run-2"), n)
	onlyNaive := filepath.Join(dir, "only")
	writeReport(t, filepath.Join(onlyNaive, "run-1"), realRunReport(41, 1, 1000, 0, ""))
	o := realRunReport(42, 1, 1000, 0, "")
	o.Configurations = o.Configurations[:1]
	writeReport(t, filepath.Join(onlyNaive, "run-2"), o)
	existing := filepath.Join(dir, "existing")
	if err := os.MkdirAll(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(existing, simval.MarkdownFile), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := "../../scenarios/ci-gate.yaml"
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"missing dir":        {[]string{"simulate", sc, "--against", filepath.Join(dir, "nosuch")}, "--against " + filepath.Join(dir, "nosuch") + ": no such file or directory"},
		"one report":         {[]string{"simulate", sc, "--against", one}, "--against " + one + ": 1 run reports (run-N/report.json); want at least 2"},
		"another shape":      {[]string{"simulate", sc, "--against", shape}, "--against " + filepath.Join(shape, "run-2", "report.json") + ": the report (scenario \"ci-gate\") is of another scenario's shape: no service times for class report"},
		"a simulated report": {[]string{"simulate", sc, "--against", simulated}, filepath.Join(simulated, "run-2", "report.json") + " is a simulated report"},
		"another scenario":   {[]string{"simulate", sc, "--against", named}, filepath.Join(named, "run-2", "report.json") + ` is a run of scenario "noisy-neighbor", not "ci-gate"`},
		"a configuration":    {[]string{"simulate", sc, "--against", onlyNaive}, filepath.Join(onlyNaive, "run-2", "report.json") + ` has no configuration "isolated"`},
		"existing out":       {[]string{"simulate", sc, "--against", good, "--out", existing}, filepath.Join(existing, simval.MarkdownFile) + ": file already exists; noisysim does not overwrite it"},
		"check alone":        {[]string{"simulate", sc, "--calibrate", filepath.Join(good, "run-1", "report.json"), "--check"}, "--check needs --against DIR"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %q", name, code, stderr.String(), tc.want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(existing, simval.MarkdownFile)); err != nil || string(data) != "mine" {
		t.Errorf("the existing validate.md changed: %q (err %v)", data, err)
	}
	if _, err := os.Stat(filepath.Join(existing, simval.JSONFile)); !os.IsNotExist(err) {
		t.Errorf("validate.json written beside an existing validate.md")
	}
}

// realSweep writes a ci-gate sweep of classes.lookup.rate 200..300, two
// trials per point, as noisysim sweep --simulate does, calibrated on cal,
// and returns it with its simulated mark removed: a "real" sweep that the
// simulator matches exactly.
func realSweep(t *testing.T, cal string) *sweep.Doc {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sim")
	var stdout, stderr bytes.Buffer
	args := []string{"sweep", "../../scenarios/ci-gate.yaml", "--simulate", "--calibrate", cal, "--vary", "classes.lookup.rate=200..300:2", "--trials", "2", "--out", dir}
	if code := realMain(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("sweep --simulate: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	d, err := sweep.ReadFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Points) != 2 || len(d.Points[1].Trials) != 2 {
		t.Fatalf("sweep: %d points", len(d.Points))
	}
	d.Simulated = ""
	return d
}

func writeSweepDoc(t *testing.T, dir string, d *sweep.Doc) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSimulateAgainstSweep: --against a real sweep's directory re-runs the
// sweep in virtual time at its points and seeds: a sweep the simulator
// matches is every figure within 25% with its DISTURBED trial left out;
// one whose throughput is twice the simulated is outside, and --check
// exits 99; --out writes validate.json and validate.md and never over
// them.
func TestSimulateAgainstSweep(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal", reports.JSONFile)
	writeReport(t, filepath.Dir(cal), realRunReport(41, 1, 1000, 0, ""))
	d := realSweep(t, cal)
	// seed 43 at rate 300: DISTURBED, and absurd: in no median.
	tr := &d.Points[1].Trials[1]
	tr.Disturbed = true
	for i := range tr.Configurations {
		tr.Configurations[i].QuietP99, tr.Configurations[i].Throughput = 1e6, 1e9
	}
	same := writeSweepDoc(t, filepath.Join(dir, "same"), d)
	out := filepath.Join(dir, "val")
	sc := "../../scenarios/ci-gate.yaml"
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"simulate", sc, "--against", same, "--calibrate", cal, "--check", "--out", out}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		"SIMULATED vs REAL SWEEP: ci-gate, the sweep in " + filepath.Join(same, "sweep.json"),
		"--vary classes.lookup.rate=200..300:2", "4 real trials", "configuration naive:", "configuration isolated:",
		"excluded as DISTURBED (real trial and its simulation out of the medians): 1 of 4 real trials", "classes.lookup.rate=300 seed 43",
		"8 of 8 figures within 25%", "written: " + filepath.Join(out, simval.JSONFile),
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "simulated classes.lookup.rate=300 trial 2/2 (seed 43)") {
		t.Errorf("stderr lacks the progress:\n%s", stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(out, simval.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var res simval.SweepResult
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 || res.Figures != 8 || res.Outside != 0 || len(res.Excluded) != 1 || res.CalibrationSeed != 41 {
		t.Fatalf("validate.json: %d rows, %d figures, %d outside, %d excluded, calibration seed %d", len(res.Rows), res.Figures, res.Outside, len(res.Excluded), res.CalibrationSeed)
	}
	for _, r := range res.Rows {
		want := 2
		if r.Values["classes.lookup.rate"] == 300 {
			want = 1
		}
		if r.QuietP99.Real.N != want || *r.QuietP99.Ratio != 1 || *r.Throughput.Ratio != 1 || r.QuietP99.Real.Median == 0 || r.Throughput.Real.Median == 0 {
			t.Errorf("%s at %v: %+v, want ratios 1 over %d trials", r.Configuration, r.Values, r, want)
		}
	}
	if md, err := os.ReadFile(filepath.Join(out, simval.MarkdownFile)); err != nil || !strings.Contains(string(md), "## Configuration isolated") {
		t.Errorf("validate.md (err %v):\n%s", err, md)
	}

	// --out never over a validation: exit 2, the files as they were.
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", sc, "--against", same, "--calibrate", cal, "--out", out}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), filepath.Join(out, simval.JSONFile)+": file already exists; noisysim does not overwrite it") {
		t.Errorf("--out over a validation: exit %d, stderr %q", code, stderr.String())
	}
	if again, err := os.ReadFile(filepath.Join(out, simval.JSONFile)); err != nil || !bytes.Equal(again, data) {
		t.Errorf("validate.json changed (err %v)", err)
	}

	// isolated's real throughput twice the simulated at rate 200: 1 figure
	// outside; --check exits 99.
	for i := range d.Points[0].Trials {
		for j, c := range d.Points[0].Trials[i].Configurations {
			if c.Name == "isolated" {
				d.Points[0].Trials[i].Configurations[j].Throughput *= 2
			}
		}
	}
	off := writeSweepDoc(t, filepath.Join(dir, "off"), d)
	stdout.Reset()
	stderr.Reset()
	code := realMain([]string{"simulate", sc, "--against", off, "--calibrate", cal, "--check", "--no-progress"}, &stdout, &stderr)
	if code != exitAssertion || !strings.Contains(stderr.String(), "1 of 8 figures of the simulated sweep not within 25% of the real sweep's (--check)") {
		t.Errorf("--check: exit %d, stderr %q; want 99", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "0.50x     NO") || !strings.Contains(stdout.String(), "7 of 8 figures within 25%") {
		t.Errorf("stdout lacks the throughput at 0.50x outside:\n%s", stdout.String())
	}
	// --only: the one configuration.
	stdout.Reset()
	if code := realMain([]string{"simulate", sc, "--against", off, "--calibrate", cal, "--only", "naive", "--check", "--no-progress"}, &stdout, &stderr); code != exitOK ||
		strings.Contains(stdout.String(), "configuration isolated") || !strings.Contains(stdout.String(), "4 of 4 figures within 25%") {
		t.Errorf("--only naive: exit %d:\n%s", code, stdout.String())
	}
}

// TestSimulateAgainstSweepBadInput: each is exit 2 naming sweep.json (and
// its field) or what else is wrong, before anything is simulated.
func TestSimulateAgainstSweepBadInput(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal", reports.JSONFile)
	writeReport(t, filepath.Dir(cal), realRunReport(41, 1, 1000, 0, ""))
	good := func() *sweep.Doc {
		d := &sweep.Doc{Version: sweep.Version, Scenario: "ci-gate", File: "../../scenarios/ci-gate.yaml", Trials: 1, Search: "grid", Complete: true,
			Vary: []sweep.VaryDoc{{Spec: "classes.lookup.rate=200..300:2", Key: "classes.lookup.rate", Value: 200, Integer: true}}}
		for _, x := range []float64{200, 300} {
			d.Points = append(d.Points, sweep.Point{Values: map[string]float64{"classes.lookup.rate": x},
				Trials: []sweep.Trial{{Seed: 42, Configurations: []sweep.ConfigTrial{{Name: "naive"}, {Name: "isolated"}}}}})
		}
		return d
	}
	sc := "../../scenarios/ci-gate.yaml"
	cases := map[string]struct {
		edit  func(*sweep.Doc)
		file  string // sweep.json's text instead of the doc
		extra []string
		want  string
	}{
		"no calibration":        {extra: []string{"--calibrate="}, want: "(a sweep) needs --calibrate report.json: a real run's report of " + sc + ", at a seed other than the sweep's trials'"},
		"simulated":             {edit: func(d *sweep.Doc) { d.Simulated = "x.json" }, want: "sweep.json: simulated: a simulated sweep"},
		"another scenario":      {edit: func(d *sweep.Doc) { d.Scenario = "noisy-neighbor" }, want: `sweep.json: scenario: a sweep of scenario "noisy-neighbor", not "ci-gate"`},
		"malformed":             {file: "{\n  \"sweep_version\": 1,\n  oops\n}", want: "sweep.json:3:3: not a sweep: malformed JSON"},
		"a field's type":        {file: `{"sweep_version": "one"}`, want: "sweep.json:1:23: not a sweep: sweep_version: want int, got a JSON string"},
		"another version":       {edit: func(d *sweep.Doc) { d.Version = 7 }, want: "sweep.json: sweep_version 7: want 1"},
		"a knee search":         {edit: func(d *sweep.Doc) { d.Search = "knee" }, want: `sweep.json: search "knee": want a grid sweep`},
		"interrupted":           {edit: func(d *sweep.Doc) { d.Complete = false }, want: "sweep.json: complete: false: the sweep was interrupted"},
		"a trial missing":       {edit: func(d *sweep.Doc) { d.Points[1].Trials = nil }, want: "sweep.json: points[1].trials: 0, want the sweep's 1"},
		"another seed":          {edit: func(d *sweep.Doc) { d.Points[1].Trials[0].Seed = 7 }, want: "sweep.json: points[1].trials[0].seed 7: " + sc + "'s seed 42 puts the 1 trials at seeds 42..42"},
		"a key not in file":     {edit: func(d *sweep.Doc) { d.File = "other.yaml"; d.Vary[0].Spec = "classes.lookup.ratez=1..2" }, want: `sweep.json: vary[0].key "classes.lookup.ratez" is not a numeric key of ` + sc + " (a sweep of another file, other.yaml?)"},
		"a bad spec":            {edit: func(d *sweep.Doc) { d.Vary[0].Spec = "classes.lookup.rate=9..1" }, want: "sweep.json: vary[0].spec: bad sweep input: --vary classes.lookup.rate: HI 1 is below LO 9"},
		"another only":          {edit: func(d *sweep.Doc) { d.Points[0].Only, d.Points[1].Only = "naive", "naive" }, extra: []string{"--only", "isolated"}, want: "--only isolated: the sweep in "},
		"simulated calibration": {edit: func(*sweep.Doc) {}, extra: []string{"--calibrate", filepath.Join(dir, "simcal", reports.JSONFile)}, want: "simcal/report.json: a simulated report"},
	}
	simcal := realRunReport(41, 1, 1000, 0, "")
	simcal.Simulated = &reports.Simulation{Calibration: "x"}
	writeReport(t, filepath.Join(dir, "simcal"), simcal)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sw := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if tc.file != "" {
				if err := os.MkdirAll(sw, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(sw, "sweep.json"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				d := good()
				if tc.edit != nil {
					tc.edit(d)
				}
				writeSweepDoc(t, sw, d)
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"simulate", sc, "--against", sw, "--calibrate", cal}, tc.extra...)
			code := realMain(args, &stdout, &stderr)
			want := tc.want
			if strings.HasPrefix(want, "sweep.json") {
				want = sw + string(filepath.Separator) + want
			}
			if code != exitUsage || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr.String(), want)
			}
			if strings.Contains(stderr.String(), "noisysim: simulated ") {
				t.Errorf("simulated before refusing:\n%s", stderr.String())
			}
		})
	}
	// An unreadable sweep.json (here a directory): exit 2 naming it.
	unreadable := filepath.Join(dir, "unreadable")
	if err := os.MkdirAll(filepath.Join(unreadable, "sweep.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"simulate", sc, "--against", unreadable, "--calibrate", cal}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), filepath.Join(unreadable, "sweep.json")) {
		t.Errorf("unreadable: exit %d, stderr %q", code, stderr.String())
	}
}
