package main

import (
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/guard"
	"github.com/noisysim/noisysim/harness/live"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/internal/runlock"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

const runUsage = `Usage: noisysim run [flags] SCENARIO.yaml

Runs a scenario end to end: starts its backend (a throwaway PostgreSQL by
default), loads the data set, measures the quiet tenants alone (solo), runs
the full mix under each configuration, prints the results side by side and
checks the assertions.

Its tables live in a schema of its own (data.schema, default noisysim) and
its roles carry a comment marking them as noisysim's; both are removed at
the end of the run, also when it fails or is interrupted, unless --keep. A
run refuses to start when that schema or one of those roles exists and
noisysim did not create it.

A measured run holds a machine-wide lock (/tmp/noisysim-measure.lock, or
$NOISYSIM_LOCK_FILE): a second run waits for it, or with --no-wait exits 2
naming the run holding it; --allow-concurrent measures beside it and the
report says so. During each measured window noisysim measures the CPU used
outside its own processes and its servers (and steal time), and stalls of
its own process (woken 50 ms or more late); a window above --max-foreign-cpu,
with steal above 5% of the CPU the machine ran, or with a stall of 250 ms
or more, is marked DISTURBED, and so is the verdict line.

With --priority, once its servers run, noisysim moves its own process into
a cpu group of its own (noisysim-gen-<pid>) with 8 times the default CPU
weight, where cgroups can be written: every server backend weighs as much
as noisysim otherwise, and 40 busy backends leave it 1/41 of a CPU to send
and time requests with (stalls). The servers and what it starts later stay
outside it. Its wake-ups then preempt the servers, which moved the isolated
margins of ci-gate, so it is not the default; the report says which it was.

Before the run it says how many quiet tenant × class pairs quiet_p99 will
judge (those reaching min_samples in both its phases). A verdict whose limit
lies inside its p99's 95% confidence interval is reported as marginal;
--strict makes a passed run with a marginal verdict exit 1.

With --retry-disturbed N, a run that failed is run again with the same
seed, up to N more times, while a check that failed it was judged over a
DISTURBED window (its window or baseline; for control_fails, its
control's; any disturbed window when a failed check names none): a
failure on undisturbed windows is final at once, a passed run is never
run again. Each retried attempt is said in one line, its reports go to
OUT/attempt-K with --out, the verdict is the last attempt's ("after K
attempts"), and report.json lists the attempts. It exits 99 when the
last attempt failed, as without it, also when the machine was disturbed
in every attempt (the verdict line says so).

With --retry-marginal N, a run that failed on marginal verdicts only
(every check that failed it had its limit inside its p99's 95%
confidence interval: either verdict was plausible) is run again with the
same seed, up to N more times; one clear failure makes the verdict final.
Its attempts are said and kept as --retry-disturbed's. A gate on a noisy
machine wants 1: a regression fails by a clear margin in every attempt.

Exit codes: 0 all assertions passed, 99 an assertion failed, 2 bad input or
usage (also: the schema or a role exists and is not noisysim's), 1 any
other error (also: --strict and a marginal verdict).

Flags (before or after the file):
`

func runRun(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), runUsage); fs.PrintDefaults() }
	only := fs.String("only", "", "run only this configuration and apply the assertions to it")
	out := fs.String("out", "", "write report.json, report.md, junit.xml and report.html into this directory")
	noProgress := fs.Bool("no-progress", false, "no progress display")
	top := fs.Int("top", reports.DefaultTopQuiet, "quiet tenants listed per configuration table")
	kind := backendFlag(fs, "", "override the scenario's backend kind: local or docker")
	image := fs.String("image", "", "container image of every node (backend docker)")
	apply := fs.Bool("apply", false, "run the policy ladder: sets apply on every hot_shard_ladder watch (without detect_only)")
	noWait := fs.Bool("no-wait", false, "exit 2 at once when another measured run holds the machine, instead of waiting")
	allowConcurrent := fs.Bool("allow-concurrent", false, "measure without the machine-wide lock, beside other runs (the report says so)")
	repeat := fs.Int("repeat", 1, "run the scenario N times with seeds seed, seed+1, …; print the verdict counts and each configuration's quiet (all) p99 / limit as a distribution")
	maxForeign := fs.Float64("max-foreign-cpu", guard.DefaultMaxForeignCPU, "CPUs used outside the run (plus steal) above which a measured window is disturbed, > 0; negative: no guard")
	strict := fs.Bool("strict", false, "exit 1 when the run passed but a verdict is marginal (its limit inside the p99's 95% confidence interval)")
	priority := fs.Bool("priority", false, "move noisysim into a cpu group of its own with 8 times the default CPU weight once its servers run (where cgroups can be written): its servers cannot starve it, but its wake-ups preempt them")
	keep := fs.Bool("keep", false, "leave the run's schema (data.schema) and roles on the database at the end; the next run removes them")
	trace := fs.String("trace", "", "write every operation the open loop is handed (intended start, tenant, class, statement, parameters) to this new file as JSON Lines, gzip-compressed if it ends in .gz (harness/TRACE.md)")
	metricsAddr := fs.String("metrics-addr", "", "serve live Prometheus metrics on this host:port while the run lasts (e.g. "+live.DefaultAddr+"; loopback only unless --metrics-remote)")
	metricsRemote := fs.Bool("metrics-remote", false, "let --metrics-addr be a non-loopback address (the metrics are then open to the network)")
	segment := fs.String("segment", "", "run only slice i of N of every class's and tenant's schedule (1-based: 1/3, 2/3, 3/3), as one of N agents; needs --out, where the histograms go for noisysim merge")
	startAt := fs.String("start-at", "", "start the first configuration's timeline at this wall-clock time (RFC 3339, e.g. 2026-01-02T15:04:05Z), after the data set is loaded: agents given the same time send together")
	retries := fs.Int("retry-disturbed", 0, "run a failed scenario again, with the same seed, up to N more times (0..10) while a check that failed it was judged over a window the machine disturbed (DISTURBED); a failure on undisturbed windows is final at once, a passed run is never run again; the verdict is the last attempt's")
	retryMarginal := fs.Int("retry-marginal", 0, "run a scenario that failed on marginal verdicts only (each failed limit inside its p99's 95% confidence interval) again, with the same seed, up to N more times (0..10); a clear failure is final at once; the verdict is the last attempt's")
	metricsTop := fs.Int("metrics-top", live.DefaultTopTenants, "tenants with their own tenant label in the live metrics (tenants 1..N); the other quiet tenants share the label \""+live.OtherQuiet+"\"")
	file, err := parseInterspersed(a, fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		fs.Usage()
		return usagef("run: missing scenario file")
	}
	if err := checkTop("run", *top); err != nil {
		return err
	}
	// Before checkOutDir, which looks at each run's directory: a --repeat
	// of millions would take the machine's memory there.
	if *repeat < 1 || *repeat > maxRepeat {
		return usagef("run: --repeat %d: want 1..%d", *repeat, maxRepeat)
	}
	if err := checkOutDir("run", *out, *repeat, min(max(*retries, 0), maxRetries)+min(max(*retryMarginal, 0), maxRetries)); err != nil {
		return err
	}
	if *trace != "" {
		if st, err := os.Stat(filepath.Dir(*trace)); err != nil || !st.IsDir() {
			return usagef("run: --trace %s: no directory %s", *trace, filepath.Dir(*trace))
		}
	}
	if *metricsAddr != "" {
		if err := live.CheckAddr(*metricsAddr, *metricsRemote); errors.Is(err, live.ErrNotLoopback) {
			return usagef("run: --metrics-addr: %v (--metrics-remote allows it)", err)
		} else if err != nil {
			return usagef("run: --metrics-addr: %v (want host:port, e.g. %s)", err, live.DefaultAddr)
		}
		if *metricsTop < 1 {
			return usagef("run: --metrics-top %d: want at least 1", *metricsTop)
		}
	}
	sc, err := scenario.Load(file)
	if err != nil {
		return err
	}
	if err := overrideBackend(sc, *kind, *image); err != nil {
		return err
	}
	if *apply && !sc.SetApply() {
		return usagef("run: --apply is for scenarios with a hot_shard_ladder watch (timeline[].watch); %s has none", file)
	}
	if sc.Backend.Kind == scenario.BackendDocker {
		if err := needDocker(ctx, "run"); err != nil {
			return err
		}
	}
	onlySet := false
	fs.Visit(func(f *flag.Flag) { onlySet = onlySet || f.Name == "only" })
	if onlySet {
		if _, ok := sc.Configuration(*only); !ok {
			return usagef("run: --only %q: %s has no such configuration (it has %s)", *only, file, configNames(sc))
		}
	}

	if badMaxForeign(*maxForeign) {
		return usagef("run: --max-foreign-cpu %v: %s", *maxForeign, wantMaxForeign)
	}
	if *noWait && *allowConcurrent {
		return usagef("run: --no-wait and --allow-concurrent exclude each other")
	}
	if *trace != "" && *repeat > 1 {
		return usagef("run: --trace records one run: not with --repeat")
	}
	if *trace != "" {
		if _, err := os.Lstat(*trace); err == nil {
			return usagef("run: --trace %s: the file exists; noisysim does not overwrite it", *trace)
		}
	}
	var f execFlags
	segmentSet := false
	fs.Visit(func(f *flag.Flag) { segmentSet = segmentSet || f.Name == "segment" })
	if err := checkRetries("--retry-disturbed", *retries, segmentSet, *trace != ""); err != nil {
		return err
	}
	if err := checkRetries("--retry-marginal", *retryMarginal, segmentSet, *trace != ""); err != nil {
		return err
	}
	if segmentSet {
		seg, err := workload.ParseSegment(*segment)
		if err != nil {
			return usagef("run: --segment: %v", err)
		}
		if *out == "" {
			return usagef("run: --segment %s needs --out DIR: the agent's histograms and partial report go there for noisysim merge", *segment)
		}
		if *repeat > 1 {
			return usagef("run: --segment runs one agent's slice once: not with --repeat")
		}
		if err := harness.SegmentProblems(sc); err != nil {
			return err
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		f.segment, f.scenarioHash = seg, scenarioHash(b)
	}
	startAtSet := false
	fs.Visit(func(f *flag.Flag) { startAtSet = startAtSet || f.Name == "start-at" })
	if startAtSet {
		// Given empty (an unset shell variable), it would silently start
		// this agent on its own clock, apart from the others.
		t, err := time.Parse(time.RFC3339Nano, *startAt)
		if err != nil {
			return usagef("run: --start-at %q: want an RFC 3339 time, e.g. 2026-01-02T15:04:05Z", *startAt)
		}
		if !t.After(time.Now()) {
			return usagef("run: --start-at %s: the time has passed already (give a time far enough ahead for every agent to load its data)", *startAt)
		}
		f.startAt = t
	}
	return execScenario(ctx, a, sc, execFlags{
		segment: f.segment, scenarioHash: f.scenarioHash, startAt: f.startAt,
		only: *only, out: *out, noProgress: *noProgress, top: *top, noWait: *noWait, allowConcurrent: *allowConcurrent,
		repeat: *repeat, retries: *retries, retryMarginal: *retryMarginal, maxForeign: *maxForeign, strict: *strict, keep: *keep, trace: *trace, priority: *priority,
		metricsAddr: *metricsAddr, metricsRemote: *metricsRemote, metricsTop: *metricsTop,
	})
}

