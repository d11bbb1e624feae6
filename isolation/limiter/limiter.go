package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noisysim/noisysim/isolation"
)

var _ isolation.Limiter = (*Limiter)(nil)

// DefaultRetryAfter is the Retry-After hint of a queue_full rejection when
// the limiter has no estimate (see Config.RetryAfter).
const DefaultRetryAfter = time.Second

// Config configures a Limiter. The zero value is invalid: MaxPerTenant must
// be set.
type Config struct {
	// MaxPerTenant is the number of concurrent executions per tenant; >= 1.
	MaxPerTenant int
	// MaxQueue is the number of waiters per tenant beyond the cap; >= 0.
	// 0 rejects at once when the tenant (or the global cap) is full.
	MaxQueue int
	// MaxWait is the longest a call waits for admission; >= 0. 0 means no
	// limit other than the caller's context.
	MaxWait time.Duration
	// MaxGlobal is the number of concurrent executions across all tenants;
	// >= 0. 0 means no global cap.
	MaxGlobal int
	// RetryAfter is the hint given with a queue_full rejection when there is
	// no waiter whose deadline bounds the wait (MaxQueue 0 or MaxWait 0);
	// >= 0. 0 means DefaultRetryAfter (1 s).
	RetryAfter time.Duration
}

// Validate reports every invalid field as a *ConfigError (joined), or nil.
func (c Config) Validate() error {
	var errs []error
	if c.MaxPerTenant < 1 {
		errs = append(errs, &ConfigError{Field: "MaxPerTenant", Value: c.MaxPerTenant, Rule: "must be >= 1"})
	}
	if c.MaxQueue < 0 {
		errs = append(errs, &ConfigError{Field: "MaxQueue", Value: c.MaxQueue, Rule: "must be >= 0"})
	}
	if c.MaxWait < 0 {
		errs = append(errs, &ConfigError{Field: "MaxWait", Value: c.MaxWait, Rule: "must be >= 0"})
	}
	if c.MaxGlobal < 0 {
		errs = append(errs, &ConfigError{Field: "MaxGlobal", Value: c.MaxGlobal, Rule: "must be >= 0"})
	}
	if c.RetryAfter < 0 {
		errs = append(errs, &ConfigError{Field: "RetryAfter", Value: c.RetryAfter, Rule: "must be >= 0"})
	}
	return errors.Join(errs...)
}

// Limiter is a per-tenant concurrency limiter: at most MaxPerTenant calls of
// a tenant run at once, up to MaxQueue more wait in the tenant's FIFO queue
// for at most MaxWait, and, with MaxGlobal, at most MaxGlobal calls run
// across all tenants. It starts no goroutines and needs no Close.
//
// Admission. A call is admitted at once when its tenant has a free slot, no
// one is queued before it and the global cap (if any) has room. Otherwise it
// queues; a freed slot passes straight to the head of the tenant's queue
// (hand-off: one waiter is woken, the slot is never up for grabs). A waiter
// whose context ends or whose MaxWait expires leaves the queue and strands
// no one: the slot goes to whoever is at the head when it frees. A call
// holding its tenant's slot but waiting for the global cap waits in one
// global FIFO queue, so a tenant occupies at most MaxPerTenant places there.
//
// Rejections are *LimitError (errors.Is(err, ErrLimited)):
//   - queue_full: the tenant's queue holds MaxQueue waiters, or MaxQueue is 0
//     and the call would have to wait. RetryAfter is the remaining MaxWait of
//     the head waiter (by then it is admitted or gone and a place frees);
//     with no such waiter, Config.RetryAfter (default 1 s).
//   - wait_exceeded: the call waited MaxWait. RetryAfter is MaxWait: no slot
//     freed for this call in that long, so retrying sooner most likely waits
//     again.
//
// A call whose context is done before admission, or ends while it waits,
// returns ctx.Err(), takes no slot and counts as cancelled, not rejected.
//
// Concurrency. Tenants are found in a lock-free map; each tenant has its own
// mutex, so unrelated tenants never serialise on a common lock. The global
// cap is an atomic counter; its mutex is taken only when calls wait for it.
//
// Memory. A tenant in use has a record of about 300 bytes plus the key
// (state, counters, one 32-byte ticket per concurrent Acquire). Records of
// idle tenants (nothing in flight, no waiters) are reclaimed lazily: when
// creating a record would bring their number to twice the number left by
// the previous sweep (and at least 64), idle records are dropped and their
// counters are folded into a compact table, about 90 bytes plus the key per
// tenant, so TenantStat and Stat still report them. That table grows with
// the number of distinct tenants ever seen; ForgetIdle empties it (totals
// keep the counts). A waiter allocates a node, a channel and a timer only
// while it waits.
type Limiter struct {
	cfg        Config
	retryAfter time.Duration
	global     *global // nil without MaxGlobal

	tenants sync.Map     // string -> *tenant
	records atomic.Int64 // live records in tenants
	sweepAt atomic.Int64 // sweep idle records when records reach this

	// statMu orders sweeps and ForgetIdle (write) against snapshots (read);
	// it guards retired and forgotten. The admission path never takes it.
	statMu    sync.RWMutex
	retired   map[string]counters
	forgotten counters
}

