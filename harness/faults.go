package harness

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// faultInjector is the optional cluster method scenario faults need; the
// container backend's clusters have it.
type faultInjector interface {
	Inject(ctx context.Context, node string, f container.Fault) (container.Restore, error)
}

var _ faultInjector = (*container.Cluster)(nil)

// restoreTimeout bounds a fault's restore, which runs even when the run is
// cancelled.
const restoreTimeout = 90 * time.Second

// opEvent is one finished op of a phase with faults, times from the phase
// start.
type opEvent struct {
	start, end time.Duration
	tenant     int
	class      string
	failed     bool
}

// faultTimes is what happened to one fault: when it was injected and
// restored (from the phase start) and any failure to do either.
type faultTimes struct {
	injected, restored time.Duration
	// restoring is when the restore began (0: not recorded, restored
	// stands for it): the ops a fault held are let go during the restore,
	// and on a busy machine may be answered before it returns.
	restoring time.Duration
	err       error
}

// restoreBegan is when the restore of ft began.
func (ft faultTimes) restoreBegan() time.Duration {
	if ft.restoring > 0 {
		return ft.restoring
	}
	return ft.restored
}

// faultRun injects one configuration's faults, each from the start of its
// timeline phase, and watches every op's outcome to measure their effect.
type faultRun struct {
	inj    faultInjector
	faults []scenario.Fault
	phases []string // the phase each fault counts from
	ctx    context.Context
	wg     sync.WaitGroup

	key     func(int) string // a tenant's key, for the report
	mu      sync.Mutex
	origin  time.Time                // the first armed phase's start: events and times count from it
	offsets map[string]time.Duration // each armed phase's start from origin
	events  []opEvent
	times   []faultTimes
}

// startFaults returns the fault run of configuration c, or nil when no
// fault applies to it. Its faults begin when their phases are armed.
func (r *runner) startFaults(ctx context.Context, c *scenario.Configuration) (*faultRun, error) {
	var fs []scenario.Fault
	var phases []string
	for _, f := range r.sc.Faults {
		if f.Applies(c.Name) {
			fs = append(fs, f)
			phases = append(phases, r.sc.FaultPhase(f))
		}
	}
	if len(fs) == 0 {
		return nil, nil
	}
	inj, ok := r.cluster.(faultInjector)
	if !ok {
		return nil, fmt.Errorf("%w: faults need a cluster of backend kind docker; this one cannot stop, pause or disconnect nodes: %w", ErrRun, scenario.ErrInvalid)
	}
	return &faultRun{inj: inj, faults: fs, phases: phases, ctx: ctx, times: make([]faultTimes, len(fs)), key: r.key,
		offsets: map[string]time.Duration{}}, nil
}

// arm marks the start of phase (now) and schedules the faults that count
// from it. Ops are watched from the first armed phase on.
func (fr *faultRun) arm(phase string) {
	now := time.Now()
	fr.mu.Lock()
	if fr.origin.IsZero() {
		fr.origin = now
	}
	fr.offsets[phase] = now.Sub(fr.origin)
	fr.mu.Unlock()
	for i, f := range fr.faults {
		if fr.phases[i] == phase {
			fr.wg.Add(1)
			go fr.inject(i, f, now)
		}
	}
}

// armed returns the origin, zero before the first arm.
func (fr *faultRun) armed() time.Time {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.origin
}

// observe returns exec observed: the start, end and failure of every op
// started once a phase with faults has begun are kept.
func (fr *faultRun) observe(exec workload.Executor) workload.Executor {
	return func(ctx context.Context, op workload.Op) error {
		origin := fr.armed()
		if origin.IsZero() {
			return exec(ctx, op)
		}
		s := time.Since(origin)
		err := exec(ctx, op)
		ev := opEvent{start: s, end: time.Since(origin), tenant: op.Tenant, class: op.Class}
		if err != nil {
			// Limiter rejections are the isolation stack at work, not the
			// fault.
			switch errorClass(err) {
			case string(scenario.ErrorQueueFull), string(scenario.ErrorWaitExceeded):
			default:
				ev.failed = true
			}
		}
		fr.mu.Lock()
		fr.events = append(fr.events, ev)
		fr.mu.Unlock()
		return err
	}
}

