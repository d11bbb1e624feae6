package reports

import (
	"fmt"
	"strconv"
	"strings"
)

// Machine is what a run knows of the machine it measured on: the nodes' CPU
// budgets, other measured runs, and the CPU others used during each
// measured window.
type Machine struct {
	// NodeCPU is how the nodes' CPU budgets were enforced; nil when none
	// were asked for.
	NodeCPU *NodeCPU `json:"node_cpu,omitempty"`
	// Concurrent, when not empty, says the run was measured with
	// --allow-concurrent beside other measured runs (their pids).
	Concurrent string `json:"concurrent,omitempty"`
	// MaxForeignCPU is the threshold above which a window counts as
	// disturbed: CPUs used outside noisysim's processes (and its database
	// servers) plus steal time, averaged over the window. 0 when the guard
	// did not run.
	MaxForeignCPU float64 `json:"max_foreign_cpu,omitempty"`
	// MaxStallMs is the longest stall of noisysim's process a window may
	// hold and not be disturbed; 0 when the stall meter did not run.
	MaxStallMs float64 `json:"max_stall_ms,omitempty"`
	// MaxStealShare is the share of the CPU the machine ran (the run's,
	// everything else's and the steal) that a hypervisor may take in a
	// window before it counts as disturbed (see StealDisturbs); 0 when the
	// guard did not run.
	MaxStealShare float64 `json:"max_steal_share,omitempty"`
	// Windows are the guard's figures per measured window, in run order.
	Windows []WindowLoad `json:"windows,omitempty"`
	// GeneratorCores are the cores noisysim itself ran on
	// (backend.generator_cores), as a CPU list; empty for any.
	GeneratorCores string `json:"generator_cores,omitempty"`
	// GeneratorPriority is the cpu group noisysim's own process ran in,
	// with its weight (e.g. "cgroup v1 /sys/fs/cgroup/cpu/noisysim-gen-123,
	// cpu.shares 8192"); empty when it ran at the default weight.
	GeneratorPriority string `json:"generator_priority,omitempty"`
	// GeneratorPrioritySkipped says why noisysim ran at the default CPU
	// weight (cgroups not writable); empty when it did not try
	// (no --priority) or had its group.
	GeneratorPrioritySkipped string `json:"generator_priority_skipped,omitempty"`
}

// NodeCPU is how the nodes' CPU budgets were enforced.
type NodeCPU struct {
	// Mechanism is e.g. "cgroup v1 /sys/fs/cgroup/cpu/noisysim/…" or
	// "docker cpu quota (--cpus)".
	Mechanism string `json:"mechanism,omitempty"`
	// Nodes are the budgets read back, in CPUs (0: none), in node order.
	Nodes []NodeBudget `json:"nodes,omitempty"`
	// Skipped, when not empty, says why the budgets asked for were not
	// enforced (backend.node_cpu_optional).
	Skipped string `json:"skipped,omitempty"`
}

// NodeBudget is one node's CPU budget.
type NodeBudget struct {
	Node string  `json:"node"`
	CPUs float64 `json:"cpus"`
	// Cores are the cores the node was pinned to (backend.node_cores), as
	// a CPU list; empty for any.
	Cores string `json:"cores,omitempty"`
}

// WindowLoad is the CPU the machine spent outside the run during one
// measured window.
type WindowLoad struct {
	// Window names the window, e.g. "solo (isolated)" or "run (naive)".
	Window string `json:"window"`
	// Seconds is the window's length.
	Seconds float64 `json:"seconds"`
	// OwnCPU is the average CPUs used by noisysim and its database servers.
	OwnCPU float64 `json:"own_cpu"`
	// NoisysimCPU is the part of OwnCPU noisysim's own process used (its
	// load generator, pools, limiters, histograms and this guard): OwnCPU
	// − NoisysimCPU is its database servers' (and other children's).
	NoisysimCPU float64 `json:"noisysim_cpu,omitempty"`
	// ForeignCPU is the average CPUs used by everything else (other
	// processes, the kernel's own work), StealCPU the average CPUs a
	// hypervisor took from this machine.
	ForeignCPU float64 `json:"foreign_cpu"`
	StealCPU   float64 `json:"steal_cpu"`
	// Top are the busiest processes outside the run, busiest first.
	Top []ForeignProc `json:"top,omitempty"`
	// Stalls counts the times noisysim's process woke 50 ms or more late
	// (the whole process stood still: the machine, its hypervisor or the
	// Go runtime paused it), StalledMs their total, StallMaxMs the longest,
	// StallAtS when the longest began, in seconds from the window's start.
	Stalls     int     `json:"stalls,omitempty"`
	StalledMs  float64 `json:"stalled_ms,omitempty"`
	StallMaxMs float64 `json:"stall_max_ms,omitempty"`
	StallAtS   float64 `json:"stall_at_s,omitempty"`
	// Disturbed is true when ForeignCPU + StealCPU exceeded the threshold,
	// when the steal took more than Machine.MaxStealShare of the CPU the
	// machine ran (StealDisturbs), or the longest stall reached Machine.MaxStallMs and a verdict may
	// rest on it (see StallMoot).
	Disturbed bool `json:"disturbed"`
	// StallMoot is true when the longest stall reached Machine.MaxStallMs
	// but no verdict rests on it, so the window is not disturbed: a stall
	// only makes latencies longer, and every latency bound judged over the
	// window holds, or misses by more than twice the longest stall (a
	// saturated control), no bound takes the window as its baseline, and
	// no check in another unit than ms (x, s) is judged over it.
	StallMoot bool `json:"stall_moot,omitempty"`
}

