package harness_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

const simScenario = `
name: simsmall
seed: 5
tenants: {count: 20, dominant_share: 0.6}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 200}
  - {name: report, isolation_class: heavy, query: report, load_factor: 3, senders: dominant}
phases: {warmup: 1s, solo: 5s, run: 5s, drain: 2s}
configurations:
  - {name: naive, mode: shared, expect: fail, shared: {pool_size: 10}}
  - name: isolated
    mode: isolated
    interactive: {pool_size: 10, limiter: {max_per_tenant: 4, max_queue: 20, max_wait: 1s}}
    heavy: {pool_size: 2, limiter: {max_per_tenant: 1, max_queue: 2, max_wait: 5s}}
assertions: {quiet_p99: {min_samples: 50}}
`

// calibrationReport is a hand-made report.json of simScenario's shape: the
// lookups take 1 ms (p0) to 3 ms (max), a report 50 ms.
func calibrationReport() *reports.Report {
	var ps []reports.Percentile
	for _, p := range []float64{0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.99} {
		ps = append(ps, reports.Percentile{P: p, Ms: 1 + p/100})
	}
	return &reports.Report{
		Scenario: "simsmall", Seed: 4,
		Configurations: []reports.Configuration{{Name: "naive", SoloQuietAll: []reports.TenantRow{
			{Tenant: reports.QuietAll, Class: "lookup", Count: 1000, Max: 3, Percentiles: ps}}}},
		Calibrations: []reports.Calibration{{Class: "report", Samples: 20, ServiceMean: 50, ServiceP50: 48}},
	}
}

// TestSimulate runs a scenario in the model: every arrival of the schedule
// is accounted for in its window, the naive control fails (40 ms reports at
// 3 × its pool take it over) while isolation holds, and the report says it
// is simulated.
func TestSimulate(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: calibrationReport(), CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Simulated == nil || !strings.HasPrefix(rep.Backend, "simulated") || rep.ScheduleHash == "" {
		t.Fatalf("not marked simulated: backend %q, simulated %+v", rep.Backend, rep.Simulated)
	}
	if len(rep.Calibrations) != 1 || rep.Calibrations[0].Rate != 3*10/0.05 {
		t.Errorf("calibrations %+v, want the report class at 3 × 10 / 50 ms = 600/s", rep.Calibrations)
	}
	// The same schedule under both configurations: the same arrivals per
	// window, each accounted for (issued + dropped).
	for _, w := range []int{1, 3} {
		a, b := rep.Configurations[0].Windows[w].Stats, rep.Configurations[1].Windows[w].Stats
		if a.Issued+a.Dropped != b.Issued+b.Dropped || a.Issued == 0 {
			t.Errorf("window %d: naive %d+%d, isolated %d+%d arrivals", w, a.Issued, a.Dropped, b.Issued, b.Dropped)
		}
		if a.TargetRate != b.TargetRate || a.TargetRate*5 < float64(a.Issued+a.Dropped)*0.99 {
			t.Errorf("window %d: target rate %v vs %v for %d arrivals over 5 s", w, a.TargetRate, b.TargetRate, a.Issued+a.Dropped)
		}
	}
	byConfig := map[string]reports.Configuration{}
	for _, c := range rep.Configurations {
		byConfig[c.Name] = c
	}
	if c := byConfig["naive"]; c.Passed || c.QuietAll[0].P99 < 100 {
		t.Errorf("naive passed %v, quiet p99 %.1f ms: want a failure, p99 way above 100 ms", c.Passed, c.QuietAll[0].P99)
	}
	iso := byConfig["isolated"]
	if !iso.Passed {
		for _, a := range rep.Assertions {
			if a.Configuration == "isolated" && !a.Passed && !a.Skipped {
				t.Errorf("isolated: %s %s/%s observed %v limit %v: %s", a.Name, a.Tenant, a.Class, a.Observed, a.Limit, a.Detail)
			}
		}
	}
	if s := iso.SoloQuietAll[0]; s.P50 < 1.3 || s.P50 > 1.7 {
		t.Errorf("isolated solo p50 %.2f ms, want about the calibration's 1.5 ms", s.P50)
	}
	if iso.Stats.Rejected == 0 {
		t.Error("isolated: the dominant tenant's reports were never rejected")
	}
	if !rep.Passed {
		t.Error("report failed: want the control failing as expected and isolation holding")
	}
	if len(iso.Series) == 0 || len(iso.Windows[3].TopDBTime) == 0 || iso.Windows[3].TopDBTime[0].Tenant != "1" {
		t.Errorf("series %d points, run window top DB time %+v: want tenant 1 first", len(iso.Series), iso.Windows[3].TopDBTime)
	}
}

// TestSimulateBadCalibration: a calibration report without service times
// for a class of the scenario is bad input naming the file and the class.
func TestSimulateBadCalibration(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cal := calibrationReport()
	cal.Scenario = "other"
	cal.Calibrations = nil
	_, err = harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "other.json"})
	if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), "other.json") || !strings.Contains(err.Error(), "class report") {
		t.Errorf("err %v: want ErrInvalid naming other.json and class report", err)
	}
	if _, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{}); !errors.Is(err, scenario.ErrInvalid) {
		t.Errorf("no calibration: err %v, want ErrInvalid", err)
	}
}

