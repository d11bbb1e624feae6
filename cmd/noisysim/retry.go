package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// maxRetries bounds --retry-disturbed: a machine disturbed through eleven
// runs in a row will not be quiet for the twelfth.
const maxRetries = 10

// attemptDir is where attempt k's reports go under out (out/attempt-k).
func attemptDir(out string, k int) string {
	return filepath.Join(out, "attempt-"+strconv.Itoa(k))
}

// retried is a run of noisysim run --retry-disturbed: how it ran sc (the
// same seed every time), where the attempts before the last one write
// their reports, and where it says each of them.
type retried struct {
	retries int // --retry-disturbed: the runs after the first at most
	// marginal is --retry-marginal: the runs after the first at most
	// that a failure on marginal verdicts only may ask for.
	marginal int
	out      string // the run's --out ("" none): earlier attempts go to out/attempt-K
	// label prefixes each attempt's line, e.g. "run 2/5 " in a --repeat
	// series; before, when not nil, is called before a line is written
	// (to end a progress display).
	label  string
	before func()
	w      io.Writer
	// made and done are set by run: the attempts it started (the last
	// one included, complete or not) and those that completed, as the
	// report lists them, for a --repeat series to count a stopped run's.
	made int
	done []reports.Attempt
	// runOnce runs the scenario once; nil: harness.Run.
	runOnce func(context.Context, *scenario.Scenario, harness.Options) (*reports.Report, error)
}

// ask says which retries t was given.
func (t *retried) ask() retryAsk { return retryAsk{disturbed: t.retries > 0, marginal: t.marginal > 0} }

// run runs sc through the engine, and again with the same seed while it
// fails on a window the machine disturbed (harness.RetryOf) and retries
// remain, or on marginal verdicts only and marginal retries remain (a
// failure both disturbed and marginal takes a disturbed retry first). An
// earlier attempt's reports go to out/attempt-K, its service logs with
// them, and it is said in one line. It returns the last
// attempt's report and error; with retries, the report lists every
// attempt (Report.Attempts). An attempt that ends in an error (an
// interruption) ends the series there: its report, if any, lists the
// attempts before it. Either way t.made and t.done say the attempts.
func (t *retried) run(ctx context.Context, sc *scenario.Scenario, opts harness.Options) (*reports.Report, error) {
	var attempts []reports.Attempt
	t.made = 0
	defer func() { t.done = attempts }()
	runOnce := t.runOnce
	if runOnce == nil {
		runOnce = harness.Run
	}
	disturbed, marginal := 0, 0 // the retries taken of each kind
	for k := 1; ; k++ {
		t.made = k
		rep, err := runOnce(ctx, sc, opts)
		if rep != nil {
			rep.Version = version()
		}
		if t.retries == 0 && t.marginal == 0 || rep == nil {
			return rep, err
		}
		if err != nil {
			rep.Attempts = attempts
			return rep, err
		}
		r := harness.RetryOf(rep, opts.Only)
		at := attemptOf(k, rep, r)
		attempts = append(attempts, at)
		rep.Attempts = attempts
		var budget string
		switch {
		case rep.Passed:
			return rep, nil
		case r.Again() && disturbed < t.retries:
			disturbed++
			budget = fmt.Sprintf("%d of %d retries", disturbed, t.retries)
		case r.AgainMarginal() && marginal < t.marginal:
			marginal++
			budget = fmt.Sprintf("%d of %d retries for marginal verdicts", marginal, t.marginal)
			at.RetriedMarginal = true
		default:
			return rep, nil
		}
		at.Retried = true
		if t.out != "" {
			at.Reports = attemptDir(t.out, k)
		}
		attempts[len(attempts)-1] = at
		if t.out != "" {
			if err := writeAttempt(at.Reports, opts.ServiceLogDir, rep); err != nil {
				return nil, err
			}
		}
		if t.before != nil {
			t.before()
		}
		where := ""
		if at.Reports != "" {
			where = "; reports in " + at.Reports
		}
		fmt.Fprintf(t.w, "%s%s; running it again (%s)%s\n", t.label, at.Line(), budget, where)
		if err := ctx.Err(); err != nil {
			// Interrupted between two attempts: the last one's reports
			// are written, the next is not started.
			return nil, fmt.Errorf("interrupted before attempt %d: %w", k+1, err)
		}
	}
}

// attemptOf is attempt k of a series, whose report is rep and whose
// retry decision is r.
func attemptOf(k int, rep *reports.Report, r harness.Retry) reports.Attempt {
	at := reports.Attempt{Attempt: k, Seed: rep.Seed, Passed: rep.Passed}
	if !rep.Passed {
		at.Failed, at.Marginal = r.Failed, r.AgainMarginal()
	}
	judged := map[string]bool{}
	for _, w := range r.Disturbed {
		judged[w.Window] = true
	}
	for _, w := range rep.Machine.Disturbed() {
		at.Disturbed = append(at.Disturbed, reports.DisturbedWindow{Window: w.Window, Why: rep.Machine.Why(w), Judged: judged[w.Window]})
	}
	return at
}