// inject applies fault i at its time from its phase's start, holds it for
// its duration and restores it, whatever happens to the run meanwhile.
// Its times count from the origin.
func (fr *faultRun) inject(i int, f scenario.Fault, phaseStart time.Time) {
	defer fr.wg.Done()
	origin := fr.armed()
	ft := &faultTimes{}
	defer func() {
		fr.mu.Lock()
		fr.times[i] = *ft
		fr.mu.Unlock()
	}()
	if !sleepUntil(fr.ctx, phaseStart.Add(f.At.Duration())) {
		ft.err = fr.ctx.Err()
		return
	}
	restore, err := fr.inj.Inject(fr.ctx, f.Node, container.Fault(f.Action))
	ft.injected = time.Since(origin)
	ft.restored = ft.injected
	if err != nil {
		ft.err = err
		return
	}
	sleepUntil(fr.ctx, origin.Add(ft.injected+f.For.Duration()))
	rctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	ft.restoring = time.Since(origin)
	ft.err = restore(rctx)
	ft.restored = time.Since(origin)
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// finish waits until every fault is restored and returns what each did.
// A nil faultRun has none.
func (fr *faultRun) finish() []reports.Fault {
	if fr == nil {
		return nil
	}
	fr.wg.Wait()
	fr.mu.Lock()
	defer fr.mu.Unlock()
	out := make([]reports.Fault, len(fr.faults))
	for i, f := range fr.faults {
		out[i] = burst(f, fr.times[i], fr.events)
		for j := range out[i].Tenants {
			if id, err := strconv.Atoi(out[i].Tenants[j].Tenant); err == nil && fr.key != nil {
				out[i].Tenants[j].Tenant = fr.key(id)
			}
		}
		// Times from the fault's own phase start, as its at.
		off := fr.offsets[fr.phases[i]].Seconds()
		out[i].Phase = fr.phases[i]
		if fr.times[i].injected > 0 || fr.times[i].restored > 0 {
			out[i].At -= off
			out[i].Restored -= off
		}
	}
	return out
}

// recoverFactor bounds the latency of the op that marks a fault's recovery:
// within recoverFactor × its class's median latency before the fault.
const recoverFactor = 2

// burst measures one fault over the phase's ops (see reports.Fault for the
// definitions). The window is [injected, restored]. An op is hit when it
// was in flight or issued during the window; it is stalled when it also
// ended after the restore began, held across it, and was slower than the
// recovery bound of its class (longer than the window when the class has
// none): a count of the ops the fault held, not only of those in flight at
// the injection. Recovery
// is the end of the first op issued after the restore that succeeded within
// recoverFactor × its class's median latency before the injection (any
// success when the class finished no op before it). Errors are the failed
// ops that ended from the injection until recovery (or the phase end).
func burst(f scenario.Fault, ft faultTimes, events []opEvent) reports.Fault {
	return burstBounded(f, ft, events, recoveryBounds(events, ft.injected))
}

// burstBounded is burst with the recovery bounds given, per class (a class
// without one has none).
func burstBounded(f scenario.Fault, ft faultTimes, events []opEvent, bound map[string]time.Duration) reports.Fault {
	rf := reports.Fault{Node: f.Node, Action: string(f.Action), At: ft.injected.Seconds(), Restored: ft.restored.Seconds()}
	if ft.err != nil {
		rf.Error = ft.err.Error()
	}
	window := ft.restored - ft.injected
	end := time.Duration(1<<63 - 1)
	for _, e := range events {
		if e.failed || e.start < ft.restored || e.end >= end {
			continue
		}
		if b, ok := bound[e.class]; ok && e.end-e.start > b {
			continue
		}
		end = e.end
		rf.Recovered = rf.Error == ""
	}
	if rf.Recovered {
		rf.TimeToRecover = msOf(end - ft.restored)
	}
	byTenant := map[int]*reports.FaultTenant{}
	tenant := func(id int) *reports.FaultTenant {
		t := byTenant[id]
		if t == nil {
			t = &reports.FaultTenant{Tenant: strconv.Itoa(id)}
			byTenant[id] = t
		}
		return t
	}
	for _, e := range events {
		lat := e.end - e.start
		if e.start < ft.restored && e.end > ft.injected {
			// Hit: in flight or issued during the window.
			rf.WorstLatency = max(rf.WorstLatency, msOf(lat))
			limit := window
			if b, ok := bound[e.class]; ok {
				limit = b
			}
			if e.end > ft.restoreBegan() && lat > limit {
				t := tenant(e.tenant)
				t.Stalled++
				rf.Stalled++
			}
		}
		if e.failed && e.end >= ft.injected && e.end <= end {
			t := tenant(e.tenant)
			if t.ByClass == nil {
				t.ByClass = map[string]int64{}
			}
			t.Errors++
			t.ByClass[e.class]++
			rf.Errors++
		}
	}
	for _, e := range events {
		if t := byTenant[e.tenant]; t != nil && e.start < ft.restored && e.end > ft.injected {
			t.WorstLatency = max(t.WorstLatency, msOf(e.end-e.start))
		}
	}
	ids := slices.Sorted(maps.Keys(byTenant))
	for _, id := range ids {
		rf.Tenants = append(rf.Tenants, *byTenant[id])
	}
	return rf
}

// recoveryBounds returns, per class, recoverFactor × the median latency
// of the class's successful ops that ended before before (the lower middle
// one for an even count). Classes without such an op have no bound.
func recoveryBounds(events []opEvent, before time.Duration) map[string]time.Duration {
	lats := map[string][]time.Duration{}
	for _, e := range events {
		if !e.failed && e.end < before {
			lats[e.class] = append(lats[e.class], e.end-e.start)
		}
	}
	bound := make(map[string]time.Duration, len(lats))
	for class, ls := range lats {
		slices.Sort(ls)
		bound[class] = recoverFactor * ls[(len(ls)-1)/2]
	}
	return bound
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// dockerBackend is the container backend with sc's images.
func dockerBackend(sc *scenario.Scenario, log *slog.Logger) *container.Backend {
	opts := []container.Option{container.WithLogger(log)}
	if sc.Backend.Image != "" {
		opts = append(opts, container.WithImages(sc.Backend.Image))
	}
	for r, img := range sc.Backend.Images {
		opts = append(opts, container.WithImage(r, img))
	}
	return container.New(opts...)
}