// TestSimulateCalibrationQuality: what is wrong with the calibration run
// (cut short, disturbed, failed, other data) is said in the notes of the
// simulated report.
func TestSimulateCalibrationQuality(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	calScenario := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(calScenario, []byte(strings.Replace(simScenario, "phases:", "data: {orders: 5000000}\nphases:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	notes := func(cal *reports.Report) string {
		t.Helper()
		rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(rep.Notes, "\n")
	}
	good := calibrationReport()
	good.Passed = true
	if n := notes(good); strings.Contains(n, "calibration cal.json") {
		t.Errorf("a sound calibration gets notes:\n%s", n)
	}
	bad := calibrationReport()
	bad.Incomplete = "interrupted"
	bad.File = calScenario
	bad.Machine = &reports.Machine{Windows: []reports.WindowLoad{{Window: "solo (naive)", Disturbed: true}, {Window: "run (naive)"}}}
	n := notes(bad)
	for _, want := range []string{
		"calibration cal.json: an incomplete run (interrupted)",
		"calibration cal.json: DISTURBED windows (other work on its machine) solo (naive): marked disturbed where it was measured: the service times",
		"calibration cal.json: measured on other data than simsmall simulates: data.orders 5000000 (simulated: 200000)",
	} {
		if !strings.Contains(n, want) {
			t.Errorf("notes lack %q:\n%s", want, n)
		}
	}
	failed := calibrationReport()
	failed.File = filepath.Join(t.TempDir(), "gone.yaml")
	n = notes(failed)
	for _, want := range []string{"calibration cal.json: a run that failed its assertions", "gone.yaml is not readable here"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes lack %q:\n%s", want, n)
		}
	}
}

// TestSimulateCitusHeavyNote: on a Citus topology the heavy class runs on
// the tenant's worker, and the note says so (not "on the primary").
func TestSimulateCitusHeavyNote(t *testing.T) {
	sc, err := scenario.Parse([]byte(strings.Replace(simScenario, "phases:", "backend: {topology: citus, workers: 2}\nphases:", 1)), "simcitus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: calibrationReport(), CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Join(rep.Notes, "\n")
	if strings.Contains(n, "runs on the primary") || !strings.Contains(n, "the model runs it on the node holding the tenant's shard") {
		t.Errorf("notes:\n%s", n)
	}
}

// TestSimulateOverheadCalibration: a quiet class's latencies are scaled
// down to the CPU the window used; when the calibration report tells
// noisysim's CPU apart from its servers' and noisysim ran on cores of its
// own, noisysim's share of it is overhead off the cores. A call alone takes
// its draw either way.
func TestSimulateOverheadCalibration(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// 1,000 lookups of 1.5 ms mean over 5 s: 1,500 ms of latencies; the
	// run used 0.16 × 5 s = 800 ms of CPU (k 0.53), noisysim 0.10 CPU of
	// it (62%).
	for _, tc := range []struct {
		name      string
		noisysim  float64
		generator string // machine.generator_cores
		from      string
		p50       float64 // ms, the simulated solo p50, about
	}{
		{"noisysim on cores of its own", 0.10, "1", "scaled to the CPU used by 0.53, 62% of it overhead off the cores", 0.8},
		{"noisysim beside its servers", 0.10, "", "scaled to the CPU used by 0.53", 0.8},
		{"own CPU only", 0, "1", "scaled to the CPU used by 0.53", 0.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cal := calibrationReport()
			cal.Machine = &reports.Machine{GeneratorCores: tc.generator, Windows: []reports.WindowLoad{{Window: "solo (naive)", Seconds: 5, OwnCPU: 0.16, NoisysimCPU: tc.noisysim}}}
			rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
			if err != nil {
				t.Fatal(err)
			}
			var from string
			for _, c := range rep.Simulated.Classes {
				if c.Class == "lookup" {
					from = c.From
				}
			}
			if !strings.Contains(from, tc.from) {
				t.Errorf("lookup calibrated from %q, want it to say %q", from, tc.from)
			}
			if (tc.noisysim == 0 || tc.generator == "") && strings.Contains(from, "overhead") {
				t.Errorf("lookup calibrated from %q: overhead without noisysim's CPU told apart on cores of its own", from)
			}
			for _, c := range rep.Configurations {
				if p := c.SoloQuietAll[0].P50; p < 0.85*tc.p50 || p > 1.15*tc.p50 {
					t.Errorf("%s: solo p50 %.2f ms, want about %.1f ms", c.Name, p, tc.p50)
				}
			}
		})
	}
}

// TestSimulateInterferenceFit: the slowdown per busy core beyond one is
// found from the calibration's isolated run window over its baseline (a
// quiet p99 of 5 ms with the noise, 2 ms alone, beside 1 more busy CPU:
// 1.5 in closed form), not from a disturbed or shared one; when the
// calibration run cannot be simulated, the closed form is only named.
func TestSimulateInterferenceFit(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		config    string // the calibration's configuration
		runCPU    float64
		disturbed bool
		want      float64
		from      string
	}{
		// Not simulable (no schedule hash): the closed form is named, not used.
		{"closed form", "isolated", 1.4, false, 0, "the closed form would give 1.5, fitted from run over solo quiet p99 (isolated lookup p99 5/2 ms)"},
		{"disturbed", "isolated", 1.4, true, 0, "DISTURBED"},
		{"a shared pool", "naive", 1.4, false, 0, "not fitted: no isolated configuration"},
		{"too little noise", "isolated", 0.5, false, 0, "not fitted: no isolated configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cal := calibrationReport()
			c := &cal.Configurations[0]
			c.Name = tc.config
			c.SoloQuietAll[0].P99 = 2
			c.Windows = []reports.Window{{Name: "run", QuietAll: []reports.TenantRow{{Tenant: reports.QuietAll, Class: "lookup", Count: 1000, P99: 5}}}}
			// 0.4 CPU over 5 s is more than the 1,500 ms of latencies: k 1.
			cal.Machine = &reports.Machine{Windows: []reports.WindowLoad{
				{Window: "solo (" + tc.config + ")", Seconds: 5, OwnCPU: 0.4},
				{Window: "run (" + tc.config + ")", Seconds: 5, OwnCPU: tc.runCPU, Disturbed: tc.disturbed},
			}}
			rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
			if err != nil {
				t.Fatal(err)
			}
			s := rep.Simulated
			if d := s.Interference - tc.want; d < -1e-9 || d > 1e-9 || !strings.Contains(s.InterferenceFrom, tc.from) {
				t.Errorf("interference %v from %q, want %v from %q", s.Interference, s.InterferenceFrom, tc.want, tc.from)
			}
			if s.Machines != "one machine of 2 cores" {
				t.Errorf("machines %q", s.Machines)
			}
			// Processor sharing alone makes the quiet p99 beside the
			// reports about 1.7× (at times two quiet calls and a report
			// share the 2 cores).
			for _, c := range rep.Configurations {
				if c.Name != "isolated" {
					continue
				}
				ratio := c.QuietAll[0].P99 / c.SoloQuietAll[0].P99
				if ratio > 1.8 {
					t.Errorf("isolated quiet p99 %.2f ms over solo %.2f ms (%.2f×) with interference %v", c.QuietAll[0].P99, c.SoloQuietAll[0].P99, ratio, s.Interference)
				}
			}
		})
	}
}

