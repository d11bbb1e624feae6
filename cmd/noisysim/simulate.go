package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

const simulateUsage = `Usage: noisysim simulate [flags] SCENARIO --calibrate report.json

Runs the scenario in virtual time (no database, no sleeping): the same seeded
schedule as noisysim run (same ops, same schedule hash), through a model of
each configuration's limiters, pools and nodes, with service times drawn
from a real run's report.json of a scenario with the same classes
(--calibrate). Prints and writes the same report as a run, marked
SIMULATED, with the same assertions. The model and where it is wrong:
harness/sim (go doc ./harness/sim).

It never overwrites a report: an --out that holds a report.json (the
--calibrate file above all) is refused, as is one that cannot be written.
Progress (the phase and the virtual time reached) goes to stderr.

With --against DIR (what noisysim run --repeat N --out DIR wrote: run-1 …
run-N, each a report.json), it checks the model against those real runs
instead: calibrated on --calibrate or, without it, DIR's first run, it
simulates every other run at that run's seed and prints, per configuration,
the quiet (all) p99 of each quiet class, the achieved rate and the
rejections of the quiet_p99 window: the real runs' median and spread, the
simulated median and spread, their ratio and whether it is within 25%, then
the ratio per seed; beside each quiet class, its quiet p99 over the run's
own solo p99 (quiet/solo, real and simulated: shown, not judged). A real
run whose machine guard marked a window of a
configuration DISTURBED, or that was cut short (incomplete), is left out
of that configuration's medians (its simulation too), and counted. Notes on the calibration (DISTURBED windows,
a run cut short or failed, other data than SCENARIO's) are printed as note:
lines and written to the validation. --out DIR2 writes validate.json and
validate.md there (never over existing ones). Exit codes with --against: 0,
or 99 with --check when a judged figure is not within 25%; 2 for DIR missing or
with fewer than 2 reports, a report of another scenario or shape, a
simulated report among them, an --out holding a validation, --against "".

With --against SWEEPDIR (a directory holding a real sweep's sweep.json,
what noisysim sweep --out SWEEPDIR wrote; it is taken before run-N), it
checks the model against the sweep: --calibrate is then required (a real
run's report.json of the scenario, best at a seed other than the sweep's
trials': one of theirs gets a note), and the same sweep (its --vary specs, points, trials and seeds,
and --only) is run again in virtual time, as sweep --simulate does. Per
configuration, a table with a row per point gives the real trials' median
and min-max of quiet_p99_ms (each trial's quiet_class; the simulated p99 is
of the same class) and throughput_per_s, the simulated median, their ratio
and whether it is within 25%, and quiet_over_solo real and simulated
(informational); then "quiet p99: N of M within 25%" and, apart,
"throughput: N of M within 25%" (an open loop matches it by construction).
A trial marked disturbed is left out of the medians (its simulation too),
and counted; a point whose every trial is disturbed is unjudged: listed, in
neither count. A trial's quiet figure that quiet_p99 did not judge
(quiet_unjudged: it judged no class) is left out of the quiet p99 medians
and count the same way (its throughput is compared), marked in the table
and listed; the count says how many were left out. --out as above; --check exits 99 when a quiet p99 or a
throughput is not within 25%, saying which, and when no point could be
judged. Notes as above, and for a
sweep.json that records no scenario shape (an older one: whether the phases
are the sweep's cannot tell). Exit 2, naming sweep.json and the field: a
sweep.json not readable or not a sweep (file:line:col), a simulated sweep,
one of another scenario name, a knee search or an interrupted sweep, a
--vary key SCENARIO does not have, trial seeds SCENARIO's seed does not
give, a scenario shape (phases, configurations, classes) other than the
one sweep.json records, more or fewer points than its --vary specs give,
a point twice or without a varied key's value, a seed twice in a point, a
trial with no configurations, one SCENARIO does not have or one beside the
point's only, a missing or unknown quiet_class, quiet_p99_ms or
throughput_per_s not above 0, a negative rejected, errors or
target_rate_per_s; no --calibrate.

Exit codes: 0 every assertion held, 99 one failed, 2 bad input (an invalid
scenario, one the simulator does not model, a --calibrate file that is not a
noisysim report.json or is of another scenario's shape, an --out holding a
report or not writable), 1 any other error (an interruption: nothing is
written).

Flags (before or after the file):
`

