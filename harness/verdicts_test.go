package harness

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// A verdict whose limit lies inside the p99's confidence interval is
// marginal, whichever way it went; one whose interval excludes the limit,
// or that was skipped, is not.
func TestQuietP99Marginal(t *testing.T) {
	rule := p99Rule{Factor: 1, Slack: 0, MinSamples: 10}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	ci := func(lo, hi float64, hiBounded bool) metrics.QuantileCI {
		return metrics.QuantileCI{Quantile: 0.99, Lo: ms(lo), Hi: ms(hi), LoBounded: true, HiBounded: hiBounded}
	}
	solo := []p99Sample{
		{Tenant: "2", Class: "c", Count: 500, P99: ms(10)}, {Tenant: "3", Class: "c", Count: 500, P99: ms(10)},
		{Tenant: "4", Class: "c", Count: 500, P99: ms(10)}, {Tenant: "5", Class: "c", Count: 500, P99: ms(10)},
		{Tenant: "6", Class: "c", Count: 500, P99: ms(10)}, {Tenant: "7", Class: "c", Count: 5, P99: ms(10)},
	}
	run := []p99Sample{
		{Tenant: "2", Class: "c", Count: 500, P99: ms(9), CI: ci(8, 11, true)},    // pass, limit 10 inside: marginal
		{Tenant: "3", Class: "c", Count: 500, P99: ms(11), CI: ci(9.5, 12, true)}, // fail, limit inside: marginal
		{Tenant: "4", Class: "c", Count: 500, P99: ms(5), CI: ci(4, 6, true)},     // pass clearly
		{Tenant: "5", Class: "c", Count: 500, P99: ms(20), CI: ci(15, 25, true)},  // fail clearly
		{Tenant: "6", Class: "c", Count: 200, P99: ms(9), CI: ci(8, 30, false)},   // pass, no upper bound: marginal
		{Tenant: "7", Class: "c", Count: 500, P99: ms(50), CI: ci(40, 60, true)},  // skipped (solo 5 samples), over its limit
	}
	want := map[string]struct{ passed, skipped, marginal bool }{
		"2": {true, false, true}, "3": {false, false, true}, "4": {true, false, false},
		"5": {false, false, false}, "6": {true, false, true}, "7": {true, true, false},
	}
	got := quietP99("isolated", rule, "run", "solo", solo, run)
	for _, a := range got {
		w := want[a.Tenant]
		if a.Passed != w.passed || a.Skipped != w.skipped || a.Marginal != w.marginal {
			t.Errorf("tenant %s: passed %v skipped %v marginal %v, want %v %v %v (%+v)", a.Tenant, a.Passed, a.Skipped, a.Marginal,
				w.passed, w.skipped, w.marginal, a)
		}
		if a.CI == nil {
			t.Errorf("tenant %s: no CI in the assertion", a.Tenant)
		}
		if a.Marginal && !strings.Contains(a.Detail, "marginal") {
			t.Errorf("tenant %s: detail does not say marginal: %q", a.Tenant, a.Detail)
		}
	}
	if m := marginal(got); len(m) != 3 {
		t.Errorf("marginal lists %d, want 3: %+v", len(m), m)
	}
	qc := quietChecks(got, 10)
	if *qc != (reports.QuietChecks{Pairs: 10, Checked: 5, Skipped: 5, SkippedOverLimit: 1}) {
		t.Errorf("quiet checks = %+v, want 5 of 10 checked, 1 skipped over its limit", *qc)
	}

	// A control whose only failures are marginal proves little: its
	// control_fails is marginal too.
	r := &runner{}
	rep := &reports.Report{Configurations: []reports.Configuration{{Name: "isolated", Expect: "fail"}}, Assertions: got}
	cf := r.expectations(rep)
	if len(cf) != 1 || !cf[0].Passed || cf[0].Marginal {
		t.Errorf("control with a clear failure (tenant 5): %+v", cf)
	}
	rep.Assertions = slices.DeleteFunc(slices.Clone(got), func(a reports.Assertion) bool { return a.Tenant == "5" })
	if cf := r.expectations(rep); len(cf) != 1 || !cf[0].Passed || !cf[0].Marginal {
		t.Errorf("control whose only failure is marginal: %+v", cf)
	}
	// A control that passed, one of its passes marginal, could as well
	// have failed: its control_fails fails, marginal too.
	rep.Assertions = slices.DeleteFunc(slices.Clone(got), func(a reports.Assertion) bool { return !a.Passed })
	cf = r.expectations(rep)
	if len(cf) != 1 || cf[0].Passed || !cf[0].Marginal || !strings.Contains(cf[0].Detail, "it passed, but 2 verdicts are marginal") {
		t.Errorf("control that passed with a marginal verdict: %+v", cf)
	}
	rep.Assertions = slices.DeleteFunc(slices.Clone(got), func(a reports.Assertion) bool { return !a.Passed || a.Marginal })
	if cf := r.expectations(rep); len(cf) != 1 || cf[0].Passed || cf[0].Marginal {
		t.Errorf("control that passed clearly: %+v", cf)
	}
}

