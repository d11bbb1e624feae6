package redislimiter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
)

var _ isolation.Limiter = (*Limiter)(nil)

// Defaults for zero Config fields.
const (
	DefaultLeaseTTL  = 10 * time.Second
	DefaultOpTimeout = 250 * time.Millisecond
	DefaultKeyPrefix = "noisysim:lim"
	// MinLeaseTTL is the shortest LeaseTTL New accepts.
	MinLeaseTTL = 30 * time.Millisecond
)

// Backoff bounds of a waiter's retries.
const (
	minBackoff = time.Millisecond
	maxBackoff = 20 * time.Millisecond
)

// Config configures a Limiter. Client and MaxPerTenant are required.
type Config struct {
	// Client is the Redis connection; the Limiter does not close it.
	Client redis.UniversalClient
	// MaxPerTenant is the number of concurrent calls per tenant across all
	// limiters sharing the Redis and KeyPrefix; >= 1.
	MaxPerTenant int
	// MaxQueue is the number of waiters per tenant in this process; >= 0.
	// 0 rejects at once when the tenant is full.
	MaxQueue int
	// MaxWait is the longest a call waits for admission; >= 0. 0 means no
	// limit other than the caller's context.
	MaxWait time.Duration
	// LeaseTTL is a lease's life without renewal, by the Redis server's
	// clock; renewed every LeaseTTL/3. Make it longer than the work's
	// statement_timeout. 0 means DefaultLeaseTTL (10 s); else >= 30 ms.
	LeaseTTL time.Duration
	// OpTimeout bounds each Redis call; 0 means DefaultOpTimeout (250 ms).
	OpTimeout time.Duration
	// FailOpen admits calls without a lease when Redis cannot be reached;
	// false (the default) rejects them with reason unavailable.
	FailOpen bool
	// RetryAfter is the hint of a queue_full rejection without a waiter
	// whose deadline bounds the wait; 0 means limiter.DefaultRetryAfter.
	RetryAfter time.Duration
	// KeyPrefix starts every key; "" means DefaultKeyPrefix. Limiters with
	// one prefix share their caps.
	KeyPrefix string
	// Owner identifies this limiter's leases; "" means a random id.
	Owner string
	// Logger receives a warning per lost lease and Redis error; nil is
	// silent.
	Logger *slog.Logger
}

// Validate reports every invalid field as a *limiter.ConfigError (joined).
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, v any, rule string) {
		errs = append(errs, &limiter.ConfigError{Field: field, Value: v, Rule: rule})
	}
	if c.Client == nil {
		bad("Client", nil, "must be set")
	}
	if c.MaxPerTenant < 1 {
		bad("MaxPerTenant", c.MaxPerTenant, "must be >= 1")
	}
	if c.MaxQueue < 0 {
		bad("MaxQueue", c.MaxQueue, "must be >= 0")
	}
	if c.MaxWait < 0 {
		bad("MaxWait", c.MaxWait, "must be >= 0")
	}
	if c.LeaseTTL != 0 && c.LeaseTTL < MinLeaseTTL {
		bad("LeaseTTL", c.LeaseTTL, "must be 0 or >= 30ms")
	}
	if c.OpTimeout < 0 {
		bad("OpTimeout", c.OpTimeout, "must be >= 0")
	}
	if c.RetryAfter < 0 {
		bad("RetryAfter", c.RetryAfter, "must be >= 0")
	}
	return errors.Join(errs...)
}

// acquireScript: KEYS[1] the tenant's set; ARGV cap, ttl ms, lease id.
// Returns {1, expiry} when added, {0, ms until the earliest lease expires}.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], 2 * ttl)
  return {1, now + ttl}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(first[2]) - now}
`)

// renewScript: KEYS[1] the set; ARGV ttl ms, lease id. 1 renewed, 0 lost
// (absent or already expired: removed, not put back).
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local exp = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not exp then return 0 end
if tonumber(exp) <= now then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[2])
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
return 1
`)

