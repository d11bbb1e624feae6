package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// Think names how a closed-loop user's think time is drawn.
type Think string

// Think-time distributions.
const (
	// ExponentialThink draws each think time from an exponential
	// distribution with mean ClosedLoopConfig.ThinkTime, truncated at
	// MaxThinkFactor × the mean, as TPC-C does for its terminals (TPC-C
	// standard specification, clause 5.2.5.4).
	ExponentialThink Think = "exponential"
	// FixedThink waits exactly ClosedLoopConfig.ThinkTime.
	FixedThink Think = "fixed"
)

// MaxThinkFactor truncates exponential think times at this many means.
const MaxThinkFactor = 10

// ClosedLoopConfig describes a closed-loop user model: each user sends one
// request, waits for it, thinks, and sends the next. Unlike an open loop, a
// closed loop slows down with the system it measures, so its latencies hide
// queueing (Result.Intended == Result.Start); use it to model users, and the
// open loop to measure.
type ClosedLoopConfig struct {
	// Users is the number of concurrent users (> 0). Users are assigned to
	// tenants in proportion to their shares (largest remainder), so tenants
	// with a small share may get none.
	Users int
	// ThinkTime is the pause between a user's requests: the mean for
	// ExponentialThink, the exact value for FixedThink. 0 means none;
	// negative is invalid.
	ThinkTime time.Duration
	// Think is the think-time distribution; "" means ExponentialThink.
	Think Think
	// RetryQueries is k: when a request fails, the user tries again, and
	// each retry issues k queries of the same class at once, as a user
	// hammering "try again" on a page that runs k queries does. A retry
	// fails if any of its queries fails. 0 means 1; negative is invalid.
	RetryQueries int
	// MaxRetries is how many retries a user makes before giving up on a
	// request. 0 means none; negative is invalid.
	MaxRetries int
	// Duration is how long users start new requests (> 0).
	Duration time.Duration
	// Drain is how long to wait for requests in flight at Duration before
	// cancelling them, as in OpenLoopConfig: 0 means DefaultDrain,
	// negative no wait.
	Drain time.Duration
	// Logger receives debug events. nil means silent.
	Logger *slog.Logger
}

// ClosedLoopStats counts what a closed-loop run did.
type ClosedLoopStats struct {
	Start, End time.Time
	// UsersByTenant is how many users each tenant got (tenants with none
	// are absent).
	UsersByTenant map[int]int
	// Requests counts user requests (a first query and its retries).
	Requests int64
	// Queries counts executor calls.
	Queries int64
	// Errors counts queries whose executor returned an error, incomplete
	// ones excluded.
	Errors int64
	// Retries counts retry attempts, each of RetryQueries queries.
	Retries int64
	// GaveUp counts requests whose last attempt failed (and was not cut
	// short by the end of the run).
	GaveUp int64
	// Incomplete counts queries cancelled at the end of the run.
	Incomplete int64
}

// closedLoop is one run of RunClosedLoop.
type closedLoop struct {
	cfg      ClosedLoopConfig
	exec     Executor
	rec      Recorder
	start    time.Time
	ctx      context.Context // the queries' context, cancelled when the run gives up
	stop     chan struct{}   // closed at Duration or when the caller's ctx is done
	seq      atomic.Int64
	requests atomic.Int64
	queries  atomic.Int64
	errors   atomic.Int64
	retries  atomic.Int64
	gaveUp   atomic.Int64
	incompl  atomic.Int64
}

// user is one closed-loop user; its random streams are its own.
type user struct {
	loop    *closedLoop
	tenant  int
	classes []string
	pick    distuv.Categorical
	think   distuv.Exponential
}

