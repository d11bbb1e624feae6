package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/simval"
	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/reports"
)

// againstFlags are simulate's flags --against acts on.
type againstFlags struct {
	dir, only, out    string
	calibrate         calibrateFlags
	cores             float64
	check, noProgress bool
}

// runDir matches the run directories noisysim run --repeat writes.
var runDir = regexp.MustCompile(`^run-([0-9]+)$`)

// realRun is one report of an --against directory.
type realRun struct {
	name, path string
	rep        *reports.Report
}

// runSimulateAgainst simulates each real run of f.dir but the calibration at
// its seed and compares the figures (package simval).
func runSimulateAgainst(ctx context.Context, a *app, file string, f againstFlags) error {
	sc, err := scenario.Load(file)
	if err != nil {
		return err
	}
	if f.only != "" {
		if _, ok := sc.Configuration(f.only); !ok {
			return usagef("simulate: --only %q: %s has no such configuration (it has %s)", f.only, file, configNames(sc))
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, sweep.JSONFile)); err == nil {
		return runSimulateAgainstSweep(ctx, a, file, sc, f)
	}
	runs, err := readRuns(f.dir, sc, f.only)
	if err != nil {
		return err
	}
	paths := f.calibrate
	if len(paths) == 0 {
		paths = calibrateFlags{runs[0].path}
	}
	if f.out != "" {
		if err := simval.Existing(f.out); err != nil {
			return usagef("simulate: --out %s: %v; noisysim does not overwrite it (give another --out, or remove it)", f.out, err)
		}
		// validate.json and validate.md only: a directory that holds a
		// run's reports (the calibration's own) takes them beside it.
		if err := checkOutWritable("simulate", f.out); err != nil {
			return err
		}
	}
	cal, err := readCalibration("simulate", paths)
	if err != nil {
		return err
	}
	var pairs []simval.Run
	t0 := time.Now()
	for _, r := range runs {
		if cal.holds(r.path) {
			continue
		}
		t1 := time.Now()
		sim, err := harness.Simulate(ctx, sc.WithSeed(r.rep.Seed), cal.set(harness.SimulateOptions{Only: f.only, Cores: f.cores, Logger: a.log}))
		if err != nil {
			return err
		}
		if !f.noProgress {
			fmt.Fprintf(a.stderr, "noisysim: simulated %s (seed %d) in %.1fs\n", r.name, r.rep.Seed, time.Since(t1).Seconds())
		}
		pairs = append(pairs, simval.Run{Name: r.name, Seed: r.rep.Seed, Real: r.rep, Sim: sim})
	}
	if len(pairs) == 0 {
		return usagef("simulate: --against %s: no run to compare besides the calibration %s", f.dir, cal.name())
	}
	res := simval.Compare(pairs, simval.DefaultTolerance)
	res.Scenario, res.Against, res.Calibration, res.CalibrationSeed, res.CalibrationSeeds = sc.Name, f.dir, cal.name(), cal.primary().Seed, cal.seeds()
	res.CalibrationDisturbed, res.CalibrationNotes = cal.disturbed(), cal.notes(sc)
	res.AddCalibration(cal.reps)
	res.Window, _ = sc.Assertions.QuietP99.QuietWindows()
	if err := simval.WriteText(a.stdout, res); err != nil {
		return err
	}
	// What the model drew, as simulate says it: each line once, though
	// each simulation's report holds it.
	said := map[string]bool{}
	for _, p := range pairs {
		for _, l := range reports.SimulatedLines(p.Sim) {
			if !said[l] {
				said[l] = true
				fmt.Fprintf(a.stdout, "simulated %s\n", l)
			}
		}
	}
	fmt.Fprintf(a.stdout, "%s in %.1fs of wall time\n", reports.Plural(len(pairs), "simulation"), time.Since(t0).Seconds())
	if f.out != "" {
		if err := simval.WriteDir(f.out, res); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "written: %s, %s\n", filepath.Join(f.out, simval.JSONFile), filepath.Join(f.out, simval.MarkdownFile))
	}
	if f.check && res.Outside > 0 {
		return fmt.Errorf("%w: scenario %s: %d of %d figures of the simulation not within %.0f%% of the real runs' (--check)",
			errAssertionFailed, sc.Name, res.Outside, res.Judged(), 100*simval.DefaultTolerance)
	}
	return nil
}

