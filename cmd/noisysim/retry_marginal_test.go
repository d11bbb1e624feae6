package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// marginalReport is a finished run's report with seed 45 whose isolated
// quiet (all) lookup p99 was observed at observed against a 6.92 ms
// limit, marginal or not; the control (naive) failed clearly.
func marginalReport(observed float64, marginal bool) *reports.Report {
	quiet := func(config string, observed float64, marginal bool) reports.Assertion {
		return reports.Assertion{Name: harness.AssertQuietP99, Window: "run", Baseline: "solo", Configuration: config,
			Tenant: reports.QuietAll, Class: "lookup", Observed: observed, Limit: 6.92, Unit: "ms", Op: "<=",
			Passed: observed <= 6.92, Marginal: marginal}
	}
	as := []reports.Assertion{
		quiet("naive", 23958, false),
		{Name: harness.AssertControlFails, Configuration: "naive", Observed: 1, Op: ">", Passed: true},
		quiet("isolated", observed, marginal),
	}
	rep := &reports.Report{Scenario: "ci-gate", Seed: 45, Passed: as[2].Passed, Assertions: as,
		Configurations: []reports.Configuration{{Name: "naive", Expect: reports.ExpectFail}, {Name: "isolated", Expect: reports.ExpectPass}}}
	if marginal {
		rep.Marginal = []reports.Assertion{as[2]}
	}
	return rep
}

