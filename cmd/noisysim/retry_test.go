package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/noisysim/noisysim/internal/runlock"
	"github.com/noisysim/noisysim/reports"
)

// failingShort is shortScenario with a quiet_p99 bound no run meets (1%
// of the solo p99): it fails on any machine, over the windows run and
// solo.
const failingShort = shortScenario + `assertions:
  quiet_p99: {factor: 0.01, slack: 0ms, min_samples: 20}
`

// --retry-disturbed: a failure on windows a CPU burner disturbed is run
// again with the same seed, each retried attempt said in one line with its
// reports in OUT/attempt-K, and report.json lists the attempts; disturbed
// in every attempt, it exits 99 and says the machine was. A failure on
// undisturbed windows is final at once. Bad values exit 2.
func TestRunRetryDisturbed(t *testing.T) {
	needPostgres(t)
	sc := writeFailingShort(t)
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	taken := filepath.Join(t.TempDir(), "taken")
	if err := os.MkdirAll(filepath.Join(taken, "attempt-2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(taken, "attempt-2", "report.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--retry-disturbed", "-1"}, "--retry-disturbed -1"},
		{[]string{"--retry-disturbed", "11"}, "--retry-disturbed 11"},
		{[]string{"--retry-disturbed", "1", "--segment", "1/2", "--out", filepath.Join(t.TempDir(), "seg")}, "--retry-disturbed"},
		{[]string{"--retry-disturbed", "2", "--out", taken}, filepath.Join(taken, "attempt-2", "report.json") + " holds a report already"},
	} {
		c := startCLI(t, env, append(append([]string{"run"}, bad.args...), sc)...)
		if code := c.wait(t); code != 2 || !strings.Contains(c.stderrText(), bad.says) {
			t.Errorf("run %s: exit %d, want 2 saying %q; stderr:\n%s", strings.Join(bad.args, " "), code, bad.says, c.stderrText())
		}
	}

	burner := startBurner(t)
	dir := filepath.Join(t.TempDir(), "r")
	c := startCLI(t, env, "run", "--no-progress", "--max-foreign-cpu", "0.1", "--retry-disturbed", "1", "--out", dir, sc)
	code := c.wait(t)
	syscall.Kill(burner, syscall.SIGKILL)
	o, e := c.output()
	if code != 99 {
		t.Fatalf("failing beside a burner: exit %d, want 99\n%s\n%s", code, o, e)
	}
	for _, want := range []string{
		"attempt 1 (seed 1): FAIL on a disturbed machine: failed shared quiet_p99 quiet (all)/lookup (observed ",
		"; disturbed solo (shared): ",
		"; run (shared): ",
		"running it again (1 of 1 retries); reports in " + filepath.Join(dir, "attempt-1"),
		"RESULT: FAIL after 2 attempts (the machine was disturbed in every attempt",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	if n := strings.Count(o, "running it again"); n != 1 {
		t.Errorf("%d retried attempts said, want 1:\n%s", n, o)
	}
	first := readAttempts(t, filepath.Join(dir, "attempt-1"))
	final := readAttempts(t, dir)
	if len(final.Attempts) != 2 || len(first.Attempts) != 1 {
		t.Fatalf("attempts: %d in report.json, %d in attempt-1/report.json; want 2 and 1", len(final.Attempts), len(first.Attempts))
	}
	for i, a := range final.Attempts {
		if a.Attempt != i+1 || a.Seed != 1 || a.Passed || len(a.Failed) == 0 || a.Failed[0].Name != "quiet_p99" {
			t.Errorf("attempt %d: %+v; want attempt %d, seed 1, failed on quiet_p99", i+1, a, i+1)
		}
		judged := false
		for _, w := range a.Disturbed {
			judged = judged || w.Judged && w.Why != "" && (w.Window == "run (shared)" || w.Window == "solo (shared)")
		}
		if !judged {
			t.Errorf("attempt %d: no disturbed window of the failed check with a reason: %+v", i+1, a.Disturbed)
		}
	}
	if a := final.Attempts[0]; !a.Retried || a.Reports != filepath.Join(dir, "attempt-1") || final.Attempts[1].Retried {
		t.Errorf("attempts: %+v; want the first retried with its reports in attempt-1, the last not", final.Attempts)
	}

	// Without the guard nothing is disturbed: the failure is final at once.
	dir = filepath.Join(t.TempDir(), "u")
	c = startCLI(t, env, "run", "--no-progress", "--max-foreign-cpu", "-1", "--retry-disturbed", "2", "--out", dir, sc)
	code = c.wait(t)
	o, e = c.output()
	if code != 99 || !strings.Contains(o, "RESULT: FAIL after 1 attempt\n") || strings.Contains(o, "running it again") {
		t.Errorf("failing undisturbed: exit %d, want 99 after 1 attempt\n%s\n%s", code, o, e)
	}
	if _, err := os.Stat(filepath.Join(dir, "attempt-1")); !os.IsNotExist(err) {
		t.Errorf("a final failure wrote %s (%v)", filepath.Join(dir, "attempt-1"), err)
	}
	if r := readAttempts(t, dir); len(r.Attempts) != 1 || r.Attempts[0].Retried {
		t.Errorf("report.json attempts %+v, want one, not retried", r.Attempts)
	}
}

// SIGINT during a retried attempt stops as it stops a run: the earlier
// attempt's reports stay in OUT/attempt-1, the interrupted one's partial
// report, marked incomplete and listing the attempt before it, goes to
// OUT, and it exits 1.
func TestRunRetryInterrupted(t *testing.T) {
	needPostgres(t)
	sc := writeFailingShort(t)
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	startBurner(t)
	dir := filepath.Join(t.TempDir(), "r")
	// -v logs each attempt's open loop start: attempt 2 is interrupted in
	// its measured timeline, not in its start or load (which the burner
	// can stretch past any fixed delay), where nothing is measured and no
	// partial report is written.
	c := startCLI(t, env, "-v", "run", "--no-progress", "--max-foreign-cpu", "0.1", "--retry-disturbed", "2", "--out", dir, sc)
	c.waitLine(t, "running it again (1 of 2 retries)")
	c.waitStderr(t, openLoopStarted, 2)
	c.cmd.Process.Signal(syscall.SIGINT)
	if code := c.wait(t); code != 1 {
		o, e := c.output()
		t.Fatalf("exit %d, want 1\n%s\n%s", code, o, e)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatalf("no partial report of the interrupted attempt: %v", err)
	}
	var rep struct {
		Incomplete string `json:"incomplete"`
		Attempts   []struct {
			Attempt int  `json:"attempt"`
			Retried bool `json:"retried"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Incomplete == "" || len(rep.Attempts) != 1 || !rep.Attempts[0].Retried {
		t.Errorf("report.json: incomplete %q, attempts %+v (%v); want it incomplete, listing attempt 1 retried", rep.Incomplete, rep.Attempts, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "attempt-1", "report.json")); err != nil {
		t.Errorf("attempt 1's report: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "attempt-2")); !os.IsNotExist(err) {
		t.Errorf("the interrupted attempt wrote attempt-2 (%v)", err)
	}
}

func writeFailingShort(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "failing.yaml")
	if err := os.WriteFile(p, []byte(failingShort), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startBurner starts a process that burns a CPU until the test ends, and
// returns its pid.
func startBurner(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("sh", "-c", "while :; do :; done >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

type attemptsReport struct {
	Attempts []struct {
		Attempt int   `json:"attempt"`
		Seed    int64 `json:"seed"`
		Passed  bool  `json:"passed"`
		Failed  []struct {
			Name string `json:"name"`
		} `json:"failed"`
		Disturbed []struct {
			Window string `json:"window"`
			Why    string `json:"why"`
			Judged bool   `json:"judged"`
		} `json:"disturbed"`
		Retried bool   `json:"retried"`
		Reports string `json:"reports"`
	} `json:"attempts"`
}

func readAttempts(t *testing.T, dir string) attemptsReport {
	t.Helper()
	return readJSONFile[attemptsReport](t, filepath.Join(dir, "report.json"))
}

// The retries of a --repeat series count the run a signal stopped, and
// list its attempts: the completed ones retried, with their reports, and
// the one stopped or the one not started.
func TestRetriesWordsCountTheStoppedRun(t *testing.T) {
	runs := []repeatRun{{attempts: 2, disturbedEvery: true}, {attempts: 1}}
	if got, want := retriesWords(runs, nil, retryAsk{disturbed: true}), "1 run retried on a disturbed machine (1 more attempt); 1 failed on a disturbed machine in every attempt"; got != want {
		t.Errorf("no stopped run: %q, want %q", got, want)
	}
	stopped := &stoppedRun{index: 3, seed: 44, made: 3, done: []reports.Attempt{
		{Attempt: 1, Seed: 44, Retried: true, Reports: "out/run-3/attempt-1"},
		{Attempt: 2, Seed: 44, Retried: true, Reports: "out/run-3/attempt-2"},
	}}
	if got, want := retriesWords(runs, stopped, retryAsk{disturbed: true}), "2 runs retried on a disturbed machine (3 more attempts), the stopped run 3 among them; 1 failed on a disturbed machine in every attempt"; got != want {
		t.Errorf("stopped in its third attempt: %q, want %q", got, want)
	}
	if got, want := stopped.words(), "run 3 (seed 44), stopped: attempt 1 FAIL on a disturbed machine, retried (reports in out/run-3/attempt-1); attempt 2 FAIL on a disturbed machine, retried (reports in out/run-3/attempt-2); attempt 3 stopped"; got != want {
		t.Errorf("words: %q, want %q", got, want)
	}
	// Stopped between two attempts: every attempt made completed.
	between := &stoppedRun{index: 1, seed: 42, made: 1, done: stopped.done[:1]}
	if got, want := between.words(), "run 1 (seed 42), stopped: attempt 1 FAIL on a disturbed machine, retried (reports in out/run-3/attempt-1); stopped before attempt 2"; got != want {
		t.Errorf("stopped between attempts: %q, want %q", got, want)
	}
	if got := retriesWords(nil, between, retryAsk{disturbed: true}); !strings.HasPrefix(got, "0 runs retried") {
		t.Errorf("one attempt made: %q, want no run counted as retried", got)
	}
}

// SIGINT in a retried attempt of the second run of --repeat 2: the summary
// counts that run's attempts with the first run's and lists them.
func TestRunRepeatRetryInterrupted(t *testing.T) {
	needPostgres(t)
	sc := writeFailingShort(t)
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	startBurner(t)
	dir := filepath.Join(t.TempDir(), "r")
	// -v logs each attempt's open loop start.
	c := startCLI(t, env, "-v", "run", "--no-progress", "--max-foreign-cpu", "0.1", "--retry-disturbed", "1", "--repeat", "2", "--out", dir, sc)
	// Each wait for a line allows 60 s: an attempt, or a retried run.
	c.waitLine(t, "run 1/2  attempt 1 (seed 1): FAIL on a disturbed machine")
	c.waitLine(t, "run 1/2  seed 1  FAIL")
	c.waitLine(t, "run 2/2  attempt 1 (seed 2): FAIL on a disturbed machine")
	// Into attempt 2's measured timeline (the 4th open loop: two attempts
	// of run 1, then run 2's), not its start or load, which the burner
	// can stretch past any fixed delay.
	c.waitStderr(t, openLoopStarted, 4)
	c.cmd.Process.Signal(syscall.SIGINT)
	code := c.wait(t)
	o, e := c.output()
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, o, e)
	}
	for _, want := range []string{
		"stopped after 1 of 2 runs; the 1 completed:",
		"retries (--retry-disturbed): 2 runs retried on a disturbed machine (2 more attempts), the stopped run 2 among them; 1 failed on a disturbed machine in every attempt",
		"  run 2 (seed 2), stopped: attempt 1 FAIL on a disturbed machine, retried (reports in " + filepath.Join(dir, "run-2", "attempt-1") + "); attempt 2 stopped",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
}