// Calibration sets the rate so that rate × mean service time is
// load_factor × the pool.
func TestCalibrationRate(t *testing.T) {
	c := &scenario.Class{Name: "report", Query: scenario.QueryReport, LoadFactor: 3}
	times := []time.Duration{20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond, 30 * time.Millisecond}
	got := calibration(c, calPool{size: 40, name: "naive shared pool"}, times, 2*time.Second)
	if math.Abs(got.Rate-4000) > 1e-9 { // 3 × 40 / 30 ms
		t.Errorf("rate %g/s, want 4000 (3 × 40 / 30 ms)", got.Rate)
	}
	if got.ServiceMean != 30 || got.ServiceP50 != 30 || got.Samples != 4 || got.Pool != 40 || got.PoolName != "naive shared pool" {
		t.Errorf("calibration = %+v", got)
	}
	if offered := got.Rate * got.ServiceMean / 1000; math.Abs(offered-120) > 1e-9 {
		t.Errorf("offered concurrency %g, want 120 (3 × 40)", offered)
	}
}

// A load_factor that makes a rate above what noisysim sends is bad input,
// at the key's file:line:col (exit 2); it was a run error (exit 1) naming
// no key.
func TestCalibratedRateTooHigh(t *testing.T) {
	sc, err := scenario.Parse([]byte(`name: cal
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
  - {name: report, isolation_class: heavy, query: report, senders: dominant,
     load_factor: 1e300}
configurations:
  - {name: naive, mode: shared, expect: fail, shared: {pool_size: 25}}
`), "cal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := sc.Class("report")
	times := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
	err = checkCalibratedRate(sc, 1, calibration(c, calPool{size: 25, name: "naive shared pool"}, times, time.Second))
	if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), "cal.yaml:5:6: classes[1].load_factor: ") || !strings.Contains(err.Error(), "give a smaller load_factor") {
		t.Errorf("got %v, want ErrInvalid at cal.yaml:5:6 naming classes[1].load_factor", err)
	}
	c.LoadFactor = 3
	if err := checkCalibratedRate(sc, 1, calibration(c, calPool{size: 25}, times, time.Second)); err != nil {
		t.Errorf("load_factor 3: %v", err)
	}
}

// The pool a calibrated class is set against is the largest shared pool,
// whichever configuration --only keeps.
func TestCalibrationPool(t *testing.T) {
	sc, err := scenario.Parse([]byte(`
name: cal
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
  - {name: report, isolation_class: heavy, query: report, senders: dominant, load_factor: 3}
configurations:
  - {name: naive, mode: shared, expect: fail, shared: {pool_size: 25}}
  - {name: isolated, mode: isolated, heavy: {pool_size: 4}}
`), "cal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := calibrationPools(sc)["report"]; got.size != 25 || got.name != "naive shared pool" {
		t.Errorf("pool = %+v, want naive's shared pool of 25", got)
	}
	if c, _ := sc.Class("report"); c.Calibrate != scenario.DefaultCalibrate {
		t.Errorf("calibrate = %s, want the default %s", c.Calibrate, scenario.DefaultCalibrate)
	}
	only, err := sc.Only("isolated")
	if err != nil {
		t.Fatal(err)
	}
	if got := calibrationPools(only)["report"]; got.size != 4 {
		t.Errorf("a scenario of isolated alone: pool %+v, want its heavy pool of 4", got)
	}
}

const sampled = `
name: sampled
seed: 7
tenants: {count: 20}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 200}
  - {name: page, isolation_class: interactive, query: page, rate: 50}
  - {name: report, isolation_class: heavy, query: report, rate: 5, senders: dominant}
phases: {warmup: 1s, solo: 4s, run: 6s}
configurations:
  - {name: isolated, mode: isolated}
assertions: {quiet_p99: {min_samples: 100CHECK}}
`

// PlanSamples counts each quiet pair's arrivals as the run draws them;
// check_top lengthens the window and baseline until every pair of the top
// K quiet tenants reaches min_samples.
func TestPlanSamples(t *testing.T) {
	parse := func(check string) *scenario.Scenario {
		sc, err := scenario.Parse([]byte(strings.Replace(sampled, "CHECK", check, 1)), "sampled.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	plain, err := PlanSamples(parse(""))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Pairs != 19*2 || plain.Window != "run" || plain.Baseline != "solo" || plain.MinSamples != 100 || len(plain.Lengthened) != 0 {
		t.Fatalf("plan = %+v, want 38 pairs (19 quiet tenants × lookup, page) of run against solo", plain)
	}
	if plain.Reaching >= plain.Pairs || plain.Pairs-plain.Reaching != len(plain.TooFew) {
		t.Errorf("reaching %d of %d with %d too few", plain.Reaching, plain.Pairs, len(plain.TooFew))
	}
	for _, p := range plain.TooFew {
		if p.Window >= 100 && p.Baseline >= 100 {
			t.Errorf("pair %+v listed as too few", p)
		}
	}

	top, err := PlanSamples(parse(", check_top: 3"))
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Lengthened) != 2 || top.CheckTop != "3" {
		t.Fatalf("check_top 3: lengthened %+v, want run and solo", top.Lengthened)
	}
	for _, l := range top.Lengthened {
		if !(l.To > l.From) {
			t.Errorf("phase %s: %g s → %g s", l.Phase, l.From, l.To)
		}
	}
	for _, p := range top.TooFew {
		if p.Tenant == "2" || p.Tenant == "3" || p.Tenant == "4" {
			t.Errorf("check_top 3: a top tenant's pair is short: %+v", p)
		}
	}
	if top.Reaching < 6 {
		t.Errorf("check_top 3: %d pairs reach, want at least the top 3 tenants' 6", top.Reaching)
	}

	all, err := PlanSamples(parse(", check_top: all"))
	if err != nil {
		t.Fatal(err)
	}
	if all.Reaching != all.Pairs || len(all.TooFew) != 0 {
		t.Errorf("check_top all: %d of %d reach", all.Reaching, all.Pairs)
	}
}

