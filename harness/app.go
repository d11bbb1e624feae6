package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/noisysim/noisysim/harness/backend/redisserver"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/limiter/redislimiter"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// AssertAppPeak is the assertion that a tenant's concurrent calls across
// all app instances stayed within what the app's limiter mode allows:
// N × max_per_tenant per instance, N × ceil(max_per_tenant / N) divided,
// max_per_tenant global (summed over the classes with a limiter).
const AssertAppPeak = "app_peak_concurrency"

// AssertAppPeakActivity is the same bound over the tenant's active
// backends seen in pg_stat_activity samples.
const AssertAppPeakActivity = "app_peak_active_backends"

// minLeaseTTL is the Redis lease TTL of a class without statement_timeout;
// with one, the TTL is twice it (and at least this).
const minLeaseTTL = 5 * time.Second

// appStack is a configuration's app instances: their stacks, one ledger,
// and for limiter global the Redis they share.
type appStack struct {
	app       *scenario.App
	instances []*pools.Stack
	next      atomic.Uint64
	ledger    *pools.Ledger
	limiters  map[pools.Class]multiStat
	peak      *peakGauge

	redis    *redis.Client // the run's own checks
	redisOpt *redis.Options
	clients  []*redis.Client // one per instance and class, as separate processes would have
	server   *redisserver.Server
	cur      int // instance being built
	// closers close the Redis limiters.
	closers []func()
}

// multiStat sums several instances' limiter counters.
type multiStat []limiterStats

// Stat sums the instances' Stats.
func (m multiStat) Stat() limiter.Stat {
	out := limiter.Stat{Tenants: map[string]limiter.TenantStat{}}
	for _, l := range m {
		st := l.Stat()
		for t, ts := range st.Tenants {
			o := out.Tenants[t]
			o.Add(ts)
			out.Tenants[t] = o
		}
		out.Total.Add(st.Total)
		out.Records += st.Records
	}
	return out
}

// newAppStack builds configuration c's app.instances stacks; for limiter
// global it first reaches Redis (redis_url) or starts a redis-server.
func (r *runner) newAppStack(ctx context.Context, c *scenario.Configuration, spread *dbSpread) (_ *appStack, err error) {
	ledger, err := pools.NewLedger(pools.LedgerConfig{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRun, err)
	}
	a := &appStack{app: c.App, ledger: ledger, limiters: map[pools.Class]multiStat{}, peak: &peakGauge{}}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	field := r.configField(c) + ".app.redis_url"
	if c.App.Limiter == scenario.AppGlobal {
		url := c.App.RedisURL
		if url == "" {
			bin, err := redisserver.Find("")
			if err != nil {
				return nil, fmt.Errorf("configuration %s: app.limiter global without redis_url: %w", c.Name, err)
			}
			if a.server, err = redisserver.Start(ctx, bin); err != nil {
				return nil, fmt.Errorf("%w: configuration %s: %w", ErrRun, c.Name, err)
			}
			url = a.server.URL()
			r.note("%s: global limiter on a throwaway redis-server at %s", c.Name, a.server.Addr())
		}
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", scenario.ErrInvalid, r.sc.Where(field), err)
		}
		a.redisOpt = opt
		a.redis = a.newClient()
		err = pingScript(ctx, a.redis)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: Redis at %s unusable: %w", scenario.ErrInvalid, r.sc.Where(field), opt.Addr, err)
		}
	}
	for i := range c.App.Instances {
		a.cur = i
		s, err := r.newInstance(ctx, c, a, i, spread, func(class pools.Class, l limiterStats) {
			a.limiters[class] = append(a.limiters[class], l)
		})
		if err != nil {
			return nil, err
		}
		a.instances = append(a.instances, s)
	}
	for _, class := range []pools.Class{pools.Interactive, pools.Heavy} {
		if p := c.Pool(scenario.IsolationClass(class)); p.Limiter.Enabled {
			r.note("%s: %d app instances, limiter %s: a tenant may run at most %d %s calls at once",
				c.Name, c.App.Instances, c.App.Limiter, a.bound(p.Limiter.MaxPerTenant), class)
		}
	}
	return a, nil
}

