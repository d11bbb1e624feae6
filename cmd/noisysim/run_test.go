package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/internal/runlock"
	"github.com/noisysim/noisysim/reports"
)

func TestRunAndValidateBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malformed := write("malformed.yaml", "name: x\nclasses: [\n")
	unknown := write("unknown.yaml", "name: x\nsed: 4\n")
	share := write("share.yaml", "name: x\ntenants: {dominant_share: 1.5}\n")
	unreadable := filepath.Join(dir, "missing.yaml")
	// Whatever a run starts goes under a TMPDIR of this test's own, and a
	// lock file of its own: the count of servers left running is of this
	// test's, not the machine's (other tests and runs start and stop theirs
	// meanwhile).
	runs := t.TempDir()
	if err := os.Chmod(runs, 0o777); err != nil { // the servers run as postgres
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", runs)
	t.Setenv(runlock.EnvPath, filepath.Join(dir, "lock"))
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"run"}, "missing scenario file"},
		{[]string{"run", "a.yaml", "b.yaml"}, "want one scenario file"},
		{[]string{"run", "--bogus", "../../scenarios/ci-gate.yaml"}, "bogus"},
		{[]string{"run", malformed}, "malformed.yaml:"},
		{[]string{"run", unknown}, "unknown.yaml:2:1: sed"},
		{[]string{"run", share}, "tenants.dominant_share"},
		{[]string{"run", unreadable}, "missing.yaml"},
		{[]string{"run", "../../scenarios/ci-gate.yaml", "--only", "nope"}, `--only "nope"`},
		{[]string{"run", "../../scenarios/ci-gate.yaml", "--only", ""}, `--only ""`},
		{[]string{"run", "../../scenarios/ci-gate.yaml", "--start-at", ""}, `--start-at ""`},
		{[]string{"run", "../../scenarios/ci-gate.yaml", "--start-at", "2020-01-02T15:04:05Z"}, "--start-at 2020-01-02T15:04:05Z: the time has passed"},
		{[]string{"validate"}, "missing scenario file"},
		{[]string{"validate", unknown, share}, "2 of 2 scenario files invalid"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			before := serversUnder(runs)
			var out, errOut bytes.Buffer
			if got := realMain(tc.args, &out, &errOut); got != exitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", got, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, errOut.String())
			}
			if after := serversUnder(runs); len(after) > len(before) {
				t.Errorf("postgres processes %v left running", after)
			}
		})
	}
	var out, errOut bytes.Buffer
	if got := realMain([]string{"validate", "../../scenarios/ci-gate.yaml", "../../scenarios/noisy-neighbor.yaml"}, &out, &errOut); got != 0 {
		t.Errorf("validate shipped scenarios: exit %d; stderr:\n%s", got, errOut.String())
	}
}

// serversUnder returns the live processes working in a directory under
// dir: a PostgreSQL server (postmaster or backend) works in its data
// directory.
func serversUnder(dir string) []int {
	return procs(func(pid, _ int, _ string) bool {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		return err == nil && strings.HasPrefix(cwd, dir+string(filepath.Separator))
	})
}