// minSweep is the number of tenant records below which idle records are
// never swept.
const minSweep = 64

// New returns a Limiter for cfg, or an error matching ErrInvalidConfig
// (a *ConfigError per invalid field).
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new limiter: %w", err)
	}
	l := &Limiter{cfg: cfg, retryAfter: cfg.RetryAfter, retired: map[string]counters{}}
	if l.retryAfter == 0 {
		l.retryAfter = DefaultRetryAfter
	}
	if cfg.MaxGlobal > 0 {
		l.global = &global{max: int64(cfg.MaxGlobal)}
	}
	l.sweepAt.Store(minSweep)
	return l, nil
}

// Config returns the configuration the limiter was built with.
func (l *Limiter) Config() Config { return l.cfg }

// Acquire admits one call of tenant, waiting as described on Limiter. On
// success the caller must call release exactly once when the work is done;
// further calls are no-ops. On error release is nil and the error is
// ctx.Err() (the context ended before admission; nothing taken) or a
// *LimitError matching ErrLimited. Each admission allocates its release
// func (24 bytes), which is what makes a repeated call harmless; Do
// allocates nothing when admitted at once.
func (l *Limiter) Acquire(ctx context.Context, tenant string) (release func(), err error) {
	_, tk, err := l.acquire(ctx, tenant, true)
	if err != nil {
		return nil, err
	}
	gen := tk.gen // set under t.mu before acquire returned; only release changes it
	return func() { tk.release(gen) }, nil
}

// Do runs fn once tenant is admitted and releases the slot when fn returns,
// fails or panics (the slot is released, then the panic continues). It
// returns the admission error (ctx.Err() or a *LimitError, fn not called) or
// fn's error. fn gets ctx; a fn that ignores its context keeps its slot until
// it returns, so work never runs beyond the caps.
func (l *Limiter) Do(ctx context.Context, tenant string, fn func(ctx context.Context) error) error {
	t, _, err := l.acquire(ctx, tenant, false)
	if err != nil {
		return err
	}
	defer l.release(t, nil, 0)
	return fn(ctx)
}

// ticket makes one Acquire's release idempotent: release acts only while
// gen, guarded by t.mu, still has the value the release func was made with.
// Tickets are reused through their tenant's free list; a swept tenant's
// tickets are dropped with it.
type ticket struct {
	l    *Limiter
	t    *tenant
	gen  uint64
	next *ticket // in t.free
}

func (tk *ticket) release(gen uint64) { tk.l.release(tk.t, tk, gen) }

// tenant is one tenant's live state. All fields but name are guarded by mu.
type tenant struct {
	name string
	mu   sync.Mutex
	dead bool // swept: look the tenant up again

	slots    int // taken tenant slots: inFlight + reserved
	inFlight int // admitted, not released
	reserved int // granted a tenant slot, not admitted yet (resuming, or waiting for the global cap)
	queue    waitList
	free     *ticket
	c        counters
}

func (t *tenant) idle() bool { return t.slots == 0 && t.queue.n == 0 }

// admit counts an admission and, if ticketed, returns a ticket for it.
func (t *tenant) admit(l *Limiter, ticketed bool) *ticket {
	t.inFlight++
	t.c.admitted++
	if !ticketed {
		return nil
	}
	tk := t.free
	if tk == nil {
		return &ticket{l: l, t: t}
	}
	t.free = tk.next
	tk.next = nil
	return tk
}

// passSlot hands a tenant slot that its holder gives up to the head of the
// queue, or frees it.
func (t *tenant) passSlot() {
	if w := t.queue.pop(); w != nil {
		t.reserved++
		w.grant()
		return
	}
	t.slots--
}

// counters are a tenant's cumulative counts.
type counters struct {
	admitted, released, rejectedQueueFull, rejectedWaitExceeded, cancelled int64
}

