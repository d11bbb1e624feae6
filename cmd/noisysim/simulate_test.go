package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// writeCalibration writes a hand-made report.json of ci-gate's shape (or,
// without the report class, of another shape): lookups and pages of 0.5 to
// 2 ms, a report of 50 ms alone.
func writeCalibration(t *testing.T, path string, withReport bool) {
	t.Helper()
	var ps []reports.Percentile
	for _, p := range []float64{0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.99} {
		ps = append(ps, reports.Percentile{P: p, Ms: 0.5 + 1.5*p/100})
	}
	rep := &reports.Report{
		Scenario: "ci-gate", Seed: 41, Backend: "local single", ScheduleHash: "x",
		Configurations: []reports.Configuration{{Name: "naive", Expect: "fail", SoloQuietAll: []reports.TenantRow{
			{Tenant: reports.QuietAll, Class: "lookup", Count: 500, P50: 1.25, P99: 2, Max: 2, Percentiles: ps},
			{Tenant: reports.QuietAll, Class: "page", Count: 200, P50: 1.25, P99: 2, Max: 2, Percentiles: ps}}}},
	}
	if withReport {
		rep.Calibrations = []reports.Calibration{{Class: "report", Query: "report", Samples: 20, ServiceMean: 50, ServiceP50: 48, LoadFactor: 3, Pool: 40, PoolName: "naive shared pool", Rate: 2400}}
	}
	var buf bytes.Buffer
	if err := reports.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSimulateCommand simulates ci-gate.yaml from a calibration: the control
// fails and isolation holds (exit 0), the reports are written and say they
// are simulated; bad calibrations are exit 2 naming the file.
func TestSimulateCommand(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	other := filepath.Join(dir, "other.json")
	writeCalibration(t, other, false)
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", cal, "--cores", "2", "--out", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "SIMULATED") || !strings.Contains(stdout.String(), "backend   simulated local single") {
		t.Errorf("stdout does not say it is simulated:\n%s", stdout.String()[:min(600, stdout.Len())])
	}
	f, err := os.Open(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reports.ReadJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Simulated == nil || rep.Simulated.Calibration != cal || len(rep.Simulated.Classes) != 3 {
		t.Errorf("report.json simulated = %+v", rep.Simulated)
	}
	// What the model draws and where from; the timeline in virtual time.
	text := stdout.String()
	for _, want := range []string{
		"SIMULATED ci-gate (../../scenarios/ci-gate.yaml) in virtual time",
		"== noisysim ci-gate (SIMULATED) ==",
		"service times from " + cal + ", a real run of scenario ci-gate, seed 41",
		"calibrated report (",
		" over 20 queries alone;",
		"simulated report: the model draws 50.00 ms mean (p50 48.00 ms) from calibrations (20 queries alone",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("stdout lacks %q:\n%s", want, text)
		}
	}
	if m := regexp.MustCompile(`(?m)^timeline (\S+)`).FindAllStringSubmatch(text, -1); len(m) != 2 || m[0][1] == "0.0" || m[0][1] == "0s" {
		t.Errorf("timeline lines %q: want each configuration's virtual length", m)
	}
	// Every rendering says SIMULATED and names the calibration.
	for file, wants := range map[string][]string{
		"report.md":   {"# noisysim report: ci-gate (SIMULATED)", "| Result | **PASS** (SIMULATED) |", cal},
		"junit.xml":   {`name="noisysim ci-gate (SIMULATED, service times from ` + cal + `)"`, `name="simulated_from" value="` + cal + `"`},
		"report.html": {"<title>noisysim: ci-gate (SIMULATED)</title>", "PASSED (SIMULATED)", cal},
	} {
		data, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s lacks %q", file, want)
			}
		}
	}

	// Bad input, each exit 2 naming what is wrong.
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"other shape":      {[]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", other}, "no service times for class report"},
		"simulated":        {[]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", filepath.Join(out, "report.json")}, "a simulated report"},
		"no calibration":   {[]string{"simulate", "../../scenarios/ci-gate.yaml"}, "--calibrate report.json is required"},
		"missing file":     {[]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", filepath.Join(dir, "nosuch.json")}, "nosuch.json"},
		"not a report":     {[]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", "../../scenarios/ci-gate.yaml"}, "ci-gate.yaml"},
		"not simulated":    {[]string{"simulate", "../../scenarios/replay-incident.yaml", "--calibrate", cal}, "simulate does not model replay"},
		"negative top":     {[]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", cal, "--top", "-3"}, "--top -3: want the number of quiet tenants"},
		"run negative top": {[]string{"run", "../../scenarios/ci-gate.yaml", "--only", "nope", "--top", "-3"}, "run: --top -3"},
		"bad cores":        {[]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", cal, "--cores", "-1"}, "--cores"},
		"no such config":   {[]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", cal, "--only", "x"}, "no such configuration"},
		"missing scenario": {[]string{"simulate", "--calibrate", cal}, "missing scenario file"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %q", name, code, stderr.String(), tc.want)
		}
	}
}

// TestSweepSimulate sweeps ci-gate.yaml in virtual time: every point's
// trials are simulations, sweep.json says so, and a sweep run one way is
// not resumed the other.
func TestSweepSimulate(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	out := filepath.Join(dir, "sweep")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"sweep", "../../scenarios/ci-gate.yaml", "--simulate", "--calibrate", cal,
		"--vary", "classes.lookup.rate=100..400:2", "--trials", "2", "--out", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "SIMULATED: every figure from noisysim simulate") {
		t.Errorf("the table does not say it is simulated:\n%s", stdout.String())
	}
	// How each class is drawn is said once while it stays the same, as
	// simulate says it, before the first trial.
	for _, class := range []string{"lookup", "report"} {
		line := "simulated " + class + ": the model draws"
		if n := strings.Count(stdout.String(), line); n != 1 || strings.Index(stdout.String(), line) > strings.Index(stdout.String(), "trial 1/2") {
			t.Errorf("%q said %d times (want once, before the first trial):\n%s", line, n, stdout.String())
		}
	}
	d, err := sweep.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if d.Simulated != cal || len(d.Points) != 2 || len(d.Points[0].Trials) != 2 || !d.Complete {
		t.Errorf("sweep.json: simulated %q, %d points, complete %v", d.Simulated, len(d.Points), d.Complete)
	}
	for _, p := range d.Points {
		for _, tr := range p.Trials {
			for _, c := range tr.Configurations {
				if c.Throughput <= 0 {
					t.Errorf("point %v seed %d %s: throughput %v", p.Values, tr.Seed, c.Name, c.Throughput)
				}
			}
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"sweep", "../../scenarios/ci-gate.yaml", "--vary", "classes.lookup.rate=100..400:2", "--out", out, "--resume"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "was simulated") {
		t.Errorf("resume for real of a simulated sweep: exit %d, stderr %q; want 2", code, stderr.String())
	}
}

// TestSweepSimulateCalibratedRate knee-searches the rate of ci-gate.yaml's
// report class, which the file calibrates (load_factor, no rate), in
// virtual time: today's rate is the calibration's (3 × pool 40 / 50 ms =
// 2400/s), every probe runs the rate it names, and both configurations get
// a headroom sentence against that calibrated rate.
func TestSweepSimulateCalibratedRate(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	out := filepath.Join(dir, "sweep")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"sweep", "../../scenarios/ci-gate.yaml", "--vary", "classes.report.rate=5..80", "--search", "knee",
		"--iterations", "2", "--simulate", "--calibrate", cal, "--out", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	o := stdout.String()
	for _, want := range []string{"classes.report.rate: the file writes load_factor 3, no rate", "today's rate 2400/s is the calibration's, taken from the calibration report " + cal + " before the search",
		"naive holds classes.report.rate to ", "isolated ", "today's calibrated 2400; "} {
		if !strings.Contains(o, want) {
			t.Errorf("stdout lacks %q:\n%s", want, o)
		}
	}
	d, err := sweep.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Knees) != 2 || d.Vary[0].Value != 2400 || d.Vary[0].Calibration == nil || !d.Complete {
		t.Fatalf("sweep.json: vary %+v, knees %+v", d.Vary, d.Knees)
	}
	for _, k := range d.Knees {
		if !strings.Contains(o, sweep.KneeSentence(k)+"\n") {
			t.Errorf("stdout lacks %s's headroom %q", k.Configuration, sweep.KneeSentence(k))
		}
		if !k.BaselineCalibrated || k.Baseline != 2400 || (k.Found && k.Headroom != k.Knee/2400) {
			t.Errorf("knee %+v, want its headroom against the calibrated 2400/s", k)
		}
	}
	// Each probe offered the rate it names: lookup 200 + page 100 + report.
	for _, p := range d.Points {
		v := p.Values["classes.report.rate"]
		for _, tr := range p.Trials {
			for _, c := range tr.Configurations {
				if want := 300 + v; c.TargetRate < want*0.9 || c.TargetRate > want*1.1 {
					t.Errorf("probe at report rate %v (%s): target rate %v/s, want about %v", v, c.Name, c.TargetRate, want)
				}
			}
		}
	}
}

// TestOutRefusesExistingReport: simulate and run never overwrite a report
// (least of all the --calibrate file) and find an unwritable --out before
// they start: exit 2 naming the file, the report left as it was.
func TestOutRefusesExistingReport(t *testing.T) {
	dir := t.TempDir()
	calDir := filepath.Join(dir, "calcopy")
	if err := os.Mkdir(calDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cal := filepath.Join(calDir, "report.json")
	writeCalibration(t, cal, true)
	before, err := os.ReadFile(cal)
	if err != nil {
		t.Fatal(err)
	}
	repeatDir := filepath.Join(dir, "repeat")
	if err := os.MkdirAll(filepath.Join(repeatDir, "run-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repeatDir, "run-2", "report.json"), before, 0o644); err != nil {
		t.Fatal(err)
	}
	htmlDir := filepath.Join(dir, "html-only")
	if err := os.Mkdir(htmlDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(htmlDir, "report.html"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sc := "../../scenarios/ci-gate.yaml"
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"simulate over its calibration": {[]string{"simulate", sc, "--calibrate", cal, "--out", calDir}, "would overwrite the --calibrate file " + cal},
		"simulate over a report":        {[]string{"simulate", sc, "--calibrate", cal, "--out", calDir + "/"}, "would overwrite the --calibrate file"},
		"run over a report":             {[]string{"run", sc, "--only", "nope", "--out", calDir}, cal + " holds a report already"},
		"run over a report.html":        {[]string{"run", sc, "--only", "nope", "--out", htmlDir}, filepath.Join(htmlDir, "report.html") + " holds a report already"},
		"run --repeat over a run":       {[]string{"run", sc, "--only", "nope", "--repeat", "2", "--out", repeatDir}, filepath.Join(repeatDir, "run-2", "report.json") + " holds a report already"},
		"simulate unwritable":           {[]string{"simulate", sc, "--calibrate", cal, "--out", "/proc/nope"}, "--out /proc/nope: cannot write in /proc"},
		"run unwritable":                {[]string{"run", sc, "--only", "nope", "--out", "/proc/nope/deeper"}, "cannot write in /proc"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %q", name, code, stderr.String(), tc.want)
		}
	}
	// A report that is not the calibration is refused too.
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "report.json"), before, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"simulate", sc, "--calibrate", cal, "--out", other}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), filepath.Join(other, "report.json")+" holds a report already") {
		t.Errorf("simulate over another report: exit %d, stderr %q", code, stderr.String())
	}
	if after, err := os.ReadFile(cal); err != nil || !bytes.Equal(before, after) {
		t.Errorf("the calibration report changed (err %v)", err)
	}
}

// TestSweepSimulateRefusesUnmodelled: a sweep in virtual time of a scenario
// simulate does not model is refused before its first point: exit 2, no
// INCOMPLETE line, no --out directory.
func TestSweepSimulateRefusesUnmodelled(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	out := filepath.Join(dir, "sweep")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"sweep", "../../scenarios/service-gate.yaml", "--simulate", "--calibrate", cal,
		"--vary", "tenants.count=10..20:2", "--out", out}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "simulate does not model HTTP classes") {
		t.Errorf("exit %d, stderr %q; want exit 2: simulate does not model HTTP classes", code, stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), "INCOMPLETE") {
		t.Errorf("a refused sweep says it was interrupted:\n%s%s", stdout.String(), stderr.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("--out %s: %v; want nothing written", out, err)
	}
}

// TestSimulateRefusalsNamePlace: what simulate refuses is named at its
// key's file:line:col, as validation names a bad value.
func TestSimulateRefusalsNamePlace(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	other := filepath.Join(dir, "other.json")
	writeCalibration(t, other, false)
	for _, tc := range []struct {
		scenario, only, cal, want string
	}{
		{"incident-drill.yaml", "sharded", cal, `incident-drill.yaml:60:1: writer: simulate does not model the checked writer`},
		{"service-gate.yaml", "gate", cal, `service-gate.yaml:\d+:\d+: classes\[0\]\.http: simulate does not model HTTP classes \(class \w+\)`},
		{"replay-incident.yaml", "isolated", cal, `replay-incident.yaml:\d+:\d+: replay: simulate does not model replay`},
		{"ci-gate.yaml", "isolated", other, `ci-gate.yaml:\d+:\d+: classes\[2\]: --calibrate .*other.json: .*no service times for class report`},
	} {
		for _, cmd := range [][]string{
			{"simulate", "../../scenarios/" + tc.scenario, "--calibrate", tc.cal},
			{"simulate", "../../scenarios/" + tc.scenario, "--calibrate", tc.cal, "--only", tc.only},
		} {
			var stdout, stderr bytes.Buffer
			code := realMain(cmd, &stdout, &stderr)
			if code != exitUsage || !regexp.MustCompile(tc.want).MatchString(stderr.String()) {
				t.Errorf("%v: exit %d, stderr %q; want exit 2 matching %q", cmd, code, stderr.String(), tc.want)
			}
		}
	}
}

// TestSimulateProgress: simulate shows each configuration's phases and the
// virtual time reached on stderr, as run does; --no-progress silences it.
func TestSimulateProgress(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	line := regexp.MustCompile(`(?m)^noisysim: (\w+) \((naive|isolated)\) +\d+\.\ds / +\d+\.\ds +\d+ ops/s$`)
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", cal, "--cores", "2"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	seen := map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(stderr.String(), -1) {
		seen[m[2]] = true
	}
	if !seen["naive"] || !seen["isolated"] {
		t.Errorf("stderr shows no progress of both configurations:\n%s", stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := realMain([]string{"simulate", "--no-progress", "../../scenarios/ci-gate.yaml", "--calibrate", cal, "--cores", "2"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--no-progress: exit %d\nstderr:\n%s", code, stderr.String())
	}
	if line.MatchString(stderr.String()) {
		t.Errorf("--no-progress: stderr shows progress:\n%s", stderr.String())
	}
}

// TestSweepSimulateNotes: a simulated sweep says the simulator's notes, each
// distinct one once, before the trial it first applies to, and keeps each
// point's in sweep.json: here a calibration that failed its assertions (in
// every trial's report) and a page rows fit fitted on quiet tenants only,
// which the dominant tenant's rows lie far above (the 4× cap applies).
func TestSweepSimulateNotes(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	rep, err := reports.ReadFile(cal)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load("../../scenarios/ci-gate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: sc.Tenants.Count, DominantShare: sc.Tenants.DominantShare,
		Distribution: workload.Distribution(sc.Tenants.Distribution), Exponent: sc.Tenants.Exponent, Shares: sc.Tenants.Shares}, rep.Seed)
	if err != nil {
		t.Fatal(err)
	}
	// Tenants 2..6 (quiet): page database time in proportion to their
	// rows, 0.01 ms per row; the dominant tenant 1 sends none.
	rep.File, rep.ScheduleHash = "../../scenarios/ci-gate.yaml", ""
	c := &rep.Configurations[0]
	for id := 2; id <= 6; id++ {
		rows := pop.Tenants[id-1].Share * float64(sc.Data.Orders)
		c.Tenants = append(c.Tenants, reports.TenantRow{Tenant: strconv.Itoa(id), Class: "page", Count: 100, DBTime: 100 * 0.01 * rows})
		c.Solo = append(c.Solo, reports.TenantRow{Tenant: strconv.Itoa(id), Class: "page", Count: 10})
	}
	var buf bytes.Buffer
	if err := reports.WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cal, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "sweep")
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"sweep", "../../scenarios/ci-gate.yaml", "--simulate", "--calibrate", cal,
		"--vary", "classes.lookup.rate=100..200:2", "--trials", "2", "--out", out}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	o := stdout.String()
	failed := "note: calibration " + cal + ": a run that failed its assertions"
	if n := strings.Count(o, failed); n != 1 || strings.Index(o, failed) > strings.Index(o, "trial 1/2") {
		t.Errorf("%q said %d times (want once, before the first trial):\n%s", failed, n, o)
	}
	beyond := regexp.MustCompile(`(?m)^note: page: 1 simulated tenant sent \d+ of its \d+ calls .* more rows than the calibration's largest tenant .* capped at 4× .* the cap applied to \d+ calls$`)
	if !beyond.MatchString(o) {
		t.Errorf("no note of the dominant tenant's pages above the calibrated rows, capped:\n%s", o)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(o, "\n") {
		if strings.HasPrefix(l, "note: ") && seen[l] {
			t.Errorf("note said twice: %s", l)
		}
		seen[l] = true
	}
	d, err := sweep.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Points {
		joined := strings.Join(p.Notes, "\n")
		if strings.Count(joined, "a run that failed its assertions") != 1 || !strings.Contains(joined, "more rows than the calibration's largest tenant") {
			t.Errorf("sweep.json point %v notes %q: want the failed calibration once and the rows beyond the fit", p.Values, p.Notes)
		}
	}
}

// TestSimulateCalibrateSeveralRuns: --calibrate takes what run --repeat
// wrote (every run-K/report.json) and more --calibrate files; the report
// names every calibration run; a directory with no report, a seed given
// twice and a run of another scenario are exit 2 naming them.
func TestSimulateCalibrateSeveralRuns(t *testing.T) {
	dir := t.TempDir()
	// calibrationAt writes a calibration at path with seed and scenario.
	calibrationAt := func(path string, seed int64, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeCalibration(t, path, true)
		rep, err := reports.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rep.Seed, rep.Scenario = seed, name
		var buf bytes.Buffer
		if err := reports.WriteJSON(&buf, rep); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repeat := filepath.Join(dir, "repeat")
	calibrationAt(filepath.Join(repeat, "run-2", "report.json"), 44, "ci-gate")
	calibrationAt(filepath.Join(repeat, "run-10", "report.json"), 52, "ci-gate")
	calibrationAt(filepath.Join(repeat, "run-1", "report.json"), 43, "ci-gate")
	more := filepath.Join(dir, "more.json")
	calibrationAt(more, 60, "ci-gate")
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"simulate", "../../scenarios/ci-gate.yaml", "--calibrate", repeat, "--calibrate", more, "--cores", "2", "--no-progress", "--out", out}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	files := strings.Join([]string{filepath.Join(repeat, "run-1", "report.json"), filepath.Join(repeat, "run-2", "report.json"),
		filepath.Join(repeat, "run-10", "report.json"), more}, ", ")
	if !strings.Contains(stdout.String(), "calibrated by "+files) {
		t.Errorf("stdout does not name the four runs in order (%s):\n%s", files, stdout.String())
	}
	rep, err := reports.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Simulated; !slices.Equal(s.CalibrationSeeds, []int64{43, 44, 52, 60}) || s.Calibration != files || s.CalibrationSeed != 43 {
		t.Errorf("simulated %q seed %d seeds %v: want the four runs, the first's seed", s.Calibration, s.CalibrationSeed, s.CalibrationSeeds)
	}
	if !slices.ContainsFunc(rep.Simulated.Classes, func(c reports.SimulatedClass) bool {
		return c.Class == "lookup" && strings.Contains(c.From, "over 4 runs (seeds 43, 44, 52, 60)")
	}) {
		t.Errorf("classes %+v: want the lookups averaged over the 4 runs", rep.Simulated.Classes)
	}

	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.json")
	calibrationAt(other, 61, "noisy-neighbor")
	copied := filepath.Join(dir, "copied.json")
	calibrationAt(copied, 44, "ci-gate")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no runs":          {[]string{"--calibrate", empty}, "--calibrate " + empty + ": a directory with no report.json and no run-K/report.json"},
		"run twice":        {[]string{"--calibrate", repeat, "--calibrate", filepath.Join(repeat, "run-2")}, "report.json is taken twice (also from --calibrate " + repeat + ")"},
		"seed twice":       {[]string{"--calibrate", repeat, "--calibrate", copied}, "--calibrate " + copied + ": seed 44 again"},
		"other scenario":   {[]string{"--calibrate", more, "--calibrate", other}, `--calibrate ` + other + `: a run of scenario "noisy-neighbor", ` + more + ` is of "ci-gate": calibrate on runs of one scenario`},
		"missing":          {[]string{"--calibrate", more, "--calibrate", filepath.Join(dir, "nosuch")}, "nosuch: no such file or directory"},
		"sweep seed twice": {[]string{"sweep", "--simulate", "--vary", "classes.lookup.rate=100..200:2", "--calibrate", more, "--calibrate", more}, "sweep: --calibrate " + more + ": given twice"},
	} {
		args := append([]string{"simulate", "../../scenarios/ci-gate.yaml"}, tc.args...)
		if tc.args[0] == "sweep" {
			args = append([]string{"sweep", "../../scenarios/ci-gate.yaml"}, tc.args[1:]...)
		}
		var stdout, stderr bytes.Buffer
		code := realMain(args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %q", name, code, stderr.String(), tc.want)
		}
	}
}

// TestSimulateCalibrateOutAndResume: an --out that is a --calibrate
// directory of runs is refused (a report.json there would shadow its
// runs); one file taken twice says so; sweep --simulate --resume takes the
// same calibration spelled otherwise (a symlink) and refuses another.
func TestSimulateCalibrateOutAndResume(t *testing.T) {
	dir := t.TempDir()
	repeat := filepath.Join(dir, "repeat")
	for i, seed := range []int64{43, 44} {
		path := filepath.Join(repeat, fmt.Sprintf("run-%d", i+1), "report.json")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeCalibration(t, path, true)
		rep, err := reports.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rep.Seed = seed
		var buf bytes.Buffer
		if err := reports.WriteJSON(&buf, rep); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := realMain(args, &stdout, &stderr)
		return code, stderr.String()
	}
	code, stderr := run("simulate", "../../scenarios/ci-gate.yaml", "--calibrate", repeat, "--cores", "2", "--no-progress", "--out", repeat)
	if code != exitUsage || !strings.Contains(stderr, "--out "+repeat+" is the --calibrate directory") {
		t.Errorf("--out the --calibrate runs' directory: exit %d, stderr %q; want exit 2 naming --out", code, stderr)
	}
	if fileExists(filepath.Join(repeat, "report.json")) {
		t.Errorf("a report.json was written into the calibration runs' directory %s", repeat)
	}
	run1 := filepath.Join(repeat, "run-1", "report.json")
	code, stderr = run("simulate", "../../scenarios/ci-gate.yaml", "--calibrate", repeat, "--calibrate", run1, "--cores", "2", "--no-progress")
	if code != exitUsage || !strings.Contains(stderr, "--calibrate "+run1+": "+run1+" is taken twice (also from --calibrate "+repeat+")") {
		t.Errorf("one file twice: exit %d, stderr %q; want exit 2 saying it is taken twice", code, stderr)
	}

	link := filepath.Join(dir, "link")
	if err := os.Symlink(repeat, link); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "sweep")
	sweepArgs := []string{"sweep", "../../scenarios/ci-gate.yaml", "--simulate", "--vary", "classes.lookup.rate=100..200:2", "--out", out}
	if code, stderr := run(append(sweepArgs, "--calibrate", repeat)...); code != exitOK && code != exitAssertion {
		t.Fatalf("sweep: exit %d\n%s", code, stderr)
	}
	if code, stderr := run(append(sweepArgs, "--resume", "--calibrate", link)...); code == exitUsage {
		t.Errorf("--resume with the same runs through a symlink: exit 2, stderr %q; want it resumed", stderr)
	}
	if code, stderr := run(append(sweepArgs, "--resume", "--calibrate", run1)...); code != exitUsage || !strings.Contains(stderr, "resume it the same way") {
		t.Errorf("--resume with another calibration: exit %d, stderr %q; want exit 2", code, stderr)
	}
}