// checkOutDir returns a usage error if --out (a directory the reports are
// written to, created if missing) cannot be one: the path, or a directory
// above it, is a file; the nearest existing directory is not writable; or
// it holds a report already (report.json, or run-I/report.json of runs
// 1..repeat when repeat > 1, and attempt-K/report.json of attempts
// 1..retries in each): noisysim never overwrites a report, as sweep
// never overwrites a sweep.json. It is checked before a run rather than
// found when the reports are written.
func checkOutDir(cmd, out string, repeat, retries int) error {
	if out == "" {
		return nil
	}
	if err := checkOutWritable(cmd, out); err != nil {
		return err
	}
	dirs := []string{out}
	if repeat > 1 {
		dirs = dirs[:0]
		for i := 1; i <= repeat; i++ {
			dirs = append(dirs, filepath.Join(out, "run-"+strconv.Itoa(i)))
		}
	}
	for _, d := range dirs[:len(dirs):len(dirs)] {
		for k := 1; k <= retries; k++ {
			dirs = append(dirs, attemptDir(d, k))
		}
	}
	for _, d := range dirs {
		for _, name := range []string{reports.JSONFile, reports.MarkdownFile, reports.JUnitFile, reports.HTMLFile, harness.SegmentFile, harness.HistogramLogFile} {
			existing := filepath.Join(d, name)
			if _, err := os.Lstat(existing); err == nil {
				return usagef("%s: --out %s: %s holds a report already; noisysim does not overwrite it (give another --out, or remove it)", cmd, out, existing)
			}
		}
	}
	return nil
}