// RunClosedLoop runs cfg.Users users against exec for cfg.Duration and
// records every query's Result in rec (nil discards them). Each user belongs
// to one tenant and picks among the classes its tenant sends with probability
// ∝ ClassSpec.Rate. The same seed gives every user the same sequence of
// classes and think times.
//
// It returns when every user has stopped and every executor call has
// returned. If ctx is cancelled, users stop at once, queries in flight are
// cancelled and recorded as incomplete, and the error wraps ctx.Err().
//
// Errors: ErrInvalid (wrapped) for an invalid config, population or class,
// or a nil executor; nothing runs then.
func RunClosedLoop(ctx context.Context, cfg ClosedLoopConfig, pop Population, classes []ClassSpec, exec Executor, rec Recorder, seed int64) (ClosedLoopStats, error) {
	classes, err := cfg.validate(pop, classes, exec)
	if err != nil {
		return ClosedLoopStats{}, fmt.Errorf("run closed loop: %w", err)
	}
	if cfg.RetryQueries == 0 {
		cfg.RetryQueries = 1
	}
	if cfg.Think == "" {
		cfg.Think = ExponentialThink
	}
	if cfg.Drain == 0 {
		cfg.Drain = DefaultDrain
	}
	if rec == nil {
		rec = RecorderFunc(func(Result) {})
	}
	log := orDiscard(cfg.Logger)

	opCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx)) // cancelled by the run only
	defer cancelOps()
	l := &closedLoop{cfg: cfg, exec: exec, rec: rec, ctx: opCtx, stop: make(chan struct{}), start: time.Now()}
	tenants := assignUsers(pop, cfg.Users)
	stats := ClosedLoopStats{Start: l.start, UsersByTenant: map[int]int{}}
	var wg sync.WaitGroup
	for i, tenant := range tenants {
		stats.UsersByTenant[tenant]++
		u := l.newUser(i, tenant, classes, seed)
		wg.Go(u.run)
	}
	log.Debug("closed loop started", "users", cfg.Users, "duration", cfg.Duration)

	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	timer := time.NewTimer(cfg.Duration)
	defer timer.Stop()
	cancelled := false
	select {
	case <-timer.C:
	case <-ctx.Done():
		cancelled = true
	}
	close(l.stop)
	if !cancelled {
		drain := max(cfg.Drain, 0)
		timer.Reset(drain)
		select {
		case <-finished:
		case <-timer.C:
		case <-ctx.Done():
			cancelled = true
		}
	}
	cancelOps()
	<-finished

	stats.End = time.Now()
	stats.Requests = l.requests.Load()
	stats.Queries = l.queries.Load()
	stats.Errors = l.errors.Load()
	stats.Retries = l.retries.Load()
	stats.GaveUp = l.gaveUp.Load()
	stats.Incomplete = l.incompl.Load()
	log.Debug("closed loop finished", "requests", stats.Requests, "queries", stats.Queries, "errors", stats.Errors,
		"retries", stats.Retries, "gave_up", stats.GaveUp, "incomplete", stats.Incomplete)
	if cancelled {
		return stats, fmt.Errorf("run closed loop: %w", ctx.Err())
	}
	return stats, nil
}

func (cfg ClosedLoopConfig) validate(pop Population, classes []ClassSpec, exec Executor) ([]ClassSpec, error) {
	classes, err := validateClasses(pop, classes)
	errs := []error{err}
	if exec == nil {
		errs = append(errs, fieldErr("Executor", nil, "must not be nil"))
	}
	if cfg.Users <= 0 {
		errs = append(errs, fieldErr("Users", cfg.Users, "must be > 0"))
	}
	if cfg.ThinkTime < 0 {
		errs = append(errs, fieldErr("ThinkTime", cfg.ThinkTime, "must be ≥ 0"))
	}
	switch cfg.Think {
	case "", ExponentialThink, FixedThink:
	default:
		errs = append(errs, fieldErr("Think", cfg.Think, "unknown think-time distribution (want %q or %q)", ExponentialThink, FixedThink))
	}
	if cfg.RetryQueries < 0 {
		errs = append(errs, fieldErr("RetryQueries", cfg.RetryQueries, "must be ≥ 0 (0 means 1)"))
	}
	if cfg.MaxRetries < 0 {
		errs = append(errs, fieldErr("MaxRetries", cfg.MaxRetries, "must be ≥ 0"))
	}
	if cfg.Duration <= 0 {
		errs = append(errs, fieldErr("Duration", cfg.Duration, "must be > 0"))
	}
	return classes, errors.Join(errs...)
}