// TestSimulateDominantClassFromDBTime: a class only the dominant tenant
// sends, at a fixed rate (noisy-neighbor's report), has no baseline rows
// and no calibrations entry: its work is the dominant tenant's database
// time per call that ended without error, in the configuration where it is
// least.
func TestSimulateDominantClassFromDBTime(t *testing.T) {
	sc, err := scenario.Parse([]byte(strings.Replace(simScenario, "load_factor: 3", "rate: 5", 1)), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cal := calibrationReport()
	cal.Calibrations = nil
	cal.Dominant = "1"
	cal.Configurations[0].Tenants = []reports.TenantRow{{Tenant: "1", Class: "report", Count: 12, Errors: 2, DBTime: 1000}}
	cal.Configurations = append(cal.Configurations, reports.Configuration{Name: "isolated",
		Tenants: []reports.TenantRow{{Tenant: "1", Class: "report", Count: 50, Errors: 45, DBTime: 250}, {Tenant: "2", Class: "report", Count: 1, DBTime: 1}}})
	rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Simulated.Classes {
		if c.Class == "report" && (c.MeanMs < 49.9 || c.MeanMs > 50.1 || !strings.Contains(c.From, "isolated's run window: 50.0 ms over 5 calls")) {
			t.Errorf("report drawn with mean %.2f ms from %q, want 50 ms from isolated's 5 calls", c.MeanMs, c.From)
		}
	}
	cal.Dominant = "3"
	if _, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2}); !errors.Is(err, scenario.ErrInvalid) {
		t.Errorf("the dominant tenant's report rows absent: err %v, want ErrInvalid", err)
	}
}

// sliceCalibration is a calibration run of sc (simScenario) at seed whose
// isolated quiet lookups had a p99 of p99 ms in the run window (2 ms
// alone), the run window 1 CPU busier than solo, its schedule_hash that of
// sc at seed: a run the scheduler wait can be fitted to.
func sliceCalibration(t *testing.T, sc *scenario.Scenario, seed int64, p99 float64) *reports.Report {
	t.Helper()
	cal := calibrationReport()
	cal.Seed = seed
	c := &cal.Configurations[0]
	c.Name = "isolated"
	c.SoloQuietAll[0].P99 = 2
	c.Windows = []reports.Window{{Name: "run", QuietAll: []reports.TenantRow{{Tenant: reports.QuietAll, Class: "lookup", Count: 1000, P99: p99}}}}
	cal.Machine = &reports.Machine{Windows: []reports.WindowLoad{{Window: "solo (isolated)", Seconds: 5, OwnCPU: 0.4}, {Window: "run (isolated)", Seconds: 5, OwnCPU: 1.4}}}
	zero := 0.0
	ran, err := harness.Simulate(context.Background(), sc.WithSeed(seed), harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2, Interference: &zero})
	if err != nil {
		t.Fatal(err)
	}
	cal.ScheduleHash = ran.ScheduleHash
	return cal
}

// simScenarioFile writes simScenario into a temporary directory and loads
// it: a scenario with a file, as a real run's report names.
func simScenarioFile(t *testing.T) (string, *scenario.Scenario) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "simsmall.yaml")
	if err := os.WriteFile(file, []byte(simScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, sc
}

// TestRunScenario: a report's scenario file is the scenario it ran while,
// at its seed and with its calibrated rate (report, a load_factor class)
// set from its calibrations, it gives the report's schedule_hash; a file
// edited since (another lookup rate), of another scenario, missing or not
// named is said so.
func TestRunScenario(t *testing.T) {
	file, sc := simScenarioFile(t)
	dir := filepath.Dir(file)
	rep := sliceCalibration(t, sc, 4, 5)
	rep.File = file
	if got, err := harness.RunScenario(rep); err != nil || got.Seed != 4 {
		t.Fatalf("unedited: %v, err %v; want simsmall at seed 4", got, err)
	}
	for _, tc := range []struct{ name, yaml, file, want string }{
		{"edited", strings.Replace(simScenario, "rate: 200", "rate: 300", 1), file, "its scenario file " + file + " no longer gives the run's schedule at its seed 4 (edited since the run)"},
		{"another scenario", strings.Replace(simScenario, "name: simsmall", "name: other", 1), file, `is now of scenario "other", not the report's "simsmall"`},
		{"missing", simScenario, filepath.Join(dir, "gone.yaml"), "its scenario file " + filepath.Join(dir, "gone.yaml") + " is not readable here"},
		{"not named", simScenario, "", "the report names no scenario file"},
	} {
		if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		rep.File = tc.file
		if got, err := harness.RunScenario(rep); got != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, err %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestSimulateSliceFitBySimulation: when the calibration's schedule is
// simulable (its schedule_hash is that of the scenario at its seed), the
// scheduler slice is bisected until the simulated calibration run's
// isolated quiet p99 is the real one's (5 ms), the interference left at 0,
// so another seed comes out near it while the quiet calls' p50 stays that
// of processor sharing (the slice lengthens the tail alone).
func TestSimulateSliceFitBySimulation(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The calibration ran simsmall at seed 4.
	cal := sliceCalibration(t, sc, 4, 5)
	zero := 0.0
	// Processor sharing alone, at the seed simulated below.
	ps, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2, Interference: &zero})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Simulated
	if !strings.HasPrefix(s.SliceFrom, "fitted by simulating the calibration's own seed 4") || s.SliceMs <= 0 || s.SliceMs >= 32 {
		t.Errorf("slice %v ms from %q: want fitted by simulation, in (0, 32) ms", s.SliceMs, s.SliceFrom)
	}
	if s.Interference != 0 || !strings.HasPrefix(s.InterferenceFrom, "0: the scheduler slice is fitted instead") {
		t.Errorf("interference %v from %q, want 0: the slice replaces it", s.Interference, s.InterferenceFrom)
	}
	quiet := func(r *reports.Report) reports.TenantRow {
		for _, c := range r.Configurations {
			if c.Name == "isolated" {
				return c.QuietAll[0]
			}
		}
		t.Fatal("no isolated configuration")
		return reports.TenantRow{}
	}
	q, q0 := quiet(rep), quiet(ps)
	if q.P99 < 0.75*5 || q.P99 > 1.25*5 {
		t.Errorf("isolated quiet p99 %.2f ms at seed 5, want within 25%% of the calibration's 5 ms", q.P99)
	}
	if q.P50 > 1.25*q0.P50 {
		t.Errorf("isolated quiet p50 %.3f ms with the slice, %.3f ms without: want the p50 kept within 25%%", q.P50, q0.P50)
	}
	t.Logf("slice %.3g ms: quiet p50 %.3f ms (%.3f without), p99 %.2f ms (%.2f without)", s.SliceMs, q.P50, q0.P50, q.P99, q0.P99)
}

// rowsMsPerRow is a report's database time per row of its tenant in
// rowsCalibration's report: 10 ms per 1,000 of the tenant's orders.
const rowsMsPerRow = 0.01

// rowsScenario is simScenario with a report every tenant sends at rate
// (per second), on 10,000 orders.
func rowsScenario(rate string) string {
	text := strings.Replace(simScenario, "{name: report, isolation_class: heavy, query: report, load_factor: 3, senders: dominant}",
		"{name: report, isolation_class: heavy, query: report, rate: "+rate+"}", 1)
	return strings.Replace(text, "tenants: {count: 20, dominant_share: 0.6}", "tenants: {count: 20, dominant_share: 0.6}\ndata: {orders: 10000}", 1)
}

// rowsCalibration is a calibration report of rowsScenario whose tenants
// are pop's: tenants 1..5 each sent 20 reports of rowsMsPerRow per row it
// holds, tenants 2..5 10 each in the baseline, whose mix (ref ms) the
// quiet tenants' percentiles give. rows(id) is tenant id's rows; lo the
// fewest of tenants 1..5.
func rowsCalibration(t *testing.T, seed int64) (cal *reports.Report, rows func(id int) float64, ref, lo float64) {
	t.Helper()
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 20, DominantShare: 0.6}, seed)
	if err != nil {
		t.Fatal(err)
	}
	rows = func(id int) float64 { return pop.Tenants[id-1].Share * 10000 }
	cal = calibrationReport()
	cal.Calibrations = nil
	cal.Dominant = "1"
	c := &cal.Configurations[0]
	var cw, cx float64
	for id := 2; id <= 5; id++ {
		c.Solo = append(c.Solo, reports.TenantRow{Tenant: strconv.Itoa(id), Class: "report", Count: 10})
		cw, cx = cw+10, cx+10*rows(id)
	}
	ref = rowsMsPerRow * cx / cw
	var ps []reports.Percentile
	for _, p := range []float64{0, 50, 99, 100} {
		ps = append(ps, reports.Percentile{P: p, Ms: ref * (0.95 + p/1000)})
	}
	c.SoloQuietAll = append(c.SoloQuietAll, reports.TenantRow{Tenant: reports.QuietAll, Class: "report", Count: 40, Max: ref * 1.05, Percentiles: ps})
	lo = math.Inf(1)
	for id := 1; id <= 5; id++ {
		lo = min(lo, rows(id))
		c.Tenants = append(c.Tenants, reports.TenantRow{Tenant: strconv.Itoa(id), Class: "report", Count: 20, DBTime: 20 * rowsMsPerRow * rows(id)})
	}
	return cal, rows, ref, lo
}

