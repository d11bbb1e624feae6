package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const faultHead = `name: faulty
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 50}
phases: {drain: 1s}
configurations: [{name: shared, mode: shared}]
assertions: {quiet_p99: {window: run, baseline: base, min_samples: 1000000}}
timeline:
  - {name: base, length: 1s}
  - name: run
    length: 3s
    actions:
`

// TestFaultActionBadInput: validate and run refuse a fault action of an
// unknown kind, without a duration, disconnect on the local backend and
// an unknown node with exit 2, each problem at its file:line:col, before
// starting anything.
func TestFaultActionBadInput(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fault.yaml")
	body := faultHead +
		"      - {type: fault, fault: crash, duration: 1s}\n" +
		"      - {type: fault, fault: pause, duration: 0s}\n" +
		"      - {type: fault, fault: disconnect, duration: 1s}\n" +
		"      - {type: fault, node: worker1, fault: stop, duration: 1s}\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`fault.yaml:14:23: timeline[1].actions[0].fault: unknown fault "crash"`,
		`fault.yaml:15:37: timeline[1].actions[1].duration: must be a duration > 0`,
		`fault.yaml:16:23: timeline[1].actions[2].fault: disconnect needs backend kind docker`,
		`fault.yaml:17:23: timeline[1].actions[3].node: unknown node "worker1"`,
	}
	for _, cmd := range []string{"validate", "run"} {
		var out, errOut bytes.Buffer
		if got := realMain([]string{cmd, p}, &out, &errOut); got != exitUsage {
			t.Errorf("%s: exit %d, want 2; stderr:\n%s", cmd, got, errOut.String())
		}
		for _, w := range want {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", cmd, w, errOut.String())
			}
		}
	}
}

// TestFaultActionInterruptedDuringPause sends SIGINT to a run while its
// node is paused for a minute: the run ends at once, the node was resumed
// (no process of it is left stopped, state T, while noisysim tears down or
// after), and the partial report lists the fault, restored.
func TestFaultActionInterruptedDuringPause(t *testing.T) {
	needPostgres(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "pause.yaml")
	body := strings.Replace(faultHead, "length: 3s", "length: 90s", 1) +
		"      - {type: fault, at: 300ms, fault: pause, duration: 60s}\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report")
	c := startCLI(t, nil, "run", p, "--out", out)
	pid := c.cmd.Process.Pid
	// The postmaster is noisysim's child; wait until it is stopped.
	var tree []int
	deadline := time.Now().Add(2 * time.Minute)
	for tree == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the node was never paused; stderr:\n%s", c.stderrText())
		}
		select {
		case <-c.done:
			t.Fatalf("noisysim exited %d before the pause; stderr:\n%s", c.code, c.stderrText())
		case <-time.After(20 * time.Millisecond):
		}
		for _, k := range childPIDs(pid) {
			if procComm(k) == "postgres" && procStat(k) == "T" {
				tree = append([]int{k}, treeBelow(k)...)
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // pause stops the postmaster's children after it
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var stopped []int
	for done := false; !done; {
		select {
		case <-c.done:
			done = true
		case <-time.After(10 * time.Millisecond):
		}
		// The restore runs before the teardown: once the interrupt is
		// handled, no process of the node stays stopped.
		if time.Since(start) > 2*time.Second {
			for _, k := range tree {
				if procStat(k) == "T" {
					stopped = append(stopped, k)
				}
			}
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("noisysim still running a minute after SIGINT; stderr:\n%s", c.stderrText())
		}
	}
	if len(stopped) > 0 {
		t.Errorf("processes still stopped 2 s after SIGINT: %v", stopped)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("noisysim took %v to stop after SIGINT, want well under the 60 s pause", d)
	}
	for _, k := range tree {
		if s := procStat(k); s != "" {
			t.Errorf("pid %d left behind, state %s", k, s)
		}
	}
	if c.code != exitError {
		t.Errorf("exit %d, want 1 (interrupted); stderr:\n%s", c.code, c.stderrText())
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Configurations []struct {
			Actions []struct {
				Type   string             `json:"type"`
				Detail string             `json:"detail"`
				After  map[string]float64 `json:"after"`
			} `json:"actions"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Configurations) != 1 || len(rep.Configurations[0].Actions) != 1 {
		t.Fatalf("report: %s", raw)
	}
	a := rep.Configurations[0].Actions[0]
	if a.Type != "fault" || a.After["node_up"] != 1 || a.After["down_s"] > 30 {
		t.Errorf("action %+v: want the pause, restored early", a)
	}
}

func (c *cli) stderrText() string {
	_, e := c.output()
	return e
}

// procStat returns the state letter of /proc/pid/stat, "" when gone.
func procStat(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

func procComm(pid int) string {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(data))
}

// childPIDs returns the pids whose parent is pid.
func childPIDs(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		k, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, k)
		}
	}
	return out
}

func treeBelow(pid int) []int {
	var out []int
	for q := childPIDs(pid); len(q) > 0; q = q[1:] {
		out = append(out, q[0])
		q = append(q, childPIDs(q[0])...)
	}
	return out
}
