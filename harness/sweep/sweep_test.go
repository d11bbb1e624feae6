package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/reports"
)

func load(t *testing.T) *sweep.Source {
	t.Helper()
	src, err := sweep.Load("../../scenarios/noisy-neighbor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestLookupAndEdit(t *testing.T) {
	src := load(t)
	for _, tc := range []struct {
		path  string
		value float64
		isInt bool
		set   float64
		check func(*scenario.Scenario) float64
	}{
		{"classes.report.rate", 12, false, 30.5, func(s *scenario.Scenario) float64 { return s.Classes[2].Rate }},
		{"classes.0.rate", 200, false, 150, func(s *scenario.Scenario) float64 { return s.Classes[0].Rate }},
		{"tenants.dominant_share", 0.6, false, 0.35, func(s *scenario.Scenario) float64 { return s.Tenants.DominantShare }},
		{"tenants.count", 50, true, 20, func(s *scenario.Scenario) float64 { return float64(s.Tenants.Count) }},
		{"configurations.isolated.heavy.limiter.max_queue", 5, true, 9, func(s *scenario.Scenario) float64 {
			c, _ := s.Configuration("isolated")
			return float64(c.Heavy.Limiter.MaxQueue)
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			k, err := src.Lookup(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if k.Value != tc.value || k.Int != tc.isInt {
				t.Errorf("Lookup = %v int %v, want %v int %v", k.Value, k.Int, tc.value, tc.isInt)
			}
			sc, err := src.Scenario([]sweep.Setting{{Key: k, Value: tc.set}})
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.check(sc); got != tc.set {
				t.Errorf("after the edit %s = %v, want %v", tc.path, got, tc.set)
			}
		})
	}
}

func TestLookupBadKeys(t *testing.T) {
	src := load(t)
	for _, tc := range []struct{ path, want string }{
		{"classes.report.ratee", `no key "ratee"`},
		{"classes.nosuch.rate", `no item named "nosuch"`},
		{"classes.report.query", "not a numeric key"},
		{"backend.settings.max_connections", "quoted string"},
		{"tenants", "not a numeric key"},
		{"tenants.exponent.x", "is a value"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, err := src.Lookup(tc.path)
			if !errors.Is(err, sweep.ErrBadInput) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "noisy-neighbor.yaml:") {
				t.Errorf("Lookup(%s) = %v, want ErrBadInput with file:line:col and %q", tc.path, err, tc.want)
			}
		})
	}
}

// A value out of the key's bounds is the scenario's own validation problem,
// at the key's place in the file.
func TestOutOfBoundsIsScenarioProblem(t *testing.T) {
	src := load(t)
	v, err := sweep.ParseVary("tenants.dominant_share=0.5..1.5:3")
	if err != nil {
		t.Fatal(err)
	}
	_, err = sweep.New(src, []sweep.Vary{v}, sweep.Options{})
	k, _ := src.Lookup("tenants.dominant_share")
	var se *scenario.Error
	if !errors.As(err, &se) || !errors.Is(err, scenario.ErrInvalid) || len(se.Problems) != 1 ||
		se.Problems[0].Line != k.Line || se.Problems[0].Field != "tenants.dominant_share" {
		t.Fatalf("New = %v, want the scenario's problem at line %d", err, k.Line)
	}
}