func runSimulate(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), simulateUsage); fs.PrintDefaults() }
	var calibrate calibrateFlags
	fs.Var(&calibrate, "calibrate", calibrateHelp+" (required, but with --against run directories: DIR's first run)")
	against := fs.String("against", "", "compare with the real runs in this directory (run --repeat N --out DIR: simulate each at its seed) or its real sweep.json (sweep --out DIR: the same sweep simulated); print real vs simulated medians")
	check := fs.Bool("check", false, "with --against: exit 99 when a figure's simulated median is not within 25% of the real one")
	only := fs.String("only", "", "simulate only this configuration")
	out := fs.String("out", "", "write report.json, report.md, junit.xml and report.html into this directory")
	cores := fs.Float64("cores", 0, "cores of a node without a CPU budget (backend.node_cpu); 0: this machine's")
	top := fs.Int("top", reports.DefaultTopQuiet, "quiet tenants listed per configuration table")
	noProgress := fs.Bool("no-progress", false, "no progress display (the phase and the virtual time reached, on stderr)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the simulation to this file (go tool pprof)")
	file, err := parseInterspersed(a, fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		fs.Usage()
		return usagef("simulate: missing scenario file")
	}
	if *cores < 0 || math.IsNaN(*cores) || math.IsInf(*cores, 0) {
		return usagef("simulate: --cores %v: want a number of cores > 0 (or 0: this machine's)", *cores)
	}
	if *against == "" && flagSet(fs, "against") {
		return usagef("simulate: --against: empty (want a directory: what noisysim run --repeat N --out DIR or noisysim sweep --out DIR wrote)")
	}
	if *check && *against == "" {
		return usagef("simulate: --check needs --against DIR (noisysim run --repeat N --out DIR's runs, or noisysim sweep --out DIR's sweep)")
	}
	// Nothing is written when interrupted: the report (or validation) is
	// written only once every simulation finished.
	a.teardown.onStop("nothing is written (simulate writes its report, or with --against its validation, only once every simulation finished)")
	if *against != "" {
		return runSimulateAgainst(ctx, a, file, againstFlags{dir: *against, calibrate: calibrate, only: *only, out: *out,
			cores: *cores, check: *check, noProgress: *noProgress})
	}
	if len(calibrate) == 0 {
		return usagef("simulate: --calibrate report.json is required (a real run's report of a scenario with the same classes: noisysim run SCENARIO --out DIR writes one)")
	}
	cal, err := readCalibration("simulate", calibrate)
	if err != nil {
		return err
	}
	if *out != "" {
		if d, ok := cal.runDirOf(*out); ok {
			return usagef("simulate: --out %s is the --calibrate directory %s of real runs (run-K/report.json): a report.json written there would be taken instead of its runs by the next --calibrate %s; give another --out", *out, d, d)
		}
		for _, name := range []string{reports.JSONFile, reports.MarkdownFile, reports.JUnitFile, reports.HTMLFile} {
			if cal.holds(filepath.Join(*out, name)) {
				return usagef("simulate: --out %s would overwrite the --calibrate file %s; give another --out", *out, filepath.Join(*out, name))
			}
		}
	}
	if err := checkTop("simulate", *top); err != nil {
		return err
	}
	if err := checkOutDir("simulate", *out, 1, 0); err != nil {
		return err
	}
	sc, err := scenario.Load(file)
	if err != nil {
		return err
	}
	if *only != "" {
		if _, ok := sc.Configuration(*only); !ok {
			return usagef("simulate: --only %q: %s has no such configuration (it has %s)", *only, file, configNames(sc))
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return usagef("simulate: --cpuprofile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("simulate: start CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	t0 := time.Now()
	sopts := cal.set(harness.SimulateOptions{Only: *only, Cores: *cores, Logger: a.log})
	var prog *progress
	if !*noProgress {
		prog = newProgress(a.stderr)
		sopts.Progress = prog.update
	}
	rep, err := harness.Simulate(ctx, sc, sopts)
	if prog != nil {
		prog.finish()
	}
	if err != nil {
		return err
	}
	// From here a signal stops nothing: what is left is writing.
	a.teardown.onStop("the simulation has finished: its reports are written in full, then noisysim exits")
	simulateStep(ctx, "simulated")
	rep.Version = version()
	fmt.Fprintf(a.stdout, "SIMULATED %s (%s) in virtual time, %.1fs of wall time, calibrated by %s\n",
		sc.Name, file, time.Since(t0).Seconds(), cal.name())
	if err := reports.WriteText(a.stdout, rep, textOptions(*top, *out)); err != nil {
		return err
	}
	if *out != "" {
		if err := reports.WriteDir(*out, rep); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "simulated reports written to %s\n", *out)
		fmt.Fprintf(a.stdout, "report.html: %s\n", filepath.Join(*out, reports.HTMLFile))
	}
	a.teardown.finished()
	simulateStep(ctx, "written")
	if !rep.Passed {
		return fmt.Errorf("%w: scenario %s, simulated (see the assertions above)", errAssertionFailed, sc.Name)
	}
	return nil
}

// simulateStep is called by simulate once the simulation has finished
// ("simulated") and once its outputs are written ("written"): a test's
// hook to land a signal there; a no-op otherwise.
var simulateStep = func(context.Context, string) {}

// sameFile reports whether paths a and b name the same file: the same
// existing file, or the same clean absolute path.
func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}