// TestRunCIGate runs the CI gate scenario end to end against a real
// PostgreSQL: both configurations (exit 0), then each alone: --only naive
// must exit 99 and --only isolated 0. The JSON report must parse and agree
// with the terminal table.
//
// The isolated configuration's latency verdict is the machine's as much as
// the system's: beside other tests' packages on a small machine its quiet
// p99 may exceed its limit. Where it does, and nothing else failed, the
// test takes its verdict from the naive control measured beside it: the
// isolated quiet (all) p99 over its limit must be at most a tenth of the
// control's (see latencyVerdict).
func TestRunCIGate(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	if _, err := local.FindBinaries(context.Background(), ""); errors.Is(err, backend.ErrNotInstalled) {
		t.Skipf("skipping: PostgreSQL server binaries not found: %v", err)
	}
	// The binary is built without -race: the race detector's overhead would
	// be measured as the database's latency.
	bin := noisysimBinary(t)
	lock := filepath.Join(t.TempDir(), "lock")
	run := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		// A lock of its own: the test measures beside whatever else runs.
		return runCommand(t, bin, lock, append([]string{"run", "--no-progress", "../../scenarios/ci-gate.yaml"}, args...)...)
	}

	var naive *ciVerdict // the control, as measured in "both"
	t.Run("both", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "report")
		text, code := run(t, "--out", dir)
		if code != 0 && code != exitAssertion {
			t.Fatalf("exit %d, want 0", code)
		}
		verdict := latencyVerdict(t, dir)
		naive = verdict
		if code == exitAssertion && !verdict.isolatedLatencyOnly() {
			t.Fatalf("exit 99, want 0: failed %v", verdict.unexpected)
		}
		if code == exitAssertion {
			verdict.againstControl(t, verdict)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Scenario       string `json:"scenario"`
			Seed           *int64 `json:"seed"`
			ScheduleHash   string `json:"schedule_hash"`
			Passed         *bool  `json:"passed"`
			Configurations []struct {
				Name    string `json:"name"`
				Tenants []struct {
					Tenant      string   `json:"tenant"`
					Class       string   `json:"class"`
					Count       *int64   `json:"count"`
					Rejected    *int64   `json:"rejected"`
					P50         *float64 `json:"p50_ms"`
					P99         *float64 `json:"p99_ms"`
					Max         *float64 `json:"max_ms"`
					DBTimeShare *float64 `json:"db_time_share"`
				} `json:"tenants"`
			} `json:"configurations"`
			Assertions []struct {
				Name          string   `json:"name"`
				Configuration string   `json:"configuration"`
				Tenant        *string  `json:"tenant"`
				Class         *string  `json:"class"`
				Observed      *float64 `json:"observed"`
				Limit         *float64 `json:"limit"`
				Passed        *bool    `json:"passed"`
			} `json:"assertions"`
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatalf("report.json: %v", err)
		}
		if rep.Scenario != "ci-gate" || rep.Seed == nil || *rep.Seed != 42 || len(rep.ScheduleHash) < 8 || rep.Passed == nil || *rep.Passed != (code == 0) {
			t.Errorf("report header: scenario %q seed %v hash %q passed %v", rep.Scenario, rep.Seed, rep.ScheduleHash, rep.Passed)
		}
		if len(rep.Configurations) != 2 || rep.Configurations[0].Name != "naive" || rep.Configurations[1].Name != "isolated" {
			t.Fatalf("configurations: %+v", rep.Configurations)
		}
		if len(rep.Assertions) == 0 {
			t.Fatal("no assertions in report.json")
		}
		if !strings.Contains(text, " more quiet tenants in "+filepath.Join(dir, "report.json")) {
			t.Errorf("the text does not send the reader to %s for the other quiet tenants", filepath.Join(dir, "report.json"))
		}
		for _, a := range rep.Assertions {
			if a.Tenant == nil || a.Class == nil || a.Observed == nil || a.Limit == nil || a.Passed == nil {
				t.Fatalf("assertion %s lacks a required field", a.Name)
			}
		}
		// The terminal table and the JSON agree: every row of the dominant
		// tenant in the text shows the JSON's count and p99.
		for _, c := range rep.Configurations {
			for _, row := range c.Tenants {
				if row.Tenant != "1" {
					continue
				}
				if row.Count == nil || row.P99 == nil || row.Max == nil || row.P50 == nil || row.Rejected == nil || row.DBTimeShare == nil {
					t.Fatalf("%s: tenant row lacks a required field", c.Name)
				}
				want := regexp.MustCompile(`(?m)^1 \(dominant\)\s+` + regexp.QuoteMeta(row.Class) + `\s+` +
					strconv.FormatInt(*row.Count, 10) + `\s+` + strconv.FormatInt(*row.Rejected, 10) + `\s+\d+\s+` +
					regexp.QuoteMeta(strconv.FormatFloat(*row.P50, 'f', 2, 64)) + `\s+` +
					regexp.QuoteMeta(strconv.FormatFloat(*row.P99, 'f', 2, 64)) + `[*!?]*\s`) // marks: a failed, skipped or marginal check
				if !want.MatchString(text) {
					t.Errorf("%s: the terminal table lacks the JSON row %s/%s count %d p50 %.2f p99 %.2f", c.Name,
						row.Tenant, row.Class, *row.Count, *row.P50, *row.P99)
				}
			}
		}
	})
	t.Run("only naive", func(t *testing.T) {
		text, code := run(t, "--only", "naive")
		if code != exitAssertion {
			t.Errorf("exit %d, want 99: the control must fail on its own", code)
		}
		// No --out: no report.json to send the reader to, but how to write one.
		if !strings.Contains(text, " more quiet tenants in report.json (write it with --out DIR)") {
			t.Errorf("without --out, the text does not say how to see the other quiet tenants:\n%s", text)
		}
	})
	// The first Ctrl-C in the middle of the run phase: exit 1, and the
	// text and the reports hold what was measured, marked incomplete.
	t.Run("interrupted", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "report")
		cmd := exec.Command(bin, "run", "../../scenarios/ci-gate.yaml", "--only", "naive", "--out", dir)
		var out bytes.Buffer
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		var errText strings.Builder
		for sc.Scan() {
			errText.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "run (naive)") {
				break
			}
		}
		time.Sleep(2 * time.Second)
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(stderr)
		errText.Write(rest)
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitError {
			t.Fatalf("exit %v, want 1\nstdout:\n%s\nstderr:\n%s", err, out.String(), errText.String())
		}
		// The last line says why the run stopped, not a bare "context canceled".
		lines := strings.Split(strings.TrimSpace(errText.String()), "\n")
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "noisysim: stopped by SIGINT") || strings.HasSuffix(last, "context canceled") {
			t.Errorf("last line on stderr %q, want it to say the run was stopped by the interrupt", last)
		}
		if !strings.Contains(out.String(), "INCOMPLETE: interrupted during run of naive") || !strings.Contains(out.String(), "partial reports (incomplete) written to "+dir) {
			t.Errorf("stdout does not show the partial report:\n%s", out.String())
		}
		raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Passed         bool   `json:"passed"`
			Incomplete     string `json:"incomplete"`
			Configurations []struct {
				Name       string            `json:"name"`
				Incomplete bool              `json:"incomplete"`
				Tenants    []json.RawMessage `json:"tenants"`
			} `json:"configurations"`
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Passed || rep.Incomplete != "interrupted during run of naive" || len(rep.Configurations) != 1 ||
			!rep.Configurations[0].Incomplete || len(rep.Configurations[0].Tenants) == 0 {
			t.Errorf("report.json: passed %v, incomplete %q, configurations %+v; want naive's measured rows, marked incomplete",
				rep.Passed, rep.Incomplete, rep.Configurations)
		}
		for _, f := range []string{"report.md", "junit.xml"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("only isolated", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "report")
		_, code := run(t, "--only", "isolated", "--out", dir)
		if code == 0 {
			return
		}
		v := latencyVerdict(t, dir)
		if code != exitAssertion || !v.isolatedLatencyOnly() || naive == nil {
			t.Fatalf("exit %d, want 0: failed %v", code, v.unexpected)
		}
		naive.againstControl(t, v)
	})
}

