package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/simval"
	"github.com/noisysim/noisysim/reports"
)

// againstFlags are simulate's flags --against acts on.
type againstFlags struct {
	dir, calibrate, only, out string
	cores                     float64
	check, noProgress         bool
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
	runs, err := readRuns(f.dir, sc, f.only)
	if err != nil {
		return err
	}
	calFile := f.calibrate
	if calFile == "" {
		calFile = runs[0].path
	}
	if f.out != "" {
		if err := simval.Existing(f.out); err != nil {
			return usagef("simulate: --out %s: %v; noisysim does not overwrite it (give another --out, or remove it)", f.out, err)
		}
		if err := checkOutDir("simulate", f.out, 1); err != nil {
			return err
		}
	}
	cal, err := reports.ReadFile(calFile)
	if err != nil {
		return usagef("simulate: --calibrate: %v", err)
	}
	if cal.Simulated != nil {
		return usagef("simulate: --calibrate %s: a simulated report; calibrate on a real run's", calFile)
	}
	var pairs []simval.Run
	t0 := time.Now()
	for _, r := range runs {
		if sameFile(r.path, calFile) {
			continue
		}
		t1 := time.Now()
		sim, err := harness.Simulate(ctx, sc.WithSeed(r.rep.Seed), harness.SimulateOptions{
			Only: f.only, Calibration: cal, CalibrationFile: calFile, Cores: f.cores, Logger: a.log,
		})
		if err != nil {
			return err
		}
		if !f.noProgress {
			fmt.Fprintf(a.stderr, "noisysim: simulated %s (seed %d) in %.1fs\n", r.name, r.rep.Seed, time.Since(t1).Seconds())
		}
		pairs = append(pairs, simval.Run{Name: r.name, Seed: r.rep.Seed, Real: r.rep, Sim: sim})
	}
	if len(pairs) == 0 {
		return usagef("simulate: --against %s: no run to compare besides the calibration %s", f.dir, calFile)
	}
	res := simval.Compare(pairs, simval.DefaultTolerance)
	res.Scenario, res.Against, res.Calibration, res.CalibrationSeed = sc.Name, f.dir, calFile, cal.Seed
	res.CalibrationDisturbed = cal.Machine.DisturbedWhy()
	res.Window, _ = sc.Assertions.QuietP99.QuietWindows()
	if err := simval.WriteText(a.stdout, res); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%d simulations in %.1fs of wall time\n", len(pairs), time.Since(t0).Seconds())
	if f.out != "" {
		if err := simval.WriteDir(f.out, res); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "written: %s, %s\n", filepath.Join(f.out, simval.JSONFile), filepath.Join(f.out, simval.MarkdownFile))
	}
	if f.check && res.Outside > 0 {
		return fmt.Errorf("%w: scenario %s: %d of %d figures of the simulation not within %.0f%% of the real runs' (--check)",
			errAssertionFailed, sc.Name, res.Outside, len(res.Figures), 100*simval.DefaultTolerance)
	}
	return nil
}

// readRuns reads dir's run-N/report.json in N's order: at least two, each a
// real run of sc's name and shape holding its configurations (only's, when
// set). Anything else is a usage error naming the file.
func readRuns(dir string, sc *scenario.Scenario, only string) ([]realRun, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, usagef("simulate: --against %s: %v (want what noisysim run --repeat N --out DIR writes)", dir, errors.Unwrap(err))
	}
	type numbered struct {
		n    int
		name string
	}
	var names []numbered
	for _, e := range entries {
		m := runDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), reports.JSONFile)); err != nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		names = append(names, numbered{n, e.Name()})
	}
	if len(names) < 2 {
		return nil, usagef("simulate: --against %s: %d run reports (run-N/report.json); want at least 2: noisysim run SCENARIO --repeat N --out %s writes them",
			dir, len(names), dir)
	}
	slices.SortFunc(names, func(x, y numbered) int { return x.n - y.n })
	var runs []realRun
	for _, nm := range names {
		path := filepath.Join(dir, nm.name, reports.JSONFile)
		rep, err := reports.ReadFile(path)
		if err != nil {
			return nil, usagef("simulate: --against: %v", err)
		}
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
		runs = append(runs, realRun{name: nm.name, path: path, rep: rep})
	}
	return runs, nil
}