// checkOutWritable checks that out, or its nearest existing parent, is a
// directory noisysim can create files in (exit 2 naming it otherwise).
func checkOutWritable(cmd, out string) error {
	for p := out; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return usagef("%s: --out %s: %s is a file, not a directory (--out names the directory the reports go to)", cmd, out, p)
			}
			// Probe by creating a file: access(2) says yes to root on a
			// directory such as /proc where nothing can be created.
			f, err := os.CreateTemp(p, ".noisysim-out-*")
			if err != nil {
				return usagef("%s: --out %s: cannot write in %s: %v", cmd, out, p, errors.Unwrap(err))
			}
			f.Close()
			os.Remove(f.Name())
			break
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return nil
}

// badMaxForeign reports whether v cannot be a --max-foreign-cpu: not a
// finite number, or 0, which the guard would take as its default (0.5):
// a user asking for no foreign CPU at all would get half a CPU, silently.
func badMaxForeign(v float64) bool {
	return math.IsNaN(v) || math.IsInf(v, 0) || v == 0
}

// wantMaxForeign says what --max-foreign-cpu takes.
const wantMaxForeign = "want a number of CPUs > 0 (e.g. 0.05; negative: no guard)"

// writeReports writes rep's files into dir (--out, or a run-i under it),
// never over a report: checkOutDir found none at the start, but another
// run given the same --out (one that waited for the machine, or ran with
// --allow-concurrent) may have written one since. Then this run's files go
// to a new directory beside dir, and the usage error (exit 2) names both.
func writeReports(dir string, rep *reports.Report) error {
	err := reports.WriteNewDir(dir, rep)
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	alt, aerr := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".")
	if aerr == nil {
		aerr = reports.WriteNewDir(alt, rep)
	}
	if aerr != nil {
		return usagef("--out %s: another run wrote its report there while this one ran; noisysim does not overwrite it, and could not write this run's reports beside it: %v", dir, aerr)
	}
	return usagef("--out %s: another run wrote its report there while this one ran; noisysim does not overwrite it: this run's reports are in %s", dir, alt)
}

