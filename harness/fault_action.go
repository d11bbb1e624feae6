package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// nodeFaulter applies a fault (stop, pause or disconnect) to a node and
// returns how to undo it.
type nodeFaulter func(ctx context.Context, node string, fault scenario.FaultAction) (func(context.Context) error, error)

// faulterOf returns how to fault c's nodes: the local backend's Inject
// (stop, pause) or the container backend's (stop, pause, disconnect); nil
// for a cluster that cannot.
func faulterOf(c backend.Cluster) nodeFaulter {
	switch c := c.(type) {
	case *local.Cluster:
		return func(ctx context.Context, node string, f scenario.FaultAction) (func(context.Context) error, error) {
			r, err := c.Inject(ctx, node, local.Fault(f))
			return r, err
		}
	case *container.Cluster:
		return func(ctx context.Context, node string, f scenario.FaultAction) (func(context.Context) error, error) {
			r, err := c.Inject(ctx, node, container.Fault(f))
			return r, err
		}
	}
	return nil
}

// recoverWait bounds how long a fault action watches for the recovery
// once its node is restored.
const recoverWait = 10 * time.Second

// nodeFault is the runner of scenario.NodeFault.
type nodeFault struct{ cfg scenario.NodeFault }

var _ ActionRunner = nodeFault{}

func init() {
	RegisterActionRunner(scenario.ActionFault, func(c scenario.ActionConfig) ActionRunner {
		return nodeFault{cfg: *c.(*scenario.NodeFault)}
	})
}

// Run applies the fault, holds it for its duration (none for restart),
// restores it, even when ctx ends meanwhile (bounded by restoreTimeout),
// then watches the timeline's ops until they recover (at most
// recoverWait, not after ctx ends). Its figures are those of a faults[]
// entry (burst), over the ops that ended from the action's start.
func (f nodeFault) Run(ctx context.Context, env ActionEnv) (ActionOutcome, error) {
	inject := faulterOf(env.Cluster)
	if inject == nil {
		return ActionOutcome{}, fmt.Errorf("fault: the cluster cannot stop, pause or disconnect nodes (backend kinds local and docker can): %w", scenario.ErrInvalid)
	}
	name := f.cfg.Node
	if name == "" {
		nodes := env.Cluster.Nodes()
		if len(nodes) == 0 {
			return ActionOutcome{}, errors.New("fault: the cluster has no node")
		}
		name = nodes[0].Name
	}
	kind := f.cfg.Fault
	if kind == scenario.FaultRestart {
		kind = scenario.FaultStop
	}
	sub := env.ops.subscribe()
	defer env.ops.unsubscribe(sub)
	restore, err := inject(ctx, name, kind)
	var ft faultTimes
	ft.injected = time.Since(sub.origin)
	if err != nil {
		return ActionOutcome{}, fmt.Errorf("fault %s on %s: %w", f.cfg.Fault, name, err)
	}
	// The hold ends at its duration, or with the timeline's load (an
	// until phase ended early): past it, the ops it holds would be cut
	// off as incomplete with nothing left to recover.
	early := false
	if f.cfg.Fault != scenario.FaultRestart {
		hold := time.NewTimer(time.Until(sub.origin.Add(ft.injected + f.cfg.Duration.Duration())))
		select {
		case <-hold.C:
		case <-ctx.Done():
		case <-env.ops.loadEnded():
			early = true
		}
		hold.Stop()
	}
	rctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	ft.restoring = time.Since(sub.origin)
	// How long the fault held, apart from the restore: restarting a
	// stopped node takes seconds of its own on a loaded machine.
	held := ft.restoring - ft.injected
	ft.err = restore(rctx)
	cancel()
	ft.restored = time.Since(sub.origin)
	if ft.err == nil && ctx.Err() == nil {
		env.ops.awaitRecovery(ctx, sub, ft.restored, recoverWait)
	}
	events, bound := env.ops.events(sub)
	rf := burstBounded(scenario.Fault{Node: name, Action: f.cfg.Fault}, ft, events, bound)
	down := (ft.restored - ft.injected).Seconds()
	up := 1.0
	if ft.err != nil {
		up = 0
	}
	o := ActionOutcome{
		Before: map[string]float64{"node_up": 1},
		After: map[string]float64{"node_up": up, "down_s": down, "restored_after_s": ft.restored.Seconds(),
			"errors": float64(rf.Errors), "stalled": float64(rf.Stalled), "worst_latency_ms": rf.WorstLatency},
	}
	o.Detail = fmt.Sprintf("%s %s: down %.2f s, restored %.2f s after the start; %s, %d stalled, worst latency %.0f ms",
		f.cfg.Fault, name, down, ft.restored.Seconds(), reports.Plural(int(rf.Errors), "error"), rf.Stalled, rf.WorstLatency)
	if early {
		o.After["restored_early"], o.After["held_s"] = 1, held.Seconds()
		o.Detail += fmt.Sprintf(", restored early (the timeline's load ended %.2f s into its %s hold)", held.Seconds(), f.cfg.Duration)
	}
	if rf.Recovered {
		o.After["time_to_recover_ms"] = rf.TimeToRecover
		o.Detail += fmt.Sprintf(", recovered %.0f ms after the restore", rf.TimeToRecover)
	} else if ft.err == nil {
		o.Detail += ", no recovery seen"
	}
	if ft.err != nil {
		return o, fmt.Errorf("fault %s on %s: restore: %w", f.cfg.Fault, name, ft.err)
	}
	return o, ctx.Err()
}