// writeAttempt writes an earlier attempt's reports into dir, and moves the
// service logs it wrote into logDir (the run's --out) there too, so the
// next attempt's do not replace them; the report names them where they
// went. Nothing existing is overwritten.
func writeAttempt(dir, logDir string, rep *reports.Report) error {
	for _, name := range []string{reports.JSONFile, reports.MarkdownFile, reports.JUnitFile, reports.HTMLFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("write attempt: %s holds a report already; noisysim does not overwrite it", filepath.Join(dir, name))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write attempt: %w", err)
	}
	if logDir != "" {
		moved := map[string]string{}
		logs, _ := filepath.Glob(filepath.Join(logDir, "service-*.log"))
		for _, from := range logs {
			to := filepath.Join(dir, filepath.Base(from))
			if _, err := os.Lstat(to); err == nil {
				return fmt.Errorf("write attempt: %s exists; noisysim does not overwrite it", to)
			}
			if err := os.Rename(from, to); err != nil {
				return fmt.Errorf("write attempt: %w", err)
			}
			moved[from] = to
		}
		for i := range rep.Configurations {
			if s := rep.Configurations[i].Service; s != nil {
				logs := append([]string(nil), s.Logs...)
				for j, l := range logs {
					if to, ok := moved[l]; ok {
						logs[j] = to
					}
				}
				cp := *s
				cp.Logs = logs
				rep.Configurations[i].Service = &cp
			}
		}
	}
	return writeReports(dir, rep)
}

// checkRetries returns a usage error if flag (--retry-disturbed or
// --retry-marginal) n is out of range or cannot go with the other flags.
func checkRetries(flag string, n int, segment, trace bool) error {
	switch {
	case n < 0 || n > maxRetries:
		return usagef("run: %s %d: want 0..%d (the runs after the first at most)", flag, n, maxRetries)
	case n > 0 && segment:
		return usagef("run: %s runs the whole scenario again: not with --segment (the verdict is noisysim merge's)", flag)
	case n > 0 && trace:
		return usagef("run: --trace records one run: not with %s", flag)
	}
	return nil
}

// retriesWords says a --repeat series' retries, e.g. "2 runs retried on
// a disturbed machine (3 more attempts); 1 failed on a disturbed machine
// in every attempt", those of the run a signal stopped (nil: none) counted
// too: "…(3 more attempts), the stopped run 4 among them; …". It says the
// retries of the flags asked: with --retry-marginal, "1 run retried on
// marginal verdicts only (1 more attempt)" too (after "; " when both).
func retriesWords(runs []repeatRun, stopped *stoppedRun, ask retryAsk) string {
	n, extra, every := 0, 0, 0
	m, mextra := 0, 0
	count := func(retries, marginalRetries int) {
		if d := retries - marginalRetries; d > 0 {
			n++
			extra += d
		}
		if marginalRetries > 0 {
			m++
			mextra += marginalRetries
		}
	}
	for _, r := range runs {
		if r.attempts > 1 {
			count(r.attempts-1, r.marginalRetries)
		}
		if r.disturbedEvery {
			every++
		}
	}
	among, mamong := "", ""
	if stopped != nil && stopped.made > 1 {
		mr := 0
		for _, a := range stopped.done {
			if a.RetriedMarginal {
				mr++
			}
		}
		count(stopped.made-1, mr)
		if stopped.made-1 > mr {
			among = fmt.Sprintf(", the stopped run %d among them", stopped.index)
		}
		if mr > 0 {
			mamong = fmt.Sprintf(", the stopped run %d among them", stopped.index)
		}
	}
	var parts []string
	if ask.disturbed {
		parts = append(parts, fmt.Sprintf("%s retried on a disturbed machine (%s)%s; %d failed on a disturbed machine in every attempt",
			reports.Plural(n, "run"), reports.Plural(extra, "more attempt"), among, every))
	}
	if ask.marginal {
		parts = append(parts, fmt.Sprintf("%s retried on marginal verdicts only (%s)%s", reports.Plural(m, "run"), reports.Plural(mextra, "more attempt"), mamong))
	}
	return strings.Join(parts, "; ")
}

// retryAsk says which retries a run was given: --retry-disturbed,
// --retry-marginal.
type retryAsk struct{ disturbed, marginal bool }

// flags names them, e.g. "--retry-disturbed, --retry-marginal".
func (a retryAsk) flags() string {
	var fs []string
	if a.disturbed {
		fs = append(fs, "--retry-disturbed")
	}
	if a.marginal {
		fs = append(fs, "--retry-marginal")
	}
	return strings.Join(fs, ", ")
}

// stoppedRun is the run of a --repeat series that a signal stopped, with
// the attempts --retry-disturbed made of it.
type stoppedRun struct {
	index int   // 1-based
	seed  int64 // the run's
	made  int   // attempts started, the stopped one included
	// done are the attempts that completed (each retried, its reports in
	// run-i/attempt-K).
	done []reports.Attempt
}

// words lists the stopped run's attempts, e.g. "run 2 (seed 43), stopped:
// attempt 1 FAIL on a disturbed machine, retried (reports in
// out/run-2/attempt-1); attempt 2 stopped".
func (s stoppedRun) words() string {
	var parts []string
	for _, a := range s.done {
		p := fmt.Sprintf("attempt %d %s", a.Attempt, passFail(a.Passed))
		switch {
		case a.RetriedMarginal:
			p += " on marginal verdicts only, retried"
		case a.Retried:
			p += " on a disturbed machine, retried"
		}
		if a.Reports != "" {
			p += " (reports in " + a.Reports + ")"
		}
		parts = append(parts, p)
	}
	if s.made > len(s.done) {
		parts = append(parts, fmt.Sprintf("attempt %d stopped", s.made))
	} else {
		parts = append(parts, fmt.Sprintf("stopped before attempt %d", s.made+1))
	}
	return fmt.Sprintf("run %d (seed %d), stopped: %s", s.index, s.seed, strings.Join(parts, "; "))
}