// assignUsers returns the tenant of each of n users: tenant i gets
// floor(n × share) users, and the users left over go to the largest
// remainders (lower ID first on ties). Users are ordered by tenant.
func assignUsers(pop Population, n int) []int {
	type quota struct {
		idx int // into pop.Tenants
		rem float64
	}
	counts := make([]int, len(pop.Tenants))
	quotas := make([]quota, len(pop.Tenants))
	left := n
	for i, t := range pop.Tenants {
		q := float64(n) * t.Share
		counts[i] = int(math.Floor(q))
		left -= counts[i]
		quotas[i] = quota{idx: i, rem: q - math.Floor(q)}
	}
	slices.SortStableFunc(quotas, func(a, b quota) int { return cmp.Compare(b.rem, a.rem) })
	for i := 0; left > 0; i = (i + 1) % len(quotas) {
		counts[quotas[i].idx]++
		left--
	}
	users := make([]int, 0, n)
	for i, c := range counts {
		for range c {
			users = append(users, pop.Tenants[i].ID)
		}
	}
	return users
}

func (l *closedLoop) newUser(i, tenant int, classes []ClassSpec, seed int64) *user {
	src := rand.NewPCG(uint64(seed), streamID("user", strconv.Itoa(i)))
	u := &user{loop: l, tenant: tenant}
	var weights []float64
	for _, c := range classes {
		if c.Senders.sends(tenant) {
			u.classes = append(u.classes, c.Name)
			weights = append(weights, c.Rate)
		}
	}
	if len(weights) > 0 {
		u.pick = distuv.NewCategorical(weights, src)
	}
	if l.cfg.ThinkTime > 0 {
		u.think = distuv.Exponential{Rate: 1 / l.cfg.ThinkTime.Seconds(), Src: src}
	}
	return u
}

// run is the user's loop: request, retry while failing, think.
func (u *user) run() {
	if len(u.classes) == 0 {
		return // the tenant sends no class
	}
	l := u.loop
	for !l.stopping() {
		class := u.classes[int(u.pick.Rand())]
		l.requests.Add(1)
		err := u.query(class)
		for r := 0; err != nil && r < l.cfg.MaxRetries && !l.stopping(); r++ {
			l.retries.Add(1)
			err = u.burst(class, l.cfg.RetryQueries)
		}
		if err != nil && !errors.Is(err, ErrIncomplete) {
			l.gaveUp.Add(1)
		}
		if !u.pause() {
			return
		}
	}
}

// burst issues k queries of class at once and returns an error if any fails.
func (u *user) burst(class string, k int) error {
	if k == 1 {
		return u.query(class)
	}
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { errs[i] = u.query(class) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// query runs one op and records it.
func (u *user) query(class string) error {
	l := u.loop
	start := time.Now()
	op := Op{Seq: l.seq.Add(1) - 1, Tenant: u.tenant, Class: class, At: start.Sub(l.start)}
	l.queries.Add(1)
	err := l.exec(l.ctx, op)
	end := time.Now()
	if err != nil && l.ctx.Err() != nil {
		// The run gave up on the query: not the system's error.
		err = errIncomplete
		l.incompl.Add(1)
	} else if err != nil {
		l.errors.Add(1)
	}
	l.rec.Record(Result{Op: op, Intended: start, Start: start, End: end, Err: err})
	return err
}

// pause thinks and reports whether the user should go on.
func (u *user) pause() bool {
	l := u.loop
	d := l.cfg.ThinkTime
	if d > 0 && l.cfg.Think == ExponentialThink {
		d = time.Duration(min(u.think.Rand(), MaxThinkFactor*l.cfg.ThinkTime.Seconds()) * float64(time.Second))
	}
	if d <= 0 {
		return !l.stopping()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !l.stopping()
	case <-l.stop:
		return false
	}
}

func (l *closedLoop) stopping() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}