func TestParseVary(t *testing.T) {
	for _, tc := range []struct {
		in    string
		isInt bool
		want  []float64
		err   string
	}{
		{in: "classes.report.rate=6..48*2", isInt: true, want: []float64{6, 12, 24, 48}},
		{in: "k=1..2:3", want: []float64{1, 1.5, 2}},
		{in: "k=0.1..0.9:5", want: []float64{0.1, 0.3, 0.5, 0.7, 0.9}},
		{in: "k=1..3:5", isInt: true, want: []float64{1, 2, 3}},
		{in: "k=1..100", want: []float64{1, 25.75, 50.5, 75.25, 100}},
		{in: "k=7", want: []float64{7}},
		{in: "k=1..10*3", want: []float64{1, 3, 9}},
		{in: "k=1..2:0", err: "STEPS"},
		{in: "k=1..2:x", err: "STEPS"},
		{in: "k=2..1", err: "below LO"},
		{in: "k=1..8*1", err: "FACTOR"},
		{in: "k=0..8*2", err: "above 0"},
		{in: "k=a..2", err: "LO"},
		{in: "=1..2", err: "want KEY="},
		{in: "k", err: "want KEY="},
	} {
		t.Run(tc.in, func(t *testing.T) {
			v, err := sweep.ParseVary(tc.in)
			if tc.err != "" {
				if !errors.Is(err, sweep.ErrBadInput) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseVary = %v, want ErrBadInput naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Values(tc.isInt); !slices.Equal(got, tc.want) {
				t.Errorf("Values = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBisect(t *testing.T) {
	// The assertions hold up to 30; at 30 one trial in three fails by
	// chance, so the knee with 3/3 trials lies below it.
	probe := func(calls *[]float64) func(float64) (int, error) {
		return func(x float64) (int, error) {
			*calls = append(*calls, x)
			switch {
			case x < 30:
				return 3, nil
			case x == 30:
				return 2, nil
			}
			return 0, nil
		}
	}
	var calls []float64
	k, err := sweep.Bisect(6, 96, true, 10, 3, probe(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if !k.Found || k.AboveRange || k.Knee != 29 || k.FailAt != 30 || k.KneePasses != 3 || k.FailPasses != 2 {
		t.Errorf("Bisect = %+v (probes %v), want knee 29 (3/3), fail at 30 (2/3)", k, calls)
	}
	if calls[0] != 6 || calls[1] != 96 {
		t.Errorf("probes %v: want the range's ends first", calls)
	}
	calls = nil
	if k, _ := sweep.Bisect(31, 96, true, 10, 3, probe(&calls)); k.Found || len(calls) != 1 {
		t.Errorf("failing at LO: %+v after %v, want not found after one probe", k, calls)
	}
	calls = nil
	if k, _ := sweep.Bisect(1, 20, false, 10, 3, probe(&calls)); !k.AboveRange || k.Knee != 20 || len(calls) != 2 {
		t.Errorf("holding at HI: %+v after %v, want above range at 20", k, calls)
	}
	calls = nil
	k, _ = sweep.Bisect(10, 40, false, 3, 3, probe(&calls))
	if len(calls) != 5 || k.Knee < 10 || k.Knee >= 30 || k.FailAt < 30 {
		t.Errorf("3 iterations: %+v after %v, want 5 probes and 10 <= knee < 30 <= fail", k, calls)
	}
}

// fakeRun stands in for harness.Run: configuration "isolated" holds while
// the report rate is at most 24, "naive" never.
func fakeRun(runs *int) sweep.RunFunc {
	return func(_ context.Context, sc *scenario.Scenario, only string) (*reports.Report, error) {
		*runs++
		rep := &reports.Report{Seed: sc.Seed}
		for _, c := range sc.Configurations {
			if only != "" && c.Name != only {
				continue
			}
			held := c.Name == "isolated" && sc.Classes[2].Rate <= 24 || c.Name == "naive" && sc.Classes[2].Rate <= 3
			if c.Name == "naive" && only == "" { // as the harness judges a control
				rep.Assertions = append(rep.Assertions, reports.Assertion{Name: "control_fails", Configuration: c.Name, Passed: !held})
			}
			rep.Configurations = append(rep.Configurations, reports.Configuration{Name: c.Name,
				QuietAll:     []reports.TenantRow{{Class: "lookup", P99: 10}},
				SoloQuietAll: []reports.TenantRow{{Class: "lookup", P99: 4}}})
			rep.Assertions = append(rep.Assertions, reports.Assertion{Name: "quiet_p99", Configuration: c.Name,
				Tenant: reports.QuietAll, Class: "lookup", Passed: held})
		}
		return rep, nil
	}
}

func TestKneesAndResume(t *testing.T) {
	src := load(t)
	v, _ := sweep.ParseVary("classes.report.rate=6..96")
	dir := t.TempDir()
	runs := 0
	ctx, cancel := context.WithCancel(context.Background())
	opts := sweep.Options{Trials: 2, Iterations: 6, Run: fakeRun(&runs), OnTrial: func(d *sweep.Doc) {
		if err := d.WriteFile(dir); err != nil {
			t.Fatal(err)
		}
		if runs == 5 {
			cancel() // interrupted: the next run sees it
		}
	}}
	interrupted := opts
	interrupted.Run = func(c context.Context, sc *scenario.Scenario, only string) (*reports.Report, error) {
		if c.Err() != nil {
			return nil, c.Err()
		}
		return fakeRun(&runs)(c, sc, only)
	}
	sw, err := sweep.New(src, []sweep.Vary{v}, interrupted)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Knees(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Knees = %v, want interrupted", err)
	}
	prior, err := sweep.ReadFile(dir)
	if err != nil || prior.Complete || len(prior.Points) == 0 {
		t.Fatalf("after the interruption: %v, %+v", err, prior)
	}
	done := runs
	opts.Prior = prior
	sw, err = sweep.New(src, []sweep.Vary{v}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Knees(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := sw.Doc()
	if len(d.Knees) != 2 || !d.Complete {
		t.Fatalf("knees %+v", d.Knees)
	}
	iso, naive := d.Knees[1], d.Knees[0]
	if iso.Configuration != "isolated" || !iso.Found || iso.Knee != 24 || iso.Headroom != 2 || iso.KneePasses != 2 {
		t.Errorf("isolated: %+v, want knee 24 = 2x today's 12", iso)
	}
	if naive.Found {
		t.Errorf("naive: %+v, want failing at the bottom", naive)
	}
	// A held control fails the run's control_fails, not its own assertions.
	grid, _ := sweep.ParseVary("classes.report.rate=2")
	gridRuns := 0
	sw3, _ := sweep.New(src, []sweep.Vary{grid}, sweep.Options{Run: fakeRun(&gridRuns)})
	if err := sw3.Grid(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := sw3.Doc().Points[0].Summary[0]; s.Name != "naive" || s.Held != 1 {
		t.Errorf("naive at rate 2: %+v, want held", s)
	}
	// The resumed sweep ran only what the interrupted one had not.
	fresh := 0
	sw2, _ := sweep.New(src, []sweep.Vary{v}, sweep.Options{Trials: 2, Iterations: 6, Run: fakeRun(&fresh)})
	if err := sw2.Knees(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs != fresh || done >= fresh {
		t.Errorf("runs: %d before the interruption, %d in all; a fresh sweep takes %d", done, runs, fresh)
	}
	if s := sweep.KneeSentence(iso); !strings.Contains(s, "isolated holds classes.report.rate to 24 (2× today's 12") {
		t.Errorf("sentence %q", s)
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep.json")); err != nil {
		t.Error(err)
	}
}

func TestGridPoints(t *testing.T) {
	src := load(t)
	v1, _ := sweep.ParseVary("classes.report.rate=12..24:2")
	v2, _ := sweep.ParseVary("tenants.dominant_share=0.4..0.6:2")
	runs := 0
	sw, err := sweep.New(src, []sweep.Vary{v1, v2}, sweep.Options{Trials: 2, Run: fakeRun(&runs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Grid(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := sw.Doc()
	if len(d.Points) != 4 || runs != 8 || d.Points[3].Values["tenants.dominant_share"] != 0.6 || d.Points[3].Values["classes.report.rate"] != 24 {
		t.Fatalf("points %+v after %d runs", d.Points, runs)
	}
	s := d.Points[0].Summary[1]
	if s.Name != "isolated" || s.Held != 2 || s.QuietOverSolo.Median != 2.5 {
		t.Errorf("summary %+v", s)
	}
}

func TestRenderers(t *testing.T) {
	src := load(t)
	v, _ := sweep.ParseVary("classes.report.rate=12..24:2")
	runs := 0
	sw, err := sweep.New(src, []sweep.Vary{v}, sweep.Options{Run: fakeRun(&runs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Grid(context.Background()); err != nil {
		t.Fatal(err)
	}
	var text, md strings.Builder
	if err := sweep.WriteText(&text, sw.Doc()); err != nil {
		t.Fatal(err)
	}
	if err := sweep.WriteMarkdown(&md, sw.Doc()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"configuration", "classes.report.rate=24  isolated       1/1", "2.50× (2.50–2.50)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "INCOMPLETE") {
		t.Errorf("a complete sweep says INCOMPLETE:\n%s", text.String())
	}
	for _, want := range []string{"# Sweep of noisy-neighbor", "| classes.report.rate=12 | naive | 0/1 |", "| classes.report.rate=24 | isolated | 1/1 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, out := range []string{text.String(), md.String()} {
		if strings.Contains(out, "unjudged") {
			t.Errorf("a sweep whose quiet_p99 judged every trial's class marks one unjudged:\n%s", out)
		}
	}
}

// TestRenderUnjudged: a point whose quiet_p99 judged no class in some trial
// shows its quiet figures marked unjudged, in the table, the Markdown and
// the page, with the note saying what the mark means; held still follows
// the assertions.
func TestRenderUnjudged(t *testing.T) {
	src := load(t)
	v, _ := sweep.ParseVary("classes.report.rate=12..24:2")
	runs := 0
	judged := fakeRun(&runs)
	run := func(ctx context.Context, sc *scenario.Scenario, only string) (*reports.Report, error) {
		rep, err := judged(ctx, sc, only)
		if err == nil && sc.Classes[2].Rate == 24 && sc.Seed%2 == 0 {
			for i := range rep.Assertions { // too few samples of every class
				if rep.Assertions[i].Name == "quiet_p99" {
					rep.Assertions[i].Skipped, rep.Assertions[i].Passed = true, true
				}
			}
		}
		return rep, err
	}
	sw, err := sweep.New(src, []sweep.Vary{v}, sweep.Options{Trials: 2, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Grid(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := sw.Doc()
	seed := d.Points[1].Trials[0].Seed
	for i, tr := range d.Points[1].Trials {
		if want := (seed+int64(i))%2 == 0; tr.Configurations[0].QuietUnjudged != want {
			t.Errorf("rate 24 trial seed %d: quiet_unjudged %v, want %v", tr.Seed, tr.Configurations[0].QuietUnjudged, want)
		}
	}
	if s := d.Points[1].Summary[1]; s.Name != "isolated" || s.QuietUnjudged != 1 || s.Held != 2 {
		t.Errorf("rate 24 isolated summary %+v: want 1 unjudged, 2/2 held", s)
	}
	var text, md, page strings.Builder
	for _, w := range []func() error{
		func() error { return sweep.WriteText(&text, d) },
		func() error { return sweep.WriteMarkdown(&md, d) },
		func() error { return sweep.WriteHTML(&page, d) },
	} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"isolated       2/2   0             10.0 unjudged 1/2  2.50× (2.50–2.50) unjudged 1/2", sweep.UnjudgedNote} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"| classes.report.rate=24 | isolated | 2/2 | 0 | 10.0 unjudged 1/2 | 2.50× (2.50–2.50) unjudged 1/2 |",
		"| classes.report.rate=12 | isolated | 2/2 | 0 | 10.0 | 2.50× (2.50–2.50) |", "\n" + sweep.UnjudgedNote + "\n"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, want := range []string{"<td>10.0 unjudged 1/2</td>", `<p id="unjudged">`, "square: quiet p99 unjudged"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestCalibratedRate sweeps the rate of ci-gate.yaml's report class, which
// the file calibrates (load_factor: 3, no rate): each point writes
// "rate: V" in place of load_factor, and a knee search takes today's rate
// from one calibration before its first probe.
func TestCalibratedRate(t *testing.T) {
	src, err := sweep.Load("../../scenarios/ci-gate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"classes.report.rate", "classes.2.rate"} {
		k, err := src.Lookup(path)
		if err != nil {
			t.Fatal(err)
		}
		if !k.Calibrated() || k.LoadFactor != 3 || k.Value != 0 || k.Int {
			t.Errorf("Lookup(%s) = %+v, want a calibrated float rate, load_factor 3", path, k)
		}
		sc, err := src.Scenario([]sweep.Setting{{Key: k, Value: 17.5}})
		if err != nil {
			t.Fatal(err)
		}
		if c := sc.Classes[2]; c.Rate != 17.5 || c.LoadFactor != 0 || c.Calibrated() {
			t.Errorf("%s set to 17.5: class %+v, want rate 17.5 and no load_factor", path, c)
		}
	}
	k, _ := src.Lookup("classes.report.rate")
	if _, err := src.Scenario([]sweep.Setting{{Key: k, Value: -1}}); !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), "ci-gate.yaml:") ||
		!strings.Contains(err.Error(), "classes[2].rate") {
		t.Errorf("rate -1: %v, want the scenario's own error at file:line:col", err)
	}
	vr, _ := sweep.ParseVary("classes.report.rate=5..80")
	vl, _ := sweep.ParseVary("classes.report.load_factor=1..3")
	if _, err := sweep.New(src, []sweep.Vary{vr, vl}, sweep.Options{Run: fakeRun(new(int))}); !errors.Is(err, sweep.ErrBadInput) {
		t.Errorf("rate and load_factor of one class: %v, want ErrBadInput", err)
	}
	// A class the file gives neither, or a calibration time: refused at file:line:col.
	dir := t.TempDir()
	data, _ := os.ReadFile("../../scenarios/ci-gate.yaml")
	withCal := filepath.Join(dir, "cal.yaml")
	if err := os.WriteFile(withCal, []byte(strings.Replace(string(data), "    load_factor: 3\n", "    load_factor: 3\n    calibrate: 2s\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := sweep.Load(withCal)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"classes.report.rate": "cal.yaml:58:5: the class's rate is calibrated", "classes.lookup.ratee": `no key "ratee"`} {
		if _, err := cs.Lookup(path); !errors.Is(err, sweep.ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup(%s) = %v, want %q", path, err, want)
		}
	}

	// The knee search calibrates once, then probes fixed rates.
	calls, runs := 0, 0
	opts := sweep.Options{Iterations: 3, Run: fakeRun(&runs), Calibrate: func(_ context.Context, sc *scenario.Scenario) (*reports.Report, error) {
		calls++
		if !sc.Classes[2].Calibrated() {
			t.Errorf("calibrated a scenario whose report class has rate %v", sc.Classes[2].Rate)
		}
		return &reports.Report{Calibrations: []reports.Calibration{{Class: "report", Query: "report", Samples: 9, ServiceMean: 250, LoadFactor: 3, Pool: 40, PoolName: "naive shared pool", Rate: 12}}}, nil
	}}
	sw, err := sweep.New(src, []sweep.Vary{vr}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Knees(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := sw.Doc()
	if calls != 1 || d.Vary[0].Value != 12 || d.Vary[0].Calibration == nil || len(d.Knees) != 2 {
		t.Fatalf("calibrations %d, vary %+v, knees %+v", calls, d.Vary[0], d.Knees)
	}
	iso := d.Knees[1]
	if !iso.Found || !iso.BaselineCalibrated || iso.Baseline != 12 || iso.Knee > 24 || iso.FailAt <= 24 || iso.Headroom != iso.Knee/12 {
		t.Errorf("isolated: %+v, want a knee at most 24 over today's calibrated 12", iso)
	}
	if s := sweep.KneeSentence(iso); !strings.Contains(s, "× today's calibrated 12;") || !strings.HasSuffix(s, ": quiet_p99 failed)") {
		t.Errorf("sentence %q", s)
	}
	if s := sweep.KneeSentence(d.Knees[0]); !strings.Contains(s, "naive fails classes.report.rate already at 5, the bottom of the range (0/1 trials held: quiet_p99 failed; today's calibrated value 12)") {
		t.Errorf("naive's sentence %q", s)
	}
	if s := sweep.BaselineSentence(d.Vary[0], d.Simulated); !strings.Contains(s, "writes load_factor 3, no rate") || !strings.Contains(s, "today's rate 12/s is the calibration's, run once before the search") {
		t.Errorf("baseline sentence %q", s)
	}
	var md strings.Builder
	if err := sweep.WriteMarkdown(&md, d); err != nil || !strings.Contains(md.String(), "today's rate 12/s") {
		t.Errorf("sweep.md lacks the baseline: %v\n%s", err, md.String())
	}
	// Resumed, the calibration is taken from the interrupted sweep.
	opts.Prior = d
	sw, _ = sweep.New(src, []sweep.Vary{vr}, opts)
	if err := sw.Knees(context.Background()); err != nil || calls != 1 || sw.Doc().Knees[1].Baseline != 12 {
		t.Errorf("resumed: %v, %d calibrations, baseline %v", err, calls, sw.Doc().Knees[1].Baseline)
	}
	// Without a calibration there is no today's value: refused.
	sw, _ = sweep.New(src, []sweep.Vary{vr}, sweep.Options{Run: fakeRun(&runs)})
	if err := sw.Knees(context.Background()); !errors.Is(err, sweep.ErrBadInput) {
		t.Errorf("no Calibrate: %v, want ErrBadInput", err)
	}
}

// TestShape: a sweep records its scenario's shape (phases, configurations,
// classes, fingerprint); Diff names each element that differs; --resume of
// a sweep of another shape is refused.
func TestShape(t *testing.T) {
	src := load(t)
	v, _ := sweep.ParseVary("classes.report.rate=12..24:2")
	runs := 0
	sw, err := sweep.New(src, []sweep.Vary{v}, sweep.Options{Run: fakeRun(&runs)})
	if err != nil {
		t.Fatal(err)
	}
	got := sw.Doc().Shape
	if got == nil || len(got.Phases) == 0 || !slices.Equal(got.Configurations, []string{"naive", "isolated"}) || len(got.Fingerprint) != 16 {
		t.Fatalf("shape %+v, want phases, naive and isolated, a 16-digit fingerprint", got)
	}
	if diff := got.Diff(got); diff != nil {
		t.Errorf("a shape differs from itself: %q", diff)
	}
	other := *got
	other.Phases = slices.Clone(got.Phases)
	other.Phases[len(other.Phases)-1] = "run 99s"
	diff := got.Diff(&other)
	if want := fmt.Sprintf("shape.phases[%d]: the sweep's %q, the scenario's \"run 99s\"", len(got.Phases)-1, got.Phases[len(got.Phases)-1]); len(diff) != 1 || diff[0] != want {
		t.Errorf("diff %q, want %q", diff, want)
	}
	edited := *got
	edited.Fingerprint = "0123456789abcdef"
	if diff := edited.Diff(got); len(diff) != 1 || !strings.Contains(diff[0], "shape.fingerprint 0123456789abcdef: not that of the shape recorded beside it") {
		t.Errorf("an edited fingerprint: %q", diff)
	}
	// --resume: the interrupted sweep ran other configurations.
	prior := *sw.Doc()
	prior.Shape = &sweep.Shape{Phases: got.Phases, Configurations: []string{"naive"}, Classes: got.Classes}
	if _, err := sweep.New(src, []sweep.Vary{v}, sweep.Options{Run: fakeRun(&runs), Prior: &prior}); err == nil ||
		!strings.Contains(err.Error(), "--resume: the sweep in the directory ran another shape of ../../scenarios/noisy-neighbor.yaml: shape.configurations: the sweep's 1 (naive), the scenario's 2 (naive, isolated)") {
		t.Errorf("--resume of another shape: %v", err)
	}
}

// TestBaselineSentenceSaysWhereTheRateCameFrom: a real calibration run
// before the search, or, in a simulated sweep, where nothing ran, the
// calibration report (whose own sample count is kept).
func TestBaselineSentenceSaysWhereTheRateCameFrom(t *testing.T) {
	v := sweep.VaryDoc{Key: "classes.report.rate", LoadFactor: 3,
		Calibration: &reports.Calibration{Class: "report", Samples: 9, ServiceMean: 250, Pool: 40, PoolName: "naive", Rate: 12}}
	if s := sweep.BaselineSentence(v, ""); !strings.Contains(s, "run once before the search (report alone: 250 ms mean over 9 queries; 3 × pool 40 of naive / mean)") {
		t.Errorf("real: %q", s)
	}
	s := sweep.BaselineSentence(v, "cal/report.json")
	if strings.Contains(s, "run once") || !strings.Contains(s, "taken from the calibration report cal/report.json before the search (report alone: 250 ms mean over 9 queries") {
		t.Errorf("simulated: %q", s)
	}
	v.Calibration = nil
	if s := sweep.BaselineSentence(v, ""); !strings.HasSuffix(s, "(not calibrated: no today's rate)") {
		t.Errorf("uncalibrated: %q", s)
	}
}

// TestWriteFileBeforeAnyPoint: sweep.json written before the first trial
// ends lists no point as an empty list a reader can range over, readable
// by all as the other outputs.
func TestWriteFileBeforeAnyPoint(t *testing.T) {
	dir := t.TempDir()
	d := &sweep.Doc{Version: 1, Scenario: "s", Search: "grid"}
	if err := d.WriteFile(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, sweep.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, sweep.JSONFile)); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("sweep.json mode: %v (err %v), want 0644 as the other outputs", fi.Mode(), err)
	}
	if !strings.Contains(string(data), `"points": []`) || d.Points != nil {
		t.Errorf("sweep.json:\n%s\nwant \"points\": [] (and the doc itself untouched: %v)", data, d.Points)
	}
}