// Limiter is the Redis-backed limiter described in the package doc. It is
// safe for concurrent use; Close it when done.
type Limiter struct {
	cfg        Config
	ttl        time.Duration
	opTimeout  time.Duration
	retryAfter time.Duration
	owner      string
	log        *slog.Logger
	seq        atomic.Uint64

	mu      sync.Mutex
	tenants map[string]*tenant
	leases  sync.WaitGroup // renewers running
	closed  bool
	stopAll chan struct{}
	close   sync.Once

	redisErrors atomic.Int64
}

// tenant is one tenant's state in this process, guarded by Limiter.mu.
type tenant struct {
	name     string
	inFlight int
	waiters  []time.Time // deadlines of this process's waiters, oldest first (zero: none)
	wake     chan struct{}
	c        counters
}

type counters struct {
	admitted, released, rejectedQueueFull, rejectedWaitExceeded, rejectedUnavailable, cancelled int64
	unprotected, leasesLost                                                                     int64
}

// New returns a Limiter for cfg, or an error matching
// limiter.ErrInvalidConfig. It does not contact Redis; Ping does.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new redis limiter: %w", err)
	}
	l := &Limiter{cfg: cfg, ttl: cfg.LeaseTTL, opTimeout: cfg.OpTimeout, retryAfter: cfg.RetryAfter,
		owner: cfg.Owner, log: cfg.Logger, tenants: map[string]*tenant{}, stopAll: make(chan struct{})}
	if l.ttl == 0 {
		l.ttl = DefaultLeaseTTL
	}
	if l.opTimeout == 0 {
		l.opTimeout = DefaultOpTimeout
	}
	if l.retryAfter == 0 {
		l.retryAfter = limiter.DefaultRetryAfter
	}
	if cfg.KeyPrefix == "" {
		l.cfg.KeyPrefix = DefaultKeyPrefix
	}
	if l.owner == "" {
		var b [6]byte
		rand.Read(b[:])
		l.owner = hex.EncodeToString(b[:])
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

// Owner is the id this limiter's leases carry.
func (l *Limiter) Owner() string { return l.owner }

// LeaseTTL is the lease life in use.
func (l *Limiter) LeaseTTL() time.Duration { return l.ttl }

// Ping checks that Redis answers and runs scripts (it loads the limiter's
// scripts), within OpTimeout.
func (l *Limiter) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout*4)
	defer cancel()
	if err := l.cfg.Client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	for _, s := range []*redis.Script{acquireScript, renewScript} {
		if err := s.Load(ctx, l.cfg.Client).Err(); err != nil {
			return fmt.Errorf("load redis script: %w", err)
		}
	}
	return nil
}

// Key is the Redis key of tenant's lease set.
func (l *Limiter) Key(tenant string) string { return l.cfg.KeyPrefix + ":{" + tenant + "}" }

func (l *Limiter) record(name string) *tenant {
	t := l.tenants[name]
	if t == nil {
		t = &tenant{name: name, wake: make(chan struct{})}
		l.tenants[name] = t
	}
	return t
}

func (l *Limiter) count(name string, f func(c *counters)) {
	l.mu.Lock()
	f(&l.record(name).c)
	l.mu.Unlock()
}

