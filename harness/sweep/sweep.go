// Package sweep runs a scenario across values of its numeric keys — the
// scenario's own run (harness.Run, its configurations and assertions) at each
// point, with repeated trials — and finds the knee: the largest value at
// which a configuration's assertions all hold.
//
// A key is any numeric key of the scenario file, named by its path
// ("classes.report.rate", "tenants.dominant_share",
// "configurations.isolated.heavy.limiter.max_queue"): the value is written
// into the file's text at the key's place and the result decoded and
// validated as any scenario, so a value out of the key's bounds is reported
// by the scenario's own validation at file:line:col.
//
//	src, _ := sweep.Load("scenarios/capacity-report-rate.yaml")
//	v, _ := sweep.ParseVary("classes.report.rate=6..48*2")
//	sw, _ := sweep.New(src, []sweep.Vary{v}, sweep.Options{Trials: 3, Run: run})
//	err := sw.Grid(ctx) // or sw.Knees(ctx)
//	doc := sw.Doc()     // what sweep.json holds
package sweep

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// Version is the version of the sweep.json shape (reports/REPORT.md, "Sweeps").
const Version = 1

// DefaultIterations is the number of bisection steps of a knee search.
const DefaultIterations = 4

// TopShares is the number of top tenants by DB time kept per trial.
const TopShares = 3

// RunFunc runs sc once and returns its report, as harness.Run does; only,
// when not empty, runs just that configuration (harness.Options.Only).
type RunFunc func(ctx context.Context, sc *scenario.Scenario, only string) (*reports.Report, error)

// Options configure a sweep. Run is required.
type Options struct {
	// Trials is the number of runs per point, seeds seed, seed+1, …; 0 means 1.
	Trials int
	// Iterations is the number of bisection steps of Knees; 0 means
	// DefaultIterations.
	Iterations int
	Run        RunFunc
	// OnTrial, when not nil, is called after each trial finished, with the
	// sweep so far (to write it out).
	OnTrial func(*Doc)
	// Only, when not empty, sweeps just this configuration (as
	// harness.Options.Only: its assertions applied, its expectation not).
	Only string
	// Prior is an earlier, interrupted sweep of the same scenario and
	// ranges (--resume): its trials are taken instead of being run again.
	Prior *Doc
	// Calibrate runs the scenario as written up to its calibration alone
	// (harness.Options.CalibrateOnly) and returns the report holding the
	// calibrations. Knees calls it once, before the first probe, when the
	// searched key is a calibrated class's rate (Key.Calibrated): the rate
	// the calibration gives is today's value, the baseline of headroom.
	// Without it such a search is refused.
	Calibrate func(ctx context.Context, sc *scenario.Scenario) (*reports.Report, error)
}

// Sweep is one sweep of a scenario.
type Sweep struct {
	src    *Source
	varies []Vary
	keys   []Key
	opts   Options
	doc    Doc
	prior  map[string]Trial
	// priorNotes are the interrupted sweep's points' notes, by pointKey.
	priorNotes map[string][]string
	base       *scenario.Scenario
}