func (c *counters) add(o counters) {
	c.admitted += o.admitted
	c.released += o.released
	c.rejectedQueueFull += o.rejectedQueueFull
	c.rejectedWaitExceeded += o.rejectedWaitExceeded
	c.cancelled += o.cancelled
}

// record returns tenant's record, creating it if needed. The caller must
// check dead after locking it.
func (l *Limiter) record(name string) *tenant {
	if v, ok := l.tenants.Load(name); ok {
		return v.(*tenant)
	}
	if l.records.Load() >= l.sweepAt.Load() {
		l.sweep()
	}
	v, loaded := l.tenants.LoadOrStore(name, &tenant{name: name})
	if !loaded {
		l.records.Add(1)
	}
	return v.(*tenant)
}

// lock returns tenant's live record, locked.
func (l *Limiter) lock(name string) *tenant {
	for {
		t := l.record(name)
		t.mu.Lock()
		if !t.dead {
			return t
		}
		t.mu.Unlock()
	}
}

// acquire admits one call of name. With ticketed it also returns a ticket
// for Acquire's release func.
func (l *Limiter) acquire(ctx context.Context, name string, ticketed bool) (*tenant, *ticket, error) {
	done := ctx.Done()
	if done != nil {
		select {
		case <-done:
			t := l.lock(name)
			t.c.cancelled++
			t.mu.Unlock()
			return nil, nil, ctx.Err()
		default:
		}
	}
	t := l.lock(name)
	if t.slots < l.cfg.MaxPerTenant && t.queue.n == 0 {
		t.slots++
		if l.global == nil || l.global.tryAcquire() {
			tk := t.admit(l, ticketed)
			t.mu.Unlock()
			return t, tk, nil
		}
		t.reserved++
		t.mu.Unlock()
		tk, err := l.acquireGlobal(ctx, t, time.Time{}, ticketed)
		return t, tk, err
	}
	if t.queue.n >= l.cfg.MaxQueue {
		t.c.rejectedQueueFull++
		retry := l.queueRetryAfter(&t.queue)
		t.mu.Unlock()
		return nil, nil, &LimitError{Tenant: name, Reason: ReasonQueueFull, RetryAfter: retry}
	}
	w := l.newWaiter(time.Time{})
	t.queue.push(w)
	t.mu.Unlock()
	tk, err := l.waitTenant(ctx, t, w, ticketed)
	return t, tk, err
}

// newWaiter returns a waiter whose deadline is deadline, or MaxWait from now
// when deadline is zero.
func (l *Limiter) newWaiter(deadline time.Time) *waiter {
	if deadline.IsZero() && l.cfg.MaxWait > 0 {
		deadline = time.Now().Add(l.cfg.MaxWait)
	}
	return &waiter{ready: make(chan struct{}), deadline: deadline}
}

// waitTenant waits in t's queue; on admission it continues to the global
// cap. Entered with w queued and t unlocked.
func (l *Limiter) waitTenant(ctx context.Context, t *tenant, w *waiter, ticketed bool) (*ticket, error) {
	w.wait(ctx.Done())
	t.mu.Lock()
	if !w.granted {
		t.queue.remove(w)
		if err := ended(ctx); err != nil {
			t.c.cancelled++
			t.mu.Unlock()
			return nil, err
		}
		t.c.rejectedWaitExceeded++
		t.mu.Unlock()
		return nil, &LimitError{Tenant: t.name, Reason: ReasonWaitExceeded, RetryAfter: l.cfg.MaxWait}
	}
	// Granted: the releaser moved its slot to us (t.reserved).
	if err := ctx.Err(); err != nil {
		t.reserved--
		t.c.cancelled++
		t.passSlot()
		t.mu.Unlock()
		return nil, err
	}
	if l.global == nil || l.global.tryAcquire() {
		t.reserved--
		tk := t.admit(l, ticketed)
		t.mu.Unlock()
		return tk, nil
	}
	t.mu.Unlock()
	return l.acquireGlobal(ctx, t, w.deadline, ticketed)
}

