package harness

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/harness/guard"
	"github.com/noisysim/noisysim/internal/affinity"
	"github.com/noisysim/noisysim/reports"
)

// watchMachine starts the disturbance guard unless Options turn it off.
func (r *runner) watchMachine() {
	if r.opts.MaxForeignCPU < 0 {
		return
	}
	var own []string
	if c, ok := r.cluster.(interface{ ContainerIDs() []string }); ok {
		own = c.ContainerIDs()
	}
	r.guard = guard.New(guard.Options{MaxForeignCPU: r.opts.MaxForeignCPU, OwnCgroups: own})
}

// priorityPrefix names noisysim's own cpu groups: noisysim-gen-<pid>, at
// the hierarchy's root, where the weight is weighed against the servers'
// (a weight under another group counts against its siblings only).
const priorityPrefix = "noisysim-gen-"

// prioritize moves noisysim's process into a cpu group of its own, named
// noisysim-gen-<pid>, with cgroup.DefaultWeight times the default CPU
// weight, with Options.Priority; where cgroups cannot be written it
// runs at the default weight and says why in the report. The servers are
// running by now and stay where they are; what noisysim starts later goes
// through cgroup.StartChild. The returned func moves it back and removes
// the group.
func (r *runner) prioritize() (undo func()) {
	if !r.opts.Priority {
		return func() {}
	}
	h, err := cgroup.Detect()
	var p *cgroup.Priority
	if err == nil {
		sweepPriorityGroups(h)
		p, err = h.Prioritize(priorityPrefix+strconv.Itoa(os.Getpid()), cgroup.DefaultWeight)
	}
	if err != nil {
		r.prioritySkipped = err.Error()
		if ue := (*cgroup.UnavailableError)(nil); errors.As(err, &ue) {
			r.prioritySkipped = ue.Reason
		}
		r.log.Info("noisysim runs at the default CPU weight", "reason", r.prioritySkipped)
		return func() {}
	}
	r.priority = p.String()
	return func() {
		if err := p.Close(); err != nil {
			r.log.Warn("leave noisysim's cpu group", "err", err)
		}
	}
}

// SweepPriorityGroups removes the empty noisysim-gen-<pid> cpu groups of
// --priority runs that no longer run (killed by SIGKILL, say), as the next
// such run does, and returns their paths; nil where cgroups cannot be
// read. noisysim cluster down calls it.
func SweepPriorityGroups() []string {
	h, err := cgroup.Detect()
	if err != nil {
		return nil
	}
	return sweepPriorityGroups(h)
}

// sweepPriorityGroups removes the empty noisysim-gen-<pid> groups of
// noisysim processes that no longer run (killed by SIGKILL, say) and
// returns the paths it removed.
func sweepPriorityGroups(h cgroup.Hierarchy) []string {
	var removed []string
	entries, _ := os.ReadDir(h.Root)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), priorityPrefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), priorityPrefix) || err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			continue // it runs (or its pid was reused: left for later)
		}
		path := filepath.Join(h.Root, e.Name())
		if os.Remove(path) == nil { // an rmdir: only when empty
			removed = append(removed, path)
		}
	}
	return removed
}

// guardWindow names the guard's window for a phase, "" for a phase that is
// not measured (start, data load, a timeline phase with measure false, the
// hot-shard load and warm-up).
func (r *runner) guardWindow(phase, config string) string {
	for _, s := range r.steps {
		if s.Name == phase && !s.Measure {
			return ""
		}
	}
	switch {
	case phase == PhaseStart || phase == PhaseLoad:
		return ""
	case phase == "hot-shard" && (config == "load" || config == "warmup"):
		return ""
	}
	return windowName(phase, config)
}

// windowName names the guard's window of a measured phase of a
// configuration: "run (naive)", "solo" for a phase outside any
// configuration, the configuration's name for a hot-shard window. An
// assertion's Window and Baseline map to the windows it was judged over
// through it (judgedOver).
func windowName(phase, config string) string {
	switch {
	case phase == "hot-shard":
		return config
	case config == "":
		return phase
	}
	return phase + " (" + config + ")"
}

// judgedOver reports whether a was judged over the guard window w, as its
// window (window) or as its baseline (baseline); name maps an assertion's
// phase and configuration to the guard's window name.
func judgedOver(a reports.Assertion, w string, name func(phase, config string) string) (window, baseline bool) {
	return a.Window != "" && name(a.Window, a.Configuration) == w, a.Baseline != "" && name(a.Baseline, a.Configuration) == w
}