// bound is the most calls of one tenant the instances together admit in a
// class whose limiter allows perTenant.
func (a *appStack) bound(perTenant int) int {
	switch a.app.Limiter {
	case scenario.AppGlobal:
		return perTenant
	default:
		return a.app.Instances * a.app.Share(perTenant)
	}
}

// redisOpTimeout bounds each Redis call of the global limiter: generous,
// so that a loaded machine's scheduling delays are not taken for an
// unreachable Redis.
const redisOpTimeout = time.Second

// newClient returns a new connection pool to the app's Redis.
func (a *appStack) newClient() *redis.Client {
	opt := *a.redisOpt
	opt.MaxRetries = -1
	opt.PoolSize = 64
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = redisOpTimeout, redisOpTimeout, redisOpTimeout, redisOpTimeout
	return redis.NewClient(&opt)
}

// checkRedisURLs checks, before anything starts, that every redis_url of
// the configurations to run (only, or all) answers PING and runs a script
// (an error names the key by file:line:col and matches scenario.ErrInvalid),
// and that redis-server is installed where one is to be started (else a
// *redisserver.NotFoundError: backend.ErrNotInstalled).
func checkRedisURLs(ctx context.Context, sc *scenario.Scenario, only string) error {
	for i := range sc.Configurations {
		c := &sc.Configurations[i]
		if c.App == nil || c.App.Limiter != scenario.AppGlobal || (only != "" && c.Name != only) {
			continue
		}
		if c.App.RedisURL == "" {
			if _, err := redisserver.Find(""); err != nil {
				return fmt.Errorf("configuration %s: app.limiter global without redis_url: %w", c.Name, err)
			}
			continue
		}
		field := fmt.Sprintf("configurations[%d].app.redis_url", i)
		opt, err := redis.ParseURL(c.App.RedisURL)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", scenario.ErrInvalid, sc.Where(field), err)
		}
		a := &appStack{redisOpt: opt}
		cl := a.newClient()
		err = pingScript(ctx, cl)
		cl.Close()
		if err != nil {
			return fmt.Errorf("%w: %s: Redis at %s unusable: %w", scenario.ErrInvalid, sc.Where(field), opt.Addr, err)
		}
	}
	return nil
}

// pingScript checks that Redis answers and runs scripts (the limiter's
// steps are server-side scripts), within 2 s.
func pingScript(ctx context.Context, cl *redis.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := cl.Ping(ctx).Err(); err != nil {
		return err
	}
	return cl.Eval(ctx, "return redis.call('TIME')[1]", nil).Err()
}

// configField is the field path of configuration c in the file.
func (r *runner) configField(c *scenario.Configuration) string {
	for i := range r.sc.Configurations {
		if r.sc.Configurations[i].Name == c.Name {
			return fmt.Sprintf("configurations[%d]", i)
		}
	}
	return "configurations"
}