// acquireGlobal waits for a global slot while holding a tenant slot
// (counted in t.reserved). deadline is the call's MaxWait deadline, zero if
// it has not started waiting yet.
func (l *Limiter) acquireGlobal(ctx context.Context, t *tenant, deadline time.Time, ticketed bool) (*ticket, error) {
	g := l.global
	g.mu.Lock()
	g.nwait.Add(1) // before take: see global.release
	if g.queue.n == 0 && g.take() {
		g.nwait.Add(-1)
		g.mu.Unlock()
		t.mu.Lock()
		t.reserved--
		tk := t.admit(l, ticketed)
		t.mu.Unlock()
		return tk, nil
	}
	if l.cfg.MaxQueue == 0 {
		g.nwait.Add(-1)
		retry := l.queueRetryAfter(&g.queue)
		g.mu.Unlock()
		t.mu.Lock()
		t.reserved--
		t.c.rejectedQueueFull++
		t.passSlot()
		t.mu.Unlock()
		return nil, &LimitError{Tenant: t.name, Reason: ReasonQueueFull, RetryAfter: retry}
	}
	w := l.newWaiter(deadline)
	g.queue.push(w)
	g.mu.Unlock()

	w.wait(ctx.Done())
	g.mu.Lock()
	granted := w.granted
	if !granted {
		g.queue.remove(w)
		g.nwait.Add(-1)
	}
	g.mu.Unlock()
	err := ended(ctx)
	if granted && err == nil {
		t.mu.Lock()
		t.reserved--
		tk := t.admit(l, ticketed)
		t.mu.Unlock()
		return tk, nil
	}
	if granted {
		g.release()
	}
	t.mu.Lock()
	t.reserved--
	if err != nil {
		t.c.cancelled++
	} else {
		t.c.rejectedWaitExceeded++
	}
	t.passSlot()
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return nil, &LimitError{Tenant: t.name, Reason: ReasonWaitExceeded, RetryAfter: l.cfg.MaxWait}
}

// ended returns ctx.Err(), or context.DeadlineExceeded when ctx's deadline
// has passed but ctx has not noticed yet: a caller whose deadline coincides
// with MaxWait left; it is cancelled, not rejected.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// queueRetryAfter is the Retry-After hint for a queue_full rejection from q
// (whose lock the caller holds): the head waiter's remaining wait, or the
// configured fallback when no waiter has a deadline.
func (l *Limiter) queueRetryAfter(q *waitList) time.Duration {
	if q.head == nil || q.head.deadline.IsZero() {
		return l.retryAfter
	}
	return max(time.Until(q.head.deadline), 0)
}

// release returns an admitted call's slots, each to the head of its queue:
// the tenant's first, then the global one. With a ticket (from Acquire) it
// acts only if the ticket still has generation gen, so that a release func
// called twice, even after its ticket was reused, releases once.
func (l *Limiter) release(t *tenant, tk *ticket, gen uint64) {
	t.mu.Lock()
	if tk != nil {
		if tk.gen != gen {
			t.mu.Unlock()
			return
		}
		tk.gen++
		tk.next = t.free
		t.free = tk
	}
	t.inFlight--
	t.c.released++
	t.passSlot()
	t.mu.Unlock()
	if l.global != nil {
		l.global.release()
	}
}

// sweep drops the records of idle tenants, keeping their counters in
// l.retired. Concurrent callers skip it while one runs.
func (l *Limiter) sweep() {
	if !l.statMu.TryLock() {
		return
	}
	defer l.statMu.Unlock()
	l.sweepLocked()
}

func (l *Limiter) sweepLocked() {
	l.tenants.Range(func(k, v any) bool {
		t := v.(*tenant)
		t.mu.Lock()
		if !t.dead && t.idle() {
			t.dead = true
			t.free = nil
			l.tenants.CompareAndDelete(k, v)
			l.records.Add(-1)
			c := l.retired[t.name]
			c.add(t.c)
			l.retired[t.name] = c
		}
		t.mu.Unlock()
		return true
	})
	l.sweepAt.Store(max(minSweep, 2*l.records.Load()))
}

// ForgetIdle reclaims the records of idle tenants and drops the per-tenant
// counters of every tenant idle at that moment; it reports how many tenants
// it forgot. Their counts stay in Stat().Total, and TenantStat of a forgotten
// tenant starts again from zero. Use it to bound memory when tenant ids are
// unbounded (e.g. after exporting Stat).
func (l *Limiter) ForgetIdle() int {
	l.statMu.Lock()
	defer l.statMu.Unlock()
	l.sweepLocked()
	n := 0
	for name, c := range l.retired {
		// A tenant that came back after its record was swept keeps its history.
		if v, ok := l.tenants.Load(name); ok {
			t := v.(*tenant)
			t.mu.Lock()
			if !t.dead {
				t.c.add(c)
				t.mu.Unlock()
				continue
			}
			t.mu.Unlock()
		}
		l.forgotten.add(c)
		n++
	}
	l.retired = map[string]counters{} // a cleared map would keep its buckets
	return n
}
