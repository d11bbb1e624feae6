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
	// Windows are the guard's figures per measured window, in run order.
	Windows []WindowLoad `json:"windows,omitempty"`
	// GeneratorCores are the cores noisysim itself ran on
	// (backend.generator_cores), as a CPU list; empty for any.
	GeneratorCores string `json:"generator_cores,omitempty"`
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
	// ForeignCPU is the average CPUs used by everything else (other
	// processes, the kernel's own work), StealCPU the average CPUs a
	// hypervisor took from this machine.
	ForeignCPU float64 `json:"foreign_cpu"`
	StealCPU   float64 `json:"steal_cpu"`
	// Top are the busiest processes outside the run, busiest first.
	Top []ForeignProc `json:"top,omitempty"`
	// Disturbed is true when ForeignCPU + StealCPU exceeded the threshold.
	Disturbed bool `json:"disturbed"`
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
	if w.Disturbed {
		s += "  DISTURBED"
	}
	return s
}

// writeMachine writes the Markdown section of m, if any.
func writeMachine(p func(string, ...any), m *Machine) {
	if m == nil {
		return
	}
	if m.NodeCPU != nil {
		p("Node CPU budgets: %s\n\n", md(m.NodeCPU.line()))
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
	if d := m.Disturbed(); len(d) > 0 {
		p("**DISTURBED:** other processes used more than %.2f CPU during %d measured window(s); the figures may not be the system's own.\n\n", m.MaxForeignCPU, len(d))
	}
	p("| Window | Seconds | Foreign CPU | Steal CPU | Own CPU | Busiest outside | Disturbed |\n|---|---|---|---|---|---|---|\n")
	for _, w := range m.Windows {
		var top []string
		for _, t := range w.Top[:min(3, len(w.Top))] {
			top = append(top, fmt.Sprintf("%s[%d] %.2f", t.Comm, t.PID, t.CPUs))
		}
		p("| %s | %.1f | %.2f | %.2f | %.2f | %s | %s |\n", md(w.Window), w.Seconds, w.ForeignCPU, w.StealCPU, w.OwnCPU, md(strings.Join(top, ", ")), yesNo(w.Disturbed))
	}
	p("\n")
}