// readRuns reads dir's run-N/report.json in N's order: at least two, each a
// real run of sc's name and shape holding its configurations (only's, when
// set). Anything else is a usage error naming the file.
func readRuns(dir string, sc *scenario.Scenario, only string) ([]realRun, error) {
	paths, err := runReports(dir)
	if err != nil {
		return nil, usagef("simulate: --against %s: %v (want what noisysim run --repeat N --out DIR writes, or a sweep's directory: noisysim sweep --out DIR)", dir, bareErr(err))
	}
	if len(paths) < 2 {
		return nil, usagef("simulate: --against %s: %d run reports (run-N/report.json) and no %s; want at least 2 runs (noisysim run SCENARIO --repeat N --out %s writes them) or a real sweep (noisysim sweep SCENARIO --vary KEY=LO..HI --out %s writes %s)",
			dir, len(paths), sweep.JSONFile, dir, dir, sweep.JSONFile)
	}
	var runs []realRun
	seen := map[int64]string{}
	for _, path := range paths {
		rep, err := reports.ReadFile(path)
		if err != nil {
			return nil, usagef("simulate: --against: %v", err)
		}
		// A seed twice is a run counted twice in the medians (the same
		// run linked twice), and the table per seed shows one of them.
		if other, dup := seen[rep.Seed]; dup {
			if sameFile(path, other) {
				return nil, usagef("simulate: --against: %s is %s again (two links to one run): give each run once", path, other)
			}
			return nil, usagef("simulate: --against: %s: seed %d again (%s is of it too): give each run once, each at its own seed", path, rep.Seed, other)
		}
		seen[rep.Seed] = path
		switch {
		case rep.Simulated != nil:
			return nil, usagef("simulate: --against: %s is a simulated report; compare with real runs'", path)
		case rep.Scenario != sc.Name:
			return nil, usagef("simulate: --against: %s is a run of scenario %q, not %q", path, rep.Scenario, sc.Name)
		}
		if err := harness.CheckShape(rep, "--against "+path, sc); err != nil {
			return nil, err
		}
		have := map[string]bool{}
		for _, c := range rep.Configurations {
			have[c.Name] = true
		}
		for _, c := range sc.Configurations {
			if (only == "" || c.Name == only) && !have[c.Name] {
				return nil, usagef("simulate: --against: %s has no configuration %q (a run with --only?)", path, c.Name)
			}
		}
		runs = append(runs, realRun{name: filepath.Base(filepath.Dir(path)), path: path, rep: rep})
	}
	return runs, nil
}

