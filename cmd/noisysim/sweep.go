package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/guard"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/reports"
)

const sweepUsage = `Usage: noisysim sweep [flags] SCENARIO.yaml --vary KEY=LO..HI[:STEPS|*FACTOR] [--vary ...]

Runs the scenario's own run (its configurations and assertions, as
'noisysim run') at each point of the ranges, --trials times per point with
seeds seed, seed+1, ..., and reports per point and configuration: the trials
whose assertions all held, the throughput reached, the quiet tenants' p99 and
its ratio to their solo p99 (median, min-max; of the worst class quiet_p99
judged, or of all classes marked "unjudged" when it judged none: no verdict
rests on such a figure), rejections, errors and the top tenants' shares of
database time.

KEY is any numeric key the scenario file writes, by its path: mapping keys by
name, list items by their name or 0-based index, e.g. classes.report.rate,
tenants.dominant_share, tenants.count,
configurations.isolated.heavy.limiter.max_per_tenant. Each value is written
into the file at the key's place and validated like any scenario.
classes.NAME.rate of a class the file calibrates (load_factor, no rate)
is swept too: each value is written as "rate: V" in place of
"load_factor: ...", and a knee search first runs the calibration alone
once, on the scenario as written: the rate it gives is today's value.
LO..HI:STEPS takes STEPS evenly spaced values (default 5); LO..HI*FACTOR
takes LO, LO*FACTOR, ... up to HI; KEY=V one value. Integer keys are rounded.

--search knee (one --vary) bisects the range for each configuration (run
alone) to the largest value at which all its assertions hold in every trial,
and says so relative to the scenario's own value (headroom).

With --out DIR, sweep.json, sweep.md and sweep.html (a plot of the quiet
p99 / solo p99 against the first key, knees marked) are rewritten after
every trial: an interrupted sweep keeps its finished trials, and --resume
continues it (refused, exit 2, when the file's phases, configurations or
classes changed since: sweep.json records them as "shape").
The cluster is started once and reused for every point (per point when a
key is under backend).

--simulate --calibrate report.json runs each trial in virtual time, as
'noisysim simulate' (no database, no machine lock): sweep.json and the
tables say the figures are simulated. The simulator's notes (a calibration
that failed or was DISTURBED, a tenant above the rows the calibration
measured, the 4x cap applied, ...) are printed as note: lines, each
distinct one once, before the trial it first applies to, and kept per
point in sweep.json (notes).

Exit codes: 0 done, 2 bad input or usage (a key not in the file or not
numeric, a value the scenario's validation rejects, STEPS 0), 1 any other
error or an interruption, 99 the scenario's assertions.headroom is not met.

Flags (before or after the file):
`

// varyFlags collects repeated --vary flags.
type varyFlags []string

func (v *varyFlags) String() string     { return strings.Join(*v, " ") }
func (v *varyFlags) Set(s string) error { *v = append(*v, s); return nil }