// execFlags are the run flags execScenario acts on, as noisysim run's
// flags of the same names; top 0 means reports.DefaultTopQuiet, repeat 0
// once, and maxForeign is --max-foreign-cpu (negative: no guard).
type execFlags struct {
	only, out, trace, metricsAddr string
	noProgress, noWait, strict    bool
	allowConcurrent, keep         bool
	priority                      bool
	metricsRemote                 bool
	top, repeat, metricsTop       int
	retries                       int // --retry-disturbed
	retryMarginal                 int // --retry-marginal
	maxForeign                    float64
	// segment, when not whole, runs one agent's slice and writes its
	// histograms (harness.WriteSegment) into out; scenarioHash names the
	// scenario file's bytes; startAt is --start-at.
	segment      workload.Segment
	scenarioHash string
	startAt      time.Time
}

// execScenario runs a loaded scenario, whose flags have been checked,
// through the engine (harness.Run): the machine-wide lock, the sample plan,
// the progress display, the reports, and the exit code of its verdict.
// noisysim run and noisysim citus hot-shard both end here.
func execScenario(ctx context.Context, a *app, sc *scenario.Scenario, f execFlags) error {
	if f.top == 0 {
		f.top = reports.DefaultTopQuiet
	}
	if f.repeat == 0 {
		f.repeat = 1
	}
	// The metrics address is taken before the lock: a port in use is bad
	// input said at once, not after waiting for another run.
	var metrics *live.Metrics
	if f.metricsAddr != "" {
		metrics = live.New(f.metricsTop)
		srv, err := live.Serve(f.metricsAddr, metrics, f.metricsRemote)
		if err != nil {
			return usagef("run: --metrics-addr: %v", err)
		}
		defer srv.Close()
		fmt.Fprintf(a.stderr, "noisysim: live metrics at http://%s/metrics while the run lasts\n", srv.Addr())
	}
	release, concurrent, err := measureLock(ctx, a, "noisysim run "+sc.Name, f.noWait, f.allowConcurrent)
	if err != nil {
		return err
	}
	defer release()

	plan, err := harness.PlanSamples(sc)
	if err != nil {
		return err
	}
	if plan != nil {
		writePlan(a.stderr, "noisysim: ", plan, 5)
	}

	var prog *progress
	opts := harness.Options{
		Only:          f.only,
		Keep:          f.keep,
		Logger:        a.log,
		MaxForeignCPU: f.maxForeign,
		Concurrent:    concurrent,
		Priority:      f.priority,
		ServiceLogDir: f.out,
		OnService:     func(kill func() error) { a.teardown.add(kill, kill) },
		// Run removes them on its own path; a second signal does not wait for it.
		OnTempDir: func(dir string) {
			a.teardown.add(func() error { return nil }, func() error { return os.RemoveAll(dir) })
		},
		OnCluster: func(c backend.Cluster) {
			kill := c.Close
			if k, ok := c.(interface{ Kill() error }); ok {
				kill = k.Kill
			}
			a.teardown.add(c.Close, kill)
		},
	}
	opts.Segment, opts.StartAt = f.segment, f.startAt
	windows := map[string][]harness.WindowResult{}
	var configs []string
	if !f.segment.Whole() {
		opts.OnWindows = func(config string, ws []harness.WindowResult) {
			configs = append(configs, config)
			windows[config] = ws
		}
	}
	if !f.noProgress && f.repeat == 1 {
		prog = newProgress(a.stderr)
		opts.Progress = prog.update
	}
	if metrics != nil {
		opts.Observer = metrics
	}
	retry := retried{retries: f.retries, marginal: f.retryMarginal, out: f.out, w: a.stdout}
	if f.repeat > 1 {
		return runRepeat(ctx, a, sc, opts, f.repeat, f.out, f.strict, retry)
	}
	var tf *traceFile
	if f.trace != "" {
		if tf, err = createTrace(f.trace); err != nil {
			return err
		}
		opts.Trace = tf
	}
	if prog != nil {
		retry.before = prog.finish
	}
	rep, err := retry.run(ctx, sc, opts)
	if tf != nil {
		if cerr := tf.finish(rep == nil); cerr != nil && err == nil {
			err = cerr
		} else if cerr == nil && rep != nil {
			fmt.Fprintf(a.stderr, "noisysim: trace written to %s\n", f.trace)
		}
	}
	if prog != nil {
		prog.finish()
	}
	if err != nil && (rep == nil || rep.Incomplete == "") {
		return err
	}
	if err == nil {
		// Measured in full: a signal from here stops nothing.
		a.teardown.onStop("the run has finished: its reports are written in full, then what noisysim started is removed")
	}
	// An interrupted run (err set, rep incomplete) still shows and writes
	// what it measured, then fails with the interruption (exit 1).
	if werr := reports.WriteText(a.stdout, rep, textOptions(f.top, f.out)); werr != nil {
		return errors.Join(err, werr)
	}
	if f.out != "" {
		if werr := writeReports(f.out, rep); werr != nil {
			return errors.Join(err, werr)
		}
		if !f.segment.Whole() && err == nil {
			meta := harness.SegmentMeta{Scenario: sc.Name, ScenarioHash: f.scenarioHash, Seed: sc.Seed, ScheduleHash: rep.ScheduleHash,
				Index: f.segment.Index, Count: f.segment.Count}
			if !f.startAt.IsZero() {
				meta.StartAt = f.startAt.UTC().Format(time.RFC3339Nano)
			}
			if werr := harness.WriteSegment(f.out, meta, configs, windows); werr != nil {
				return werr
			}
			fmt.Fprintf(a.stdout, "segment %s: histograms written to %s (noisysim merge reads them)\n", f.segment, filepath.Join(f.out, harness.HistogramLogFile))
		}
		if err != nil && !f.segment.Whole() {
			fmt.Fprintf(a.stdout, "segment %s: stopped before its end: its partial reports (incomplete) are kept in %s, but no %s or %s is written, so noisysim merge cannot use them: run every agent again, with a new --start-at\n",
				f.segment, f.out, harness.HistogramLogFile, harness.SegmentFile)
		} else if err != nil {
			fmt.Fprintf(a.stdout, "partial reports (incomplete) written to %s\n", f.out)
		} else {
			fmt.Fprintf(a.stdout, "reports written to %s\n", f.out)
		}
		fmt.Fprintf(a.stdout, "report.html: %s\n", filepath.Join(f.out, reports.HTMLFile))
	}
	if err != nil {
		return err
	}
	a.teardown.finished()
	runStep(ctx, "written")
	if !f.segment.Whole() {
		// One agent's assertions judge a slice of the load: the verdict
		// is noisysim merge's, over every agent's histograms.
		fmt.Fprintf(a.stdout, "segment %s: the verdict is noisysim merge's (this agent's own: passed %v)\n", f.segment, rep.Passed)
		return nil
	}
	if !rep.Passed {
		return fmt.Errorf("%w: scenario %s%s (see the assertions above)", errAssertionFailed, sc.Name, reports.AttemptsWords(rep))
	}
	if f.strict && len(rep.Marginal) > 0 {
		return fmt.Errorf("%w: scenario %s passed with %s (listed above)", errStrict, sc.Name, reports.Plural(len(rep.Marginal), "marginal verdict"))
	}
	return nil
}

