package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// maxRepeat bounds --repeat.
const maxRepeat = 1000

// repeatRun is one run of a --repeat series.
type repeatRun struct {
	seed      int64
	passed    bool
	disturbed bool
	margins   map[string]float64 // configuration → quiet (all) p99 / its limit
	marginal  int                // marginal verdicts
	attempts  int                // --retry-disturbed or --retry-marginal: the attempts it took (0: not asked)
	// marginalRetries: the attempts retried for marginal verdicts.
	marginalRetries int
	// disturbedEvery: it failed on a disturbed machine in every attempt.
	disturbedEvery bool
	err            error
}

// runRepeat runs sc n times, seed sc.Seed, sc.Seed+1, …, prints a line per
// run, then the verdict counts and each configuration's margin (its quiet
// (all) p99 over its limit) as a distribution. With out, run i's reports go
// to out/run-i, an interrupted run's marked incomplete. Each run is
// retried on its own as retry says (--retry-disturbed), its earlier
// attempts' reports in out/run-i/attempt-K. It returns errAssertionFailed (exit 99) if any run failed,
// and stops at the first run that could not complete.
func runRepeat(ctx context.Context, a *app, sc *scenario.Scenario, opts harness.Options, n int, out string, strict bool, retry retried) error {
	base := sc.Seed
	var runs []repeatRun
	for i := range n {
		one := sc.WithSeed(base + int64(i))
		retry.label = fmt.Sprintf("run %d/%d  ", i+1, n)
		if out != "" {
			retry.out = filepath.Join(out, "run-"+strconv.Itoa(i+1))
		}
		rep, err := retry.run(ctx, one, opts)
		if err != nil {
			err = fmt.Errorf("run %d of %d (seed %d): %w", i+1, n, one.Seed, err)
			if rep != nil && rep.Incomplete != "" && out != "" {
				// Interrupted: what it measured is written, as by a
				// single run, marked incomplete.
				dir := filepath.Join(out, "run-"+strconv.Itoa(i+1))
				if werr := writeReports(dir, rep); werr != nil {
					return errors.Join(err, werr)
				}
				fmt.Fprintf(a.stdout, "run %d/%d  seed %d  INCOMPLETE: partial reports written to %s\n", i+1, n, one.Seed, dir)
			}
			// The stopped run's attempts count among the retries.
			var stopped *stoppedRun
			if retry.retries > 0 || retry.marginal > 0 {
				stopped = &stoppedRun{index: i + 1, seed: one.Seed, made: retry.made, done: retry.done}
			}
			switch {
			case len(runs) > 0:
				// The runs that completed are measured: their counts
				// and margins stand, said as what they are.
				fmt.Fprintf(a.stdout, "stopped after %d of %d runs; the %d completed:\n", len(runs), n, len(runs))
				writeRepeatSummary(a.stdout, sc, runs, stopped, retry.ask())
			case stopped != nil && stopped.made > 1:
				fmt.Fprintf(a.stdout, "stopped in run 1 of %d, before any run completed\n", n)
				writeRetries(a.stdout, nil, stopped, retry.ask())
			}
			return err
		}
		if i == n-1 {
			// Every run has measured in full: what is left is writing.
			a.teardown.onStop("the runs have finished: their reports are written in full, then what noisysim started is removed")
		}
		r := repeatRun{seed: one.Seed, passed: rep.Passed, disturbed: len(rep.Machine.Disturbed()) > 0, margins: margins(rep),
			marginal: len(rep.Marginal), attempts: len(rep.Attempts), disturbedEvery: rep.DisturbedEveryAttempt()}
		for _, at := range rep.Attempts {
			if at.RetriedMarginal {
				r.marginalRetries++
			}
		}
		runs = append(runs, r)
		fmt.Fprintf(a.stdout, "run %d/%d  seed %d  %s%s%s\n", i+1, n, one.Seed, passFail(rep.Passed), reports.AttemptsWords(rep), marginWords(sc, r))
		if out != "" {
			dir := filepath.Join(out, "run-"+strconv.Itoa(i+1))
			if err := writeReports(dir, rep); err != nil {
				return err
			}
		}
	}
	// Every run is measured and written: a signal from here on changes
	// nothing (the cluster is removed as always).
	a.teardown.finished()
	writeRepeatSummary(a.stdout, sc, runs, nil, retry.ask())
	if out != "" {
		fmt.Fprintf(a.stdout, "reports written to %s/run-1 … run-%d\n", out, n)
		fmt.Fprintf(a.stdout, "report.html: %s … run-%d/%s\n", filepath.Join(out, "run-1", reports.HTMLFile), n, reports.HTMLFile)
	}
	marginalRuns := 0
	for _, r := range runs {
		if !r.passed {
			every := ""
			if runs[0].attempts > 0 {
				every = "; " + retriesWords(runs, nil, retry.ask())
			}
			return fmt.Errorf("%w: scenario %s: %d of %d runs failed%s", errAssertionFailed, sc.Name, countFailed(runs), n, every)
		}
		if r.marginal > 0 {
			marginalRuns++
		}
	}
	if strict && marginalRuns > 0 {
		return fmt.Errorf("%w: scenario %s: %d of %d runs passed with marginal verdicts", errStrict, sc.Name, marginalRuns, n)
	}
	return nil
}

