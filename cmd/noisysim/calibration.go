package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// calibrateFlags are the values of a repeatable --calibrate: each a
// report.json, a directory holding one (run --out DIR), or what noisysim
// run --repeat N --out DIR wrote (every run-K/report.json in it).
type calibrateFlags []string

func (c *calibrateFlags) String() string { return strings.Join(*c, ", ") }

// Set adds s; an empty value adds nothing (the command then says what it
// needs, as without the flag).
func (c *calibrateFlags) Set(s string) error {
	if s != "" {
		*c = append(*c, s)
	}
	return nil
}

// calibrateHelp is --calibrate's flag help.
const calibrateHelp = "a real run's report.json to draw service times from, or a directory of run --repeat N --out (every run in it); repeatable: several runs of one scenario at other seeds average the service times, set a load_factor class's rate from the median run's, and fit the scheduler wait to their median quiet p99"

// calibration is the real runs a simulation is calibrated on: the first
// sets the calibrated classes' rates, all of them the quiet tenants'
// service times and the scheduler wait (harness.SimulateOptions).
type calibration struct {
	reps  []*reports.Report
	files []string
	// runDirs are the --calibrate directories whose run-K/report.json
	// were taken (what run --repeat N --out wrote).
	runDirs []string
}

// readCalibration reads paths (--calibrate's values, in order) for cmd: a
// usage error naming the path for one that is not a real noisysim report,
// a directory with none, runs of more than one scenario or a seed twice.
func readCalibration(cmd string, paths []string) (*calibration, error) {
	cal := &calibration{}
	seen := map[int64]string{}
	from := map[string]string{} // a file taken: the --calibrate value it came from
	for _, p := range paths {
		files, err := calibrationFiles(p)
		if err != nil {
			return nil, usagef("%s: --calibrate %s: %v", cmd, p, err)
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() && !fileExists(filepath.Join(p, reports.JSONFile)) {
			cal.runDirs = append(cal.runDirs, p)
		}
		for _, f := range files {
			if i := slices.IndexFunc(cal.files, func(g string) bool { return sameFile(f, g) }); i >= 0 {
				if f == p && from[cal.files[i]] == cal.files[i] {
					return nil, usagef("%s: --calibrate %s: given twice: give each calibration run once", cmd, p)
				}
				return nil, usagef("%s: --calibrate %s: %s is taken twice (also from --calibrate %s): give each calibration run once", cmd, p, f, from[cal.files[i]])
			}
			rep, err := reports.ReadFile(f)
			if err != nil {
				return nil, usagef("%s: --calibrate: %v", cmd, err)
			}
			if rep.Simulated != nil {
				return nil, usagef("%s: --calibrate %s: a simulated report; calibrate on a real run's", cmd, f)
			}
			if len(cal.reps) > 0 && rep.Scenario != cal.reps[0].Scenario {
				return nil, usagef("%s: --calibrate %s: a run of scenario %q, %s is of %q: calibrate on runs of one scenario", cmd, f, rep.Scenario, cal.files[0], cal.reps[0].Scenario)
			}
			if other, dup := seen[rep.Seed]; dup {
				return nil, usagef("%s: --calibrate %s: seed %d again (%s is of it too): give each calibration run once, at its own seed", cmd, f, rep.Seed, other)
			}
			seen[rep.Seed] = f
			from[f] = p
			cal.reps, cal.files = append(cal.reps, rep), append(cal.files, f)
		}
	}
	return cal, nil
}

// calibrationFiles returns the report files path stands for: itself, its
// report.json, or its run-K/report.json in K's order.
func calibrationFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	if f := filepath.Join(path, reports.JSONFile); fileExists(f) {
		return []string{f}, nil
	}
	runs, err := runReports(path)
	if err != nil {
		return nil, bareErr(err)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("a directory with no %s and no run-K/%s (want a report.json, or what noisysim run --out DIR or run --repeat N --out DIR wrote)", reports.JSONFile, reports.JSONFile)
	}
	return runs, nil
}