// measureLock takes the machine-wide lock of measured runs for what, or
// with allowConcurrent returns the note the report carries instead.
func measureLock(ctx context.Context, a *app, what string, noWait, allowConcurrent bool) (release func(), concurrent string, err error) {
	if allowConcurrent {
		concurrent = "measured with --allow-concurrent, without the machine-wide lock"
		if h, held := runlock.Held(runlock.Path()); held {
			concurrent += "; another measured run was going at the start: " + h.String()
		}
		return func() {}, concurrent, nil
	}
	lock, err := runlock.Acquire(ctx, runlock.Path(), runlock.Options{What: what, NoWait: noWait,
		OnWait: func(w runlock.Wait) {
			place := w.InLine()
			if w.NoTicket != nil {
				place = "without a place in line (" + w.NoTicket.Error() + "): it goes once the lock is free and no run waits"
			}
			if w.Next {
				fmt.Fprintf(a.stderr, "noisysim: the machine is free, but runs wait ahead of this one and take it first (next: %s), %s (--no-wait exits instead, --allow-concurrent measures beside it)\n", w.Holder, place)
				return
			}
			fmt.Fprintf(a.stderr, "noisysim: waiting for the measured run of %s to finish, %s (--no-wait exits instead, --allow-concurrent measures beside it)\n", w.Holder, place)
		}})
	if err != nil {
		return nil, "", err
	}
	return func() { lock.Release() }, "", nil
}