// check_top refuses a min_samples no phase up to MaxSizedPhase reaches, at
// the key's file:line:col, also one whose length would overflow a duration.
func TestPlanSamplesOutOfReach(t *testing.T) {
	for _, tc := range []struct{ name, min string }{
		{"above an hour", "100000000"},
		{"beyond a duration", "9223372036854775807"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte(strings.Replace(sampled, "100CHECK", tc.min+", check_top: 1", 1)), "sampled.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, err = PlanSamples(sc)
			if !errors.Is(err, scenario.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			for _, want := range []string{"sampled.yaml:12:", "assertions.quiet_p99.check_top", "longer than 1h0m0s", "min_samples " + tc.min} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to name %q", err, want)
				}
			}
		})
	}
}

// The A/B check judges the median of the matched pairs' ratios: one
// disturbed pair does not move the verdict; pairs with too few samples are
// left out, and with fewer than two left the check is skipped.
func TestQuietP99AB(t *testing.T) {
	rule := p99Rule{Factor: 1, Slack: 0, MinSamples: 10}
	pair := func(class string, a, b time.Duration, n int64) abBlock {
		return abBlock{a: []p99Sample{{Tenant: quietAll, Class: class, Count: n, P99: a}},
			b: []p99Sample{{Tenant: quietAll, Class: class, Count: n, P99: b}}}
	}
	ms := time.Millisecond
	blocks := []abBlock{pair("c", 10*ms, 5*ms, 50), pair("c", 10*ms, 200*ms, 50), pair("c", 10*ms, 6*ms, 50)}
	got := quietP99AB("isolated", rule, blocks, "ab1_b..ab3_b", "ab1_a..ab3_a")
	if len(got) != 1 {
		t.Fatalf("got %d assertions, want 1", len(got))
	}
	if a := got[0]; !a.Passed || a.Skipped || math.Abs(a.Observed-0.6) > 1e-9 || a.Name != AssertQuietP99AB || a.Tenant != quietAll {
		t.Errorf("median of 0.5, 20, 0.6: %+v, want 0.6, passed", a)
	}
	if !strings.Contains(got[0].Detail, "1 over 1") {
		t.Errorf("detail does not count the pair over its limit: %q", got[0].Detail)
	}
	blocks = append(blocks, pair("c", 10*ms, 30*ms, 50), pair("c", 10*ms, 40*ms, 50))
	if a := quietP99AB("naive", rule, blocks, "", "")[0]; a.Passed || math.Abs(a.Observed-3) > 1e-9 {
		t.Errorf("median of 0.5, 20, 0.6, 3, 4: %+v, want 3, failed", a)
	}
	few := []abBlock{pair("c", 10*ms, 5*ms, 50), pair("c", 10*ms, 5*ms, 5), pair("c", 10*ms, 5*ms, 3)}
	if a := quietP99AB("isolated", rule, few, "", "")[0]; !a.Skipped {
		t.Errorf("one pair with enough samples: %+v, want skipped", a)
	}
}

// assertions.quiet_p99_ab appends its pairs of blocks to the timeline.
func TestABTimeline(t *testing.T) {
	sc, err := scenario.Parse([]byte(`
name: ab
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
phases: {warmup: 1s, solo: 2s, run: 2s}
configurations:
  - {name: isolated, mode: isolated}
assertions: {quiet_p99_ab: {blocks: 2, block: 3s}}
`), "ab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range sc.Steps() {
		names = append(names, fmt.Sprintf("%s %s %s %v", p.Name, p.Length, p.Senders, p.Measure))
	}
	want := []string{"solo_warmup 1s quiet false", "solo 2s quiet true", "warmup 1s all false", "run 2s all true",
		"ab1_settle_a 1s quiet false", "ab1_a 3s quiet true", "ab1_settle_b 1s all false", "ab1_b 3s all true",
		"ab2_settle_a 1s quiet false", "ab2_a 3s quiet true", "ab2_settle_b 1s all false", "ab2_b 3s all true"}
	if !slices.Equal(names, want) {
		t.Errorf("timeline:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}