// --retry-marginal: a run that failed on marginal verdicts only is run
// again with the same seed while marginal retries remain, each retried
// attempt said in one line; a clear failure, a pass, or a marginal
// failure without the flag is final at once. The runs are a script of
// reports here: which verdicts are marginal is the engine's (its own
// tests), what is done with them is this loop's.
func TestRetriedMarginal(t *testing.T) {
	for _, tc := range []struct {
		name              string
		disturbed, margin int
		script            []*reports.Report
		attempts          int
		passed            bool
		says              []string
	}{
		{"marginal, then a pass", 0, 1, []*reports.Report{marginalReport(7.30, true), marginalReport(2.1, false)}, 2, true,
			[]string{"attempt 1 (seed 45): FAIL on marginal verdicts only: failed isolated quiet_p99 quiet (all)/lookup (observed 7.30 ms, want <= 6.92 ms); running it again (1 of 1 retries for marginal verdicts)"}},
		{"marginal twice: the last attempt's verdict", 0, 1, []*reports.Report{marginalReport(7.30, true), marginalReport(7.10, true), marginalReport(2, false)}, 2, false,
			[]string{"running it again (1 of 1 retries for marginal verdicts)"}},
		{"two retries asked", 0, 2, []*reports.Report{marginalReport(7.30, true), marginalReport(7.10, true), marginalReport(2, false)}, 3, true,
			[]string{"running it again (1 of 2 retries for marginal verdicts)", "attempt 2 (seed 45): FAIL on marginal verdicts only", "running it again (2 of 2 retries for marginal verdicts)"}},
		{"a clear failure is final", 0, 2, []*reports.Report{marginalReport(30, false), marginalReport(2, false)}, 1, false, nil},
		{"without --retry-marginal a marginal failure is final", 2, 0, []*reports.Report{marginalReport(7.30, true), marginalReport(2, false)}, 1, false, nil},
		{"a pass is never run again", 0, 2, []*reports.Report{marginalReport(6.5, true), marginalReport(2, false)}, 1, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ran := 0
			r := retried{retries: tc.disturbed, marginal: tc.margin, w: &out,
				runOnce: func(context.Context, *scenario.Scenario, harness.Options) (*reports.Report, error) {
					rep := tc.script[ran]
					ran++
					return rep, nil
				}}
			rep, err := r.run(t.Context(), &scenario.Scenario{Name: "ci-gate", Seed: 45}, harness.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if ran != tc.attempts || len(rep.Attempts) != tc.attempts || rep.Passed != tc.passed {
				t.Fatalf("ran %d, %d attempts listed, passed %v; want %d, %d, %v\n%s", ran, len(rep.Attempts), rep.Passed, tc.attempts, tc.attempts, tc.passed, out.String())
			}
			for i, a := range rep.Attempts {
				last := i == len(rep.Attempts)-1
				if a.Retried == last || a.RetriedMarginal == last || a.Marginal != (!a.Passed && tc.script[i].Marginal != nil) {
					t.Errorf("attempt %d: %+v; want retried for its marginal verdicts but the last", i+1, a)
				}
			}
			for _, want := range tc.says {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			if got := strings.Count(out.String(), "running it again"); got != tc.attempts-1 {
				t.Errorf("%d retries said, want %d:\n%s", got, tc.attempts-1, out.String())
			}
		})
	}
}

// With --out, a retried attempt's reports go to OUT/attempt-K, and its
// Markdown names the flag it was retried under.
func TestRetriedMarginalWritesTheAttempt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	script := []*reports.Report{marginalReport(7.30, true), marginalReport(2.1, false)}
	ran := 0
	var out bytes.Buffer
	r := retried{marginal: 1, out: dir, w: &out, runOnce: func(context.Context, *scenario.Scenario, harness.Options) (*reports.Report, error) {
		ran++
		return script[ran-1], nil
	}}
	rep, err := r.run(t.Context(), &scenario.Scenario{Name: "ci-gate", Seed: 45}, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a := rep.Attempts[0]; a.Reports != attemptDir(dir, 1) {
		t.Errorf("attempt 1's reports in %q, want %q", a.Reports, attemptDir(dir, 1))
	}
	md, err := os.ReadFile(filepath.Join(attemptDir(dir, 1), reports.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "attempt 1 (seed 45): FAIL on marginal verdicts only") || !strings.Contains(string(md), "; retried (--retry-marginal)") {
		t.Errorf("attempt-1/report.md does not say the marginal attempt:\n%s", md)
	}
}

// Bad values of --retry-marginal exit 2 before anything starts.
func TestRunRetryMarginalBadInput(t *testing.T) {
	sc := writeFailingShort(t)
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--retry-marginal", "-1"}, "--retry-marginal -1: want 0..10"},
		{[]string{"--retry-marginal", "11"}, "--retry-marginal 11: want 0..10"},
		{[]string{"--retry-marginal", "1", "--segment", "1/2", "--out", filepath.Join(t.TempDir(), "seg")}, "--retry-marginal runs the whole scenario again"},
		{[]string{"--retry-marginal", "1", "--trace", filepath.Join(t.TempDir(), "t.jsonl")}, "not with --retry-marginal"},
	} {
		c := startCLI(t, nil, append(append([]string{"run"}, bad.args...), sc)...)
		if code := c.wait(t); code != 2 || !strings.Contains(c.stderrText(), bad.says) {
			t.Errorf("run %s: exit %d, want 2 saying %q; stderr:\n%s", strings.Join(bad.args, " "), code, bad.says, c.stderrText())
		}
	}
}

// A --repeat series with --retry-marginal counts the runs retried for
// marginal verdicts apart from those retried on a disturbed machine, and
// a stopped run's attempts say which they were.
func TestRetriesWordsMarginal(t *testing.T) {
	runs := []repeatRun{{attempts: 2, marginalRetries: 1}, {attempts: 3, marginalRetries: 1}, {attempts: 1}}
	if got, want := retriesWords(runs, nil, retryAsk{disturbed: true, marginal: true}), "1 run retried on a disturbed machine (1 more attempt); 0 failed on a disturbed machine in every attempt; 2 runs retried on marginal verdicts only (2 more attempts)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	stopped := &stoppedRun{index: 4, seed: 45, made: 2, done: []reports.Attempt{{Attempt: 1, Seed: 45, Retried: true, RetriedMarginal: true, Marginal: true}}}
	if got, want := retriesWords(runs, stopped, retryAsk{disturbed: true, marginal: true}), "1 run retried on a disturbed machine (1 more attempt); 0 failed on a disturbed machine in every attempt; 3 runs retried on marginal verdicts only (3 more attempts), the stopped run 4 among them"; got != want {
		t.Errorf("with a stopped run: got %q, want %q", got, want)
	}
	if got, want := stopped.words(), "run 4 (seed 45), stopped: attempt 1 FAIL on marginal verdicts only, retried; attempt 2 stopped"; got != want {
		t.Errorf("words: %q, want %q", got, want)
	}
	var b bytes.Buffer
	writeRetries(&b, runs, nil, retryAsk{disturbed: true, marginal: true})
	if !strings.HasPrefix(b.String(), "retries (--retry-disturbed, --retry-marginal): ") {
		t.Errorf("retries line %q names not both flags", b.String())
	}
	// Only --retry-marginal asked: nothing said of disturbed retries.
	b.Reset()
	writeRetries(&b, runs, nil, retryAsk{marginal: true})
	if got, want := b.String(), "retries (--retry-marginal): 2 runs retried on marginal verdicts only (2 more attempts)\n"; got != want {
		t.Errorf("retries line %q, want %q", got, want)
	}
}