// errStrict is a passed run that --strict fails: a verdict is marginal.
var errStrict = errors.New("--strict")

// writePlan says how many quiet tenant × class pairs quiet_p99 will judge
// at the scenario's rates and phase lengths, and lists up to max of those
// that will not reach min_samples.
func writePlan(w io.Writer, prefix string, p *reports.QuietPlan, max int) {
	fmt.Fprintf(w, "%squiet_p99 will check %d of %d quiet tenant × class pairs: those with >= %d samples in both %s and %s\n",
		prefix, p.Reaching, p.Pairs, p.MinSamples, p.Window, p.Baseline)
	for _, l := range p.Lengthened {
		fmt.Fprintf(w, "%s  check_top %s: %s lengthened from %s to %s\n", prefix, p.CheckTop, l.Phase,
			time.Duration(l.From*float64(time.Second)), time.Duration(l.To*float64(time.Second)))
	}
	if missing := p.Pairs - p.Reaching; missing > 0 {
		var parts []string
		for _, pp := range p.TooFew[:min(max, len(p.TooFew))] {
			parts = append(parts, fmt.Sprintf("%s/%s (%s %d, %s %d)", pp.Tenant, pp.Class, p.Window, pp.Window, p.Baseline, pp.Baseline))
		}
		more := ""
		if missing > len(parts) {
			more = fmt.Sprintf(", and %d more", missing-len(parts))
		}
		fmt.Fprintf(w, "%s  too few samples, skipped: %s%s (assertions.quiet_p99.check_top: K sizes the phases for the K busiest)\n",
			prefix, strings.Join(parts, ", "), more)
	}
}