func runSweep(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), sweepUsage); fs.PrintDefaults() }
	var varies varyFlags
	fs.Var(&varies, "vary", "KEY=LO..HI[:STEPS|*FACTOR]: a numeric key's range (repeatable: the points are the product)")
	only := fs.String("only", "", "sweep only this configuration (its assertions applied, its expectation not)")
	trials := fs.Int("trials", 1, "runs per point, seeds seed, seed+1, ...")
	search := fs.String("search", "", "knee: bisect the one --vary's range for each configuration's largest value where its assertions hold")
	iterations := fs.Int("iterations", sweep.DefaultIterations, "bisection steps of --search knee")
	out := fs.String("out", "", "write sweep.json, sweep.md and sweep.html into this directory, after every trial")
	resume := fs.Bool("resume", false, "continue the interrupted sweep in --out (its finished trials are kept)")
	noWait := fs.Bool("no-wait", false, "exit 2 at once when another measured run holds the machine, instead of waiting")
	allowConcurrent := fs.Bool("allow-concurrent", false, "measure without the machine-wide lock, beside other runs")
	simulate := fs.Bool("simulate", false, "sweep in virtual time: each trial is noisysim simulate (no database), calibrated by --calibrate")
	var calibrate calibrateFlags
	fs.Var(&calibrate, "calibrate", "with --simulate: "+calibrateHelp)
	maxForeign := fs.Float64("max-foreign-cpu", guard.DefaultMaxForeignCPU, "CPUs used outside the run (plus steal) above which a measured window is disturbed, > 0; negative: no guard")
	file, err := parseInterspersed(a, fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		fs.Usage()
		return usagef("sweep: missing scenario file")
	}
	switch {
	case len(varies) == 0:
		return usagef("sweep: want at least one --vary KEY=LO..HI")
	case *trials < 1 || *trials > maxRepeat:
		return usagef("sweep: --trials %d: want 1..%d", *trials, maxRepeat)
	case *search != "" && *search != "knee":
		return usagef("sweep: --search %q: want knee", *search)
	case *search == "knee" && len(varies) != 1:
		return usagef("sweep: --search knee varies one key, got %d --vary", len(varies))
	case *iterations < 1 || *iterations > 20:
		return usagef("sweep: --iterations %d: want 1..20", *iterations)
	case *resume && *out == "":
		return usagef("sweep: --resume continues the sweep in --out DIR: give --out")
	case *noWait && *allowConcurrent:
		return usagef("sweep: --no-wait and --allow-concurrent exclude each other")
	case *simulate && len(calibrate) == 0:
		return usagef("sweep: --simulate needs --calibrate report.json (a real run's report of a scenario with the same classes)")
	case !*simulate && len(calibrate) > 0:
		return usagef("sweep: --calibrate is for --simulate")
	case badMaxForeign(*maxForeign):
		return usagef("sweep: --max-foreign-cpu %v: %s", *maxForeign, wantMaxForeign)
	}
	var vs []sweep.Vary
	for _, s := range varies {
		v, err := sweep.ParseVary(s)
		if err != nil {
			return err
		}
		vs = append(vs, v)
	}
	src, err := sweep.Load(file)
	if err != nil {
		return err
	}
	var prior *sweep.Doc
	if *out != "" {
		prior, err = sweep.ReadFile(*out)
		switch {
		case err == nil && !*resume:
			return usagef("sweep: %s holds a sweep already: --resume continues it; noisysim does not overwrite it", filepath.Join(*out, "sweep.json"))
		case errors.Is(err, os.ErrNotExist) && *resume:
			return usagef("sweep: --resume: no sweep.json in %s", *out)
		case errors.Is(err, os.ErrNotExist):
			prior = nil
		case err != nil:
			return err
		}
	}
	var cal *calibration
	calName := ""
	if *simulate {
		cal, err = readCalibration("sweep", calibrate)
		if err != nil {
			return err
		}
		calName = cal.name()
	}
	if prior != nil && cal != nil && prior.Simulated != calName && cal.sameAs(prior.Simulated) {
		calName = prior.Simulated // the same runs, spelled otherwise: sweep.json keeps its spelling
	}
	if prior != nil && prior.Simulated != calName {
		was := "run for real"
		if prior.Simulated != "" {
			was = "simulated, --simulate --calibrate " + prior.Simulated
		}
		return usagef("sweep: --resume: the sweep in %s was %s; resume it the same way", *out, was)
	}

	simRun, simCalibrate := simulateSweep(a, cal, 0, a.stdout, "")
	var hopts harness.Options // set below, once the input is checked
	var startOnce func(context.Context) error
	var started *teardownItem
	var writeErr error
	knees := 0
	baselineSaid := false
	opts := sweep.Options{Trials: *trials, Iterations: *iterations, Prior: prior, Only: *only,
		Run: func(ctx context.Context, sc *scenario.Scenario, only string) (*reports.Report, error) {
			if cal != nil {
				return simRun(ctx, sc, only)
			}
			if err := startOnce(ctx); err != nil {
				return nil, err
			}
			o := hopts
			o.Only = only
			return harness.Run(ctx, sc, o)
		},
		Calibrate: func(ctx context.Context, sc *scenario.Scenario) (*reports.Report, error) {
			if cal != nil {
				return simCalibrate(ctx, sc)
			}
			if err := startOnce(ctx); err != nil {
				return nil, err
			}
			o := hopts
			o.CalibrateOnly = true
			return harness.Run(ctx, sc, o)
		},
		OnTrial: func(d *sweep.Doc) {
			if v := d.Vary[0]; v.Calibration != nil && !baselineSaid {
				baselineSaid = true
				fmt.Fprintln(a.stdout, sweep.BaselineSentence(v, d.Simulated))
			}
			switch {
			case len(d.Points) == 0 && len(d.Knees) == 0: // the calibration alone, said above
			case len(d.Knees) > knees:
				knees = len(d.Knees)
				fmt.Fprintln(a.stdout, sweep.KneeSentence(d.Knees[knees-1]))
			default:
				p := d.Points[len(d.Points)-1]
				last := p.Trials[len(p.Trials)-1]
				fmt.Fprintf(a.stdout, "%s  trial %d/%d  seed %d  %s%s\n", pointWords(d, p), len(p.Trials), d.Trials, last.Seed, heldWords(last), disturbedWord(last))
			}
			if *out != "" && writeErr == nil {
				writeErr = writeSweep(*out, d)
			}
		}}
	sw, err := sweep.New(src, vs, opts)
	if err != nil {
		return err
	}
	base, err := src.Scenario(nil)
	if err != nil {
		return err
	}
	if cal != nil {
		// Bad input before the first trial and before --out is made:
		// what the simulator does not model, the scenario's shape
		// against the calibration.
		if err := cal.check(base); err != nil {
			return err
		}
		sw.Doc().Simulated = calName
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
	}
	if h := base.Assertions.Headroom; h.Key != "" {
		if *search != "knee" {
			fmt.Fprintf(a.stderr, "noisysim: assertions.headroom (%s) is checked by --search knee only\n", h.Key)
		} else if k := sw.Keys()[0]; k.Path != h.Key {
			if hk, err := src.Lookup(h.Key); err != nil || hk.Line != k.Line || hk.Col != k.Col {
				return usagef("sweep: --search knee of %s: %s: the scenario's assertions.headroom.key is %s; search that key", k.Path, src.Where("assertions.headroom.key"), h.Key)
			}
		}
	}
	if base.Backend.Kind == scenario.BackendDocker {
		if err := needDocker(ctx, "sweep"); err != nil {
			return err
		}
	}
	if cal == nil {
		release, concurrent, err := measureLock(ctx, a, "noisysim sweep "+base.Name, *noWait, *allowConcurrent)
		if err != nil {
			return err
		}
		defer release()
		hopts.Concurrent = concurrent
	}

	hopts = harness.Options{Logger: a.log, MaxForeignCPU: *maxForeign, Concurrent: hopts.Concurrent,
		OnCluster: func(c backend.Cluster) { registerCluster(a, c) }}
	perPoint := false
	for _, v := range vs {
		perPoint = perPoint || strings.HasPrefix(v.Key, "backend.")
	}
	if !perPoint {
		// The cluster is started at the first run (none when --resume
		// finds every trial done) and reused by every point.
		defer func() {
			if started != nil {
				a.teardown.finish(started)
			}
		}()
	}
	startOnce = func(ctx context.Context) error {
		if perPoint || hopts.Cluster != nil {
			return nil
		}
		c, err := harness.StartBackend(ctx, base, a.log)
		if err != nil {
			return err
		}
		started = registerCluster(a, c)
		hopts.Cluster = c
		return nil
	}
	if *search == "knee" {
		err = sw.Knees(ctx)
	} else {
		err = sw.Grid(ctx)
	}
	d := sw.Doc()
	fmt.Fprintln(a.stdout)
	if werr := sweep.WriteText(a.stdout, d); werr != nil {
		return errors.Join(err, werr)
	}
	if *out != "" {
		if werr := writeSweep(*out, d); werr != nil {
			return errors.Join(err, werr)
		}
		fmt.Fprintf(a.stdout, "sweep written to %s (sweep.json, sweep.md, sweep.html)\n", *out)
	}
	if err != nil {
		return err
	}
	if writeErr == nil {
		// Every trial ran and is written: a signal while the cluster is
		// removed changes nothing.
		a.teardown.onStop("the sweep has finished: it is written in full, then what noisysim started is removed")
		a.teardown.finished()
		sweepStep(ctx, "written")
	}
	return errors.Join(writeErr, headroomGate(a.stdout, base, d))
}