// opTap watches the outcome of every op of a configuration's timeline for
// the fault actions: while one subscribes, it keeps each op that ends
// (start, end, failure, from the subscription); always, the latest
// successful latencies of each class, for the recovery bounds. A nil
// opTap watches nothing.
type opTap struct {
	watching atomic.Int32 // len(subs)
	mu       sync.Mutex
	recent   map[string]*latencyRing
	subs     []*opSub
	// ended is closed once the timeline's load has ended: no op is left
	// to recover.
	ended   chan struct{}
	endOnce sync.Once
}

func newOpTap() *opTap { return &opTap{recent: map[string]*latencyRing{}, ended: make(chan struct{})} }

// loadEnded returns a channel closed once the timeline's load has ended;
// nil (never ready) on a nil opTap.
func (t *opTap) loadEnded() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.ended
}

// end says the timeline's load has ended; harmless on nil or twice.
func (t *opTap) end() {
	if t != nil {
		t.endOnce.Do(func() { close(t.ended) })
	}
}

// faultActions reports whether a phase of the timeline lists a fault
// action.
func (r *runner) faultActions() bool {
	for _, s := range r.steps {
		for _, a := range s.Actions {
			if a.Type == scenario.ActionFault {
				return true
			}
		}
	}
	return false
}

// opSub is one subscription to an opTap.
type opSub struct {
	origin time.Time
	events []opEvent
	bound  map[string]time.Duration // recovery bounds at the subscription
}

// recentOps is how many successful latencies of a class an opTap keeps.
const recentOps = 256

type latencyRing struct {
	lat  [recentOps]time.Duration
	n, i int
}

func (r *latencyRing) add(d time.Duration) {
	r.lat[r.i] = d
	r.i = (r.i + 1) % recentOps
	r.n = min(r.n+1, recentOps)
}

// observe returns exec observed by t.
func (t *opTap) observe(exec workload.Executor) workload.Executor {
	return func(ctx context.Context, op workload.Op) error {
		start := time.Now()
		err := exec(ctx, op)
		end := time.Now()
		failed := false
		if err != nil {
			// Limiter rejections are the isolation stack at work, not
			// the fault.
			switch errorClass(err) {
			case string(scenario.ErrorQueueFull), string(scenario.ErrorWaitExceeded):
			default:
				failed = true
			}
		}
		if err != nil && t.watching.Load() == 0 {
			return err
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if err == nil {
			r := t.recent[op.Class]
			if r == nil {
				r = &latencyRing{}
				t.recent[op.Class] = r
			}
			r.add(end.Sub(start))
		}
		for _, s := range t.subs {
			if end.Before(s.origin) {
				continue
			}
			s.events = append(s.events, opEvent{start: start.Sub(s.origin), end: end.Sub(s.origin), tenant: op.Tenant, class: op.Class, failed: failed})
		}
		return err
	}
}

// subscribe starts keeping the ops that end from now on.
func (t *opTap) subscribe() *opSub {
	s := &opSub{origin: time.Now(), bound: map[string]time.Duration{}}
	if t == nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for class, r := range t.recent {
		ls := slices.Clone(r.lat[:r.n])
		slices.Sort(ls)
		s.bound[class] = recoverFactor * ls[(len(ls)-1)/2]
	}
	t.subs = append(t.subs, s)
	t.watching.Add(1)
	return s
}

// unsubscribe stops keeping ops for s; harmless twice.
func (t *opTap) unsubscribe(s *opSub) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.subs, s); i >= 0 {
		t.subs = slices.Delete(t.subs, i, i+1)
		t.watching.Add(-1)
	}
}

// events returns the ops s has kept so far and its recovery bounds.
func (t *opTap) events(s *opSub) ([]opEvent, map[string]time.Duration) {
	if t == nil {
		return nil, s.bound
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(s.events), s.bound
}

// awaitRecovery waits until s holds an op that recovers from a fault
// restored at restored (see burst), at most wait, not after ctx or the
// timeline's load ends.
func (t *opTap) awaitRecovery(ctx context.Context, s *opSub, restored, wait time.Duration) {
	if t == nil {
		return
	}
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		t.mu.Lock()
		ok := slices.ContainsFunc(s.events, func(e opEvent) bool {
			b, bounded := s.bound[e.class]
			return !e.failed && e.start >= restored && (!bounded || e.end-e.start <= b)
		})
		t.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.ended:
			return
		case <-tick.C:
		}
	}
}