// textOptions are the terminal report's options: the tables name top
// quiet tenants and send the reader for the rest to out's report.json, or,
// without --out, say how to write one.
// checkTop refuses a negative --top, which would list no quiet tenant by
// name without saying so.
func checkTop(cmd string, top int) error {
	if top < 0 {
		return usagef("%s: --top %d: want the number of quiet tenants to list, at least 1 (0: the default %d)", cmd, top, reports.DefaultTopQuiet)
	}
	return nil
}

func textOptions(top int, out string) reports.TextOptions {
	o := reports.TextOptions{TopQuiet: top, FullReport: "report.json (write it with --out DIR)"}
	if out != "" {
		o.FullReport = filepath.Join(out, "report.json")
	}
	return o
}

func configNames(sc *scenario.Scenario) string {
	var names []string
	for _, c := range sc.Configurations {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// parseInterspersed parses flags placed before or after the one positional
// argument, which it returns ("" if none).
func parseInterspersed(a *app, fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := parseFlags(a, fs, args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(pos) {
	case 0:
		return "", nil
	case 1:
		return pos[0], nil
	}
	what := "scenario file"
	if fs.Name() == "report" {
		what = "report.json"
	}
	return "", usagef("%s: want one %s, got %d arguments: %s", fs.Name(), what, len(pos), strings.Join(pos, " "))
}

// progress shows the run's phase: a progress bar on a terminal, a line per
// phase (and every 5 s) otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	key   string
	lastT time.Time
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *progress) update(pr harness.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := pr.Phase + " " + pr.Configuration
	desc := pr.Phase
	if pr.Configuration != "" {
		desc += " (" + pr.Configuration + ")"
	}
	if !p.tty {
		if key != p.key || time.Since(p.lastT) >= 5*time.Second {
			fmt.Fprintf(p.w, "noisysim: %-22s %5.1fs / %4.1fs  %6.0f ops/s\n", desc, pr.Elapsed.Seconds(), pr.Total.Seconds(), pr.Rate)
			p.key, p.lastT = key, time.Now()
		}
		return
	}
	if key != p.key {
		if p.bar != nil {
			p.bar.Finish()
			fmt.Fprintln(p.w)
		}
		p.key = key
		total := pr.Total.Milliseconds()
		if total <= 0 {
			total = -1 // a spinner: start and load have no planned length
		}
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(fmt.Sprintf("%-22s", desc)),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
		)
	}
	p.bar.Describe(fmt.Sprintf("%-22s %6.0f ops/s", desc, pr.Rate))
	if pr.Total > 0 {
		p.bar.Set64(min(pr.Elapsed.Milliseconds(), pr.Total.Milliseconds()))
	} else {
		p.bar.Add64(1)
	}
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}

const validateUsage = `Usage: noisysim validate SCENARIO.yaml...

Checks scenario files and reports every problem at once, each with its
file:line:col and field. Exit code 0 when all are valid, 2 otherwise.

For a noisy-neighbour scenario it also says how many quiet tenant × class
pairs quiet_p99 will judge at the scenario's rates and phase lengths (those
with at least min_samples requests in both its window and baseline), and
names the first that will not.
`

func runValidate(_ context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), validateUsage) }
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return usagef("validate: missing scenario file")
	}
	var bad []error
	for _, f := range fs.Args() {
		sc, err := scenario.Load(f)
		if err == nil {
			err = checkHeadroomKey(f, sc)
		}
		if err == nil {
			var plan *reports.QuietPlan
			if plan, err = harness.PlanSamples(sc); err == nil && plan != nil {
				fmt.Fprintf(a.stdout, "%s: ok\n", f)
				writePlan(a.stdout, "  ", plan, 10)
				continue
			}
		}
		if err != nil {
			var se *scenario.Error
			if errors.As(err, &se) {
				for _, p := range se.Problems {
					fmt.Fprintln(a.stderr, p.Error())
				}
				if len(se.Problems) == 0 {
					fmt.Fprintln(a.stderr, err)
				}
			} else {
				fmt.Fprintln(a.stderr, err)
			}
			bad = append(bad, err)
			continue
		}
		fmt.Fprintf(a.stdout, "%s: ok\n", f)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %d of %d scenario files invalid", scenario.ErrInvalid, len(bad), fs.NArg())
	}
	return nil
}