// New resolves each vary's key in src and checks every value of its range
// against the scenario's validation (the other keys at their own values).
// Errors match ErrBadInput or scenario.ErrInvalid.
func New(src *Source, varies []Vary, opts Options) (*Sweep, error) {
	if len(varies) == 0 {
		return nil, badf("want at least one --vary KEY=LO..HI")
	}
	if opts.Trials == 0 {
		opts.Trials = 1
	}
	if opts.Iterations == 0 {
		opts.Iterations = DefaultIterations
	}
	base, err := src.Scenario(nil)
	if err != nil {
		return nil, err
	}
	if _, ok := base.Configuration(opts.Only); opts.Only != "" && !ok {
		return nil, badf("--only %q: %s has no such configuration", opts.Only, src.File)
	}
	sw := &Sweep{src: src, varies: varies, opts: opts, base: base, prior: map[string]Trial{}, priorNotes: map[string][]string{}}
	points := 1
	for _, v := range varies {
		k, err := src.Lookup(v.Key)
		if err != nil {
			return nil, err
		}
		for _, other := range sw.keys {
			if other.Line == k.Line && other.Col == k.Col {
				return nil, badf("--vary %s: the same key as --vary %s", v.Key, other.Path)
			}
		}
		sw.keys = append(sw.keys, k)
		vals := v.Values(k.Int)
		points *= len(vals)
		for _, x := range []float64{vals[0], vals[len(vals)-1]} {
			if _, err := src.Scenario([]Setting{{k, x}}); err != nil {
				return nil, fmt.Errorf("--vary %s at %s: %w", v.Key, k.Format(x), err)
			}
		}
	}
	if points > MaxPoints {
		return nil, badf("%d points: more than %d", points, MaxPoints)
	}
	if len(sw.keys) > 1 {
		var set []Setting
		for i, k := range sw.keys {
			set = append(set, Setting{k, varies[i].Values(k.Int)[0]})
		}
		if _, err := src.Scenario(set); err != nil {
			return nil, err
		}
	}
	sw.doc = Doc{Version: Version, Scenario: base.Name, File: src.File, Trials: opts.Trials, Shape: ShapeOf(base)}
	for i, v := range varies {
		sw.doc.Vary = append(sw.doc.Vary, VaryDoc{Spec: v.String(), Key: v.Key, Value: sw.keys[i].Value, Integer: sw.keys[i].Int,
			LoadFactor: sw.keys[i].LoadFactor})
	}
	if p := opts.Prior; p != nil {
		if err := sw.takePrior(p); err != nil {
			return nil, err
		}
	}
	return sw, nil
}

func (sw *Sweep) takePrior(p *Doc) error {
	if p.Version != Version || p.File != sw.doc.File || len(p.Vary) != len(sw.doc.Vary) {
		return badf("--resume: the sweep in the directory is of another scenario or other keys (%s %v)", p.File, p.specs())
	}
	for i := range p.Vary {
		if p.Vary[i].Spec != sw.doc.Vary[i].Spec {
			return badf("--resume: the sweep in the directory varies %v, not %v", p.specs(), sw.doc.specs())
		}
	}
	if p.Shape != nil {
		if diff := p.Shape.Diff(sw.doc.Shape); len(diff) > 0 {
			return badf("--resume: the sweep in the directory ran another shape of %s: %s", sw.doc.File, strings.Join(diff, "; "))
		}
	}
	for _, pt := range p.Points {
		sw.priorNotes[pointKey(pt.Values, pt.Only)] = pt.Notes
		for _, t := range pt.Trials {
			sw.prior[pointKey(pt.Values, pt.Only)+"#"+strconv.FormatInt(t.Seed, 10)] = t
		}
	}
	return nil
}

// Doc returns the sweep so far.
func (sw *Sweep) Doc() *Doc { return &sw.doc }

// Keys returns the resolved keys, in --vary order.
func (sw *Sweep) Keys() []Key { return sw.keys }

// Grid runs every point of the ranges' product (the last key varying
// fastest), each with Options.Trials trials of all configurations.
func (sw *Sweep) Grid(ctx context.Context) error {
	sw.doc.Search = "grid"
	var walk func(i int, set []Setting) error
	walk = func(i int, set []Setting) error {
		if i == len(sw.keys) {
			_, err := sw.point(ctx, set, sw.opts.Only)
			return err
		}
		for _, x := range sw.varies[i].Values(sw.keys[i].Int) {
			if err := walk(i+1, append(slices.Clone(set), Setting{sw.keys[i], x})); err != nil {
				return err
			}
		}
		return nil
	}
	err := walk(0, nil)
	sw.doc.Complete = err == nil
	return err
}