// sweepStep is called by sweep once it is written in full (step
// "written"); a no-op outside tests, which set it to act there (signalAt).
var sweepStep = func(context.Context, string) {}

// simulateSweep returns a sweep's run and calibrate functions in virtual
// time, as noisysim simulate: service times drawn from cal (nil: the
// sweep is not simulated), nodes without a CPU budget of cores cores (0: this machine's).
// How each class is drawn and the report's notes (a tenant beyond the
// calibrated rows, …) are written to w, each line after prefix, when
// first seen.
func simulateSweep(a *app, cal *calibration, cores float64, w io.Writer, prefix string) (sweep.RunFunc, func(context.Context, *scenario.Scenario) (*reports.Report, error)) {
	// How each class is drawn (a rows fit made or not, the
	// interference) can change from point to point: said when first
	// seen, before the trial it applies to, as simulate says it.
	var mu sync.Mutex
	said := map[string]bool{}
	run := func(ctx context.Context, sc *scenario.Scenario, only string) (*reports.Report, error) {
		rep, err := harness.Simulate(ctx, sc, cal.set(harness.SimulateOptions{Only: only, Cores: cores, Logger: a.log}))
		if err == nil {
			mu.Lock()
			for _, l := range reports.SimulatedLines(rep) {
				if !said[l] {
					said[l] = true
					fmt.Fprintf(w, "%ssimulated %s\n", prefix, l)
				}
			}
			for _, n := range rep.Notes {
				if !said["note: "+n] {
					said["note: "+n] = true
					fmt.Fprintf(w, "%snote: %s\n", prefix, n)
				}
			}
			mu.Unlock()
		}
		return rep, err
	}
	calibrate := func(ctx context.Context, sc *scenario.Scenario) (*reports.Report, error) {
		return harness.Simulate(ctx, sc, cal.set(harness.SimulateOptions{Cores: cores, Logger: a.log, CalibrateOnly: true}))
	}
	return run, calibrate
}

