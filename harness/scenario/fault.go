package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/noisysim/noisysim/harness/backend"
)

// ActionFault is the type of NodeFault.
const ActionFault = "fault"

// FaultRestart stops a node and starts it again at once (the fault
// action only).
const FaultRestart FaultAction = "restart"

// NodeFault is the fault action: it stops, pauses, restarts or (kind
// docker) disconnects one node, and restores it Duration later, even when
// the run is cancelled meanwhile.
//
//	actions:
//	  - {type: fault, at: 1s, node: primary, fault: pause, duration: 2s}
type NodeFault struct {
	// Node is the node's name (primary, replica1, primary2, coordinator,
	// worker1, … as the topology names them). Default: the first node
	// (primary, primary1 or coordinator).
	Node string `yaml:"node"`
	// Fault is stop (an immediate shutdown, started again at the
	// restore), pause (every process of the node frozen, resumed at the
	// restore), restart (stop, then start at once) or disconnect (kind
	// docker: off the cluster network). Required.
	Fault FaultAction `yaml:"fault"`
	// Duration is how long the fault holds before the restore, > 0;
	// required but for restart, which takes none.
	Duration Duration `yaml:"duration"`
}

// NodeNames returns the names of the nodes the backend's topology starts,
// the first one first; nil for kind external, whose nodes noisysim does
// not name.
func (b Backend) NodeNames() []string {
	if b.Kind == BackendExternal {
		return nil
	}
	switch b.Topology {
	case backend.TopologyReplica:
		return []string{"primary", "replica1"}
	case TopologyShards:
		return b.ShardNames()
	case TopologyCitus:
		out := []string{"coordinator"}
		for i := range b.Workers {
			out = append(out, "worker"+strconv.Itoa(i+1))
		}
		return out
	}
	return []string{"primary"}
}

// faultKinds returns the faults kind k can inject.
func faultKinds(k BackendKind) []FaultAction {
	switch k {
	case BackendLocal:
		return []FaultAction{FaultStop, FaultPause, FaultRestart}
	case BackendDocker:
		return []FaultAction{FaultStop, FaultPause, FaultRestart, FaultDisconnect}
	}
	return nil
}

// Validate checks the node against the topology, the fault against the
// backend kind and the duration.
func (f *NodeFault) Validate(s *Scenario) []ActionProblem {
	kinds := faultKinds(s.Backend.Kind)
	if kinds == nil {
		return []ActionProblem{{Msg: fmt.Sprintf("needs backend kind local or docker (noisysim stops, pauses and restarts the nodes it started); got kind %q", s.Backend.Kind)}}
	}
	var ps []ActionProblem
	if nodes := s.Backend.NodeNames(); f.Node != "" && !slices.Contains(nodes, f.Node) {
		ps = append(ps, ActionProblem{Key: "node", Msg: fmt.Sprintf("unknown node %q; topology %s has %s", f.Node, s.Backend.Topology, strings.Join(nodes, ", "))})
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	switch {
	case f.Fault == "":
		ps = append(ps, ActionProblem{Key: "fault", Msg: "required: one of " + strings.Join(names, ", ")})
	case f.Fault == FaultDisconnect && s.Backend.Kind == BackendLocal:
		ps = append(ps, ActionProblem{Key: "fault", Msg: "disconnect needs backend kind docker: local nodes and noisysim share the loopback interface; use stop, pause or restart"})
	case !slices.Contains(kinds, f.Fault):
		ps = append(ps, ActionProblem{Key: "fault", Msg: fmt.Sprintf("unknown fault %q; want one of %s", f.Fault, strings.Join(names, ", "))})
	case f.Fault == FaultRestart && f.Duration != 0:
		ps = append(ps, ActionProblem{Key: "duration", Msg: "not for restart, which starts the node again at once; use stop with a duration to hold it down"})
	case f.Fault != FaultRestart && f.Duration <= 0:
		ps = append(ps, ActionProblem{Key: "duration", Msg: fmt.Sprintf("must be a duration > 0 (how long the %s holds before the restore), got %s", f.Fault, f.Duration)})
	}
	return ps
}

// faultActionOverlap reports a fault action whose hold [at, at +
// duration] ends past the timeline's end, or meets that of an earlier
// fault action on the same node: a node
// takes one fault at a time (the second would fail when it starts). Actions
// of one phase are compared, and of different phases when no phase before
// the later one's ends on its actions (until), which would move its start.
func (c *checker) faultActionOverlap(s *Scenario) {
	type hold struct {
		field      string
		node       string
		fault      FaultAction
		start, end Duration
		fixed      bool // start counts from the timeline's start
		phase      int
	}
	nodes := s.Backend.NodeNames()
	var holds []hold
	var start Duration
	fixed := true
	for i := range s.Timeline {
		p := &s.Timeline[i]
		for j, a := range p.Actions {
			f, ok := a.Config.(*NodeFault)
			if !ok || a.At < 0 || len(f.Validate(s)) > 0 {
				continue
			}
			node := f.Node
			if node == "" && len(nodes) > 0 {
				node = nodes[0]
			}
			h := hold{field: fmt.Sprintf("timeline[%d].actions[%d]", i, j), node: node, fault: f.Fault,
				start: start + a.At, fixed: fixed, phase: i}
			h.end = h.start + f.Duration
			for _, g := range holds {
				if g.node != h.node || (g.phase != h.phase && !(g.fixed && h.fixed)) {
					continue
				}
				if h.start <= g.end && g.start <= h.end {
					c.add(h.field+".at", "the %s of %s overlaps %s (%s %s from %s to %s of the timeline): a node takes one fault at a time",
						h.fault, h.node, g.field, g.fault, g.node, g.start, g.end)
					break
				}
			}
			holds = append(holds, h)
		}
		if p.Until != "" {
			fixed = false
		}
		start += p.Span()
	}
	// start is now the timeline's end (its longest, with until phases at
	// their max): a hold past it would end after the load, with the ops it
	// held cut off as incomplete and nothing left to recover.
	for _, h := range holds {
		if h.end > start {
			c.add(h.field+".duration", "the %s of %s holds from %s to %s of the timeline, past its end at %s: a fault must be restored within the timeline (shorten duration or move at)",
				h.fault, h.node, h.start, h.end, start)
		}
	}
}

func init() {
	RegisterAction(ActionFault, func() ActionConfig { return &NodeFault{} })
}
