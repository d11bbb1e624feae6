package harness_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

const faultScenario = `
name: fault
seed: 5
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
phases: {drain: 1s}
timeline:
  - {name: warm, length: 300ms, measure: false}
  - {name: base, length: 1s}
  - name: faults
    length: 4s
    actions:
      - {type: fault, at: 200ms, fault: pause, duration: 1s}
      - {type: fault, at: 3s, node: primary, fault: stop, duration: 1s}
  - {name: after, length: 3s}
configurations:
  - {name: shared, mode: shared}
assertions: {quiet_p99: {window: after, baseline: base, min_samples: 1000000}}
`

// TestFaultAction pauses, then stops the single node of a local cluster
// during a timeline: ops stall during the pause and fail during the stop,
// the run goes on after each restore, and the report lists both actions
// with their figures. Each fault leaves its recovery seconds of load: on a
// loaded machine a pause is injected and restored up to a second late,
// and the first lookups within the recovery bound come more than a second
// after a restart, while the pool replaces its broken connections.
func TestFaultAction(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	sc, err := scenario.Parse([]byte(faultScenario), "fault.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Stat().Nodes[0].PID
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rep.Configurations[0]
	if len(cfg.Actions) != 2 {
		t.Fatalf("%d actions, want 2: %+v", len(cfg.Actions), cfg.Actions)
	}
	pause, stop := cfg.Actions[0], cfg.Actions[1]
	t.Logf("pause: %s\nstop: %s", pause.Detail, stop.Detail)
	for _, a := range []reports.ActionResult{pause, stop} {
		if a.Type != "fault" || a.Phase != "faults" || a.Error != "" || a.Before["node_up"] != 1 || a.After["node_up"] != 1 {
			t.Errorf("action %+v: want a fault in phase faults, restored", a)
		}
		// Held 1 s; the restore of a stop waits for the restart.
		if d := a.After["down_s"]; d < 0.99 || d > 10 {
			t.Errorf("%s: down %.2f s, want about 1 s", a.Detail, d)
		}
		if _, ok := a.After["time_to_recover_ms"]; !ok {
			t.Errorf("%s: no recovery seen after the restore", a.Detail)
		}
	}
	// Started 0.2 s and 3 s into the phase, which starts at 1.3 s.
	if pause.At < 1.49 || stop.At < 4.29 || stop.At < pause.At {
		t.Errorf("actions at %.2f s and %.2f s, want from 1.5 s and 4.3 s", pause.At, stop.At)
	}
	if !strings.HasPrefix(pause.Detail, "pause primary") || !strings.HasPrefix(stop.Detail, "stop primary") {
		t.Errorf("details %q, %q", pause.Detail, stop.Detail)
	}
	// A pause holds the ops: 100 lookups a second wait up to 1 s, each
	// issued during it held until the restore.
	if pause.After["stalled"] < 30 || pause.After["worst_latency_ms"] < 900 {
		t.Errorf("pause: %s; want stalled ops and a worst latency near 1 s", pause.Detail)
	}
	if stop.After["errors"] < 1 {
		t.Errorf("stop: %s; want errors", stop.Detail)
	}
	st := c.Stat().Nodes[0]
	if !st.Running || st.PID == pid {
		t.Errorf("node after the run: running %v pid %d (was %d), want a new postmaster", st.Running, st.PID, pid)
	}
	// The run went on after the restores: the after window's lookups ran.
	var ok, failed int64
	for _, w := range cfg.Windows {
		for _, row := range w.Tenants {
			if w.Name == "after" {
				ok += row.Count - row.Errors
			}
			if w.Name == "faults" {
				failed += row.Errors
			}
		}
	}
	if ok < 100 || failed < 1 {
		t.Errorf("after: %d lookups succeeded (want about 300); faults: %d failed (want some)", ok, failed)
	}
	assertStates(t, st.PID)
}

// TestFaultActionAfterLoad restarts the node at the end of the last
// phase: with no op left to recover, the action ends with the load rather
// than watch for a recovery for 10 s.
func TestFaultActionAfterLoad(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	rep := runFaultTail(t, c, `      - {type: fault, at: 3900ms, fault: restart}`)
	acts := rep.Configurations[0].Actions
	if len(acts) != 1 || acts[0].Error != "" || acts[0].After["node_up"] != 1 {
		t.Fatalf("actions %+v, want the restart, restored", acts)
	}
	// Judged from the restore, not the action's start: the restart itself
	// takes seconds on a loaded machine.
	if a := acts[0]; a.Took-a.After["restored_after_s"] > 3 {
		t.Errorf("%s: took %.1f s, %.1f s of it after the restore; want it to end with the load, not watch for a recovery (10 s)",
			a.Detail, a.Took, a.Took-a.After["restored_after_s"])
	}
}

// runFaultTail runs faultScenario on c with tail in place of its two
// faults and its after phase (the faults phase is then the window).
func runFaultTail(t *testing.T, c *local.Cluster, tail string) *reports.Report {
	t.Helper()
	src := strings.Replace(faultScenario, `      - {type: fault, at: 200ms, fault: pause, duration: 1s}
      - {type: fault, at: 3s, node: primary, fault: stop, duration: 1s}
  - {name: after, length: 3s}`, tail, 1)
	src = strings.Replace(src, "window: after,", "window: faults,", 1)
	sc, err := scenario.Parse([]byte(src), "fault.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// assertStates fails t when pid or one of its descendants is stopped
// (state T in /proc/<pid>/stat).
func assertStates(t *testing.T, pid int) {
	t.Helper()
	for _, p := range append([]int{pid}, descendantsOf(pid)...) {
		if s := procState(p); s == "T" {
			t.Errorf("pid %d is stopped", p)
		}
	}
}

func procState(pid int) string {
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

func descendantsOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	kids := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			kids[pp] = append(kids[pp], p)
		}
	}
	var out []int
	for q := []int{pid}; len(q) > 0; q = q[1:] {
		out = append(out, kids[q[0]]...)
		q = append(q, kids[q[0]]...)
	}
	return out
}

const dockerFaultScenario = `
name: dockerfault
seed: 5
backend: {kind: docker, image: IMAGE, topology: replica}
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
phases: {drain: 1s}
timeline:
  - {name: warm, length: 300ms, measure: false}
  - {name: base, length: 1s}
  - name: faults
    length: 12s
    actions:
      - {type: fault, at: 200ms, fault: pause, duration: 1s}
      - {type: fault, at: 2s, fault: restart}
      - {type: fault, at: 8s, node: replica1, fault: disconnect, duration: 1s}
  - {name: after, length: 2s}
configurations:
  - {name: shared, mode: shared}
assertions: {quiet_p99: {window: after, baseline: base, min_samples: 1000000}}
`

// TestFaultActionDocker runs the fault action on the container backend:
// a pause and a restart of the primary and a disconnect of the replica,
// each restored, with the pause's stalls and the restart's errors. The
// disconnect comes last: a primary stopped while its walsender still holds
// the connection of a replica taken off the network waits for it until
// Docker's stop timeout.
func TestFaultActionDocker(t *testing.T) {
	image := container.LocalTestImage
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	needDockerImage(ctx, t, image)
	sc, err := scenario.Parse([]byte(strings.Replace(dockerFaultScenario, "IMAGE", image, 1)), "dockerfault.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(ctx, sc, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	acts := rep.Configurations[0].Actions
	if len(acts) != 3 {
		t.Fatalf("%d actions, want 3: %+v", len(acts), acts)
	}
	byDetail := map[string]reports.ActionResult{}
	for _, a := range acts {
		t.Logf("%s (error %q)", a.Detail, a.Error)
		if a.Error != "" || a.After["node_up"] != 1 {
			t.Errorf("action %+v: want restored", a)
		}
		byDetail[strings.TrimSuffix(strings.Join(strings.Fields(a.Detail)[:2], " "), ":")] = a
	}
	if a := byDetail["pause primary"]; a.After["worst_latency_ms"] < 900 || a.After["down_s"] < 0.99 {
		t.Errorf("pause: %+v; want a worst latency near 1 s", a)
	}
	if a := byDetail["restart primary"]; a.After["errors"] < 1 {
		t.Errorf("restart: %+v; want errors", a)
	}
	if a := byDetail["disconnect replica1"]; a.After["down_s"] < 0.99 {
		t.Errorf("disconnect: %+v; want 1 s down", a)
	}
}

// TestFaultActionRestoredWithTheLoad: a stop whose hold would outlast the
// timeline, because an until phase after it ended at once, is restored
// when the load ends, not held past it: the report says so, and the
// ops of the drain find the node up.
func TestFaultActionRestoredWithTheLoad(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	rep := runFaultTail(t, c, `      - {type: fault, at: 3500ms, fault: stop, duration: 4s}
  - name: wait
    until: actions_done
    max: 5s
    actions:
      - {type: terminate_sessions, tenant: 1}`)
	var stop *reports.ActionResult
	for i, a := range rep.Configurations[0].Actions {
		if a.Type == "fault" {
			stop = &rep.Configurations[0].Actions[i]
		}
	}
	if stop == nil {
		t.Fatalf("no fault action in %+v", rep.Configurations[0].Actions)
	}
	t.Logf("%s", stop.Detail)
	// Held from 3.5 s until the load ended at 4 s, not its 4 s; down_s
	// adds the restart, seconds of its own on a loaded machine.
	if stop.Error != "" || stop.After["restored_early"] != 1 || stop.After["held_s"] > 3 || stop.After["down_s"] < stop.After["held_s"] ||
		!strings.Contains(stop.Detail, "restored early") {
		t.Errorf("stop: %s (error %q, after %v); want it restored early, with the load, well before its 4 s", stop.Detail, stop.Error, stop.After)
	}
	if st := c.Stat().Nodes[0]; !st.Running {
		t.Errorf("node not running after the run")
	}
}