// runSimulateAgainstSweep re-runs the real sweep in f.dir in virtual time
// (the same --vary specs, points, trials and seeds, and --only) through the
// sweep engine, calibrated on f.calibrate, and compares each point and
// configuration (simval.CompareSweep).
func runSimulateAgainstSweep(ctx context.Context, a *app, file string, sc *scenario.Scenario, f againstFlags) error {
	path := filepath.Join(f.dir, sweep.JSONFile)
	real, err := sweep.ReadFile(f.dir)
	if err != nil {
		if errors.Is(err, sweep.ErrBadInput) {
			return fmt.Errorf("simulate: --against: %w", err)
		}
		return usagef("simulate: --against: %v", err)
	}
	only, err := checkSweepAgainst(path, real, sc, f.only)
	if err != nil {
		return err
	}
	if len(f.calibrate) == 0 {
		return usagef("simulate: --against %s (a sweep) needs --calibrate report.json: a real run's report of %s, at a seed other than the sweep's trials' (the model is then checked on seeds it was not calibrated on)",
			path, file)
	}
	src, err := sweep.Load(file)
	if err != nil {
		return err
	}
	var vs []sweep.Vary
	grid := 1 // the points the specs give
	for i, v := range real.Vary {
		pv, err := sweep.ParseVary(v.Spec)
		if err != nil {
			return fmt.Errorf("simulate: --against %s: vary[%d].spec: %w", path, i, err)
		}
		k, err := src.Lookup(pv.Key)
		if err != nil {
			return fmt.Errorf("simulate: --against %s: vary[%d].key %q is not a numeric key of %s (a sweep of another file, %s?): %w", path, i, pv.Key, file, real.File, err)
		}
		vs = append(vs, pv)
		grid *= len(pv.Values(k.Int))
	}
	if len(real.Points) != grid {
		return usagef("simulate: --against %s: points: %d, but a complete sweep of its vary specs (%s) has %d (a point removed or added by hand?)",
			path, len(real.Points), specsText(real.Vary), grid)
	}
	base, err := src.Scenario(nil)
	if err != nil {
		return err
	}
	notes, err := simval.CheckSweep(real, path, sc.Name, sweep.ShapeOf(base))
	if err != nil {
		return usagef("simulate: --against: %v", err)
	}
	for i, p := range real.Points {
		for j, t := range p.Trials {
			if t.Seed < base.Seed || t.Seed >= base.Seed+int64(real.Trials) {
				return usagef("simulate: --against %s: points[%d].trials[%d].seed %d: %s's seed %d puts the %d trials at seeds %d..%d (the sweep ran another seed?)",
					path, i, j, t.Seed, file, base.Seed, real.Trials, base.Seed, base.Seed+int64(real.Trials)-1)
			}
		}
	}
	if f.out != "" {
		if err := simval.Existing(f.out); err != nil {
			return usagef("simulate: --out %s: %v; noisysim does not overwrite it (give another --out, or remove it)", f.out, err)
		}
		// validate.json and validate.md only: a directory that holds a
		// run's reports (the calibration's own) takes them beside it.
		if err := checkOutWritable("simulate", f.out); err != nil {
			return err
		}
	}
	cal, err := readCalibration("simulate", f.calibrate)
	if err != nil {
		return err
	}
	if err := cal.check(base); err != nil {
		return err
	}
	for i, r := range cal.reps {
		for _, p := range real.Points {
			if slices.ContainsFunc(p.Trials, func(t sweep.Trial) bool { return t.Seed == r.Seed }) {
				fmt.Fprintf(a.stderr, "noisysim: note: the calibration %s is of seed %d, a seed of the sweep's trials: a calibration at another seed checks the model on seeds it was not calibrated on\n", cal.files[i], r.Seed)
				break
			}
		}
	}

	// How each class is drawn, on stderr beside each trial's progress:
	// stdout is the comparison.
	run, calibrate := simulateSweep(a, cal, f.cores, a.stderr, "noisysim: ")
	var sims []simval.SweepTrial
	var last map[string]simval.Figures
	t0, t1 := time.Now(), time.Now()
	sw, err := sweep.New(src, vs, sweep.Options{Trials: real.Trials, Only: only, Calibrate: calibrate,
		Run: func(ctx context.Context, sc *scenario.Scenario, only string) (*reports.Report, error) {
			rep, err := run(ctx, sc, only)
			if err == nil {
				last = simval.FiguresOf(rep)
			}
			return rep, err
		},
		OnTrial: func(d *sweep.Doc) {
			if len(d.Points) == 0 {
				return
			}
			p := d.Points[len(d.Points)-1]
			t := p.Trials[len(p.Trials)-1]
			sims = append(sims, simval.SweepTrial{Values: p.Values, Seed: t.Seed, Figures: last})
			if !f.noProgress {
				fmt.Fprintf(a.stderr, "noisysim: simulated %s trial %d/%d (seed %d) in %.1fs\n", pointWords(d, p), len(p.Trials), d.Trials, t.Seed, time.Since(t1).Seconds())
			}
			t1 = time.Now()
		}})
	if err != nil {
		return fmt.Errorf("simulate: --against %s: vary: %w", path, err)
	}
	if err := sw.Grid(ctx); err != nil {
		return err
	}
	res, err := simval.CompareSweep(real, sims, only, simval.DefaultTolerance)
	if err != nil {
		return usagef("simulate: --against %s: %v", path, err)
	}
	res.Scenario, res.Against, res.Calibration, res.CalibrationSeed, res.CalibrationSeeds = sc.Name, path, cal.name(), cal.primary().Seed, cal.seeds()
	res.CalibrationDisturbed, res.CalibrationNotes = cal.disturbed(), cal.notes(sc)
	res.Notes = notes
	calTrials, unplaced := calibrationTrials(cal, real.Vary)
	res.AddCalibration(calTrials)
	res.CalibrationUnplaced = unplaced
	if err := simval.WriteSweepText(a.stdout, res); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s in %.1fs of wall time\n", reports.Plural(len(sims), "simulation"), time.Since(t0).Seconds())
	if f.out != "" {
		if err := simval.WriteSweepDir(f.out, res); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "written: %s, %s\n", filepath.Join(f.out, simval.JSONFile), filepath.Join(f.out, simval.MarkdownFile))
	}
	if f.check && res.QuietP99.Judged == 0 {
		// A gate that judged nothing has not passed: every point's real
		// trials were DISTURBED, or their quiet figures unjudged.
		why, fix := "every trial DISTURBED", "rerun the sweep on a quiet machine"
		if len(res.QuietUnjudged) > 0 {
			why, fix = "every trial DISTURBED or its quiet figure unjudged by quiet_p99", "rerun the sweep on a quiet machine, with phases long enough for quiet_p99 to judge a class"
		}
		return fmt.Errorf("%w: scenario %s: no point of the real sweep could be judged (%s): --check has nothing to pass on; %s",
			errAssertionFailed, sc.Name, why, fix)
	}
	if f.check && res.Outside() > 0 {
		var outside []string
		for _, t := range []struct {
			name string
			t    simval.Tally
		}{{"quiet p99", res.QuietP99}, {"throughput", res.Throughput}} {
			if t.t.Outside() > 0 {
				outside = append(outside, fmt.Sprintf("%s: %d of %d", t.name, t.t.Outside(), t.t.Judged))
			}
		}
		return fmt.Errorf("%w: scenario %s: the simulated sweep not within %.0f%% of the real sweep's (--check): %s",
			errAssertionFailed, sc.Name, 100*simval.DefaultTolerance, strings.Join(outside, "; "))
	}
	return nil
}