// limiter makes the class's limiter of the instance being built, wrapped
// in the peak gauge.
func (a *appStack) limiter(c *scenario.Configuration, class pools.Class, p *scenario.Pool) (isolation.Limiter, limiterStats, error) {
	lc := p.Limiter
	var l isolation.Limiter
	var ls limiterStats
	switch a.app.Limiter {
	case scenario.AppGlobal:
		ttl := max(2*p.Role.StatementTimeout.Duration(), minLeaseTTL)
		cl := a.newClient()
		a.clients = append(a.clients, cl)
		rl, err := redislimiter.New(redislimiter.Config{
			Client: cl, OpTimeout: redisOpTimeout, MaxPerTenant: lc.MaxPerTenant, MaxQueue: lc.MaxQueue, MaxWait: lc.MaxWait.Duration(),
			LeaseTTL: ttl, FailOpen: a.app.FailOpen, KeyPrefix: "noisysim:" + c.Name + ":" + string(class),
			Owner: fmt.Sprintf("%s-%d", c.Name, a.cur),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%w: configuration %s: %s limiter: %w", scenario.ErrInvalid, c.Name, class, err)
		}
		a.closers = append(a.closers, rl.Close)
		l, ls = rl, rl
	default:
		ll, err := limiter.New(limiter.Config{
			MaxPerTenant: a.app.Share(lc.MaxPerTenant), MaxQueue: lc.MaxQueue,
			MaxWait: lc.MaxWait.Duration(), MaxGlobal: a.app.Share(lc.MaxGlobal),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("%w: configuration %s: %s limiter: %w", scenario.ErrInvalid, c.Name, class, err)
		}
		l, ls = ll, ll
	}
	return a.peak.wrap(class, l), ls, nil
}

// pick returns the instance of the next call, round-robin.
func (a *appStack) pick() *pools.Stack {
	return a.instances[(a.next.Add(1)-1)%uint64(len(a.instances))]
}

func (a *appStack) close() {
	for _, s := range a.instances {
		s.Close()
	}
	for _, f := range a.closers {
		f()
	}
	for _, cl := range a.clients {
		cl.Close()
	}
	a.clients = nil
	if a.redis != nil {
		a.redis.Close()
		a.redis = nil
	}
	if a.server != nil {
		a.server.Stop()
	}
}

// peakGauge counts each class's admitted calls in flight per tenant
// across all instances, and the most seen at once.
type peakGauge struct{ tenants sync.Map } // peakKey → *[2]atomic.Int64 (now, peak)

type peakKey struct {
	class  pools.Class
	tenant string
}

func (g *peakGauge) wrap(class pools.Class, l isolation.Limiter) isolation.Limiter {
	return isolation.LimiterFunc(func(ctx context.Context, tenant string) (func(), error) {
		release, err := l.Acquire(ctx, tenant)
		if err != nil {
			return nil, err
		}
		v, _ := g.tenants.LoadOrStore(peakKey{class, tenant}, new([2]atomic.Int64))
		c := v.(*[2]atomic.Int64)
		n := c[0].Add(1)
		for p := c[1].Load(); n > p && !c[1].CompareAndSwap(p, n); p = c[1].Load() {
		}
		var once atomic.Bool
		return func() {
			if once.CompareAndSwap(false, true) {
				c[0].Add(-1) // before the slot goes back, so the gauge never counts a successor twice
				release()
			}
		}, nil
	})
}

// peaks returns class's peak per tenant.
func (g *peakGauge) peaks(class pools.Class) map[string]int64 {
	out := map[string]int64{}
	g.tenants.Range(func(k, v any) bool {
		if pk := k.(peakKey); pk.class == class {
			out[pk.tenant] = v.(*[2]atomic.Int64)[1].Load()
		}
		return true
	})
	return out
}

// appAssertions are the peak assertions of an app configuration, per
// class with a limiter: the dominant tenant's peak (if it sends the class)
// and the highest quiet tenant's, from the limiters' admissions; and the
// dominant tenant's most active backends in one pg_stat_activity sample
// against the sum of its classes' bounds.
func (r *runner) appAssertions(c *scenario.Configuration, st *stack, act *reports.Activity) []reports.Assertion {
	a := st.app
	if a == nil {
		return nil
	}
	dom := r.key(scenario.DominantTenant)
	detail := fmt.Sprintf("%d instances, limiter %s", a.app.Instances, a.app.Limiter)
	var out []reports.Assertion
	domBound := 0
	for _, class := range []pools.Class{pools.Interactive, pools.Heavy} {
		p := c.Pool(scenario.IsolationClass(class))
		if !p.Limiter.Enabled {
			continue
		}
		bound := int64(a.bound(p.Limiter.MaxPerTenant))
		domSends, quietSend := false, false
		for _, cl := range r.sc.Classes {
			if pools.Class(cl.IsolationClass) != class {
				continue
			}
			domSends = domSends || cl.Senders != scenario.SendersQuiet
			quietSend = quietSend || cl.Senders != scenario.SendersDominant
		}
		peaks := a.peak.peaks(class)
		if domSends {
			domBound += int(bound)
			out = append(out, countAssert(AssertAppPeak, c.Name, dom, string(class), "<=", peaks[dom], bound,
				"the noisy tenant's most calls admitted at once across the instances' limiters; "+detail))
		}
		if quietSend {
			quiet := ""
			for _, t := range slices.Sorted(maps.Keys(peaks)) {
				if t != dom && (quiet == "" || peaks[t] > peaks[quiet]) {
					quiet = t
				}
			}
			if quiet != "" {
				out = append(out, countAssert(AssertAppPeak, c.Name, quiet, string(class), "<=", peaks[quiet], bound,
					"the quiet tenant with the highest peak; "+detail))
			}
		}
	}
	if act != nil && domBound > 0 {
		var active int64
		for _, row := range act.Tenants {
			if row.Tenant == dom {
				active = row.MaxActive
			}
		}
		out = append(out, countAssert(AssertAppPeakActivity, c.Name, dom, "", "<=", active, int64(domBound),
			fmt.Sprintf("the noisy tenant's most active backends (t:%s) in one pg_stat_activity sample (every %v); %s", dom, activityEvery, detail)))
	}
	if ex := a.redisExtra(); ex != nil {
		r.note("%s: Redis limiter: %d calls admitted without a lease (fail open), %d leases lost, %d Redis errors",
			c.Name, ex.Unprotected, ex.LeasesLost, ex.RedisErrors)
	}
	return out
}

// redisExtra sums the Redis limiters' extra counters; nil without.
func (a *appStack) redisExtra() *redislimiter.Extra {
	var ex *redislimiter.Extra
	for _, ms := range a.limiters {
		for _, l := range ms {
			if rl, ok := l.(*redislimiter.Limiter); ok {
				if ex == nil {
					ex = &redislimiter.Extra{}
				}
				e := rl.Extra()
				ex.Unprotected += e.Unprotected
				ex.LeasesLost += e.LeasesLost
				ex.RedisErrors += e.RedisErrors
			}
		}
	}
	return ex
}

// Calls on a stack with app instances go to the next instance, round-robin.

func (s *stack) Query(ctx context.Context, c pools.Class, tenant, sql string, args ...any) (pools.Result, error) {
	if s.app != nil {
		return s.app.pick().Query(ctx, c, tenant, sql, args...)
	}
	return s.Stack.Query(ctx, c, tenant, sql, args...)
}

func (s *stack) Tx(ctx context.Context, c pools.Class, tenant string, opts pgx.TxOptions, fn func(ctx context.Context, tx pgx.Tx) error) (pools.Result, error) {
	if s.app != nil {
		return s.app.pick().Tx(ctx, c, tenant, opts, fn)
	}
	return s.Stack.Tx(ctx, c, tenant, opts, fn)
}

func (s *stack) WithConn(ctx context.Context, c pools.Class, tenant string, fn func(ctx context.Context, conn *pgx.Conn) error) (pools.Result, error) {
	if s.app != nil {
		return s.app.pick().WithConn(ctx, c, tenant, fn)
	}
	return s.Stack.WithConn(ctx, c, tenant, fn)
}

// Stat is the first instance's Stat with every instance's pools.
func (s *stack) Stat() pools.Stat {
	st := s.Stack.Stat()
	if s.app != nil {
		for _, in := range s.app.instances[1:] {
			st.Pools = append(st.Pools, in.Stat().Pools...)
		}
	}
	return st
}

// WaitClosed waits for every instance's given-up connections to close.
func (s *stack) WaitClosed(ctx context.Context) error {
	if s.app == nil {
		return s.Stack.WaitClosed(ctx)
	}
	var errs []error
	for _, in := range s.app.instances {
		errs = append(errs, in.WaitClosed(ctx))
	}
	return errors.Join(errs...)
}

// Close closes every instance, the Redis limiters, the Redis connection
// and a redis-server noisysim started.
func (s *stack) Close() {
	if s.app != nil {
		s.app.close()
		return
	}
	s.Stack.Close()
}
