package harness

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// step is one phase of the timeline as the run loop sees it: where it
// starts and ends from the timeline's start, and the classes it sends.
type step struct {
	scenario.Phase
	start, end time.Duration
	// specs are the scenario's classes at the phase's rates (factor 0
	// leaves the class out).
	specs []workload.ClassSpec
}

// preciseWait is the open loop's PreciseWait in a run: the last stretch
// before each intended start is slept in the kernel, not on a Go timer
// (BenchmarkReplayFidelity measures it).
const preciseWait = workload.DefaultPreciseWait

// buildTimeline lays out the phases one after the other, each with the
// scenario's classes at its rate factors.
func buildTimeline(specs []workload.ClassSpec, phases []scenario.Phase) []step {
	var steps []step
	var at time.Duration
	for _, p := range phases {
		st := step{Phase: p, start: at, end: at + p.Span().Duration()}
		for _, c := range specs {
			if f := p.Rate(c.Name); f > 0 {
				c.Rate *= f
				st.specs = append(st.specs, c)
			}
		}
		steps = append(steps, st)
		at = st.end
	}
	return steps
}

// timelineSource is the open loop's arrivals over the whole timeline, drawn
// as they are consumed: each phase's arrivals come from a workload.Stream
// drawn with the scenario's seed over the phase's own span, at its rate
// factors, kept for its senders and shifted to the phase's start. A phase
// of the same classes and senders as another has the same arrivals, so the
// quiet tenants of the default timeline send in "run" exactly what they
// sent in "solo" over its length. Seq numbers the ops over the timeline.
type timelineSource struct {
	steps   []step
	streams []*workload.Stream // nil for a phase that sends nothing
	cur     int
	seq     int64
	// clock, when set, gives the phases' actual starts and ends: a phase
	// with until ends when the clock says, and the arrivals of the phases
	// after it move with it. Without a clock the steps' planned spans hold.
	clock *phaseClock
	// sent counts the arrivals returned per phase.
	sent []int64
}

var (
	_ workload.Source = (*timelineSource)(nil)
	_ workload.Sized  = (*timelineSource)(nil)
)

// newTimelineSource returns the timeline's arrivals from its start, only
// seg's slice of each phase's (workload.Segment; zero: all). A phase with
// until draws its arrivals over its max.
func newTimelineSource(pop workload.Population, steps []step, seed int64, seg workload.Segment) (*timelineSource, error) {
	ts := &timelineSource{steps: steps, streams: make([]*workload.Stream, len(steps)), sent: make([]int64, len(steps))}
	for i, st := range steps {
		if len(st.specs) == 0 {
			continue
		}
		senders := st.Senders
		s, err := workload.NewStream(pop, st.specs, st.Span().Duration(), seed,
			func(op workload.Op) bool { return senders.Sends(op.Tenant) })
		if err == nil && !seg.Whole() {
			s, err = s.Slice(seg)
		}
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", st.Name, err)
		}
		ts.streams[i] = s
	}
	return ts, nil
}

// Next returns the next arrival of the timeline. With a clock, it waits
// for the start of a phase that follows one with until, and drops the
// arrivals of a phase with until from the moment it ended.
func (ts *timelineSource) Next() (workload.Op, bool) {
	for ; ts.cur < len(ts.streams); ts.cur++ {
		s := ts.streams[ts.cur]
		if s == nil {
			continue
		}
		start := ts.steps[ts.cur].start
		if ts.clock != nil {
			var ok bool
			if start, ok = ts.clock.startOf(ts.cur); !ok {
				return workload.Op{}, false
			}
		}
		if op, ok := s.Next(); ok {
			op.At += start
			if ts.clock != nil && ts.steps[ts.cur].Until != "" && ts.clock.endedBy(ts.cur, op.At) {
				continue // the phase ended before this arrival: the next phase's turn
			}
			op.Seq = ts.seq
			ts.seq++
			ts.sent[ts.cur]++
			return op, true
		}
	}
	if ts.clock != nil {
		// The run lasts until the last phase ended.
		ts.clock.startOf(len(ts.steps))
	}
	return workload.Op{}, false
}

// Duration is the timeline's length: planned, or as the clock ended it.
func (ts *timelineSource) Duration() time.Duration {
	if len(ts.steps) == 0 {
		return 0
	}
	if ts.clock != nil {
		if end, ok := ts.clock.knownStart(len(ts.steps)); ok {
			return end
		}
	}
	return ts.steps[len(ts.steps)-1].end
}

// Len is the number of arrivals over the timeline.
func (ts *timelineSource) Len() int64 {
	var n int64
	for _, l := range ts.phaseLens() {
		n += l
	}
	return n
}