// calibrationTrials returns cal's runs as a sweep's trials at the values
// of vary's keys their scenario files give, and why a run's values are not
// known: its file not readable here or edited since the run
// (harness.RunScenario), or a key it does not have as a number (a
// calibrated rate: its value is set at run time).
//
// Runs left out for the same reason are named together:
// "a/run-1/report.json, a/run-2/report.json: WHY".
func calibrationTrials(cal *calibration, vary []sweep.VaryDoc) (trials []simval.CalibrationTrial, unplaced []string) {
	var whys []string
	files := map[string][]string{}
	leave := func(i int, why string) {
		if _, ok := files[why]; !ok {
			whys = append(whys, why)
		}
		files[why] = append(files[why], cal.files[i])
	}
	defer func() {
		for _, why := range whys {
			unplaced = append(unplaced, strings.Join(files[why], ", ")+": "+why)
		}
	}()
	for i, rep := range cal.reps {
		if _, err := harness.RunScenario(rep); err != nil {
			leave(i, err.Error())
			continue
		}
		file := harness.RunFile(rep)
		src, err := sweep.Load(file)
		if err != nil {
			leave(i, fmt.Sprintf("its scenario file %s is not readable here (%v)", file, err))
			continue
		}
		values := map[string]float64{}
		for _, v := range vary {
			k, err := src.Lookup(v.Key)
			switch {
			case err != nil:
				leave(i, fmt.Sprintf("%s in %s: %v", v.Key, file, err))
			case k.Calibrated():
				leave(i, fmt.Sprintf("%s in %s is a calibrated rate (load_factor), set at run time", v.Key, file))
			default:
				values[v.Key] = k.Value
				continue
			}
			values = nil
			break
		}
		if values != nil {
			trials = append(trials, simval.CalibrationTrial{Values: values, Trial: sweep.TrialOf(rep, rep.Seed)})
		}
	}
	return trials, unplaced
}

// checkSweepAgainst checks that real (read from path) is a finished real
// grid sweep of sc's name, and returns the configuration to compare: the
// sweep's --only, or only when the sweep had none. Anything else is a
// usage error naming path and the field.
func checkSweepAgainst(path string, real *sweep.Doc, sc *scenario.Scenario, only string) (string, error) {
	switch {
	case real.Version != sweep.Version:
		return "", usagef("simulate: --against %s: sweep_version %d: want %d (a sweep.json noisysim sweep --out wrote)", path, real.Version, sweep.Version)
	case real.Simulated != "":
		return "", usagef("simulate: --against %s: simulated: a simulated sweep (--simulate --calibrate %s); compare with a real sweep's", path, real.Simulated)
	case real.Scenario != sc.Name:
		return "", usagef("simulate: --against %s: scenario: a sweep of scenario %q, not %q", path, real.Scenario, sc.Name)
	case real.Search != "grid":
		return "", usagef("simulate: --against %s: search %q: want a grid sweep (a knee search's points follow its own results)", path, real.Search)
	case !real.Complete:
		return "", usagef("simulate: --against %s: complete: false: the sweep was interrupted (noisysim sweep --resume --out %s finishes it)", path, filepath.Dir(path))
	case len(real.Vary) == 0:
		return "", usagef("simulate: --against %s: vary: empty", path)
	case len(real.Points) == 0:
		return "", usagef("simulate: --against %s: points: empty", path)
	case real.Trials < 1 || real.Trials > maxRepeat:
		return "", usagef("simulate: --against %s: trials %d: want 1..%d", path, real.Trials, maxRepeat)
	}
	ran := real.Points[0].Only
	for i, p := range real.Points {
		if p.Only != ran {
			return "", usagef("simulate: --against %s: points[%d].only %q: points[0]'s is %q (want one --only for the whole sweep)", path, i, p.Only, ran)
		}
		if len(p.Trials) != real.Trials {
			return "", usagef("simulate: --against %s: points[%d].trials: %d, want the sweep's %d", path, i, len(p.Trials), real.Trials)
		}
	}
	switch {
	case ran == "":
		return only, nil
	case only != "" && only != ran:
		return "", usagef("simulate: --only %s: the sweep in %s ran --only %s", only, path, ran)
	}
	if _, ok := sc.Configuration(ran); !ok {
		return "", usagef("simulate: --against %s: points[0].only %q: %s has no such configuration", path, ran, sc.Name)
	}
	return ran, nil
}

// specsText returns a sweep's --vary specs, joined by ", ".
func specsText(vs []sweep.VaryDoc) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Spec)
	}
	return strings.Join(out, ", ")
}