// ciVerdict is what a ci-gate report.json says of the latency verdicts:
// each configuration's quiet (all) p99 over its limit (the largest over the
// classes), and the failed assertions other than the isolated
// configuration's quiet_p99 and the control's own.
type ciVerdict struct {
	ratio      map[string]float64
	unexpected []string
}

func latencyVerdict(t *testing.T, dir string) *ciVerdict {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Assertions []struct {
			Name, Configuration, Tenant, Class string
			Observed, Limit                    float64
			Passed, Skipped                    bool
		} `json:"assertions"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	v := &ciVerdict{ratio: map[string]float64{}}
	for _, a := range rep.Assertions {
		if a.Name == "quiet_p99" && a.Tenant == reports.QuietAll && a.Limit > 0 {
			v.ratio[a.Configuration] = max(v.ratio[a.Configuration], a.Observed/a.Limit)
		}
		if a.Passed || a.Skipped || a.Configuration == "naive" || a.Configuration == "isolated" && a.Name == "quiet_p99" {
			continue
		}
		v.unexpected = append(v.unexpected, a.Configuration+" "+a.Name+" "+a.Tenant+"/"+a.Class)
	}
	return v
}

// isolatedLatencyOnly reports whether the only failures are the isolated
// configuration's latency checks (or the control's own).
func (v *ciVerdict) isolatedLatencyOnly() bool {
	return len(v.unexpected) == 0 && v.ratio["isolated"] > 1
}

// againstControl takes the isolated latency verdict of iso from the naive
// control of v, measured on the same machine in the same test: isolation
// must keep the quiet tenants' p99 over its limit at most a tenth of the
// control's.
func (v *ciVerdict) againstControl(t *testing.T, iso *ciVerdict) {
	t.Helper()
	n, i := v.ratio["naive"], iso.ratio["isolated"]
	t.Logf("isolated quiet (all) p99 %.2fx its limit (over it: a loaded machine); the naive control %.2fx", i, n)
	if !(n > 1) || i > n/10 {
		t.Errorf("isolated quiet (all) p99 %.2fx its limit against the control's %.2fx: want at most a tenth of it", i, n)
	}
}

func TestTextOptionsSayWhereTheReportIs(t *testing.T) {
	if got := textOptions(5, "").FullReport; !strings.Contains(got, "--out DIR") {
		t.Errorf("without --out: %q, want how to write a report (--out DIR)", got)
	}
	if got := textOptions(5, "out").FullReport; got != filepath.Join("out", "report.json") {
		t.Errorf("with --out out: %q, want out/report.json", got)
	}
}

// runCommand runs the noisysim binary bin with args under the run lock file
// lock, logs its exit code and output, and returns its stdout and exit code.
func runCommand(t *testing.T, bin, lock string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), runlock.EnvPath+"="+lock)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("noisysim %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return out.String(), code
}