// Knees finds, for each configuration, the largest value of the one varied
// key (within its range) at which all the configuration's assertions hold
// in every trial, by bisection: each probe runs that configuration alone
// (harness.Options.Only) Trials times.
func (sw *Sweep) Knees(ctx context.Context) error {
	if len(sw.keys) != 1 {
		return badf("--search knee varies one key, got %d", len(sw.keys))
	}
	sw.doc.Search = "knee"
	if err := sw.calibrateBaseline(ctx); err != nil {
		return err
	}
	k, v := sw.keys[0], sw.varies[0]
	for _, c := range sw.base.Configurations {
		if sw.opts.Only != "" && c.Name != sw.opts.Only {
			continue
		}
		probe := func(x float64) (int, error) {
			p, err := sw.point(ctx, []Setting{{k, x}}, c.Name)
			if err != nil {
				return 0, err
			}
			return p.held(c.Name), nil
		}
		kn, err := Bisect(v.Lo, v.Hi, k.Int, sw.opts.Iterations, sw.opts.Trials, probe)
		kn.Configuration, kn.Expect, kn.Key, kn.Baseline = c.Name, string(c.Expect), k.Path, k.Value
		kn.BaselineCalibrated = k.Calibrated()
		if kn.FailAt != 0 || !kn.Found {
			kn.Failed = sw.failed(kn.FailAt, k, c.Name)
		}
		if kn.Found && k.Value != 0 {
			kn.Headroom = kn.Knee / k.Value
		}
		if err != nil {
			return err
		}
		sw.doc.Knees = append(sw.doc.Knees, kn)
		if sw.opts.OnTrial != nil {
			sw.opts.OnTrial(&sw.doc)
		}
	}
	sw.doc.Complete = true
	return nil
}

