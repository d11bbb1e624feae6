package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Executor runs one op. It must return soon after ctx is cancelled: the
// engine cancels ctx at the end of a run and waits for every call to return.
// An Executor is called from many goroutines at once.
type Executor func(ctx context.Context, op Op) error

// Result is the outcome of one op, handed to a Recorder.
type Result struct {
	Op Op
	// Intended is when the op should have started: run start + Op.At.
	// In a closed loop it equals Start.
	Intended time.Time
	// Start is when the executor was called; zero if it never was (the op
	// was dropped, or was still queued when the run ended).
	Start time.Time
	// End is when the executor returned, when the op was dropped, or, for
	// an incomplete op, when the run gave up on it.
	End time.Time
	// Err is the executor's error; ErrDropped for a dropped op; an error
	// wrapping ErrIncomplete and context.Canceled for an incomplete one.
	Err error
}

// Latency returns the response time End − Intended. Measured from the
// intended start, it includes any time the op spent waiting for the
// generator, a worker or a stalled system (coordinated-omission corrected).
func (r Result) Latency() time.Duration { return r.End.Sub(r.Intended) }

// Service returns the service time End − Start, or 0 if the op never started.
func (r Result) Service() time.Duration {
	if r.Start.IsZero() {
		return 0
	}
	return r.End.Sub(r.Start)
}

// Recorder receives every op's Result exactly once. Record is called from
// many goroutines at once and should return quickly: in an open loop, drops
// are recorded on the dispatching goroutine.
type Recorder interface {
	Record(Result)
}

// RecorderFunc adapts a function to Recorder.
type RecorderFunc func(Result)

// Record calls f(r).
func (f RecorderFunc) Record(r Result) { f(r) }

var _ Recorder = RecorderFunc(nil)

// errIncomplete is the Err of an op the run gave up on.
var errIncomplete = fmt.Errorf("run op: %w: %w", ErrIncomplete, context.Canceled)

// Open-loop defaults.
const (
	// DefaultMaxInFlight bounds the ops queued or running at once when
	// OpenLoopConfig.MaxInFlight is 0: 10,000, i.e. a 10 s stall at
	// 1,000 ops/s before arrivals are dropped.
	DefaultMaxInFlight = 10000
	// DefaultDrain is how long a run waits for in-flight ops after the
	// schedule ends when the config's Drain is 0.
	DefaultDrain = 10 * time.Second
	// DefaultPreciseWait is the PreciseWait a caller on the real clock
	// should set: 2 ms, twice the 1 ms to which the Go runtime rounds a
	// timer's sleep on Linux (its epoll wait takes whole milliseconds).
	DefaultPreciseWait = 2 * time.Millisecond
)

// OpenLoopConfig tunes RunOpenLoop. The zero value is usable.
type OpenLoopConfig struct {
	// Workers is the number of goroutines calling the executor; arrivals
	// wait for a free worker in a queue (their latency counts the wait).
	// 0 means a goroutine per op: an arrival never waits for one (a
	// goroutine that finished its op takes the next arrival, a new one is
	// started when none is free). Negative is invalid.
	Workers int
	// MaxInFlight bounds ops issued but not finished (queued or running).
	// An arrival that finds MaxInFlight ops in flight is dropped: recorded
	// with ErrDropped and counted, never queued. 0 means
	// DefaultMaxInFlight. Negative is invalid.
	MaxInFlight int
	// Drain is how long to wait for in-flight ops after the schedule ends
	// (after its Duration, or after the last op was issued if that is
	// later). Ops still in flight then are cancelled and recorded as
	// incomplete. 0 means DefaultDrain; negative means no wait.
	Drain time.Duration
	// Logger receives debug events and a warning at the first drop. nil
	// means silent.
	Logger *slog.Logger
	// PreciseWait is the last stretch before an op's intended start that
	// the dispatcher sleeps in the kernel (nanosleep, to within tens of
	// µs) instead of on a Go timer: an idle Go program's timers wake in
	// whole milliseconds on Linux (the runtime's epoll wait), so a timer
	// alone starts ops up to 1 ms late at any rate. The dispatcher's
	// thread is blocked for that stretch (its P handed to other
	// goroutines); ctx is checked when it ends. 0 means Go timers only,
	// as under testing/synctest, whose fake clock a kernel sleep would
	// not advance; DefaultPreciseWait is the value for the real clock.
	// Negative is invalid.
	PreciseWait time.Duration
}