// TestSimulateSignalAfterTheWork: a SIGINT that lands once the simulation
// has finished (while its reports are written, or after) stops nothing:
// the reports are written in full, the message says so, and the exit code
// is the verdict's (0 or 99, as the report says), not the 1 of a stopped
// command.
func TestSimulateSignalAfterTheWork(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	for _, step := range []string{"simulated", "written"} {
		t.Run(step, func(t *testing.T) {
			simulateStep = signalAt(t, step)
			defer func() { simulateStep = func(context.Context, string) {} }()
			out := filepath.Join(dir, "out-"+step)
			var stdout, stderr bytes.Buffer
			code := realMain([]string{"simulate", "../../scenarios/capacity-report-rate.yaml", "--calibrate", cal, "--cores", "2", "--no-progress", "--out", out}, &stdout, &stderr)
			rep, err := reports.ReadFile(filepath.Join(out, reports.JSONFile))
			if err != nil {
				t.Fatalf("report: %v", err)
			}
			if want := map[bool]int{true: exitOK, false: exitAssertion}[rep.Passed]; code != want {
				t.Errorf("exit %d, want %d (the verdict: passed %v)\n%s", code, want, rep.Passed, stderr.String())
			}
			want := "its outputs are complete and its result stands"
			if step == "simulated" {
				want = "stopping: the simulation has finished: its reports are written in full"
			}
			if !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "nothing is written") || strings.Contains(stderr.String(), "stopped by") {
				t.Errorf("stderr lacks %q or says it stopped:\n%s", want, stderr.String())
			}
		})
	}
}