// Acquire admits one call of tenant. On success the caller must call
// release once when the work is done (further calls are no-ops); it
// removes the lease and stops its renewal. Errors, release nil: ctx.Err()
// (counted cancelled, nothing taken) or a *limiter.LimitError (queue_full,
// wait_exceeded, or unavailable when Redis fails and FailOpen is false).
func (l *Limiter) Acquire(ctx context.Context, name string) (func(), error) {
	if err := ctx.Err(); err != nil {
		l.count(name, func(c *counters) { c.cancelled++ })
		return nil, err
	}
	key := l.Key(name)
	id := l.owner + ":" + strconv.FormatUint(l.seq.Add(1), 36)

	ok, err := l.try(ctx, key, id)
	if err != nil {
		return l.failed(ctx, name, err)
	}
	if ok {
		return l.admitted(name, key, id), nil
	}

	// Full: queue in this process.
	l.mu.Lock()
	t := l.record(name)
	if len(t.waiters) >= l.cfg.MaxQueue {
		t.c.rejectedQueueFull++
		retry := l.retryAfter
		if len(t.waiters) > 0 && !t.waiters[0].IsZero() {
			retry = max(time.Until(t.waiters[0]), 0)
		}
		l.mu.Unlock()
		return nil, &limiter.LimitError{Tenant: name, Reason: limiter.ReasonQueueFull, RetryAfter: retry}
	}
	var deadline time.Time
	if l.cfg.MaxWait > 0 {
		deadline = time.Now().Add(l.cfg.MaxWait)
	}
	t.waiters = append(t.waiters, deadline)
	l.mu.Unlock()
	leave := func() {
		for i, d := range t.waiters {
			if d == deadline {
				t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
				break
			}
		}
	}

	var expired <-chan time.Time
	if !deadline.IsZero() {
		tm := time.NewTimer(time.Until(deadline))
		defer tm.Stop()
		expired = tm.C
	}
	backoff := minBackoff
	for {
		l.mu.Lock()
		wake := t.wake
		l.mu.Unlock()
		tm := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-expired:
		case <-wake:
		case <-tm.C:
		}
		tm.Stop()
		backoff = min(2*backoff, maxBackoff)
		if err := ended(ctx); err != nil {
			l.mu.Lock()
			leave()
			t.c.cancelled++
			l.mu.Unlock()
			return nil, err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			l.mu.Lock()
			leave()
			t.c.rejectedWaitExceeded++
			l.mu.Unlock()
			return nil, &limiter.LimitError{Tenant: name, Reason: limiter.ReasonWaitExceeded, RetryAfter: l.cfg.MaxWait}
		}
		ok, err := l.try(ctx, key, id)
		if err != nil || ok {
			l.mu.Lock()
			leave()
			l.mu.Unlock()
		}
		if err != nil {
			return l.failed(ctx, name, err)
		}
		if ok {
			return l.admitted(name, key, id), nil
		}
	}
}

// ended returns ctx.Err(), or DeadlineExceeded once ctx's deadline passed.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// try runs the acquire script once.
func (l *Limiter) try(ctx context.Context, key, id string) (bool, error) {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opTimeout)
	defer cancel()
	res, err := acquireScript.Run(octx, l.cfg.Client, []string{key},
		l.cfg.MaxPerTenant, l.ttl.Milliseconds(), id).Int64Slice()
	if err != nil {
		l.redisErrors.Add(1)
		return false, fmt.Errorf("acquire lease: %w", err)
	}
	return len(res) > 0 && res[0] == 1, nil
}

// failed handles a Redis error on admission: fail open or closed.
func (l *Limiter) failed(ctx context.Context, name string, err error) (func(), error) {
	if cerr := ended(ctx); cerr != nil {
		l.count(name, func(c *counters) { c.cancelled++ })
		return nil, cerr
	}
	l.log.Warn("redis limiter: redis unavailable", "tenant", name, "fail_open", l.cfg.FailOpen, "err", err)
	if l.cfg.FailOpen {
		l.mu.Lock()
		t := l.record(name)
		t.inFlight++
		t.c.admitted++
		t.c.unprotected++
		l.mu.Unlock()
		var once sync.Once
		return func() { once.Do(func() { l.done(name) }) }, nil
	}
	l.count(name, func(c *counters) { c.rejectedUnavailable++ })
	return nil, fmt.Errorf("redis limiter: %w (%w)", &limiter.LimitError{Tenant: name, Reason: limiter.ReasonUnavailable, RetryAfter: l.retryAfter}, err)
}