// runReports returns dir's run-K/report.json (what noisysim run --repeat
// N --out dir writes), in K's order.
func runReports(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type numbered struct {
		n    int
		file string
	}
	var runs []numbered
	for _, e := range entries {
		m := runDir.FindStringSubmatch(e.Name())
		// run-K may be a link to a run's directory (runs of several
		// --repeat series gathered in one place): its report.json decides.
		if m == nil {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f := filepath.Join(p, reports.JSONFile)
		if e.Type()&fs.ModeSymlink != 0 {
			// Someone linked it as a run: one that leads nowhere (broken,
			// a loop) or to no run is a mistake, not a run fewer.
			st, err := os.Stat(p)
			switch {
			case err != nil:
				return nil, fmt.Errorf("%s: a link that leads to no run directory: %v", p, bareErr(err))
			case !st.IsDir() || !fileExists(f):
				target, _ := os.Readlink(p)
				return nil, fmt.Errorf("%s: a link to %s, not a run's directory (no %s in it)", p, target, reports.JSONFile)
			}
		}
		if !fileExists(f) {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		runs = append(runs, numbered{n, f})
	}
	slices.SortFunc(runs, func(a, b numbered) int { return a.n - b.n })
	var out []string
	for _, r := range runs {
		out = append(out, r.file)
	}
	return out, nil
}

// bareErr returns err without its *os.PathError's operation and path
// (the caller names the path), or err itself when it wraps nothing.
func bareErr(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// sameAs reports whether name (a calibration's name(), as sweep.json
// records it) names the same files as c, in the same order, however they
// were spelled (relative, absolute, through a symlink).
func (c *calibration) sameAs(name string) bool {
	if name == c.name() {
		return true
	}
	files := strings.Split(name, ", ")
	if len(files) != len(c.files) {
		return false
	}
	for i, f := range files {
		if !sameFile(f, c.files[i]) {
			return false
		}
	}
	return true
}

// runDirOf returns the --calibrate directory of runs (run-K/report.json)
// that dir is, if any: a report.json written there would be taken instead
// of its runs by the next --calibrate of it.
func (c *calibration) runDirOf(dir string) (string, bool) {
	i := slices.IndexFunc(c.runDirs, func(d string) bool { return sameFile(d, dir) })
	if i < 0 {
		return "", false
	}
	return c.runDirs[i], true
}

// primary is the first calibration run.
func (c *calibration) primary() *reports.Report { return c.reps[0] }

// name names the calibration runs: their files, comma-separated.
func (c *calibration) name() string { return strings.Join(c.files, ", ") }

// set fills o's calibration fields.
func (c *calibration) set(o harness.SimulateOptions) harness.SimulateOptions {
	o.Calibration, o.CalibrationFile = c.reps[0], c.files[0]
	o.MoreCalibrations, o.MoreCalibrationFiles = c.reps[1:], c.files[1:]
	return o
}

// holds reports whether path is one of the calibration's files.
func (c *calibration) holds(path string) bool {
	return slices.ContainsFunc(c.files, func(f string) bool { return sameFile(f, path) })
}

// seeds lists the calibration runs' seeds when there are several ("42,
// 43, 44"); "" for one.
func (c *calibration) seeds() string {
	if len(c.reps) < 2 {
		return ""
	}
	var out []string
	for _, r := range c.reps {
		out = append(out, strconv.FormatInt(r.Seed, 10))
	}
	return strings.Join(out, ", ")
}

// check returns harness.CheckSimulate's error for the first run of the
// calibration that does not fit sc.
func (c *calibration) check(sc *scenario.Scenario) error {
	for i, r := range c.reps {
		if err := harness.CheckSimulate(sc, r, c.files[i]); err != nil {
			return err
		}
	}
	return nil
}

// disturbed is every run's DISTURBED windows, each run's named by its file
// when there are several; "" when none.
func (c *calibration) disturbed() string {
	var out []string
	for i, r := range c.reps {
		if why := r.Machine.DisturbedWhy(); why != "" {
			if len(c.reps) > 1 {
				why = c.files[i] + ": " + why
			}
			out = append(out, why)
		}
	}
	return strings.Join(out, "; ")
}

// notes is harness.CalibrationNotes of every run, each distinct one once,
// named by its run's file when there are several.
func (c *calibration) notes(sc *scenario.Scenario) []string {
	var out []string
	for i, r := range c.reps {
		for _, n := range harness.CalibrationNotes(r, c.files[i], sc) {
			if len(c.reps) > 1 && !strings.Contains(n, c.files[i]) {
				n = c.files[i] + ": " + n
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}
