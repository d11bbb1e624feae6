package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
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
	rep := &reports.Report{Scenario: "ci-gate", Seed: seed, Backend: "local single", ScheduleHash: "x", Passed: true,
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
	res := readValidation[simval.Result](t, out)
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
		"excluded as DISTURBED or incomplete (real run and its simulation out of the medians): naive 2 of 3, isolated 1 of 3",
		"run-2 (seed 42) naive: run (naive): noisysim stood still 300 ms",
		"2000.0/s", "1000.0–3000.0/s (2)", "2.00 ms", "1.00–3.00 ms (2)",
		"\nsimulated report: the model draws ",
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
	// A calibration on other data: said on the terminal and in
	// validate.json, as a sweep's validation says it.
	otherCal := calibrationOnMoreOrders(t, dir, "other", 40, "")
	stdout.Reset()
	stderr.Reset()
	// --out the calibration's own directory: validate.json and
	// validate.md go beside its report, which stays as it was.
	out2 := filepath.Dir(otherCal)
	calBefore, err := os.ReadFile(otherCal)
	if err != nil {
		t.Fatal(err)
	}
	note := "note: calibration " + otherCal + ": measured on other data than ci-gate simulates: data.orders 5000000 (simulated: 100000)"
	if code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--against", runs, "--cores", "2", "--calibrate", otherCal, "--no-progress", "--out", out2}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), note) {
		t.Errorf("a calibration on other data: exit %d, stderr %q; want %q:\n%s", code, stderr.String(), note, stdout.String())
	}
	if data, err := os.ReadFile(filepath.Join(out2, simval.JSONFile)); err != nil || !strings.Contains(string(data), `"calibration_notes": [`) || !strings.Contains(string(data), "data.orders 5000000") {
		t.Errorf("validate.json lacks the calibration note (err %v):\n%s", err, data)
	}
	if calAfter, err := os.ReadFile(otherCal); err != nil || !bytes.Equal(calAfter, calBefore) {
		t.Errorf("the calibration's report.json beside --out's validation changed (err %v)", err)
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
	writeReport(t, filepath.Join(dir, "series", "run-1"), realRunReport(41, 1, 1000, 0, ""))
	writeReport(t, filepath.Join(dir, "series", "run-2"), realRunReport(42, 1, 1000, 0, ""))
	writeReport(t, filepath.Join(dir, "series2", "run-1"), realRunReport(42, 1, 1000, 0, ""))
	link := func(target, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	// gathered links the series' two runs as run-1 and run-2 and third
	// as run-3 into a directory of its own.
	gathered := func(name, third string) string {
		d := filepath.Join(dir, name)
		link("../series/run-1", filepath.Join(d, "run-1"))
		link("../series/run-2", filepath.Join(d, "run-2"))
		link(third, filepath.Join(d, "run-3"))
		return d
	}
	twice := gathered("twice", "../series/run-2")          // one run linked twice
	seedTwice := gathered("seedtwice", "../series2/run-1") // two runs of one seed
	broken := gathered("broken", "../series/run-9")
	loop := gathered("loop", "run-3")
	norun := gathered("norun", "..")
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
		"one report":         {[]string{"simulate", sc, "--against", one}, "--against " + one + ": 1 run reports (run-N/report.json) and no sweep.json; want at least 2 runs (noisysim run SCENARIO --repeat N --out " + one + " writes them) or a real sweep (noisysim sweep SCENARIO --vary KEY=LO..HI --out " + one + " writes sweep.json)"},
		"another shape":      {[]string{"simulate", sc, "--against", shape}, "--against " + filepath.Join(shape, "run-2", "report.json") + ": the report (scenario \"ci-gate\") is of another scenario's shape: no service times for class report"},
		"a simulated report": {[]string{"simulate", sc, "--against", simulated}, filepath.Join(simulated, "run-2", "report.json") + " is a simulated report"},
		"another scenario":   {[]string{"simulate", sc, "--against", named}, filepath.Join(named, "run-2", "report.json") + ` is a run of scenario "noisy-neighbor", not "ci-gate"`},
		"a configuration":    {[]string{"simulate", sc, "--against", onlyNaive}, filepath.Join(onlyNaive, "run-2", "report.json") + ` has no configuration "isolated"`},
		"one run twice":      {[]string{"simulate", sc, "--against", twice}, filepath.Join(twice, "run-3", "report.json") + " is " + filepath.Join(twice, "run-2", "report.json") + " again (two links to one run): give each run once"},
		"a seed twice":       {[]string{"simulate", sc, "--against", seedTwice}, filepath.Join(seedTwice, "run-3", "report.json") + ": seed 42 again (" + filepath.Join(seedTwice, "run-2", "report.json") + " is of it too)"},
		"a broken link":      {[]string{"simulate", sc, "--against", broken}, "--against " + broken + ": " + filepath.Join(broken, "run-3") + ": a link that leads to no run directory: no such file or directory"},
		"a link loop":        {[]string{"simulate", sc, "--against", loop}, "--against " + loop + ": " + filepath.Join(loop, "run-3") + ": a link that leads to no run directory: too many levels of symbolic links"},
		"a link to no run":   {[]string{"simulate", sc, "--against", norun}, "--against " + norun + ": " + filepath.Join(norun, "run-3") + ": a link to .., not a run's directory (no report.json in it)"},
		"existing out":       {[]string{"simulate", sc, "--against", good, "--out", existing}, filepath.Join(existing, simval.MarkdownFile) + ": file already exists; noisysim does not overwrite it"},
		"check alone":        {[]string{"simulate", sc, "--calibrate", filepath.Join(good, "run-1", "report.json"), "--check"}, "--check needs --against DIR (noisysim run --repeat N --out DIR's runs, or noisysim sweep --out DIR's sweep)"},
		"empty against":      {[]string{"simulate", sc, "--against", "", "--calibrate", filepath.Join(good, "run-1", "report.json")}, "simulate: --against: empty (want a directory: what noisysim run --repeat N --out DIR or noisysim sweep --out DIR wrote)"},
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
		"quiet p99: 4 of 4 within 25%", "throughput: 4 of 4 within 25%", "written: " + filepath.Join(out, simval.JSONFile),
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "simulated classes.lookup.rate=300 trial 2/2 (seed 43)") {
		t.Errorf("stderr lacks the progress:\n%s", stderr.String())
	}
	// How each class is drawn: on stderr, once while it stays the same;
	// stdout is the comparison alone.
	if n := strings.Count(stderr.String(), "noisysim: simulated lookup: the model draws"); n != 1 || strings.Contains(stdout.String(), "the model draws") {
		t.Errorf("the lookup class's draws said %d times on stderr (want once), stdout has them: %v\nstderr:\n%s",
			n, strings.Contains(stdout.String(), "the model draws"), stderr.String())
	}
	res := readValidation[simval.SweepResult](t, out)
	if all := (simval.Tally{Judged: 4, Within: 4}); len(res.Rows) != 4 || res.QuietP99 != all || res.Throughput != all || len(res.Excluded) != 1 || res.CalibrationSeed != 41 ||
		len(res.CalibrationNotes) != 0 || len(res.Notes) != 0 {
		t.Fatalf("validate.json: %d rows, quiet p99 %+v, throughput %+v, %d excluded, calibration seed %d, notes %q %q",
			len(res.Rows), res.QuietP99, res.Throughput, len(res.Excluded), res.CalibrationSeed, res.CalibrationNotes, res.Notes)
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
	// The calibration report names no scenario file: its point is not
	// known, and the terminal says so.
	if want := "calibration runs not set beside the sweep: " + cal + ": the report names no scenario file"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
	}
	// Two runs left out for one reason: named together, on one line.
	cal2 := filepath.Join(dir, "cal2", reports.JSONFile)
	writeReport(t, filepath.Dir(cal2), realRunReport(39, 1, 1000, 0, ""))
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", sc, "--against", same, "--calibrate", cal, "--calibrate", cal2, "--no-progress"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("two calibrations: exit %d\n%s", code, stderr.String())
	}
	if want := "calibration runs not set beside the sweep: " + cal + ", " + cal2 + ": the report names no scenario file"; !strings.Contains(stdout.String(), want) ||
		strings.Count(stdout.String(), "not set beside the sweep") != 1 {
		t.Errorf("two runs without a scenario file: want one line %q:\n%s", want, stdout.String())
	}
	// A calibration run of ci-gate.yaml ran at classes.lookup.rate=200, a
	// point of the sweep: its own real quiet p99 is set beside that
	// point's, per configuration, and not beside 300's.
	at := filepath.Join(dir, "calat", reports.JSONFile)
	atRep := realRunReport(40, 1, 1000, 0, "")
	atRep.File, atRep.ScheduleHash = sc, "" // no hash: the file taken at its word
	for _, c := range atRep.Configurations {
		for _, class := range []string{"lookup", "page"} {
			atRep.Assertions = append(atRep.Assertions, reports.Assertion{Name: harness.AssertQuietP99, Configuration: c.Name, Tenant: reports.QuietAll, Class: class, Observed: 1, Limit: 8, Unit: "ms", Op: "<=", Passed: true})
		}
	}
	writeReport(t, filepath.Dir(at), atRep)
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", sc, "--against", same, "--calibrate", at, "--no-progress"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("calibrated at a point: exit %d\n%s", code, stderr.String())
	}
	calRows := regexp.MustCompile(`(?m)^(naive|isolated) +classes\.lookup\.rate=(\d+) +\d`).FindAllStringSubmatch(stdout.String(), -1)
	if !strings.Contains(stdout.String(), "the calibration runs' own real quiet p99 at their point against the sweep's real median there") ||
		len(calRows) != 2 || calRows[0][2] != "200" || calRows[1][2] != "200" || strings.Contains(stdout.String(), "not set beside") {
		t.Errorf("calibrated at 200: calibration rows %q, want naive and isolated at 200:\n%s", calRows, stdout.String())
	}
	// The same run, its scenario file edited since (classes.lookup.rate
	// 300 now): its schedule_hash is not the file's, so the point it ran
	// at is not known; not set beside 300's.
	src, err := os.ReadFile(sc)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, "edited.yaml")
	if err := os.WriteFile(edited, bytes.Replace(src, []byte("rate: 200 "), []byte("rate: 300 "), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	atRep.File, atRep.ScheduleHash = edited, "x"
	writeReport(t, filepath.Dir(at), atRep)
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", sc, "--against", same, "--calibrate", at, "--no-progress"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("calibrated on an edited file: exit %d\n%s", code, stderr.String())
	}
	if want := "calibration runs not set beside the sweep: " + at + ": its scenario file " + edited + " no longer gives the run's schedule at its seed 40 (edited since the run)"; !strings.Contains(stdout.String(), want) ||
		strings.Contains(stdout.String(), "own real quiet p99 at their point") {
		t.Errorf("calibrated on an edited file: stdout lacks %q or sets the runs beside a point:\n%s", want, stdout.String())
	}

	// --out never over a validation: exit 2, the files as they were.
	data, err := os.ReadFile(filepath.Join(out, simval.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
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
	if code != exitAssertion || !strings.Contains(stderr.String(), "the simulated sweep not within 25% of the real sweep's (--check): throughput: 1 of 4") ||
		strings.Contains(stderr.String(), "quiet p99:") {
		t.Errorf("--check: exit %d, stderr %q; want 99 for the throughput alone", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "0.50x     NO") || !strings.Contains(stdout.String(), "quiet p99: 4 of 4 within 25%") ||
		!strings.Contains(stdout.String(), "throughput: 3 of 4 within 25%") {
		t.Errorf("stdout lacks the throughput at 0.50x outside, counted apart from the quiet p99:\n%s", stdout.String())
	}
	// --only: the one configuration.
	stdout.Reset()
	if code := realMain([]string{"simulate", sc, "--against", off, "--calibrate", cal, "--only", "naive", "--check", "--no-progress"}, &stdout, &stderr); code != exitOK ||
		strings.Contains(stdout.String(), "configuration isolated") || !strings.Contains(stdout.String(), "quiet p99: 2 of 2 within 25%") {
		t.Errorf("--only naive: exit %d:\n%s", code, stdout.String())
	}
	// The quiet p99 off by 2 at rate 200 (the throughput as simulated):
	// --check exits 99 for the quiet p99 alone.
	d = realSweep(t, cal)
	for i := range d.Points[0].Trials {
		for j := range d.Points[0].Trials[i].Configurations {
			d.Points[0].Trials[i].Configurations[j].QuietP99 *= 2
		}
	}
	quiet := writeSweepDoc(t, filepath.Join(dir, "quiet"), d)
	stdout.Reset()
	stderr.Reset()
	code = realMain([]string{"simulate", sc, "--against", quiet, "--calibrate", cal, "--check", "--no-progress"}, &stdout, &stderr)
	if code != exitAssertion || !strings.Contains(stderr.String(), "(--check): quiet p99: 2 of 4") || strings.Contains(stderr.String(), "throughput:") ||
		!strings.Contains(stdout.String(), "quiet p99: 2 of 4 within 25%") || !strings.Contains(stdout.String(), "throughput: 4 of 4 within 25%") {
		t.Errorf("quiet p99 off: exit %d, stderr %q; want 99 for the quiet p99 alone\n%s", code, stderr.String(), stdout.String())
	}
}

// TestSimulateAgainstSweepNotes: what the comparison cannot vouch for is
// said on the terminal and in validate.json and validate.md: a
// calibration run DISTURBED or on other data (harness.CalibrationNotes, as
// the run-vs-run comparison), a sweep.json recording no scenario shape
// ("cannot tell"); a point whose every real trial is DISTURBED is unjudged,
// listed and in neither count, so --check passes, unless no point at all
// could be judged.
func TestSimulateAgainstSweepNotes(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal", reports.JSONFile)
	writeReport(t, filepath.Dir(cal), realRunReport(41, 1, 1000, 0, ""))
	d := realSweep(t, cal)
	d.Shape = nil
	for j := range d.Points[1].Trials {
		tr := &d.Points[1].Trials[j]
		tr.Disturbed = true
		for i := range tr.Configurations {
			tr.Configurations[i].QuietP99 *= 10
		}
	}
	sw := writeSweepDoc(t, filepath.Join(dir, "sweep"), d)
	// A calibration of the same service times, DISTURBED and on 50 times
	// the orders.
	sc := "../../scenarios/ci-gate.yaml"
	noisyCal := calibrationOnMoreOrders(t, dir, "noisy", 41, "solo (isolated)")
	out := filepath.Join(dir, "val")
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"simulate", sc, "--against", sw, "--calibrate", noisyCal, "--check", "--out", out, "--no-progress"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, want 0 (the off point unjudged)\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	wants := []string{
		"note: calibration " + noisyCal + ": DISTURBED windows (other work on its machine) solo (isolated): noisysim stood still 300 ms",
		"note: calibration " + noisyCal + ": measured on other data than ci-gate simulates: data.orders 5000000 (simulated: 100000)",
		"note: sweep.json records no shape of its scenario (a sweep of an older noisysim): whether ci-gate's phases are those the sweep ran cannot tell",
		"unjudged (every real trial DISTURBED; in neither count): 2 of 4 points and configurations",
	}
	for _, want := range append(wants, "quiet p99: 2 of 2 within 25%", "  naive classes.lookup.rate=300\n", "unjudged (no undisturbed trial)") {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	md, err := os.ReadFile(filepath.Join(out, simval.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(wants, "- isolated classes.lookup.rate=300") {
		if !strings.Contains(string(md), want) {
			t.Errorf("validate.md lacks %q:\n%s", want, md)
		}
	}
	res := readValidation[simval.SweepResult](t, out)
	notes := strings.Join(append(res.CalibrationNotes, res.Notes...), "\n")
	if len(res.CalibrationNotes) != 2 || len(res.Notes) != 1 || !strings.Contains(notes, "data.orders 5000000") || !strings.Contains(notes, "cannot tell") ||
		res.QuietP99 != (simval.Tally{Judged: 2, Within: 2, Unjudged: 2}) {
		t.Errorf("validate.json: calibration_notes %q, notes %q, quiet p99 %+v", res.CalibrationNotes, res.Notes, res.QuietP99)
	}

	// Every point unjudged: --check has nothing to pass on and fails.
	for i := range d.Points {
		for j := range d.Points[i].Trials {
			d.Points[i].Trials[j].Disturbed = true
		}
	}
	allOff := writeSweepDoc(t, filepath.Join(dir, "all-disturbed"), d)
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", sc, "--against", allOff, "--calibrate", cal, "--check", "--no-progress"}, &stdout, &stderr); code != exitAssertion ||
		!strings.Contains(stderr.String(), "no point of the real sweep could be judged") {
		t.Errorf("every trial DISTURBED, --check: exit %d, want %d naming it\nstdout:\n%s\nstderr:\n%s", code, exitAssertion, stdout.String(), stderr.String())
	}
}

// TestSimulateAgainstSweepQuietUnjudged: a real trial whose quiet figure
// quiet_p99 did not judge (quiet_unjudged) is compared without it: out of
// the quiet p99 medians and count (however far off it is), marked in the
// table, listed in validate.json and validate.md, its throughput still
// compared; a sweep whose every quiet figure is unjudged gives --check
// nothing to pass on.
func TestSimulateAgainstSweepQuietUnjudged(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal", reports.JSONFile)
	writeReport(t, filepath.Dir(cal), realRunReport(41, 1, 1000, 0, ""))
	d := realSweep(t, cal)
	// naive's seed 43 at rate 300: unjudged, 10 times the simulated.
	tr := &d.Points[1].Trials[1]
	for i := range tr.Configurations {
		if tr.Configurations[i].Name == "naive" {
			tr.Configurations[i].QuietUnjudged = true
			tr.Configurations[i].QuietP99 *= 10
		}
	}
	sw := writeSweepDoc(t, filepath.Join(dir, "sweep"), d)
	sc := "../../scenarios/ci-gate.yaml"
	out := filepath.Join(dir, "val")
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"simulate", sc, "--against", sw, "--calibrate", cal, "--check", "--out", out, "--no-progress"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, want 0 (the unjudged figure left out)\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	wants := []string{"yes (1 unjudged left out)",
		"quiet figure unjudged (quiet_p99 judged no class, the worst class of all stood in; out of the quiet p99 medians and count with its simulation, throughput still compared): 1 real trials and configurations",
		"quiet p99: 4 of 4 within 25% (per point and configuration; 1 real quiet figures unjudged by quiet_p99 left out)", "throughput: 4 of 4 within 25%"}
	for _, want := range append(wants, "  naive classes.lookup.rate=300 seed 43\n") {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	md, err := os.ReadFile(filepath.Join(out, simval.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(wants, "- naive classes.lookup.rate=300 seed 43\n") {
		if !strings.Contains(string(md), want) {
			t.Errorf("validate.md lacks %q:\n%s", want, md)
		}
	}
	res := readValidation[simval.SweepResult](t, out)
	if len(res.QuietUnjudged) != 1 || res.QuietUnjudged[0].Configuration != "naive" || res.QuietUnjudged[0].Seed != 43 || len(res.Excluded) != 0 {
		t.Errorf("validate.json: quiet_unjudged %+v, excluded %+v; want naive at 300 seed 43 alone", res.QuietUnjudged, res.Excluded)
	}
	for _, r := range res.Rows {
		want := 0
		if r.Configuration == "naive" && r.Values["classes.lookup.rate"] == 300 {
			want = 1
		}
		if r.QuietUnjudged != want || r.QuietP99.Real.N != 2-want || r.Throughput.Real.N != 2 || !r.QuietP99.Within {
			t.Errorf("%s at %v: quiet_unjudged %d, quiet p99 over %d, throughput over %d, within %v; want %d, %d, 2, true",
				r.Configuration, r.Values, r.QuietUnjudged, r.QuietP99.Real.N, r.Throughput.Real.N, r.QuietP99.Within, want, 2-want)
		}
	}

	// Every quiet figure unjudged: --check has nothing to pass on.
	for i := range d.Points {
		for j := range d.Points[i].Trials {
			for k := range d.Points[i].Trials[j].Configurations {
				d.Points[i].Trials[j].Configurations[k].QuietUnjudged = true
			}
		}
	}
	all := writeSweepDoc(t, filepath.Join(dir, "all-unjudged"), d)
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", sc, "--against", all, "--calibrate", cal, "--check", "--no-progress"}, &stdout, &stderr); code != exitAssertion ||
		!strings.Contains(stderr.String(), "no point of the real sweep could be judged (every trial DISTURBED or its quiet figure unjudged by quiet_p99)") ||
		!strings.Contains(stdout.String(), "throughput: 4 of 4 within 25%") || !strings.Contains(stdout.String(), "quiet p99 unjudged (every real quiet figure not DISTURBED unjudged by quiet_p99; not in the quiet p99 count): 4 of 4") {
		t.Errorf("every quiet figure unjudged, --check: exit %d, want %d naming it\nstdout:\n%s\nstderr:\n%s", code, exitAssertion, stdout.String(), stderr.String())
	}
}

// hookBuffer is a syncBuffer that calls onWrite with each write's text.
type hookBuffer struct {
	syncBuffer
	onWrite func(string)
}

func (b *hookBuffer) Write(p []byte) (int, error) {
	n, err := b.syncBuffer.Write(p)
	b.onWrite(string(p))
	return n, err
}

// TestSimulateAgainstSweepInterrupted: SIGINT during the simulations
// stops them (exit 1), says nothing is written, and writes nothing.
func TestSimulateAgainstSweepInterrupted(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal", reports.JSONFile)
	writeReport(t, filepath.Dir(cal), realRunReport(41, 1, 1000, 0, ""))
	sw := writeSweepDoc(t, filepath.Join(dir, "sweep"), realSweep(t, cal))
	out := filepath.Join(dir, "val")
	var stdout syncBuffer
	var once sync.Once
	// realMain is still running (and handling SIGINT) when its first
	// progress line is written.
	stderr := &hookBuffer{onWrite: func(s string) {
		if strings.Contains(s, "noisysim: simulated ") {
			once.Do(func() { syscall.Kill(os.Getpid(), syscall.SIGINT) })
		}
	}}
	code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--against", sw, "--calibrate", cal, "--out", out}, &stdout, stderr)
	if code != exitError || !strings.Contains(stderr.String(), "noisysim: interrupt: stopping: nothing is written") ||
		strings.Contains(stderr.String(), "the reports of it are written") {
		t.Errorf("SIGINT: exit %d, want 1 saying nothing is written:\n%s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, simval.JSONFile)); !os.IsNotExist(err) {
		t.Errorf("validate.json written by an interrupted validation (err %v)", err)
	}
}

// TestSimulateAgainstSweepBadInput: each is exit 2 naming sweep.json (and
// its field) or what else is wrong, before anything is simulated.
func TestSimulateAgainstSweepBadInput(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal", reports.JSONFile)
	writeReport(t, filepath.Dir(cal), realRunReport(41, 1, 1000, 0, ""))
	sc := "../../scenarios/ci-gate.yaml"
	ciGate, err := scenario.Load(sc)
	if err != nil {
		t.Fatal(err)
	}
	good := func() *sweep.Doc {
		d := &sweep.Doc{Version: sweep.Version, Scenario: "ci-gate", File: "../../scenarios/ci-gate.yaml", Trials: 1, Search: "grid", Complete: true,
			Vary:  []sweep.VaryDoc{{Spec: "classes.lookup.rate=200..300:2", Key: "classes.lookup.rate", Value: 200, Integer: true}},
			Shape: sweep.ShapeOf(ciGate)}
		for _, x := range []float64{200, 300} {
			var cs []sweep.ConfigTrial
			for _, name := range []string{"naive", "isolated"} {
				cs = append(cs, sweep.ConfigTrial{Name: name, QuietClass: "lookup", QuietP99: 2, SoloP99: 1, QuietOverSolo: 2, Throughput: 300})
			}
			d.Points = append(d.Points, sweep.Point{Values: map[string]float64{"classes.lookup.rate": x},
				Trials: []sweep.Trial{{Seed: 42, Configurations: cs}}})
		}
		return d
	}
	// ci-gate with a longer run phase: another shape than the sweep's.
	longer := filepath.Join(dir, "longer.yaml")
	text, err := os.ReadFile(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(longer, bytes.Replace(text, []byte("run: 20s"), []byte("run: 22s"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := func(d *sweep.Doc, i, j, k int) *sweep.ConfigTrial { return &d.Points[i].Trials[j].Configurations[k] }
	cases := map[string]struct {
		edit     func(*sweep.Doc)
		file     string // sweep.json's text instead of the doc
		scenario string // in place of sc
		extra    []string
		noCal    bool // no --calibrate of the good calibration
		want     string
	}{
		"no quiet class":       {edit: func(d *sweep.Doc) { conf(d, 1, 0, 1).QuietClass = "" }, want: "sweep.json: points[1].trials[0].configurations[1].quiet_class: missing"},
		"another quiet class":  {edit: func(d *sweep.Doc) { conf(d, 0, 0, 0).QuietClass = "nosuch" }, want: `sweep.json: points[0].trials[0].configurations[0].quiet_class "nosuch": ci-gate has no such class (it has lookup, page, report)`},
		"no configurations":    {edit: func(d *sweep.Doc) { d.Points[1].Trials[0].Configurations = nil }, want: "sweep.json: points[1].trials[0].configurations: empty"},
		"a configuration gone": {edit: func(d *sweep.Doc) { d.Points[1].Trials[0].Configurations = d.Points[1].Trials[0].Configurations[:1] }, want: `sweep.json: points[1].trials[0].configurations: no configuration "isolated", a configuration of ci-gate`},
		"another configuration": {edit: func(d *sweep.Doc) { d.Shape = nil; conf(d, 0, 0, 1).Name = "tuned" },
			want: `sweep.json: points[0].trials[0].configurations[1].name "tuned": ci-gate has no such configuration (it has naive, isolated)`},
		"a point twice": {edit: func(d *sweep.Doc) { d.Points[1].Values = map[string]float64{"classes.lookup.rate": 200} },
			want: "sweep.json: points[1].values: the same point as points[0] (classes.lookup.rate=200)"},
		"a value missing": {edit: func(d *sweep.Doc) { d.Points[0].Values = map[string]float64{} }, want: "sweep.json: points[0].values: no value of the varied key classes.lookup.rate"},
		"a seed twice": {edit: func(d *sweep.Doc) {
			d.Trials = 2
			for i := range d.Points {
				d.Points[i].Trials = append(d.Points[i].Trials, d.Points[i].Trials[0])
			}
		}, want: "sweep.json: points[0].trials[1].seed 42: the same as points[0].trials[0]'s"},
		"a zero p99":           {edit: func(d *sweep.Doc) { conf(d, 1, 0, 0).QuietP99 = 0 }, want: "sweep.json: points[1].trials[0].configurations[0].quiet_p99_ms 0: want > 0"},
		"a negative p99":       {edit: func(d *sweep.Doc) { conf(d, 1, 0, 0).QuietP99 = -3 }, want: "sweep.json: points[1].trials[0].configurations[0].quiet_p99_ms -3: want > 0"},
		"a zero throughput":    {edit: func(d *sweep.Doc) { conf(d, 0, 0, 1).Throughput = 0 }, want: "sweep.json: points[0].trials[0].configurations[1].throughput_per_s 0: want > 0"},
		"negative throughput":  {edit: func(d *sweep.Doc) { conf(d, 0, 0, 1).Throughput = -5 }, want: "sweep.json: points[0].trials[0].configurations[1].throughput_per_s -5: want > 0"},
		"a point removed":      {edit: func(d *sweep.Doc) { d.Points = d.Points[:1] }, want: "sweep.json: points: 1, but a complete sweep of its vary specs ("},
		"negative rejections":  {edit: func(d *sweep.Doc) { conf(d, 0, 0, 1).Rejected = -10 }, want: "sweep.json: points[0].trials[0].configurations[1].rejected -10: want >= 0"},
		"negative errors":      {edit: func(d *sweep.Doc) { conf(d, 0, 0, 0).Errors = -3 }, want: "sweep.json: points[0].trials[0].configurations[0].errors -3: want >= 0"},
		"negative target rate": {edit: func(d *sweep.Doc) { conf(d, 1, 0, 0).TargetRate = -1 }, want: "sweep.json: points[1].trials[0].configurations[0].target_rate_per_s -1: want >= 0"},
		"another configuration than only": {edit: func(d *sweep.Doc) { d.Points[0].Only, d.Points[1].Only = "isolated", "isolated" },
			want: `sweep.json: points[0].trials[0].configurations[0].name "naive": the point ran only "isolated" (points[0].only)`},
		"another phase":         {scenario: longer, want: `sweep.json: shape.phases[3]: the sweep's "run 20s", the scenario's "run 22s" (the scenario changed since the sweep?)`},
		"edited shape":          {edit: func(d *sweep.Doc) { d.Shape.Configurations = []string{"naive"} }, want: "sweep.json: shape.configurations: the sweep's 1 (naive), the scenario's 2 (naive, isolated)"},
		"edited fingerprint":    {edit: func(d *sweep.Doc) { d.Shape.Fingerprint = "0000" }, want: "sweep.json: shape.fingerprint 0000: not that of the shape recorded beside it"},
		"empty against":         {extra: []string{"--against="}, want: "simulate: --against: empty"},
		"no calibration":        {noCal: true, extra: []string{"--calibrate="}, want: "(a sweep) needs --calibrate report.json: a real run's report of " + sc + ", at a seed other than the sweep's trials'"},
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
			file := sc
			if tc.scenario != "" {
				file = tc.scenario
			}
			args := []string{"simulate", file, "--against", sw, "--calibrate", cal}
			if tc.noCal {
				args = args[:4]
			}
			args = append(args, tc.extra...)
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

// calibrationOnMoreOrders writes dir/name/report.json: a real run of
// ci-gate (seed, disturbed as realRunReport) from a copy of the scenario
// with 50 times its orders, and returns its path.
func calibrationOnMoreOrders(t *testing.T, dir, name string, seed int64, disturbed string) string {
	t.Helper()
	text, err := os.ReadFile("../../scenarios/ci-gate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bigger := filepath.Join(dir, name+"-bigger.yaml")
	if err := os.WriteFile(bigger, bytes.Replace(text, []byte("orders: 100000"), []byte("orders: 5000000"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := realRunReport(seed, 1, 1000, 0, disturbed)
	rep.File = bigger
	path := filepath.Join(dir, name, reports.JSONFile)
	writeReport(t, filepath.Dir(path), rep)
	return path
}

// readValidation decodes out's validate.json into a T (simval.Result or
// simval.SweepResult).
func readValidation[T any](t *testing.T, out string) T {
	t.Helper()
	return readJSONFile[T](t, filepath.Join(out, simval.JSONFile))
}

// readJSONFile decodes the JSON file at path into a T.
func readJSONFile[T any](t *testing.T, path string) T {
	t.Helper()
	var res T
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	return res
}