func countFailed(runs []repeatRun) int {
	n := 0
	for _, r := range runs {
		if !r.passed {
			n++
		}
	}
	return n
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// margins returns, per configuration, the largest quiet (all) p99 over its
// limit among the classes (the quiet_p99 assertions on the merged quiet
// tenants).
func margins(rep *reports.Report) map[string]float64 {
	m := map[string]float64{}
	for _, as := range rep.Assertions {
		if as.Name != harness.AssertQuietP99 || as.Tenant != reports.QuietAll || !(as.Limit > 0) || math.IsNaN(as.Observed) {
			continue
		}
		r := as.Observed / as.Limit
		if cur, ok := m[as.Configuration]; !ok || r > cur {
			m[as.Configuration] = r
		}
	}
	return m
}

func marginWords(sc *scenario.Scenario, r repeatRun) string {
	var parts []string
	for _, c := range sc.Configurations {
		if v, ok := r.margins[c.Name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2fx", c.Name, v))
		}
	}
	s := ""
	if len(parts) > 0 {
		s = "  quiet (all) p99 / limit: " + strings.Join(parts, ", ")
	}
	if r.marginal > 0 {
		s += fmt.Sprintf("  MARGINAL %d", r.marginal)
	}
	if r.disturbed {
		s += "  DISTURBED"
	}
	return s
}

// writeRepeatSummary prints the verdict counts and the margins'
// distribution per configuration of the runs that completed, and the
// retries, those of the run a signal stopped (nil: none) included.
func writeRepeatSummary(w io.Writer, sc *scenario.Scenario, runs []repeatRun, stopped *stoppedRun, ask retryAsk) {
	failed, disturbed := countFailed(runs), 0
	for _, r := range runs {
		if r.disturbed {
			disturbed++
		}
	}
	fmt.Fprintf(w, "\n== %s of %s (seeds %d..%d) ==\n", reports.Plural(len(runs), "run"), sc.Name, runs[0].seed, runs[len(runs)-1].seed)
	marginal := 0
	for _, r := range runs {
		if r.marginal > 0 {
			marginal++
		}
	}
	fmt.Fprintf(w, "verdicts: %d PASS, %d FAIL; %d disturbed; %d with marginal verdicts\n", len(runs)-failed, failed, disturbed, marginal)
	if runs[0].attempts > 0 || stopped != nil {
		writeRetries(w, runs, stopped, ask)
	}
	fmt.Fprintf(w, "quiet (all) p99 / its limit (above 1 fails the bound; a control expected to fail wants it well above):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "configuration\texpect\tmin\tp50\tmax\tall (seed order)")
	for _, c := range sc.Configurations {
		var vals []float64
		for _, r := range runs {
			if v, ok := r.margins[c.Name]; ok {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\n", c.Name, c.Expect)
			continue
		}
		all := make([]string, len(vals))
		for i, v := range vals {
			all[i] = strconv.FormatFloat(v, 'f', 2, 64)
		}
		sorted := slices.Sorted(slices.Values(vals))
		fmt.Fprintf(tw, "%s\t%s\t%.2fx\t%.2fx\t%.2fx\t%s\n", c.Name, c.Expect, sorted[0], median(sorted), sorted[len(sorted)-1], strings.Join(all, " "))
	}
	tw.Flush()
}

// writeRetries prints the retries line of a --repeat series, and the
// stopped run's attempts under it.
func writeRetries(w io.Writer, runs []repeatRun, stopped *stoppedRun, ask retryAsk) {
	fmt.Fprintf(w, "retries (%s): %s\n", ask.flags(), retriesWords(runs, stopped, ask))
	if stopped != nil {
		fmt.Fprintf(w, "  %s\n", stopped.words())
	}
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