// ForeignProc is a process outside the run and its average CPUs over a
// window.
type ForeignProc struct {
	PID  int     `json:"pid"`
	Comm string  `json:"comm"`
	CPUs float64 `json:"cpus"`
}

// Disturbed returns the windows marked disturbed.
func (m *Machine) Disturbed() []WindowLoad {
	if m == nil {
		return nil
	}
	var out []WindowLoad
	for _, w := range m.Windows {
		if w.Disturbed {
			out = append(out, w)
		}
	}
	return out
}

// MinStealCPU is the least steal that disturbs a window, whatever its
// share: a few ticks of the kernel's 10 ms counters in a short, idle window
// are no evidence.
const MinStealCPU = 0.02

// StealShare returns the share of the CPU the machine ran during w that a
// hypervisor took: StealCPU / (OwnCPU + ForeignCPU + StealCPU); 0 when
// nothing ran. Steal only accrues while a virtual CPU wants to run, so it
// is a share of demand: 0.10 means the run's processes waited for a
// physical CPU a tenth of the time they wanted one, which lengthens a tail
// latency as a busy neighbour on the same core would.
func (w WindowLoad) StealShare() float64 {
	d := w.OwnCPU + w.ForeignCPU + w.StealCPU
	if d <= 0 {
		return 0
	}
	return w.StealCPU / d
}

// StealDisturbs reports whether the steal of w disturbs it under the
// bound maxShare (Machine.MaxStealShare): at least MinStealCPU and more
// than maxShare of the CPU the machine ran. A machine that ran half a CPU
// for the run and lost 0.1 CPU more to its hypervisor is disturbed, though
// 0.1 CPU is far below what other processes may use (MaxForeignCPU).
func StealDisturbs(w WindowLoad, maxShare float64) bool {
	return maxShare > 0 && w.StealCPU >= MinStealCPU && w.StealShare() > maxShare
}

// CPUDisturbed reports whether w is disturbed by the CPU others took, as
// opposed to a stall of noisysim's own process: the work of other
// processes and the steal above MaxForeignCPU, or the steal above
// MaxStealShare of the machine's CPU.
func (m *Machine) CPUDisturbed(w WindowLoad) bool {
	return m != nil && (m.MaxForeignCPU > 0 && w.ForeignCPU+w.StealCPU > m.MaxForeignCPU || StealDisturbs(w, m.MaxStealShare))
}

// Why returns why w, one of m's windows, is disturbed, e.g. "0.82 CPU
// used outside the run" or "noisysim stood still 730 ms at 4.2 s"; ""
// when it is not.
func (m *Machine) Why(w WindowLoad) string {
	if m == nil || !w.Disturbed {
		return ""
	}
	var why []string
	if m.MaxForeignCPU > 0 && w.ForeignCPU+w.StealCPU > m.MaxForeignCPU {
		if w.StealCPU > 0 {
			// The bound is on their sum: say both parts, so that the
			// steal named below is not read as added twice.
			why = append(why, fmt.Sprintf("%.2f CPU used outside the run (%.2f by other work, %.2f stolen; above %.2f)", w.ForeignCPU+w.StealCPU, w.ForeignCPU, w.StealCPU, m.MaxForeignCPU))
		} else {
			why = append(why, fmt.Sprintf("%.2f CPU used outside the run (above %.2f)", w.ForeignCPU, m.MaxForeignCPU))
		}
	}
	if StealDisturbs(w, m.MaxStealShare) {
		why = append(why, fmt.Sprintf("the hypervisor took %.2f CPU, %.0f%% of the CPU the machine ran (above %.0f%%)", w.StealCPU, 100*w.StealShare(), 100*m.MaxStealShare))
	}
	if m.MaxStallMs > 0 && w.StallMaxMs >= m.MaxStallMs {
		why = append(why, fmt.Sprintf("noisysim stood still %.0f ms at %.1f s (%.0f ms or more)", w.StallMaxMs, w.StallAtS, m.MaxStallMs))
	}
	if len(why) == 0 {
		why = append(why, "marked disturbed where it was measured")
	}
	return strings.Join(why, " and ")
}