// RunStats counts what happened to a schedule's ops.
// Issued + Dropped + Unissued == Scheduled and
// Completed + Incomplete == Issued.
type RunStats struct {
	// Start is the run start; op i was intended at Start + Ops[i].At.
	Start time.Time
	// End is when the last op finished or was given up on.
	End       time.Time
	Scheduled int64
	// Issued ops were handed to a worker or goroutine.
	Issued int64
	// Completed ops returned from the executor before the run ended.
	Completed int64
	// Errors counts completed ops whose executor returned an error.
	Errors int64
	// Dropped arrivals found MaxInFlight ops in flight.
	Dropped int64
	// Incomplete ops were queued or running when the run gave up on them.
	Incomplete int64
	// Unissued ops were never reached because ctx was cancelled.
	Unissued int64
	// MaxLag is the largest delay between an op's intended start and the
	// moment the generator issued it: how far the generator fell behind.
	MaxLag time.Duration
}

// flight states.
const (
	queued int32 = iota
	running
	reported
)

// flight is one issued op.
type flight struct {
	op       Op
	intended time.Time
	start    time.Time // written by the executing goroutine before state becomes running
	state    atomic.Int32
}

// openLoop is one run of RunOpenLoop. The dispatching goroutine owns
// flights, live and stats; executing goroutines touch only the atomics.
type openLoop struct {
	cfg   OpenLoopConfig
	log   *slog.Logger
	exec  Executor
	rec   Recorder
	ctx   context.Context // the ops' context, cancelled when the run gives up
	queue chan *flight    // nil with a goroutine per op
	// idle hands an op to a goroutine that finished its last one and waits
	// for the next (a goroutine per op only): the dispatcher starts a new
	// goroutine only when none waits, so an op costs no goroutine start
	// and no stack growth once the run has as many as it keeps busy.
	idle      chan *flight
	spawned   sync.WaitGroup // the goroutines that idle feeds
	inflight  atomic.Int64
	completed atomic.Int64
	errors    atomic.Int64
	wg        sync.WaitGroup

	flights []*flight // issued ops not yet known to be reported, compacted as they finish
	live    int       // len(flights) after the last compaction
	stats   RunStats
}

// RunOpenLoop issues each op of s at its intended start, run start + op.At,
// computed from the run start, never from the previous op. When the generator
// is late it issues at once without skipping or shifting later ops, and the
// latency shows the delay. Every op's Result goes to rec (nil discards them),
// including dropped and incomplete ops; see OpenLoopConfig.
//
// RunOpenLoop returns when every op has finished or been given up on and
// every executor call has returned. If ctx is cancelled it stops issuing,
// gives up on the ops in flight at once and returns an error wrapping
// ctx.Err() with the stats so far.
//
// Errors: ErrInvalid (wrapped) for a nil executor, a negative Workers or
// MaxInFlight, or ops not sorted by At; nothing runs then.
func RunOpenLoop(ctx context.Context, s Schedule, exec Executor, rec Recorder, cfg OpenLoopConfig) (RunStats, error) {
	if err := errors.Join(cfg.validate(exec), s.validate()); err != nil {
		return RunStats{}, fmt.Errorf("run open loop: %w", err)
	}
	return runOpenLoop(ctx, s.Source(), exec, rec, cfg)
}

// RunOpenLoopSource is RunOpenLoop over ops pulled from src as they come
// due: with a Stream, the schedule is drawn as it is consumed and memory
// stays flat however long the run. Scheduled and Unissued count the ops
// pulled (and, after a cancel, those left when src implements Sized).
//
// Errors: as RunOpenLoop, except that an op out of order (At before the
// previous op's, or negative) is found when it is pulled: the run stops
// issuing, finishes the ops in flight as at the end of a schedule, and
// returns the stats with an error wrapping ErrInvalid.
func RunOpenLoopSource(ctx context.Context, src Source, exec Executor, rec Recorder, cfg OpenLoopConfig) (RunStats, error) {
	err := cfg.validate(exec)
	if src == nil {
		err = errors.Join(err, fieldErr("Source", nil, "must not be nil"))
	}
	if err != nil {
		return RunStats{}, fmt.Errorf("run open loop: %w", err)
	}
	return runOpenLoop(ctx, src, exec, rec, cfg)
}