// admitted counts an admission and starts the lease's renewal.
func (l *Limiter) admitted(name, key, id string) func() {
	l.mu.Lock()
	t := l.record(name)
	t.inFlight++
	t.c.admitted++
	stop := make(chan struct{})
	if !l.closed { // after Close the lease is not renewed: it lives one TTL
		l.leases.Add(1)
		go l.renew(name, key, id, stop)
	}
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout)
			defer cancel()
			if err := l.cfg.Client.ZRem(ctx, key, id).Err(); err != nil {
				l.redisErrors.Add(1)
				l.log.Warn("redis limiter: release lease", "tenant", name, "err", err)
			}
			l.done(name)
		})
	}
}

// done counts a release and wakes this process's waiters of the tenant.
func (l *Limiter) done(name string) {
	l.mu.Lock()
	t := l.record(name)
	t.inFlight--
	t.c.released++
	close(t.wake)
	t.wake = make(chan struct{})
	l.mu.Unlock()
}

// renew extends the lease every ttl/3 until stop is closed or the lease is
// lost.
func (l *Limiter) renew(name, key, id string, stop chan struct{}) {
	defer l.leases.Done()
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-l.stopAll:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout)
		n, err := renewScript.Run(ctx, l.cfg.Client, []string{key}, l.ttl.Milliseconds(), id).Int()
		cancel()
		if err != nil {
			// Keep trying until the lease would have expired anyway: the
			// next renewal that reaches Redis says whether it is lost.
			l.redisErrors.Add(1)
			continue
		}
		if n == 0 {
			l.count(name, func(c *counters) { c.leasesLost++ })
			l.log.Warn("redis limiter: lease lost; the call runs unprotected", "tenant", name, "lease", id)
			return
		}
	}
}

// Close stops every lease's renewal (the leases then expire within one
// LeaseTTL unless released). Calls in flight may still release. It is
// idempotent and does not close the Redis client.
func (l *Limiter) Close() {
	l.close.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.stopAll)
		l.leases.Wait()
	})
}

// Extra is what a Redis limiter counts beyond limiter.Stat.
type Extra struct {
	// Unprotected counts calls admitted without a lease (FailOpen while
	// Redis was unreachable).
	Unprotected int64
	// LeasesLost counts leases a renewal found gone: their calls ran on
	// without a slot.
	LeasesLost int64
	// RedisErrors counts failed Redis calls (acquire, renew, release).
	RedisErrors int64
}

// Stat returns this process's counters in the local limiter's shape (each
// tenant's InFlight and Queued are this process's).
func (l *Limiter) Stat() limiter.Stat {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := limiter.Stat{Tenants: make(map[string]limiter.TenantStat, len(l.tenants)), Records: len(l.tenants)}
	for name, t := range l.tenants {
		ts := limiter.TenantStat{InFlight: t.inFlight, Queued: len(t.waiters),
			Admitted: t.c.admitted, Released: t.c.released,
			RejectedQueueFull: t.c.rejectedQueueFull, RejectedWaitExceeded: t.c.rejectedWaitExceeded,
			RejectedUnavailable: t.c.rejectedUnavailable, Cancelled: t.c.cancelled}
		st.Tenants[name] = ts
		st.Total.Add(ts)
	}
	return st
}

// TenantStat returns one tenant's counters in this process.
func (l *Limiter) TenantStat(name string) limiter.TenantStat { return l.Stat().Tenants[name] }

// Extra returns the counters beyond limiter.Stat, summed over tenants.
func (l *Limiter) Extra() Extra {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := Extra{RedisErrors: l.redisErrors.Load()}
	for _, t := range l.tenants {
		e.Unprotected += t.c.unprotected
		e.LeasesLost += t.c.leasesLost
	}
	return e
}

// Held returns the number of live leases of tenant in Redis (all
// owners), by the server's clock.
func (l *Limiter) Held(ctx context.Context, tenant string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout*4)
	defer cancel()
	t, err := l.cfg.Client.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis time: %w", err)
	}
	return l.cfg.Client.ZCount(ctx, l.Key(tenant), "("+strconv.FormatInt(t.UnixMilli(), 10), "+inf").Result()
}