// phaseLens returns the number of arrivals of each phase.
func (ts *timelineSource) phaseLens() []int64 {
	out := make([]int64, len(ts.streams))
	for i, s := range ts.streams {
		if s != nil {
			out[i] = s.Len()
		}
	}
	return out
}

// Hash identifies the timeline's arrivals: each phase's start and its
// stream's hash (workload.Stream.Hash, which equals
// workload.Schedule.Hash of the same draw).
func (ts *timelineSource) Hash() string {
	h := sha256.New()
	io.WriteString(h, "noisysim timeline v1\x00")
	for i, s := range ts.streams {
		fmt.Fprintf(h, "%s\x00%d\x00", ts.steps[i].Name, ts.steps[i].start)
		if s != nil {
			io.WriteString(h, s.Hash())
		}
		io.WriteString(h, "\x00")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// window is what one phase of one configuration's timeline measured.
type window struct {
	step  *step
	rec   *metrics.Recorder
	usage []pools.Usage // the ledger at the phase's start
	// layout is the Citus placements at the phase's start (topology
	// citus; nil otherwise or when they could not be read).
	layout *citusLayout
	// start and end are the phase's span as it ran, from the timeline's
	// start (a phase with until ends when its actions did); sent is the
	// arrivals it sent (open loop).
	start, end time.Duration
	sent       int64
	// cut marks the phase an interruption stopped: end is when it stopped.
	cut bool
}

// cutShort ends the windows of a timeline stopped at stopped (from its
// start): the phase it stopped in ends there and is marked cut, the phases
// after it keep their planned spans (they were not reached). It returns the
// index of the last phase reached, -1 when none was.
func cutShort(windows []*window, stopped time.Duration) int {
	reached := -1
	for i, w := range windows {
		if w.start >= stopped {
			break
		}
		reached = i
		if w.end > stopped {
			w.end, w.cut = stopped, true
		}
	}
	return reached
}

// timelineRun is one configuration's run of the timeline.
type timelineRun struct {
	windows []*window
	stats   workload.RunStats
	// usageEnd is the ledger after the last phase; limits the limiters'
	// counters at the timeline's start and end.
	usageEnd               []pools.Usage
	limitsBefore, limitsAt map[string]limiter.TenantStat
	ex                     *executor
	faults                 *faultRun
	series                 []reports.Point
	// layouts are the Citus layouts each point of series was sampled
	// with (topology citus), for respread.
	layouts []*citusLayout
	actions []reports.ActionResult
	// origin is the wall-clock time of the timeline's start: the windows'
	// spans and the intervals' ticks count from it.
	origin time.Time
	// stopped is when, from origin, an interrupted open loop stopped; 0
	// when it ran to its end.
	stopped time.Duration
}

// window returns the window of the phase named name.
func (tr *timelineRun) window(name string) (*window, bool) {
	for _, w := range tr.windows {
		if w.step.Name == name {
			return w, true
		}
	}
	return nil, false
}

// measured returns the measured windows in timeline order.
func (tr *timelineRun) measured() []*window {
	var out []*window
	for _, w := range tr.windows {
		if w.step.Measure {
			out = append(out, w)
		}
	}
	return out
}

// shares returns the ledger's DB time per tenant over window i.
func (tr *timelineRun) shares(i int) map[string]*pools.Window {
	end := tr.usageEnd
	if i+1 < len(tr.windows) {
		end = tr.windows[i+1].usage
	}
	return pools.UsageWindow(tr.windows[i].usage, end)
}

// runTimeline runs every phase of the timeline through st, in order, with
// one load engine: the open loop over the whole timeline's schedule (the
// closed loop phase by phase), each result recorded in the window of the
// phase it was intended in. At each phase's start the ledger is read, the
// faults counting from it are armed, its actions start and its watcher
// begins (stopped when the phase ends). A phase with until ends when its
// actions and watcher have (at the latest after its max): the phase clock
// moves the later phases' arrivals with it. The checked writer w, when
// not nil, writes from the timeline's start until runTimeline returns.
func (r *runner) runTimeline(ctx context.Context, c *scenario.Configuration, st *stack, faults *faultRun, w *checkedWriter) (*timelineRun, error) {
	tr := &timelineRun{ex: &executor{r: r, stack: st}, faults: faults}
	for i := range r.steps {
		rec, err := metrics.New(r.windowMetrics())
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRun, err)
		}
		tr.windows = append(tr.windows, &window{step: &r.steps[i], rec: rec})
	}
	exec := tr.ex.do
	if faults != nil {
		exec = faults.observe(exec)
	}
	tr.limitsBefore = st.limiterStat()
	drain := max(r.sc.Phases.Drain.Duration(), time.Millisecond)
	ring := newLedgerRing(st.Ledger().Usage)
	env := r.actionEnv(st)
	env.DBTime = ring.dbTime
	if r.faultActions() {
		env.ops = newOpTap()
		exec = env.ops.observe(exec)
	}
	acts := &actionRun{env: env, t0: time.Now()}
	acts.env.Record = func(res reports.ActionResult) {
		if res.At == 0 {
			res.At = time.Since(acts.t0).Seconds()
		}
		acts.keep(res)
	}
	var current atomic.Int32 // the phase running, for the series
	if r.citus != nil {
		stopFollow := r.followLayout(ctx)
		defer stopFollow()
	}
	stopSeries := r.sampleSeries(c.Name, st, tr, &current, ring, w)
	defer stopSeries()
	var layouts sync.WaitGroup // the Citus layout reads (topology citus)
	defer layouts.Wait()
	// over[i] is closed when phase i's time is over: its watcher stops.
	over := make([]chan struct{}, len(r.steps))
	for i := range over {
		over[i] = make(chan struct{})
	}
	// begin marks phase i's start: progress, the ledger, faults, actions
	// and the watcher.
	begin := func(i int) {
		current.Store(int32(i))
		w := tr.windows[i]
		w.usage = st.Ledger().Usage()
		r.setPhase(w.step.Name, c.Name, w.step.Span().Duration())
		if faults != nil && slices.Contains(faults.phases, w.step.Name) {
			faults.arm(w.step.Name)
		}
		if r.citus != nil {
			// Read beside the phase: a slow coordinator must not hold up
			// the phase's actions. Read once the timeline has ended.
			layouts.Go(func() {
				w.layout = r.snapshotLayout(ctx, w.step.Name)
				if w.layout != nil && w.step.Name == r.sc.NoiseStart() {
					dom := r.key(scenario.DominantTenant)
					hot := w.layout.Placements[w.layout.shardOf[dom]]
					r.citus.hotQuiet = w.layout.tenantsOn(hot, dom, r.citus.tenants)
					r.citus.hotWorker = r.citus.names.Name(hot)
				}
			})
		}
		acts.start(ctx, w.step)
		acts.watch(ctx, w.step, over[i])
	}
	var err error
	if r.sc.Load.Model == scenario.ModelClosed {
		tr.origin = time.Now()
		if w != nil {
			w.start(ctx, tr.origin)
		}
		for i, w := range tr.windows {
			begin(i)
			w.start, w.end = w.step.start, w.step.end
			if len(w.step.specs) == 0 {
				if !sleepUntil(ctx, time.Now().Add(w.step.Length.Duration())) {
					err = ctx.Err()
				}
			} else {
				var cs workload.RunStats
				cs, err = r.closedLoop(ctx, w.step, drain, exec, r.observed(c.Name, shifted(w.rec, w.step.start)))
				tr.stats = addStats(tr.stats, cs)
			}
			close(over[i])
			if err != nil {
				break
			}
		}
	} else {
		lctx, stopClock := context.WithCancel(ctx)
		t0 := time.Now()
		tr.origin = t0
		clk := newPhaseClock(lctx, r.steps, t0)
		if w != nil {
			w.start(ctx, t0)
		}
		rec := r.observed(c.Name, workload.RecorderFunc(func(res workload.Result) {
			if p, ok := res.Op.Payload.(*recorded); ok && p.turn != nil && errors.Is(res.Err, workload.ErrDropped) {
				p.turn.finish() // a dropped statement never runs: the session goes on
			}
			tr.windows[clk.stepAt(res.Op.At)].rec.Record(res)
		}))
		marks := make(chan struct{})
		go func() {
			defer close(marks)
			// The load ends with the last phase, before the drain: a
			// fault action's hold still running ends with it.
			defer env.ops.end()
			for i, s := range r.steps {
				start, ok := clk.startOf(i)
				if !ok || (i > 0 && !sleepUntilOr(lctx.Done(), t0.Add(start))) {
					return
				}
				begin(i)
				if s.Until == "" {
					if !sleepUntilOr(lctx.Done(), t0.Add(start+s.Length.Duration())) {
						return
					}
				} else {
					// The phase ends when its actions and watcher have,
					// at the latest after max.
					timer := time.NewTimer(time.Until(t0.Add(start + s.Max.Duration())))
					select {
					case <-acts.done(s.Name):
						clk.end(i, time.Since(t0))
					case <-timer.C:
						clk.end(i, start+s.Max.Duration())
						r.note("%s: phase %s reached its max (%s) before its actions ended", c.Name, s.Name, s.Max)
					case <-lctx.Done():
					}
					timer.Stop()
				}
				close(over[i])
			}
		}()
		// The first phase begins before its first arrival. The arrivals
		// are the generated schedule's, or a replayed trace's.
		var (
			src  workload.Source
			sent []int64
			rs   *replaySource
		)
		if r.replay != nil {
			if rs, err = r.newReplaySource(); err == nil {
				defer rs.Close()
				src, sent = rs, rs.sent
			}
		} else {
			var ts *timelineSource
			if ts, err = newTimelineSource(r.pop, r.steps, r.sc.Seed, r.opts.Segment); err == nil {
				ts.clock = clk
				src, sent = ts, ts.sent
			}
		}
		if err == nil {
			if r.trace != nil {
				src = r.trace.wrap(c.Name, src)
				rec = r.trace.results(c.Name, rec)
			}
			tr.stats, err = workload.RunOpenLoopSource(ctx, src, exec, rec, workload.OpenLoopConfig{Drain: drain, Logger: r.log, PreciseWait: preciseWait})
			if ctx.Err() != nil {
				tr.stopped = time.Since(t0)
			}
			tr.ex.endTxs() // a replayed log's transaction blocks left open
		}
		if rs != nil && err == nil {
			if rerr := rs.tr.counts().err; rerr != nil {
				err = fmt.Errorf("replay: %w", rerr)
			}
		}
		if r.trace != nil && err == nil {
			err = r.trace.flush()
		}
		stopClock()
		<-marks
		for i, w := range tr.windows {
			w.start, w.end = clk.span(i)
			if sent != nil {
				w.sent = sent[i]
			}
		}
		if tr.stopped > 0 {
			cutShort(tr.windows, tr.stopped)
		}
	}
	for _, ch := range over {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	env.ops.end() // a fault action restored after the load watches for no recovery
	tr.actions = acts.finish()
	layouts.Wait()
	stopSeries()
	if st.spread != nil {
		// Every call has ended: each point's load from the DB time of
		// the calls that ran in it, not of those that ended in it.
		respread(tr.series, tr.layouts, st.poolKeys(), st.spread)
	}
	tr.usageEnd = st.Ledger().Usage()
	tr.limitsAt = st.limiterStat()
	for _, w := range tr.windows {
		if w.usage == nil {
			w.usage = tr.usageEnd // a phase the run did not reach
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return tr, fmt.Errorf("%w: timeline of %s: %w", ErrRun, c.Name, err)
	}
	return tr, nil
}

// seriesEvery is the step of a configuration's series.
const seriesEvery = time.Second

// sampleSeries adds a point to tr.series every seriesEvery until the
// returned func is called (once or more): the requests issued, the ledger's
// top tenants, the limiters and the checked writer's answers (w, when
// not nil) over the last step. Each ledger reading goes to ring too. The
// pools' and workers' loads are what st.spread holds when the point is
// taken (a call still running is not in it yet); respread completes them
// once the run is over.
func (r *runner) sampleSeries(config string, st *stack, tr *timelineRun, current *atomic.Int32, ring *ledgerRing, w *checkedWriter) (stop func()) {
	t0 := time.Now()
	if st.spread != nil {
		st.spread.start(t0)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(seriesEvery)
		defer tick.Stop()
		lastCalls, lastUsage, lastRejected := tr.ex.calls.Load(), st.Ledger().Usage(), map[pools.Class]limiter.TenantStat{}
		for class, l := range st.limiters {
			lastRejected[class] = l.Stat().Total
		}
		var lastAcked, lastFailed int64
		var lastDBTime []time.Duration // per pool, in st.Stat().Pools order (fixed for the stack's life)
		var lastOpened []int64
		for _, ps := range st.Stat().Pools {
			lastDBTime = append(lastDBTime, ps.DBTime)
			lastOpened = append(lastOpened, ps.NewConns)
		}
		last := t0
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				calls, usage := tr.ex.calls.Load(), st.Ledger().Usage()
				ring.add(now, usage)
				pt := reports.Point{Window: r.steps[current.Load()].Name, At: now.Sub(t0).Seconds(),
					Rate:      float64(calls-lastCalls) / now.Sub(last).Seconds(),
					TopDBTime: topShares(pools.UsageWindow(lastUsage, usage), seriesTopTenants)}
				for _, class := range slices.Sorted(maps.Keys(st.limiters)) {
					ls, was := st.limiters[class].Stat().Total, lastRejected[class]
					lp := reports.LimiterPoint{Class: string(class), InFlight: int64(ls.InFlight),
						Queued: int64(ls.Queued), Rejected: ls.Rejected() - was.Rejected()}
					for reason, n := range map[limiter.Reason]int64{
						limiter.ReasonQueueFull:    ls.RejectedQueueFull - was.RejectedQueueFull,
						limiter.ReasonWaitExceeded: ls.RejectedWaitExceeded - was.RejectedWaitExceeded,
					} {
						if n > 0 {
							if lp.RejectedByReason == nil {
								lp.RejectedByReason = map[string]int64{}
							}
							lp.RejectedByReason[string(reason)] = n
						}
					}
					pt.Limiters = append(pt.Limiters, lp)
					lastRejected[class] = ls
				}
				for i, ps := range st.Stat().Pools {
					pt.Pools = append(pt.Pools, reports.PoolPoint{Name: ps.Name, Node: cmp.Or(ps.Node, ps.Addr), Standby: ps.Standby,
						Borrowed: int64(ps.AcquiredConns), Max: int64(ps.MaxConns)})
					if i < len(lastDBTime) {
						pt.Pools[i].Busy = (ps.DBTime - lastDBTime[i]).Seconds() / now.Sub(last).Seconds()
						lastDBTime[i] = ps.DBTime
					}
					if i < len(lastOpened) {
						pt.Pools[i].Opened = ps.NewConns - lastOpened[i]
						lastOpened[i] = ps.NewConns
					}
				}
				if r.citus != nil {
					l := r.citus.latest.Load()
					if l != nil && st.spread != nil {
						pt.Workers = l.workerPoints(st.spread.over(last.Sub(t0).Seconds(), pt.At).tenants, now.Sub(last).Seconds())
					}
					tr.layouts = append(tr.layouts, l)
				}
				if w != nil {
					acked, failed := w.answered()
					pt.Writer = &reports.WriterPoint{Acked: acked - lastAcked, Errors: failed - lastFailed}
					lastAcked, lastFailed = acked, failed
				}
				tr.series = append(tr.series, pt)
				if o := r.opts.Observer; o != nil {
					o.Point(config, pt)
				}
				lastCalls, lastUsage, last = calls, usage, now
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// sleepUntilOr waits until t; false if done was closed first.
func sleepUntilOr(done <-chan struct{}, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-done:
		return false
	case <-timer.C:
		return true
	}
}

// shifted records results with their intended start moved by d, so that a
// phase run on its own keeps timeline times.
func shifted(rec workload.Recorder, d time.Duration) workload.Recorder {
	return workload.RecorderFunc(func(res workload.Result) {
		res.Op.At += d
		rec.Record(res)
	})
}

func addStats(a, b workload.RunStats) workload.RunStats {
	if a.Start.IsZero() {
		a.Start = b.Start
	}
	a.End = b.End
	a.Scheduled += b.Scheduled
	a.Issued += b.Issued
	a.Completed += b.Completed
	a.Errors += b.Errors
	a.Dropped += b.Dropped
	a.Incomplete += b.Incomplete
	a.Unissued += b.Unissued
	a.MaxLag = max(a.MaxLag, b.MaxLag)
	return a
}

// closedLoop runs one phase with simulated users instead of a schedule:
// the users of the tenants that send in the phase (each keeps about as
// many users as in the whole population), picking among the phase's
// classes.
func (r *runner) closedLoop(ctx context.Context, s *step, drain time.Duration, exec workload.Executor, rec workload.Recorder) (workload.RunStats, error) {
	l := r.sc.Load
	pop := workload.Population{Config: r.pop.Config, Seed: r.pop.Seed}
	kept := 0.0
	for _, t := range r.pop.Tenants {
		if s.Senders.Sends(t.ID) {
			kept += t.Share
		}
	}
	for _, t := range r.pop.Tenants {
		if s.Senders.Sends(t.ID) {
			t.Share /= kept
			pop.Tenants = append(pop.Tenants, t)
		}
	}
	users := max(1, int(math.Round(float64(l.Users)*kept)))
	cs, err := workload.RunClosedLoop(ctx, workload.ClosedLoopConfig{
		Users: users, ThinkTime: l.ThinkTime.Duration(), RetryQueries: l.RetryQueries, MaxRetries: l.MaxRetries,
		Duration: s.Length.Duration(), Drain: drain, Logger: r.log,
	}, pop, s.specs, exec, rec, r.sc.Seed)
	return workload.RunStats{
		Start: cs.Start, End: cs.End, Scheduled: cs.Queries, Issued: cs.Queries,
		Completed: cs.Queries - cs.Incomplete, Errors: cs.Errors, Incomplete: cs.Incomplete,
	}, err
}