// machineReport puts the nodes' CPU budgets, the concurrency note and the
// guard's windows into rep.
func (r *runner) machineReport(rep *reports.Report) {
	var windows []reports.WindowLoad
	if r.guard != nil {
		windows = r.guard.End()
	}
	if rep == nil {
		return
	}
	m := &reports.Machine{Concurrent: r.opts.Concurrent, Windows: windows}
	if r.guard != nil {
		m.MaxForeignCPU = r.guard.MaxForeignCPU()
		m.MaxStealShare = r.guard.MaxStealShare()
		if d := r.guard.MaxStall(); d > 0 {
			m.MaxStallMs = float64(d.Milliseconds())
		}
	}
	if c, ok := r.cluster.(backend.CPUReporter); ok {
		if st := c.CPUBudgets(); st.Mechanism != "" || st.Skipped != "" {
			nc := &reports.NodeCPU{Mechanism: st.Mechanism, Skipped: st.Skipped}
			for _, n := range st.Nodes {
				nc.Nodes = append(nc.Nodes, reports.NodeBudget{Node: n.Node, CPUs: n.CPUs, Cores: n.Cores})
			}
			m.NodeCPU = nc
			if st.Skipped != "" {
				rep.Notes = append(rep.Notes, "running WITHOUT the CPU budgets asked for: "+st.Skipped)
			}
		}
	}
	m.GeneratorPriority, m.GeneratorPrioritySkipped = r.priority, r.prioritySkipped
	if g := r.sc.Backend.Generator(); len(g) > 0 && r.generatorSkipped == "" {
		m.GeneratorCores = affinity.Format(g)
	}
	if r.generatorSkipped != "" {
		rep.Notes = append(rep.Notes, "running noisysim WITHOUT its generator_cores: "+r.generatorSkipped)
	}
	if len(r.sc.Backend.NodeCores) > 0 {
		pinned := false
		if m.NodeCPU != nil {
			for _, n := range m.NodeCPU.Nodes {
				pinned = pinned || n.Cores != ""
			}
		}
		if !pinned {
			rep.Notes = append(rep.Notes, "running WITHOUT the node_cores asked for: no node could be pinned on this machine")
		}
	}
	settleStalls(m, rep.Assertions, r.guardWindow)
	if m.NodeCPU != nil || m.Concurrent != "" || len(m.Windows) > 0 || m.GeneratorCores != "" {
		rep.Machine = m
	}
}

// stallReach is how far a stall of noisysim's process may move a latency:
// the arrivals due while it stood still go out up to the stall late, then
// together, and queue behind each other for about as long again.
const stallReach = 2

// settleStalls clears Disturbed on each window disturbed only by a stall
// of noisysim's process (its longest stall reached m.MaxStallMs, the CPU
// used outside the run did not pass m.MaxForeignCPU) on which no verdict
// rests, and marks it StallMoot. A stall only lengthens the latencies
// measured in its window, so a latency bound judged over it (an assertion
// in ms with the window as its Window) rests on the stall only when it
// fails by less than stallReach times the longest stall (less, without the
// stall, might hold) or, for a lower bound, holds by less than that. A
// bound that takes the window as its Baseline always rests on it: a longer
// baseline p99 raises the limit. So does any check in another unit than
// ms judged over the window (a ratio of p99s, a time to detect), whose
// reach is not known; counts (no unit) do not. So a saturated control that misses its
// bound by seconds is not disturbed by a 300 ms stall of its generator,
// while an isolated window that misses by 100 ms is. name maps an
// assertion's window and configuration to the guard's window name.
func settleStalls(m *reports.Machine, as []reports.Assertion, name func(phase, config string) string) {
	if m.MaxStallMs <= 0 {
		return
	}
	for i := range m.Windows {
		w := &m.Windows[i]
		if !w.Disturbed || m.CPUDisturbed(*w) || w.StallMaxMs < m.MaxStallMs {
			continue
		}
		if !stallDecides(*w, as, name) {
			w.Disturbed, w.StallMoot = false, true
		}
	}
}

// stallDecides reports whether a verdict of as rests on w's longest stall
// (see settleStalls).
func stallDecides(w reports.WindowLoad, as []reports.Assertion, name func(phase, config string) string) bool {
	reach := stallReach * w.StallMaxMs
	for _, a := range as {
		if a.Skipped || a.Unit == "" {
			continue // counts are not moved by a stall
		}
		window, baseline := judgedOver(a, w.Window, name)
		if baseline {
			return true
		}
		if !window {
			continue
		}
		if a.Unit != "ms" {
			// A ratio of p99s (quiet_p99_ab, in x), a time to detect
			// (detect_within, in s), a unit added later: how far the
			// stall moves it is not known here.
			return true
		}
		switch a.Op {
		case "<=", "<":
			if !a.Passed && a.Observed-reach <= a.Limit {
				return true
			}
		case ">=", ">":
			if a.Passed && a.Observed-reach <= a.Limit {
				return true
			}
		default:
			return true
		}
	}
	return false
}