func registerCluster(a *app, c backend.Cluster) *teardownItem {
	kill := c.Close
	if k, ok := c.(interface{ Kill() error }); ok {
		kill = k.Kill
	}
	return a.teardown.add(c.Close, kill)
}

func writeSweep(dir string, d *sweep.Doc) error {
	if err := d.WriteFile(dir); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "sweep.md"))
	if err != nil {
		return fmt.Errorf("write sweep: %w", err)
	}
	err = sweep.WriteMarkdown(f, d)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	h, err := os.Create(filepath.Join(dir, sweep.HTMLFile))
	if err != nil {
		return fmt.Errorf("write sweep: %w", err)
	}
	err = sweep.WriteHTML(h, d)
	return errors.Join(err, h.Close())
}

func pointWords(d *sweep.Doc, p sweep.Point) string {
	var parts []string
	for _, v := range d.Vary {
		if x, ok := p.Values[v.Key]; ok {
			parts = append(parts, fmt.Sprintf("%s=%g", v.Key, x))
		}
	}
	if p.Only != "" {
		parts = append(parts, "("+p.Only+")")
	}
	return strings.Join(parts, " ")
}

func heldWords(t sweep.Trial) string {
	var parts []string
	for _, c := range t.Configurations {
		w := c.Name + " held"
		if !c.Held {
			w = c.Name + " FAILED " + strings.Join(c.Failed, ",")
		}
		switch {
		case c.QuietOverSolo > 0 && c.QuietUnjudged:
			w += fmt.Sprintf(" (quiet/solo p99 %.2f× of %s, unjudged: quiet_p99 judged no class)", c.QuietOverSolo, c.QuietClass)
		case c.QuietOverSolo > 0:
			w += fmt.Sprintf(" (quiet/solo p99 %.2f×)", c.QuietOverSolo)
		}
		parts = append(parts, w)
	}
	return strings.Join(parts, ", ")
}

func disturbedWord(t sweep.Trial) string {
	s := ""
	if t.Disturbed {
		s += "  DISTURBED"
	}
	if t.Resumed {
		s += "  (kept from the interrupted sweep)"
	}
	return s
}

// headroomGate checks the scenario's assertions.headroom against a knee
// search of its key: each configuration it names (default: every one
// expected to pass) holds to at least min × the file's value. nil without
// headroom or a knee search.
func headroomGate(w io.Writer, sc *scenario.Scenario, d *sweep.Doc) error {
	h := sc.Assertions.Headroom
	if h.Key == "" || d.Search != "knee" {
		return nil
	}
	var short []string
	searched := map[string]bool{}
	for _, k := range d.Knees {
		searched[k.Configuration] = true
		if c, ok := sc.Configuration(k.Configuration); !ok || !h.Of(c) {
			continue
		}
		ok := k.Found && k.Headroom >= h.Min
		verdict := "PASS"
		if !ok {
			verdict = "FAIL"
			short = append(short, k.Configuration)
		}
		if k.AboveRange && !ok {
			fmt.Fprintf(w, "headroom %s: %s holds %s to at least %.3g×, the top of the range (want >= %.3g×: search a range up to that)\n", verdict, k.Configuration, h.Key, k.Headroom, h.Min)
			continue
		}
		fmt.Fprintf(w, "headroom %s: %s holds %s to %.3g× (want >= %.3g×)\n", verdict, k.Configuration, h.Key, k.Headroom, h.Min)
	}
	if !slices.ContainsFunc(sc.Configurations, func(c scenario.Configuration) bool { return h.Of(&c) }) {
		fmt.Fprintf(w, "headroom unchecked: no configuration is expected to pass (name the ones to hold in assertions.headroom.configurations)\n")
	}
	for _, c := range sc.Configurations {
		if h.Of(&c) && !searched[c.Name] {
			fmt.Fprintf(w, "headroom unchecked: %s was not searched (--only)\n", c.Name)
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("%w: scenario %s: headroom of %s below %g× for %s", errAssertionFailed, sc.Name, h.Key, h.Min, strings.Join(short, ", "))
	}
	return nil
}

// checkHeadroomKey checks that sc's assertions.headroom.key is a numeric
// key of its file, as sweep --vary would take it.
func checkHeadroomKey(file string, sc *scenario.Scenario) error {
	h := sc.Assertions.Headroom
	if h.Key == "" {
		return nil
	}
	src, err := sweep.Load(file)
	if err == nil {
		_, err = src.Lookup(h.Key)
	}
	if err != nil {
		return fmt.Errorf("%s: assertions.headroom.key: %w", file, err)
	}
	return nil
}