// failed returns the assertions of configuration name that failed in any
// trial of its knee probe at value x.
func (sw *Sweep) failed(x float64, k Key, name string) []string {
	var out []string
	key := pointKey(map[string]float64{k.Path: x}, name)
	for _, p := range sw.doc.Points {
		if pointKey(p.Values, p.Only) != key {
			continue
		}
		for _, t := range p.Trials {
			for _, c := range t.Configurations {
				if c.Name == name {
					out = append(out, c.Failed...)
				}
			}
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

// calibrateBaseline sets today's value of a calibrated rate key (the file
// writes load_factor, no rate): taken from Prior when it holds it (a
// resumed search), else from one Options.Calibrate of the scenario as
// written.
func (sw *Sweep) calibrateBaseline(ctx context.Context) error {
	k := &sw.keys[0]
	vd := &sw.doc.Vary[0]
	if !k.Calibrated() || k.Value != 0 {
		return nil
	}
	if p := sw.opts.Prior; p != nil && len(p.Vary) == 1 && p.Vary[0].Calibration != nil {
		k.Value, vd.Value, vd.Calibration = p.Vary[0].Value, p.Vary[0].Value, p.Vary[0].Calibration
		return nil
	}
	if sw.opts.Calibrate == nil {
		return badf("--vary %s: the class's rate is calibrated (load_factor %g) and the sweep has no calibration to take today's rate from", k.Path, k.LoadFactor)
	}
	class := strings.TrimSuffix(strings.TrimPrefix(k.Path, "classes."), ".rate")
	if _, ok := sw.base.Class(class); !ok {
		if ix, err := strconv.Atoi(class); err == nil && ix >= 0 && ix < len(sw.base.Classes) {
			class = sw.base.Classes[ix].Name // the report names the class
		}
	}
	rep, err := sw.opts.Calibrate(ctx, sw.base)
	if err != nil {
		return fmt.Errorf("calibrate %s for today's rate: %w", k.Path, err)
	}
	for _, c := range rep.Calibrations {
		if c.Class == class {
			k.Value, vd.Value, vd.Calibration = c.Rate, c.Rate, &c
			if sw.opts.OnTrial != nil {
				sw.opts.OnTrial(&sw.doc)
			}
			return nil
		}
	}
	return fmt.Errorf("calibrate %s: the run calibrated no class %s", k.Path, class)
}

// Bisect searches [lo, hi] for the largest value at which probe reports
// every one of trials trials holding: it probes lo, then hi, then halves the
// interval between the last value that held and the first that failed
// iterations times (geometric midpoint when lo > 0, whole numbers when
// integer). probe returns the number of trials that held.
func Bisect(lo, hi float64, integer bool, iterations, trials int, probe func(float64) (int, error)) (Knee, error) {
	kn := Knee{Lo: lo, Hi: hi, Trials: trials}
	n, err := probe(lo)
	if err != nil {
		return kn, err
	}
	kn.Probes = append(kn.Probes, Probe{lo, n})
	if n < trials {
		kn.FailAt, kn.FailPasses = lo, n
		return kn, nil
	}
	kn.Found, kn.Knee, kn.KneePasses = true, lo, n
	if hi == lo {
		kn.AboveRange = true
		return kn, nil
	}
	if n, err = probe(hi); err != nil {
		return kn, err
	}
	kn.Probes = append(kn.Probes, Probe{hi, n})
	if n == trials {
		kn.Knee, kn.KneePasses, kn.AboveRange = hi, n, true
		return kn, nil
	}
	good, bad := lo, hi
	kn.FailAt, kn.FailPasses = hi, n
	for range iterations {
		mid := (good + bad) / 2
		if good > 0 {
			mid = math.Sqrt(good * bad)
		}
		if integer {
			mid = math.Round(mid)
		} else {
			mid, _ = strconv.ParseFloat(strconv.FormatFloat(mid, 'g', 6, 64), 64)
		}
		if mid <= good || mid >= bad {
			break
		}
		if n, err = probe(mid); err != nil {
			return kn, err
		}
		kn.Probes = append(kn.Probes, Probe{mid, n})
		if n == trials {
			good, kn.Knee, kn.KneePasses = mid, mid, n
		} else {
			bad, kn.FailAt, kn.FailPasses = mid, mid, n
		}
	}
	return kn, nil
}

// point runs (or takes from Prior) the trials of one point.
func (sw *Sweep) point(ctx context.Context, set []Setting, only string) (*Point, error) {
	sc, err := sw.src.Scenario(set)
	if err != nil {
		return nil, err
	}
	values := map[string]float64{}
	for _, s := range set {
		values[s.Key.Path] = s.Value
		if s.Key.Int {
			values[s.Key.Path] = math.Round(s.Value)
		}
	}
	key := pointKey(values, only)
	for i := range sw.doc.Points {
		if p := &sw.doc.Points[i]; pointKey(p.Values, p.Only) == key && len(p.Trials) == sw.opts.Trials {
			return p, nil // a knee search probing a value twice
		}
	}
	// The point enters the doc with its first finished trial: an
	// interrupted sweep lists no point without one.
	ix := -1
	base := sc.Seed
	for i := range sw.opts.Trials {
		seed := base + int64(i)
		t, ok := sw.prior[key+"#"+strconv.FormatInt(seed, 10)]
		var notes []string
		if ok {
			t.Resumed = true
		} else {
			rep, err := sw.opts.Run(ctx, sc.WithSeed(seed), only)
			if err != nil {
				return nil, fmt.Errorf("point %s trial %d (seed %d): %w", key, i+1, seed, err)
			}
			t, notes = TrialOf(rep, seed), rep.Notes
		}
		if ix < 0 {
			sw.doc.Points = append(sw.doc.Points, Point{Values: values, Only: only, Notes: slices.Clone(sw.priorNotes[key])})
			ix = len(sw.doc.Points) - 1
		}
		p := &sw.doc.Points[ix]
		p.Trials = append(p.Trials, t)
		for _, n := range notes {
			if !slices.Contains(p.Notes, n) {
				p.Notes = append(p.Notes, n)
			}
		}
		p.Summary = summarize(p.Trials)
		if sw.opts.OnTrial != nil {
			sw.opts.OnTrial(&sw.doc)
		}
	}
	return &sw.doc.Points[ix], nil
}

func pointKey(values map[string]float64, only string) string {
	var parts []string
	for _, k := range slices.Sorted(mapsKeys(values)) {
		parts = append(parts, k+"="+strconv.FormatFloat(values[k], 'g', -1, 64))
	}
	s := strings.Join(parts, ",")
	if only != "" {
		s += " only " + only
	}
	return s
}

func mapsKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TrialOf reduces one run's report to what a sweep keeps of it: the
// figures of a trial at seed (sweep.json's points[].trials[]).
func TrialOf(rep *reports.Report, seed int64) Trial {
	t := Trial{Seed: seed, Passed: rep.Passed, Disturbed: rep.Machine != nil && len(rep.Machine.Disturbed()) > 0}
	for _, c := range rep.Configurations {
		ct := ConfigTrial{Name: c.Name, Held: true, Throughput: c.Stats.AchievedRate, TargetRate: c.Stats.TargetRate,
			Rejected: c.Stats.Rejected, Errors: c.Stats.Errors}
		for _, a := range rep.Assertions {
			// control_fails judges the run (a control held), not the
			// configuration's own assertions.
			if a.Configuration == c.Name && !a.Skipped && !a.Passed && a.Name != harness.AssertControlFails {
				ct.Held = false
				ct.Failed = append(ct.Failed, a.Name)
			}
		}
		ct.Failed = slices.Compact(slices.Sorted(slices.Values(ct.Failed)))
		// The quiet tenants' worst class: its p99 against its solo p99,
		// among the classes quiet_p99 judged (a class with too few
		// samples to judge, as the quiet tenants' rare reports, would
		// otherwise stand for the point with a p99 no verdict rests on).
		judged := map[string]bool{}
		for _, a := range rep.Assertions {
			if a.Name == harness.AssertQuietP99 && a.Configuration == c.Name && a.Tenant == reports.QuietAll && !a.Skipped {
				judged[a.Class] = true
			}
		}
		for _, q := range c.QuietAll {
			if len(judged) > 0 && !judged[q.Class] {
				continue
			}
			for _, s := range c.SoloQuietAll {
				if s.Class == q.Class && s.P99 > 0 && q.P99/s.P99 > ct.QuietOverSolo {
					ct.QuietP99, ct.SoloP99, ct.QuietOverSolo, ct.QuietClass = q.P99, s.P99, q.P99/s.P99, q.Class
				}
			}
		}
		if ct.QuietClass == "" { // no solo p99: the worst p99
			for _, q := range c.QuietAll {
				if len(judged) > 0 && !judged[q.Class] {
					continue
				}
				if q.P99 > ct.QuietP99 {
					ct.QuietP99, ct.QuietClass = q.P99, q.Class
				}
			}
		}
		// A class quiet_p99 did not judge still stands for the trial (a
		// figure beats none), marked as such.
		ct.QuietUnjudged = ct.QuietClass != "" && !judged[ct.QuietClass]
		ct.TopDBTime = c.TopDBTime[:min(TopShares, len(c.TopDBTime))]
		t.Configurations = append(t.Configurations, ct)
	}
	return t
}

// summarize returns each configuration's figures over the trials.
func summarize(trials []Trial) []ConfigSummary {
	var out []ConfigSummary
	var names []string
	for _, t := range trials {
		for _, c := range t.Configurations {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	for _, name := range names {
		s := ConfigSummary{Name: name}
		var thr, ratio, q99, rej, errs []float64
		for _, t := range trials {
			for _, c := range t.Configurations {
				if c.Name != name {
					continue
				}
				s.Trials++
				if c.Held {
					s.Held++
				}
				if c.QuietUnjudged {
					s.QuietUnjudged++
				}
				thr = append(thr, c.Throughput)
				if c.QuietOverSolo > 0 {
					ratio = append(ratio, c.QuietOverSolo)
				}
				q99 = append(q99, c.QuietP99)
				rej = append(rej, float64(c.Rejected))
				errs = append(errs, float64(c.Errors))
				if s.TopDBTime == nil {
					s.TopDBTime = c.TopDBTime
				}
			}
		}
		s.Throughput, s.QuietP99 = SpreadOf(thr), SpreadOf(q99)
		s.QuietOverSolo, s.Rejected, s.Errors = SpreadOf(ratio), SpreadOf(rej), SpreadOf(errs)
		out = append(out, s)
	}
	return out
}

// SpreadOf returns the median, min, max and count of xs (zero for none).
func SpreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// held returns the number of trials in which configuration name's
// assertions all held.
func (p *Point) held(name string) int {
	n := 0
	for _, t := range p.Trials {
		for _, c := range t.Configurations {
			if c.Name == name && c.Held {
				n++
			}
		}
	}
	return n
}