func runOpenLoop(ctx context.Context, src Source, exec Executor, rec Recorder, cfg OpenLoopConfig) (RunStats, error) {
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Drain == 0 {
		cfg.Drain = DefaultDrain
	}
	if rec == nil {
		rec = RecorderFunc(func(Result) {})
	}
	// The ops' context is cancelled by the run only, after the ops in
	// flight were recorded as incomplete, so that none of them is reported
	// as a completed op that failed with context.Canceled.
	opCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()
	e := &openLoop{cfg: cfg, log: orDiscard(cfg.Logger), exec: exec, rec: rec, ctx: opCtx}
	if cfg.Workers > 0 {
		e.queue = make(chan *flight, cfg.MaxInFlight)
		e.wg.Add(cfg.Workers)
		for range cfg.Workers {
			go e.worker()
		}
	} else {
		e.idle = make(chan *flight)
	}
	e.stats = RunStats{Start: time.Now()}
	e.log.Debug("open loop started", "duration", src.Duration(), "workers", cfg.Workers, "max_in_flight", cfg.MaxInFlight)

	cancelled, orderErr := e.dispatch(ctx, src)
	if e.queue != nil {
		close(e.queue)
	} else {
		close(e.idle) // the waiting goroutines return
	}
	defer e.spawned.Wait()
	finished := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(finished)
	}()
	if !cancelled {
		cancelled = e.drain(ctx, src.Duration(), finished)
	}
	e.stats.Incomplete = e.abandon(time.Now())
	cancelOps()
	<-finished

	st := e.stats
	st.End = time.Now()
	st.Completed = e.completed.Load()
	st.Errors = e.errors.Load()
	e.log.Debug("open loop finished", "issued", st.Issued, "completed", st.Completed, "errors", st.Errors,
		"dropped", st.Dropped, "incomplete", st.Incomplete, "unissued", st.Unissued, "max_lag", st.MaxLag)
	if cancelled {
		return st, fmt.Errorf("run open loop: %w", ctx.Err())
	}
	if orderErr != nil {
		return st, fmt.Errorf("run open loop: %w", orderErr)
	}
	return st, nil
}

// dispatch issues every op of src at its intended start and reports whether
// ctx was cancelled before the last one, or the op out of order that stopped
// it.
func (e *openLoop) dispatch(ctx context.Context, src Source) (cancelled bool, orderErr error) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	done := ctx.Done()
	// unissued counts the op in hand and, if src knows its length, the
	// ops it still holds.
	unissued := func() {
		e.stats.Unissued = 1
		if sz, ok := src.(Sized); ok {
			e.stats.Unissued = max(sz.Len()-e.stats.Scheduled+1, 1)
		}
		e.stats.Scheduled += e.stats.Unissued - 1
	}
	var prev time.Duration
	for {
		op, ok := src.Next()
		if !ok {
			return false, nil
		}
		if op.At < prev || op.At < 0 {
			return false, fieldErr(fmt.Sprintf("op %d At", e.stats.Scheduled), op.At, "ops must be sorted by At, none before 0 (previous op is at %v)", prev)
		}
		prev = op.At
		e.stats.Scheduled++
		intended := e.stats.Start.Add(op.At)
		// One clock read per op that is already due (at a high rate, most).
		now := time.Now()
		if wait := intended.Sub(now) - e.cfg.PreciseWait; wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-done:
				unissued()
				return true, nil
			}
			now = time.Now()
		}
		if e.cfg.PreciseWait > 0 {
			if wait := intended.Sub(now); wait > 0 {
				preciseSleep(wait)
				now = time.Now()
			}
		}
		select {
		case <-done:
			unissued()
			return true, nil
		default:
		}
		e.issue(op, intended, now)
	}
}