// traceFile is the file run --trace writes, gzip-compressed when its name
// ends in .gz.
type traceFile struct {
	path string
	f    *os.File
	gz   *gzip.Writer
	w    io.Writer
}

// createTrace creates path; an existing file is never overwritten.
func createTrace(path string) (*traceFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, usagef("run: --trace %s: the file exists; noisysim does not overwrite it", path)
		}
		return nil, usagef("run: --trace: %v", err)
	}
	t := &traceFile{path: path, f: f, w: f}
	if strings.HasSuffix(path, ".gz") {
		t.gz = gzip.NewWriter(f)
		t.w = t.gz
	}
	return t, nil
}

func (t *traceFile) Write(p []byte) (int, error) { return t.w.Write(p) }

// finish closes the file; with remove (the run did not start) it removes
// the file it created.
func (t *traceFile) finish(remove bool) error {
	var err error
	if t.gz != nil {
		err = t.gz.Close()
	}
	err = errors.Join(err, t.f.Close())
	if remove {
		return errors.Join(err, os.Remove(t.path))
	}
	if err != nil {
		return fmt.Errorf("write trace %s: %w", t.path, err)
	}
	return nil
}

// runStep is called by run once its reports are written in full
// ("written"): a test's hook to land a signal there; a no-op otherwise.
var runStep = func(context.Context, string) {}