// budgetsLine returns e.g. "primary 0.4 CPU, replica1 no budget (cgroup v1 …)".
func (n *NodeCPU) line() string {
	if n.Skipped != "" {
		return "NONE, running without them: " + n.Skipped
	}
	var parts []string
	for _, b := range n.Nodes {
		v := "no budget"
		if b.CPUs > 0 {
			v = strconv.FormatFloat(b.CPUs, 'f', -1, 64) + " CPU"
		}
		if b.Cores != "" {
			v += " on cores " + b.Cores
		}
		parts = append(parts, b.Node+" "+v)
	}
	return fmt.Sprintf("%s (%s)", strings.Join(parts, ", "), n.Mechanism)
}

// windowLine returns one window's figures for the terminal.
func (w WindowLoad) line() string {
	s := fmt.Sprintf("%-28s foreign %.2f CPU, steal %.2f CPU, own %.2f CPU", w.Window, w.ForeignCPU, w.StealCPU, w.OwnCPU)
	if len(w.Top) > 0 {
		var top []string
		for _, p := range w.Top[:min(3, len(w.Top))] {
			top = append(top, fmt.Sprintf("%s[%d] %.2f", p.Comm, p.PID, p.CPUs))
		}
		s += "; top: " + strings.Join(top, ", ")
	}
	if w.Stalls > 0 {
		s += fmt.Sprintf("; %s", w.stallText())
	}
	if w.Disturbed {
		s += "  DISTURBED"
	}
	return s
}

// stallText returns e.g. "2 stalls, longest 730 ms at 4.2 s".
func (w WindowLoad) stallText() string {
	if w.Stalls == 0 {
		return ""
	}
	n := "1 stall"
	if w.Stalls > 1 {
		n = fmt.Sprintf("%d stalls (%.0f ms in all)", w.Stalls, w.StalledMs)
	}
	s := fmt.Sprintf("%s, longest %.0f ms at %.1f s", n, w.StallMaxMs, w.StallAtS)
	if w.StallMoot {
		s += ", no verdict rests on it"
	}
	return s
}

// DisturbedWhy lists m's disturbed windows with why each is, e.g.
// "solo: 0.90 CPU used outside the run (above 0.50)", joined by "; ";
// empty when none is (or m is nil).
func (m *Machine) DisturbedWhy() string {
	var why []string
	for _, w := range m.Disturbed() {
		why = append(why, w.Window+": "+m.Why(w))
	}
	return strings.Join(why, "; ")
}

// writeMachine writes the Markdown section of m, if any.
func writeMachine(p func(string, ...any), m *Machine) {
	if m == nil {
		return
	}
	if m.NodeCPU != nil {
		p("Node CPU budgets: %s\n\n", md(m.NodeCPU.line()))
	}
	if m.GeneratorPriority != "" {
		p("Generator priority: %s\n\n", md(m.GeneratorPriority))
	}
	if m.GeneratorCores != "" {
		p("Generator: noisysim on cores %s\n\n", md(m.GeneratorCores))
	}
	if m.Concurrent != "" {
		p("**Concurrent:** %s\n\n", md(m.Concurrent))
	}
	if len(m.Windows) == 0 {
		return
	}
	if why := m.DisturbedWhy(); why != "" {
		p("**DISTURBED:** %s; the figures may not be the system's own.\n\n", md(why))
	}
	p("| Window | Seconds | Foreign CPU | Steal CPU | Own CPU | Busiest outside | Stalls | Disturbed |\n|---|---|---|---|---|---|---|---|\n")
	for _, w := range m.Windows {
		var top []string
		for _, t := range w.Top[:min(3, len(w.Top))] {
			top = append(top, fmt.Sprintf("%s[%d] %.2f", t.Comm, t.PID, t.CPUs))
		}
		p("| %s | %.1f | %.2f | %.2f | %.2f | %s | %s | %s |\n", md(w.Window), w.Seconds, w.ForeignCPU, w.StealCPU, w.OwnCPU, md(strings.Join(top, ", ")), md(w.stallText()), yesNo(w.Disturbed))
	}
	p("\n")
}
