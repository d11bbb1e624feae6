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