// TestSimulateWorkGrowsWithRows: a class every tenant sends whose database
// time per call grows with the sending tenant's rows (a report over its own
// orders) is scaled per tenant by a line fitted on the calibration's
// tenants, so the dominant tenant's reports take what its rows take, not
// the quiet tenants' mix; a class whose time does not grow (lookups by key)
// is drawn the same for every tenant.
func TestSimulateWorkGrowsWithRows(t *testing.T) {
	sc, err := scenario.Parse([]byte(rowsScenario("2")), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cal, rows, ref, _ := rowsCalibration(t, sc.Seed)
	c := &cal.Configurations[0]
	for id := 1; id <= 5; id++ {
		c.Tenants = append(c.Tenants, reports.TenantRow{Tenant: strconv.Itoa(id), Class: "lookup", Count: 100, DBTime: 100 * 1.5})
	}
	// The calibration ran this scenario at its seed: the same schedule.
	ran, err := harness.Simulate(context.Background(), sc.WithSeed(cal.Seed), harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	cal.ScheduleHash = ran.ScheduleHash
	rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Simulated.Classes {
		scaled := strings.Contains(s.From, "scaled by its tenant's rows")
		if scaled != (s.Class == "report") {
			t.Errorf("class %s drawn from %q: scaled per tenant %v, want %v", s.Class, s.From, scaled, s.Class == "report")
		}
	}
	want := rowsMsPerRow * rows(1) // 60 ms: tenant 1 holds 6,000 of the 10,000 orders
	for _, cf := range rep.Configurations {
		if cf.Name != "isolated" {
			continue
		}
		for _, row := range cf.Tenants {
			if row.Tenant == "1" && row.Class == "report" && (row.P50 < 0.8*want || row.P50 > 1.25*want) {
				t.Errorf("tenant 1's reports: p50 %.1f ms, want about %.0f ms (its rows), not the quiet mix's %.1f ms", row.P50, want, ref)
			}
		}
	}
}

// TestSimulateRowsFitNeedsCalibrationTenants: the rows fit places each
// calibration tenant's measured time at the rows it held in the
// calibration run. A scenario at another dominant_share (a sweep point)
// whose calibration file is not readable here has other shares: it is
// not fitted on them but drawn the same for every tenant, and the class's
// line says why; with the calibration's file readable, it is fitted on the
// calibration's tenants and scaled to the simulated tenant's rows, unless
// that file was edited since the run (another schedule). A
// simulated data set of the scenario's own (data.setup) is never said to
// be scaled.
func TestSimulateRowsFitNeedsCalibrationTenants(t *testing.T) {
	base := rowsScenario("2")
	calText := strings.Replace(base, "seed: 5", "seed: 4", 1)
	calSc, err := scenario.Parse([]byte(calText), "cal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cal, _, ref, _ := rowsCalibration(t, calSc.Seed)
	ran, err := harness.Simulate(context.Background(), calSc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	cal.ScheduleHash = ran.ScheduleHash

	point, err := scenario.Parse([]byte(strings.Replace(base, "dominant_share: 0.6", "dominant_share: 0.3", 1)), "point.yaml")
	if err != nil {
		t.Fatal(err)
	}
	simPop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 20, DominantShare: 0.3}, point.Seed)
	if err != nil {
		t.Fatal(err)
	}
	simulate := func(sc *scenario.Scenario, cal *reports.Report) (from string, p50 float64) {
		t.Helper()
		rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range rep.Simulated.Classes {
			if s.Class == "report" {
				from = s.From
			}
		}
		for _, cf := range rep.Configurations {
			for _, row := range cf.Tenants {
				if cf.Name == "isolated" && row.Tenant == "1" && row.Class == "report" {
					p50 = row.P50
				}
			}
		}
		return from, p50
	}

	cal.File = filepath.Join(t.TempDir(), "missing.yaml")
	from, p50 := simulate(point, cal)
	if strings.Contains(from, "scaled by its tenant's rows") || !strings.Contains(from, "drawn the same for every tenant") {
		t.Errorf("calibration file unreadable, another schedule: report drawn from %q, want drawn the same for every tenant and why", from)
	}
	if p50 < 0.8*ref || p50 > 1.25*ref {
		t.Errorf("calibration file unreadable: tenant 1's reports p50 %.2f ms, want the unscaled mix's %.2f ms", p50, ref)
	}

	cal.File = filepath.Join(t.TempDir(), "cal.yaml")
	if err := os.WriteFile(cal.File, []byte(calText), 0o644); err != nil {
		t.Fatal(err)
	}
	from, p50 = simulate(point, cal)
	want := rowsMsPerRow * simPop.Tenants[0].Share * 10000
	if !strings.Contains(from, "scaled by its tenant's rows") {
		t.Errorf("calibration file readable: report drawn from %q, want scaled by its tenant's rows", from)
	}
	if p50 < 0.8*want || p50 > 1.25*want {
		t.Errorf("calibration file readable: tenant 1's reports p50 %.2f ms, want about %.2f ms (its rows at share %.2f)", p50, want, simPop.Tenants[0].Share)
	}

	// The calibration's file edited since the run (another share):
	// not the tenants the calibration measured.
	edited := strings.Replace(calText, "dominant_share: 0.6", "dominant_share: 0.3", 1)
	if err := os.WriteFile(cal.File, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if from, _ = simulate(point, cal); strings.Contains(from, "scaled by its tenant's rows") || !strings.Contains(from, "edited since") {
		t.Errorf("calibration file edited since the run: report drawn from %q, want drawn the same for every tenant and why", from)
	}
	if err := os.WriteFile(cal.File, []byte(calText), 0o644); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.sql"), []byte("select 1;"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := strings.Replace(calText, "data: {orders: 10000}", "data: {setup: [x.sql]}", 1)
	for _, q := range []string{"lookup", "report"} {
		own = strings.Replace(own, "query: "+q, "sql: \"select 1\"", 1)
	}
	setup, err := scenario.Parse([]byte(own), filepath.Join(dir, "setup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if from, _ = simulate(setup, cal); strings.Contains(from, "scaled by its tenant's rows") || !strings.Contains(from, "data.setup") {
		t.Errorf("data.setup: report drawn from %q, want not scaled (its rows per tenant are not known) and why", from)
	}
}

// ownRowsCalibration is rowsCalibration of base at seed 4, as the
// calibration's own run: its scenario file written beside it and its
// schedule_hash the one a run of it has, so that the rows fit trusts it.
func ownRowsCalibration(t *testing.T, base string) (cal *reports.Report, rows func(id int) float64, lo float64) {
	t.Helper()
	calText := strings.Replace(base, "seed: 5", "seed: 4", 1)
	calSc, err := scenario.Parse([]byte(calText), "cal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cal, rows, _, lo = rowsCalibration(t, calSc.Seed)
	ownCalibration(t, cal, calSc, calText)
	return cal, rows, lo
}

// ownCalibration makes cal the report of a run of calSc (whose text is
// calText): the scenario file written beside it and its schedule_hash the
// one a run of it has, as simulate checks before it trusts the calibration
// with the scenario's shape.
func ownCalibration(t *testing.T, cal *reports.Report, calSc *scenario.Scenario, calText string) {
	t.Helper()
	cal.File = filepath.Join(t.TempDir(), "cal.yaml")
	if err := os.WriteFile(cal.File, []byte(calText), 0o644); err != nil {
		t.Fatal(err)
	}
	ran, err := harness.Simulate(context.Background(), calSc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	cal.ScheduleHash = ran.ScheduleHash
}

// TestSimulateRowsFitFloor: a tenant with fewer rows than the calibration's
// smallest (many more tenants on the same orders) is drawn as that
// smallest tenant, not by the line extrapolated to near 0 ms.
func TestSimulateRowsFitFloor(t *testing.T) {
	base := rowsScenario("40")
	cal, _, lo := ownRowsCalibration(t, base)

	many, err := scenario.Parse([]byte(strings.Replace(base, "count: 20,", "count: 2000,", 1)), "many.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manyPop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 2000, DominantShare: 0.6}, many.Seed)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Simulate(context.Background(), many, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	small := 0
	for _, cf := range rep.Configurations {
		for _, row := range cf.Tenants {
			id, err := strconv.Atoi(row.Tenant)
			if err != nil || cf.Name != "isolated" || row.Class != "report" || row.Count == 0 || manyPop.Tenants[id-1].Share*10000 > lo/4 {
				continue
			}
			small++
			if row.P50 < 0.8*rowsMsPerRow*lo {
				t.Errorf("tenant %s (%.1f rows): report p50 %.3f ms, want at least about %.2f ms (the calibration's smallest tenant, %.0f rows)",
					row.Tenant, manyPop.Tenants[id-1].Share*10000, row.P50, rowsMsPerRow*lo, lo)
			}
		}
	}
	if small == 0 {
		t.Fatalf("no tenant with fewer than %.0f rows sent a report", lo/4)
	}
}

// TestSimulateRowsFitAbove: a tenant with more rows than the calibration's
// largest (the same tenants on 10× the orders) is drawn on the fitted line
// only up to 4× that tenant's cost, and the notes say how many tenants and
// calls lay above the calibrated range, how far, and that the cap applied;
// on the calibration's own orders every tenant lies within it and no note
// says otherwise.
func TestSimulateRowsFitAbove(t *testing.T) {
	base := rowsScenario("2")
	cal, rows, _ := ownRowsCalibration(t, base)
	hi := rows(1) // the dominant tenant: the most rows of the calibration's
	simulate := func(text string) *reports.Report {
		t.Helper()
		sc, err := scenario.Parse([]byte(text), "sim.yaml")
		if err != nil {
			t.Fatal(err)
		}
		rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	aboveNote := func(rep *reports.Report) string {
		for _, n := range rep.Notes {
			if strings.HasPrefix(n, "report: ") && strings.Contains(n, "more rows than the calibration's largest tenant") {
				return n
			}
		}
		return ""
	}

	within := simulate(base)
	if n := aboveNote(within); n != "" {
		t.Errorf("every tenant within the calibrated range, yet a note: %s", n)
	}
	for _, s := range within.Simulated.Classes {
		if s.Class == "report" && !strings.Contains(s.From, fmt.Sprintf("above %.0f, its largest's, at most 4× that tenant's cost", hi)) {
			t.Errorf("report drawn from %q: want the cap above %.0f rows stated", s.From, hi)
		}
	}

	above := simulate(strings.Replace(base, "data: {orders: 10000}", "data: {orders: 100000}", 1))
	n := aboveNote(above)
	t.Logf("10× the orders: %s", n)
	for _, want := range []string{"up to 10× as many", fmt.Sprintf("(%.0f rows)", hi), "capped at 4× that tenant's cost", "the cap applied to"} {
		if !strings.Contains(n, want) {
			t.Errorf("10× the orders: note %q lacks %q (notes: %q)", n, want, above.Notes)
		}
	}
	simPop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 20, DominantShare: 0.6}, 5)
	if err != nil {
		t.Fatal(err)
	}
	bigger := 0
	for _, tn := range simPop.Tenants {
		if tn.Share*100000 > hi {
			bigger++
		}
	}
	var tenants int
	var sent, calls int64
	if _, err := fmt.Sscanf(strings.Replace(n, " tenant sent", " tenants sent", 1), "report: %d simulated tenants sent %d of its %d calls", &tenants, &sent, &calls); err != nil ||
		tenants < 1 || tenants > bigger || sent <= 0 || sent >= calls {
		t.Errorf("10× the orders: note %q: %d tenants (want 1..%d, those holding more than %.0f rows) sent %d of %d calls (%v)", n, tenants, bigger, hi, sent, calls, err)
	}
	// Tenant 1's reports: at the cap, 4 × its calibrated cost, not the
	// line's 10 ×.
	want := maxRowsCap * rowsMsPerRow * hi
	for _, cf := range above.Configurations {
		for _, row := range cf.Tenants {
			if cf.Name == "isolated" && row.Tenant == "1" && row.Class == "report" && (row.P50 < 0.8*want || row.P50 > 1.25*want) {
				t.Errorf("tenant 1 on 10× the orders: report p50 %.1f ms, want about %.0f ms (capped at 4× %.0f ms), not the line's %.0f ms",
					row.P50, want, rowsMsPerRow*hi, 10*rowsMsPerRow*hi)
			}
		}
	}

	// 2× the orders: above the range, on the line, below the cap.
	n = aboveNote(simulate(strings.Replace(base, "data: {orders: 10000}", "data: {orders: 20000}", 1)))
	if !strings.Contains(n, "up to 2× as many") || !strings.Contains(n, "below the cap of 4×") || strings.Contains(n, "cap applied") {
		t.Errorf("2× the orders: note %q, want above the range up to 2×, below the cap", n)
	}
}

// maxRowsCap is harness's cap on the rows fit above its range (4× the
// calibration's largest tenant's cost).
const maxRowsCap = 4

// TestSimulateDominantReportScalesWithRows: a report only the dominant
// tenant sends reads all of its orders, so at another tenants.dominant_share
// (a sweep point of noisy-neighbor's or ci-gate's share) each of its reports
// takes its rows over the calibration's dominant tenant's times the
// calibrated work, as a real run at that share does, and a calibrated
// (load_factor) rate is set from that work, as a real run's calibration
// sets it; at the calibration's own share nothing changes.
func TestSimulateDominantReportScalesWithRows(t *testing.T) {
	for _, tc := range []struct {
		name, class string
		calibrated  bool
	}{
		{"fixed rate", "{name: report, isolation_class: heavy, query: report, rate: 5, senders: dominant}", false},
		{"load_factor", "{name: report, isolation_class: heavy, query: report, load_factor: 3, senders: dominant}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const calMs = 60.0 // a report of the dominant tenant at 0.6 of 10,000 orders
			base := strings.Replace(simScenario, "{name: report, isolation_class: heavy, query: report, load_factor: 3, senders: dominant}", tc.class, 1)
			base = strings.Replace(base, "tenants: {count: 20, dominant_share: 0.6}", "tenants: {count: 20, dominant_share: 0.6}\ndata: {orders: 10000}", 1)
			calText := strings.Replace(base, "seed: 5", "seed: 4", 1)
			calSc, err := scenario.Parse([]byte(calText), "cal.yaml")
			if err != nil {
				t.Fatal(err)
			}
			cal := calibrationReport()
			cal.Dominant = "1"
			if tc.calibrated {
				cal.Calibrations = []reports.Calibration{{Class: "report", Samples: 20, ServiceMean: calMs, ServiceP50: calMs}}
			} else {
				cal.Calibrations = nil
				cal.Configurations[0].Tenants = []reports.TenantRow{{Tenant: "1", Class: "report", Count: 20, DBTime: 20 * calMs}}
			}
			ownCalibration(t, cal, calSc, calText)

			for _, share := range []float64{0.6, 0.3, 0.8} {
				text := strings.Replace(base, "dominant_share: 0.6", fmt.Sprintf("dominant_share: %g", share), 1)
				sc, err := scenario.Parse([]byte(text), "point.yaml")
				if err != nil {
					t.Fatal(err)
				}
				rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
				if err != nil {
					t.Fatal(err)
				}
				want := calMs * share / 0.6
				// Database time per report that ended without error, in
				// isolated (one report at a time: none slowed by another).
				var per float64
				for _, cf := range rep.Configurations {
					for _, row := range cf.Tenants {
						if n := row.Count - row.Errors - row.Incomplete; cf.Name == "isolated" && row.Tenant == "1" && row.Class == "report" && n > 0 {
							per = row.DBTime / float64(n)
						}
					}
				}
				if per < 0.8*want || per > 1.25*want {
					t.Errorf("dominant_share %g: tenant 1's reports took %.1f ms of database time each, want about %.1f ms (its rows over the calibration's at 0.6, times %.0f ms)", share, per, want, calMs)
				}
				for _, s := range rep.Simulated.Classes {
					if s.Class == "report" && !strings.Contains(s.From, "scaled by the dominant tenant's rows") {
						t.Errorf("dominant_share %g: report drawn from %q, want scaled by the dominant tenant's rows", share, s.From)
					}
				}
				if !tc.calibrated {
					continue
				}
				// naive's shared pool of 10, load_factor 3: 30 reports in flight.
				wantRate := 3 * 10 / (want / 1000)
				if len(rep.Calibrations) != 1 || math.Abs(rep.Calibrations[0].Rate-wantRate) > 0.01*wantRate || math.Abs(rep.Calibrations[0].ServiceMean-want) > 0.01*want {
					t.Errorf("dominant_share %g: calibrations %+v, want rate %.0f/s from a %.1f ms report", share, rep.Calibrations, wantRate, want)
				}
			}
		})
	}
}

// TestSimulateSliceFitOverRuns: calibrated on several runs of one scenario
// at other seeds, the scheduler wait is fitted to the median of their quiet
// p99s (the tail one run shows varies from seed to seed), the service times
// averaged over them; a run of another scenario among them is refused,
// naming it.
func TestSimulateSliceFitOverRuns(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(seed int64, p99 float64) *reports.Report { return sliceCalibration(t, sc, seed, p99) }
	low, mid, high := run(4, 4), run(6, 6), run(7, 10)
	at9 := sc.WithSeed(9)
	simulate := func(reps ...*reports.Report) *reports.Report {
		t.Helper()
		var files []string
		for _, r := range reps[1:] {
			files = append(files, fmt.Sprintf("run-%d.json", r.Seed))
		}
		rep, err := harness.Simulate(context.Background(), at9, harness.SimulateOptions{Calibration: reps[0], CalibrationFile: fmt.Sprintf("run-%d.json", reps[0].Seed),
			MoreCalibrations: reps[1:], MoreCalibrationFiles: files, Cores: 2})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	quiet := func(r *reports.Report) float64 {
		for _, c := range r.Configurations {
			if c.Name == "isolated" {
				return c.QuietAll[0].P99
			}
		}
		t.Fatal("no isolated configuration")
		return 0
	}
	all, alone4, alone10 := simulate(low, high, mid), simulate(low), simulate(high)
	s := all.Simulated
	if !strings.HasPrefix(s.SliceFrom, "fitted by simulating 3 calibration runs at their own seeds (4, 7, 6) until the median of their run quiet p99s matched") {
		t.Errorf("slice from %q: want fitted over the 3 runs' median", s.SliceFrom)
	}
	if !slices.Equal(s.CalibrationSeeds, []int64{4, 7, 6}) || s.Calibration != "run-4.json, run-7.json, run-6.json" {
		t.Errorf("calibration %q seeds %v: want the three runs named", s.Calibration, s.CalibrationSeeds)
	}
	if !(alone4.Simulated.SliceMs < s.SliceMs && s.SliceMs < alone10.Simulated.SliceMs) {
		t.Errorf("slice over the runs %.3g ms, want between the 4 ms run's %.3g and the 10 ms run's %.3g", s.SliceMs, alone4.Simulated.SliceMs, alone10.Simulated.SliceMs)
	}
	if q := quiet(all); q < 0.75*6 || q > 1.25*6 {
		t.Errorf("isolated quiet p99 %.2f ms at seed 9, want within 25%% of the runs' median 6 ms (alone: %.2f fitted on 4 ms, %.2f on 10 ms)", q, quiet(alone4), quiet(alone10))
	}
	if !slices.ContainsFunc(s.Classes, func(c reports.SimulatedClass) bool {
		return c.Class == "lookup" && strings.Contains(c.From, "of 3 configurations over 3 runs (seeds 4, 7, 6)")
	}) {
		t.Errorf("classes %+v: want the lookup's service times averaged over the 3 runs", s.Classes)
	}
	t.Logf("slice %.3g ms over the runs (%.3g on the 4 ms run, %.3g on the 10 ms one); quiet p99 %.2f ms", s.SliceMs, alone4.Simulated.SliceMs, alone10.Simulated.SliceMs, quiet(all))

	other := run(8, 6)
	other.Scenario = "another"
	_, err = harness.Simulate(context.Background(), at9, harness.SimulateOptions{Calibration: low, CalibrationFile: "run-4.json",
		MoreCalibrations: []*reports.Report{other}, MoreCalibrationFiles: []string{"other.json"}, Cores: 2})
	if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "--calibrate other.json: a run of scenario \"another\"") {
		t.Errorf("err = %v, want the run of another scenario named", err)
	}
}

// TestSimulateLoadFactorWithoutCalibration: a load_factor class the
// calibration drew from its dominant tenant's database time (no
// calibrations entry: it was not a load_factor class there) has no wall time to set
// its rate from: bad input naming the class and the file, not a rate of
// +Inf.
func TestSimulateLoadFactorWithoutCalibration(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A run where the dominant tenant sent its reports at a rate of their
	// own: drawn from its database time.
	cal := calibrationReport()
	cal.Calibrations, cal.Dominant = nil, "1"
	cal.Configurations[0].Tenants = []reports.TenantRow{{Tenant: "1", Class: "report", Count: 20, DBTime: 1000}}
	_, err = harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json", Cores: 2})
	if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "classes[1].load_factor: class report sets its rate from its service time alone, and --calibrate cal.json") {
		t.Errorf("err = %v, want the class and the calibration named", err)
	}
}

// countdownCtx is a context cancelled at the n-th call of its Err (from
// any goroutine): a signal that lands at a chosen step of the work.
type countdownCtx struct {
	context.Context
	cancel context.CancelFunc
	left   atomic.Int64
}

func newCountdownCtx(n int64) *countdownCtx {
	ctx, cancel := context.WithCancel(context.Background())
	c := &countdownCtx{Context: ctx, cancel: cancel}
	c.left.Store(n)
	return c
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) <= 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// TestSimulateSliceFitInterrupted: a simulation calibrated on several runs
// and interrupted at any step, the scheduler wait's fit over the runs
// among them, returns context.Canceled and says it once (once per
// calibration run before).
func TestSimulateSliceFitInterrupted(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reps := []*reports.Report{sliceCalibration(t, sc, 4, 4), sliceCalibration(t, sc, 7, 10), sliceCalibration(t, sc, 6, 6)}
	at9 := sc.WithSeed(9)
	interrupted := 0
	for n := int64(1); n < 1<<20; n *= 2 {
		ctx := newCountdownCtx(n)
		_, err := harness.Simulate(ctx, at9, harness.SimulateOptions{Calibration: reps[0], CalibrationFile: "run-4.json",
			MoreCalibrations: reps[1:], MoreCalibrationFiles: []string{"run-7.json", "run-6.json"}, Cores: 2})
		ctx.cancel()
		if err == nil {
			break // finished before its n-th step
		}
		interrupted++
		if !errors.Is(err, context.Canceled) || strings.Count(err.Error(), "context canceled") != 1 {
			t.Errorf("cancelled at step %d: %q, want context.Canceled said once", n, err)
		}
	}
	if interrupted < 3 {
		t.Errorf("interrupted at %d steps only: the countdown does not reach the fit", interrupted)
	}
}

// TestSimulateLoadFactorMedianRun: over several calibration runs, a
// load_factor class's rate is set from the median run's service time
// alone, not the first run's: a first run that measured its reports on a
// busy moment (92 ms against 50 and 60) no longer sets every simulated
// run's rate. One run alone still sets it.
func TestSimulateLoadFactorMedianRun(t *testing.T) {
	sc, err := scenario.Parse([]byte(simScenario), "simsmall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(seed int64, mean float64) *reports.Report {
		r := calibrationReport()
		r.Seed = seed
		r.Calibrations[0].ServiceMean, r.Calibrations[0].ServiceP50 = mean, mean
		return r
	}
	rate := func(reps ...*reports.Report) (float64, string) {
		t.Helper()
		rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: reps[0], CalibrationFile: "run-1.json",
			MoreCalibrations: reps[1:], MoreCalibrationFiles: []string{"run-2.json", "run-3.json"}[:len(reps)-1], Cores: 2, CalibrateOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Calibrations) != 1 {
			t.Fatalf("calibrations %+v", rep.Calibrations)
		}
		return rep.Calibrations[0].Rate, rep.Calibrations[0].Query
	}
	if r, _ := rate(run(4, 92), run(5, 50), run(6, 60)); math.Abs(r-3*10/0.060) > 1e-6 {
		t.Errorf("rate %.1f/s over runs of 92, 50 and 60 ms, want the 60 ms run's 3 × 10 / 60 ms = 500/s", r)
	}
	if r, _ := rate(run(4, 92), run(5, 50)); math.Abs(r-3*10/0.050) > 1e-6 {
		t.Errorf("rate %.1f/s over runs of 92 and 50 ms, want the lower middle one's (50 ms) 600/s", r)
	}
	if r, _ := rate(run(4, 92)); math.Abs(r-3*10/0.092) > 1e-6 {
		t.Errorf("rate %.1f/s for one run of 92 ms, want its own %.1f/s", r, 3*10/0.092)
	}
	// An entry that cannot set a rate (a report edited by hand) is left
	// out and said to be; with none usable, the error names the file and
	// the value.
	if r, _ := rate(run(4, 92), run(5, 0), run(6, 1e308)); math.Abs(r-3*10/0.092) > 1e-6 {
		t.Errorf("rate %.1f/s over runs of 92, 0 and 1e308 ms, want the one usable run's", r)
	}
	rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: run(4, 92), CalibrationFile: "run-1.json",
		MoreCalibrations: []*reports.Report{run(5, -5), run(6, 60)}, MoreCalibrationFiles: []string{"run-2.json", "run-3.json"}, Cores: 2, CalibrateOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if from := rep.Simulated; from == nil {
		t.Fatal("not simulated")
	}
	_, err = harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: run(4, 0), CalibrationFile: "run-1.json",
		MoreCalibrations: []*reports.Report{run(5, 1e-300)}, MoreCalibrationFiles: []string{"run-2.json"}, Cores: 2, CalibrateOnly: true})
	if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(fmt.Sprint(err), "--calibrate run-1.json has no usable calibrations entry for it (service_mean_ms 0 over 20 queries") {
		t.Errorf("err = %v, want the unusable entry named with its file", err)
	}
}

// TestSimulateMedianRunKeepsTheFirstRunsSchedule: with the median run's
// rate drawn, the first calibration run's scenario file is still checked
// against its own schedule (its own rate): not said to be edited since,
// so the report class is still rescaled to the dominant tenant's rows.
func TestSimulateMedianRunKeepsTheFirstRunsSchedule(t *testing.T) {
	file, sc := simScenarioFile(t)
	run := func(seed int64, mean float64) *reports.Report {
		r := calibrationReport()
		r.Seed, r.File, r.FileAbs = seed, file, file
		r.Calibrations[0].ServiceMean, r.Calibrations[0].ServiceP50 = mean, mean
		zero := 0.0
		ran, err := harness.Simulate(context.Background(), sc.WithSeed(seed), harness.SimulateOptions{Calibration: r, CalibrationFile: "cal.json", Cores: 2, Interference: &zero})
		if err != nil {
			t.Fatal(err)
		}
		r.ScheduleHash = ran.ScheduleHash // its schedule at its own rate
		return r
	}
	first, second, third := run(4, 92), run(5, 50), run(6, 60)
	rep, err := harness.Simulate(context.Background(), sc, harness.SimulateOptions{Calibration: first, CalibrationFile: "run-1.json",
		MoreCalibrations: []*reports.Report{second, third}, MoreCalibrationFiles: []string{"run-2.json", "run-3.json"}, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Simulated.Classes {
		if c.Class == "report" && (strings.Contains(c.From, "edited since") || !strings.Contains(c.From, "the median of 3 runs")) {
			t.Errorf("report drawn %q: want the median run's, the first run's file not said to be edited", c.From)
		}
	}
}
