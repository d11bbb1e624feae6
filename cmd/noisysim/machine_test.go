package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/internal/runlock"
)

// shortScenario is a scenario of a few seconds for the tests of the lock and
// the guard.
const shortScenario = `name: short
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 50}
phases: {warmup: 500ms, solo: 2s, run: 3s, drain: 500ms}
configurations:
  - {name: shared, mode: shared}
`

func writeShort(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "short.yaml")
	if err := os.WriteFile(p, []byte(shortScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type machineReport struct {
	StartedAt time.Time `json:"started_at"`
	Machine   *struct {
		Concurrent    string  `json:"concurrent"`
		MaxForeignCPU float64 `json:"max_foreign_cpu"`
		Windows       []struct {
			Window     string  `json:"window"`
			ForeignCPU float64 `json:"foreign_cpu"`
			Top        []struct {
				PID  int     `json:"pid"`
				CPUs float64 `json:"cpus"`
			} `json:"top"`
			Disturbed bool `json:"disturbed"`
		} `json:"windows"`
	} `json:"machine"`
}

func readMachineReport(t *testing.T, dir string) machineReport {
	t.Helper()
	return readJSONFile[machineReport](t, filepath.Join(dir, "report.json"))
}

// Two measured runs at once: the second waits, or with --no-wait exits 2
// naming the first's pid; --allow-concurrent runs beside it and says so.
func TestRunLock(t *testing.T) {
	needPostgres(t)
	sc := writeShort(t)
	lock := filepath.Join(t.TempDir(), "lock")
	env := []string{runlock.EnvPath + "=" + lock}
	holder := startCLI(t, env, "run", "--no-progress", sc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if h, held := runlock.Held(lock); held && h.PID == holder.cmd.Process.Pid {
			if !strings.Contains(h.What, "short") {
				t.Errorf("the lock says %q, want the scenario's name", h.What)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first run did not take the lock within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	noWait := startCLI(t, env, "run", "--no-progress", "--no-wait", sc)
	waiter := startCLI(t, env, "run", "--no-progress", "--out", filepath.Join(t.TempDir(), "w"), sc)
	concDir := filepath.Join(t.TempDir(), "c")
	conc := startCLI(t, env, "run", "--no-progress", "--allow-concurrent", "--out", concDir, sc)

	code := noWait.wait(t)
	_, errOut := noWait.output()
	pid := strconv.Itoa(holder.cmd.Process.Pid)
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code != 2 || len(lines) != 1 || !strings.Contains(errOut, "pid "+pid) {
		t.Errorf("--no-wait beside a measured run: exit %d, want 2 with one line naming pid %s; stderr:\n%s", code, pid, errOut)
	}
	if code := holder.wait(t); code != 0 {
		o, e := holder.output()
		t.Fatalf("first run: exit %d\n%s\n%s", code, o, e)
	}
	holderDone := time.Now()
	if code := conc.wait(t); code != 0 {
		o, e := conc.output()
		t.Fatalf("--allow-concurrent run: exit %d\n%s\n%s", code, o, e)
	}
	if code := waiter.wait(t); code != 0 {
		o, e := waiter.output()
		t.Fatalf("waiting run: exit %d\n%s\n%s", code, o, e)
	}
	if _, e := waiter.output(); !strings.Contains(e, "waiting for the measured run of pid "+pid) || !strings.Contains(e, "to finish, 1st in line") {
		t.Errorf("the waiting run does not say whom it waits for; stderr:\n%s", e)
	}
	wr := readMachineReportFromOut(t, waiter)
	if wr.StartedAt.Before(holderDone.Add(-2 * time.Second)) {
		t.Errorf("the waiting run started at %v, before the first ended at %v", wr.StartedAt, holderDone)
	}
	cr := readMachineReport(t, concDir)
	if cr.Machine == nil || !strings.Contains(cr.Machine.Concurrent, "--allow-concurrent") || !strings.Contains(cr.Machine.Concurrent, "pid "+pid) {
		t.Errorf("the --allow-concurrent report does not say it ran beside pid %s: %+v", pid, cr.Machine)
	}
	if o, _ := conc.output(); !strings.Contains(o, "CONCURRENT:") {
		t.Errorf("the --allow-concurrent run's terminal report does not say so:\n%s", o)
	}
}

// readMachineReportFromOut reads the report of a run started with --out,
// from the directory its output names.
func readMachineReportFromOut(t *testing.T, c *cli) machineReport {
	t.Helper()
	o, _ := c.output()
	for _, line := range strings.Split(o, "\n") {
		if d, ok := strings.CutPrefix(line, "reports written to "); ok {
			return readMachineReport(t, strings.TrimSpace(d))
		}
	}
	t.Fatalf("no report directory in the output:\n%s", o)
	return machineReport{}
}

// A CPU burner outside noisysim beside a short scenario: the windows name
// it, they are marked disturbed, and so is the verdict line.
func TestRunDisturbedByBurner(t *testing.T) {
	needPostgres(t)
	sc := writeShort(t)
	out, err := exec.Command("sh", "-c", "while :; do :; done >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	burner, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(burner, syscall.SIGKILL)
	dir := filepath.Join(t.TempDir(), "r")
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	c := startCLI(t, env, "run", "--no-progress", "--max-foreign-cpu", "0.1", "--out", dir, sc)
	if code := c.wait(t); code != 0 {
		o, e := c.output()
		t.Fatalf("exit %d\n%s\n%s", code, o, e)
	}
	o, _ := c.output()
	if !strings.Contains(o, "RESULT: PASS, DISTURBED") {
		t.Errorf("the verdict line does not say the run was disturbed:\n%s", o)
	}
	r := readMachineReport(t, dir)
	if r.Machine == nil || len(r.Machine.Windows) != 2 {
		t.Fatalf("report.json machine = %+v, want 2 windows (solo, run)", r.Machine)
	}
	for _, w := range r.Machine.Windows {
		if !w.Disturbed {
			t.Errorf("window %s (foreign %.2f CPU) beside a burner not marked disturbed", w.Window, w.ForeignCPU)
		}
		named := false
		for _, p := range w.Top {
			named = named || p.PID == burner
		}
		if !named {
			t.Errorf("window %s does not name the burner (pid %d) among the busiest processes: %+v", w.Window, burner, w.Top)
		}
	}
}

// --repeat runs the scenario with successive seeds and prints the verdict
// counts and the margins' distribution.
func TestRunRepeat(t *testing.T) {
	needPostgres(t)
	sc := writeShort(t)
	dir := filepath.Join(t.TempDir(), "r")
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	c := startCLI(t, env, "run", "--repeat", "2", "--out", dir, sc)
	if code := c.wait(t); code != 0 {
		o, e := c.output()
		t.Fatalf("exit %d\n%s\n%s", code, o, e)
	}
	o, _ := c.output()
	for _, want := range []string{"run 1/2  seed 1  PASS", "run 2/2  seed 2  PASS", "== 2 runs of short (seeds 1..2) ==", "verdicts: 2 PASS, 0 FAIL", "configuration  expect", "shared "} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	for _, run := range []string{"run-1", "run-2"} {
		if _, err := os.Stat(filepath.Join(dir, run, "report.json")); err != nil {
			t.Errorf("no report for %s: %v", run, err)
		}
	}
	bad := startCLI(t, env, "run", "--repeat", "0", sc)
	if code := bad.wait(t); code != 2 {
		t.Errorf("--repeat 0: exit %d, want 2", code)
	}
}

// SIGINT during --repeat --out writes the interrupted run's partial
// reports, marked incomplete, as it does for a single run, prints the
// summary of the runs that completed, and exits 1.
func TestRunRepeatInterrupted(t *testing.T) {
	needPostgres(t)
	sc := writeShort(t)
	dir := filepath.Join(t.TempDir(), "r")
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	// -v logs each run's open loop start: run 2 is interrupted in its
	// measured timeline, not in its start or load (which a loaded machine
	// can stretch past any fixed delay), where nothing is measured and no
	// partial report is written.
	c := startCLI(t, env, "-v", "run", "--repeat", "3", "--out", dir, sc)
	c.waitStderr(t, openLoopStarted, 2)
	c.cmd.Process.Signal(syscall.SIGINT)
	if code := c.wait(t); code != 1 {
		o, e := c.output()
		t.Fatalf("exit %d, want 1\n%s\n%s", code, o, e)
	}
	o, _ := c.output()
	done := strings.Count(o, "  seed ") - strings.Count(o, "INCOMPLETE")
	run := filepath.Join(dir, "run-"+strconv.Itoa(done+1))
	raw, err := os.ReadFile(filepath.Join(run, "report.json"))
	if err != nil {
		t.Fatalf("no partial report of the interrupted run: %v\n%s", err, o)
	}
	var rep struct {
		Incomplete string `json:"incomplete"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Incomplete == "" {
		t.Errorf("%s/report.json not marked incomplete (%v): %.300s", run, err, raw)
	}
	if !strings.Contains(o, "INCOMPLETE: partial reports written to "+run) {
		t.Errorf("output does not say where the partial reports are:\n%s", o)
	}
	// The runs that completed keep their summary.
	if done > 0 {
		for _, want := range []string{fmt.Sprintf("stopped after %d of 3 runs", done), fmt.Sprintf("verdicts: %d PASS", done)} {
			if !strings.Contains(o, want) {
				t.Errorf("output lacks %q:\n%s", want, o)
			}
		}
	}
}

// With --priority a run moves noisysim into a cpu group of its own (its
// servers stay outside it), says so in its reports and removes the group
// at the end; without it noisysim stays where it was.
func TestRunPriority(t *testing.T) {
	needPostgres(t)
	needCgroups(t)
	sc := writeShort(t)
	dir := filepath.Join(t.TempDir(), "r")
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	c := startCLI(t, env, "run", "--no-progress", "--priority", "--out", dir, sc)
	pid := c.cmd.Process.Pid
	group := "/noisysim-gen-" + strconv.Itoa(pid)
	var seen, serverOutside, serverInside bool
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cpuCgroup(t, pid) != group {
			if seen {
				break // the run has ended its measurement
			}
			continue
		}
		seen = true
		var kids []string // each thread's children: the forking thread is any
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			kids = append(kids, strings.Fields(string(b))...)
		}
		for _, k := range kids {
			kp, _ := strconv.Atoi(k)
			if comm, _ := os.ReadFile("/proc/" + k + "/comm"); strings.TrimSpace(string(comm)) != "postgres" {
				continue
			}
			if g := cpuCgroup(t, kp); g == group {
				serverInside = true
			} else if g != "" {
				serverOutside = true
			}
		}
	}
	if code := c.wait(t); code != 0 {
		o, e := c.output()
		t.Fatalf("exit %d\n%s\n%s", code, o, e)
	}
	if !seen {
		t.Fatalf("noisysim (pid %d) was never in %s during the run", pid, group)
	}
	if serverInside || !serverOutside {
		t.Errorf("its postmaster in noisysim's group: %v; outside it: %v (want outside only)", serverInside, serverOutside)
	}
	if h, err := cgroup.Detect(); err == nil {
		assertGone(t, filepath.Join(h.Root, filepath.FromSlash(group)))
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Machine struct {
			GeneratorPriority string `json:"generator_priority"`
		} `json:"machine"`
	}
	json.Unmarshal(raw, &r)
	if !strings.Contains(r.Machine.GeneratorPriority, group) {
		t.Errorf("report.json machine.generator_priority = %q, want it to name %s", r.Machine.GeneratorPriority, group)
	}
	if o, _ := c.output(); !strings.Contains(o, "generator noisysim in cgroup") {
		t.Errorf("the terminal report does not name noisysim's group:\n%s", o)
	}

	off := startCLI(t, env, "run", "--no-progress", "--out", filepath.Join(t.TempDir(), "off"), sc)
	home := cpuCgroup(t, os.Getpid())
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		g := cpuCgroup(t, off.cmd.Process.Pid)
		if g == "" {
			break
		}
		if g != home {
			t.Errorf("without --priority noisysim moved to %s", g)
			break
		}
	}
	if code := off.wait(t); code != 0 {
		o, e := off.output()
		t.Fatalf("without --priority: exit %d\n%s\n%s", code, o, e)
	}
	if o, _ := off.output(); strings.Contains(o, "generator noisysim in") {
		t.Errorf("without --priority: the report names a group:\n%s", o)
	}
}

// cpuCgroup returns the cpu cgroup of pid relative to its hierarchy's root,
// "" when the process is gone.
func cpuCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && (strings.Contains(","+f[1]+",", ",cpu,") || (f[0] == "0" && f[1] == "")) {
			return f[2]
		}
	}
	return ""
}