// issue hands op to a worker or a new goroutine, or drops it if MaxInFlight
// ops are in flight.
func (e *openLoop) issue(op Op, intended, now time.Time) {
	e.stats.MaxLag = max(e.stats.MaxLag, now.Sub(intended))
	if e.inflight.Load() >= int64(e.cfg.MaxInFlight) {
		if e.stats.Dropped == 0 {
			e.log.Warn("open loop dropping arrivals: too many ops in flight", "max_in_flight", e.cfg.MaxInFlight, "at", op.At)
		}
		e.stats.Dropped++
		e.rec.Record(Result{Op: op, Intended: intended, End: now, Err: ErrDropped})
		return
	}
	e.inflight.Add(1)
	e.stats.Issued++
	f := &flight{op: op, intended: intended}
	if len(e.flights) >= 2*e.live+1024 {
		e.flights = compact(e.flights)
		e.live = len(e.flights)
	}
	e.flights = append(e.flights, f)
	if e.queue != nil {
		e.queue <- f // never blocks: capacity MaxInFlight ≥ ops in flight
		return
	}
	e.wg.Add(1)
	select {
	case e.idle <- f: // a goroutine waiting for work took it
	default:
		e.spawned.Add(1)
		go e.reuse(f)
	}
}

// reuse executes f, then each op handed to it on idle until idle is closed.
func (e *openLoop) reuse(f *flight) {
	defer e.spawned.Done()
	for {
		e.execute(f)
		e.wg.Done()
		var ok bool
		if f, ok = <-e.idle; !ok {
			return
		}
	}
}

// drain waits for the ops in flight until the schedule's end (or the last
// issue, if later) plus Drain, and reports whether ctx was cancelled first.
func (e *openLoop) drain(ctx context.Context, d time.Duration, finished <-chan struct{}) (cancelled bool) {
	deadline := e.stats.Start.Add(d)
	if now := time.Now(); now.After(deadline) {
		deadline = now // the generator was late: drain from the last issue
	}
	if e.cfg.Drain > 0 {
		deadline = deadline.Add(e.cfg.Drain)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
	case <-ctx.Done():
		return true
	}
	return false
}

func (cfg OpenLoopConfig) validate(exec Executor) error {
	var errs []error
	if exec == nil {
		errs = append(errs, fieldErr("Executor", nil, "must not be nil"))
	}
	if cfg.Workers < 0 {
		errs = append(errs, fieldErr("Workers", cfg.Workers, "must be ≥ 0 (0 means a goroutine per op)"))
	}
	if cfg.MaxInFlight < 0 {
		errs = append(errs, fieldErr("MaxInFlight", cfg.MaxInFlight, "must be ≥ 0 (0 means %d)", DefaultMaxInFlight))
	}
	if cfg.PreciseWait < 0 {
		errs = append(errs, fieldErr("PreciseWait", cfg.PreciseWait, "must be ≥ 0 (0 means Go timers only)"))
	}
	return errors.Join(errs...)
}

// worker executes queued ops until the queue is closed and empty.
func (e *openLoop) worker() {
	defer e.wg.Done()
	for f := range e.queue {
		e.execute(f)
	}
}

// execute runs f unless the run already gave up on it, and records the
// result unless the run gave up on it while it ran.
func (e *openLoop) execute(f *flight) {
	defer e.inflight.Add(-1)
	f.start = time.Now()
	if !f.state.CompareAndSwap(queued, running) {
		return // reported incomplete while queued
	}
	err := e.exec(e.ctx, f.op)
	end := time.Now()
	if !f.state.CompareAndSwap(running, reported) {
		return // reported incomplete when the run ended
	}
	e.completed.Add(1)
	if err != nil {
		e.errors.Add(1)
	}
	e.rec.Record(Result{Op: f.op, Intended: f.intended, Start: f.start, End: end, Err: err})
}

// abandon records every flight not yet reported as incomplete at time at and
// returns how many there were. It runs before the ops' context is cancelled,
// so an op that finishes in the meantime is reported as completed, not as
// cancelled.
func (e *openLoop) abandon(at time.Time) int64 {
	var n int64
	for _, f := range e.flights {
		for {
			s := f.state.Load()
			if s == reported {
				break
			}
			if f.state.CompareAndSwap(s, reported) {
				r := Result{Op: f.op, Intended: f.intended, End: at, Err: errIncomplete}
				if s == running {
					r.Start = f.start
					if r.Start.After(at) {
						r.End = r.Start // started while the run was giving up
					}
				}
				e.rec.Record(r)
				n++
				break
			}
		}
	}
	return n
}

// compact drops reported flights, keeping order.
func compact(flights []*flight) []*flight {
	out := flights[:0]
	for _, f := range flights {
		if f.state.Load() != reported {
			out = append(out, f)
		}
	}
	clear(flights[len(out):])
	return out
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
