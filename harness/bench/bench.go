package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/workload"
	"github.com/noisysim/noisysim/workload/pgscript"
)

// Defaults for Config's zero values.
const (
	DefaultPgBench      = "/usr/lib/postgresql/15/bin/pgbench"
	DefaultDuration     = 10 * time.Second
	DefaultPoolSize     = 8
	DefaultThreads      = 2
	DefaultTenants      = 50
	DefaultFixedRate    = 20000
	DefaultOverload     = 1.5
	DefaultSearchStep   = 3 * time.Second
	DefaultSearchSteps  = 6
	DefaultSustainP99   = 100 * time.Millisecond
	DefaultMemTenants   = 10000
	DefaultMemClasses   = 3
	DefaultMemRate      = 5000
	DefaultMemDuration  = 10 * time.Minute
	DefaultSampleEvery  = 10 * time.Second
	DefaultMemWarmup    = time.Minute
	DefaultOrders       = 200000
	DefaultMemoryBudget = 500 << 20
	// MinSampleEvery is the shortest SampleEvery Run takes.
	MinSampleEvery = 100 * time.Millisecond
)

// ErrInvalid marks an unusable Config; the CLI exits 2 on it.
var ErrInvalid = errors.New("invalid bench configuration")

// Config tunes Run. The zero value runs every step with the defaults.
type Config struct {
	// PgBench is the pgbench binary. "" means DefaultPgBench.
	PgBench string
	// Duration is the length of each throughput step (pgbench and noisysim
	// at their maximum, then both at FixedRate). 0 means DefaultDuration.
	Duration time.Duration
	// PoolSize is pgbench's client count (-c) and the size of noisysim's
	// naive pool. 0 means DefaultPoolSize.
	PoolSize int
	// Threads is pgbench's -j. 0 means DefaultThreads.
	Threads int
	// Tenants is the tenant count of the throughput steps. 0 means
	// DefaultTenants.
	Tenants int
	// FixedRate is the rate (ops/s) both tools are held at in the
	// fixed-rate step. 0 means DefaultFixedRate; negative skips the step.
	FixedRate float64
	// Overload bounds the searches for the sustained maxima: the highest
	// rate tried is Overload × pgbench's unthrottled rate. 0 means DefaultOverload; it must be
	// > 1.
	Overload float64
	// SearchStep is the length of each probe of that search and
	// SearchSteps the number of rates probed (a probe that misses runs
	// once more at its rate, and the rate counts as sustained when the
	// second sustains it: one stall of a shared machine does not fix the
	// maximum): the first at pgbench's unthrottled
	// rate, then bisecting between the highest rate sustained and the
	// lowest not (from 0 and Overload × pgbench's), so the maximum is found
	// to within Overload × pgbench's / 2^(SearchSteps−1). pgbench's
	// sustained maximum is searched alike, with -R and -T SearchStep
	// (rounded to whole seconds). 0 means the defaults.
	SearchStep  time.Duration
	SearchSteps int
	// SustainP99 is the p99 latency (from the intended start) above which
	// a probe did not sustain its rate: ops queued for the pool faster than
	// it served them. A probe of noisysim sustains its rate when it also
	// drops fewer than 0.1% of its arrivals; pgbench's probes drop none
	// (the transactions they leave unstarted count in their p99, see
	// PgBenchRun.Unstarted). 0 means DefaultSustainP99.
	SustainP99 time.Duration
	// Procs is GOMAXPROCS while noisysim's open loops run (restored after
	// each): fewer Ps leave a woken goroutine no idle P to wake a second
	// thread for, at the risk of stalling the generator when its thread is
	// descheduled. 0 leaves GOMAXPROCS as it is.
	Procs int
	// SchedBatch puts noisysim's threads in the kernel's SCHED_BATCH policy
	// while its open loops run (restored after each): a thread woken by a
	// response or a timer then does not preempt the server's backend
	// running on its CPU.
	SchedBatch bool
	// SkipThroughput skips the maximum and fixed-rate steps.
	SkipThroughput bool
	// MemTenants × MemClasses series at MemRate ops/s for MemDuration, RSS
	// sampled every SampleEvery: the memory step. Zero values mean the
	// defaults; a negative MemDuration skips the step.
	MemTenants  int
	MemClasses  int
	MemRate     float64
	MemDuration time.Duration
	SampleEvery time.Duration
	// MemWarmup is the time after which the RSS must stay flat. 0 means
	// DefaultMemWarmup (or a tenth of MemDuration if that is shorter).
	MemWarmup time.Duration
	// MemProfile, if not "", is the prefix of the heap profiles the memory
	// step writes: MemProfile-warmup.pprof at the first sample at or after
	// MemWarmup and MemProfile-end.pprof at the end of its run (compare
	// them with go tool pprof -diff_base).
	MemProfile string
	// Orders is the number of rows of the data set. 0 means DefaultOrders.
	Orders int
	// Seed seeds the populations and schedules.
	Seed int64
	// Logger receives progress records. nil means silent.
	Logger *slog.Logger
}

// Validate reports every unusable field of c (after defaults), joined; each
// error wraps ErrInvalid.
func (c Config) Validate() error { return c.fill() }

func (c *Config) fill() error {
	orDefault(&c.PgBench, DefaultPgBench)
	orDefault(&c.Duration, DefaultDuration)
	orDefault(&c.PoolSize, DefaultPoolSize)
	orDefault(&c.Threads, DefaultThreads)
	orDefault(&c.Tenants, DefaultTenants)
	orDefault(&c.MemTenants, DefaultMemTenants)
	orDefault(&c.MemClasses, DefaultMemClasses)
	orDefault(&c.Orders, DefaultOrders)
	orDefault(&c.FixedRate, DefaultFixedRate)
	orDefault(&c.Overload, DefaultOverload)
	orDefault(&c.SearchStep, DefaultSearchStep)
	orDefault(&c.SearchSteps, DefaultSearchSteps)
	orDefault(&c.SustainP99, DefaultSustainP99)
	orDefault(&c.MemRate, DefaultMemRate)
	orDefault(&c.MemDuration, DefaultMemDuration)
	orDefault(&c.SampleEvery, DefaultSampleEvery)
	if c.MemWarmup == 0 {
		c.MemWarmup = min(DefaultMemWarmup, c.MemDuration/10)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	// Fields are named with the bench command's flag.
	flags := map[string]string{"Duration": "--duration", "PoolSize": "--pool", "Threads": "--threads", "Tenants": "--tenants",
		"MemTenants": "--memory-tenants", "MemClasses": "--memory-classes", "Orders": "--orders", "FixedRate": "--rate",
		"MemRate": "--memory-rate", "Overload": "--overload", "SampleEvery": "--sample-every",
		"SearchStep": "--search-step", "SearchSteps": "--search-steps", "SustainP99": "--sustain-p99", "Procs": "--procs",
		"MemProfile": "--memprofile", "MemWarmup": "--memory-warmup", "MemDuration": "--memory-duration"}
	bad := func(field string, v any, why string) {
		errs = append(errs, fmt.Errorf("%s (%s) = %v: %s: %w", field, flags[field], v, why, ErrInvalid))
	}
	if c.Duration < time.Second {
		bad("Duration", c.Duration, "must be at least 1s")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"PoolSize", c.PoolSize}, {"Threads", c.Threads}, {"MemClasses", c.MemClasses}, {"SearchSteps", c.SearchSteps}} {
		if f.v < 1 {
			bad(f.name, f.v, "must be ≥ 1")
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Tenants", c.Tenants}, {"MemTenants", c.MemTenants}} {
		if f.v < 2 || f.v > workload.MaxTenants {
			bad(f.name, f.v, fmt.Sprintf("want 2..%d tenants", workload.MaxTenants))
		}
	}
	if c.Orders < max(c.Tenants, c.MemTenants) {
		bad("Orders", c.Orders, "need at least one order per tenant")
	}
	if c.Threads > c.PoolSize {
		bad("Threads", c.Threads, "pgbench needs at least as many clients (PoolSize) as threads")
	}
	finite := func(name string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v > workload.MaxRate {
			bad(name, v, "must be a finite rate in ops/s")
		}
	}
	finite("FixedRate", c.FixedRate)
	finite("MemRate", c.MemRate)
	finite("Overload", c.Overload)
	if !(c.Overload > 1) {
		bad("Overload", c.Overload, "must be > 1")
	}
	if !(c.MemRate > 0) {
		bad("MemRate", c.MemRate, "must be > 0")
	}
	if c.SearchStep < time.Second {
		bad("SearchStep", c.SearchStep, "must be at least 1s")
	}
	if c.Procs < 0 {
		bad("Procs", c.Procs, "must be ≥ 0 (0 leaves GOMAXPROCS as it is)")
	}
	if c.SustainP99 <= 0 {
		bad("SustainP99", c.SustainP99, "must be > 0")
	}
	if c.SampleEvery < MinSampleEvery {
		// Each sample stops the world to read the heap: at a sample every
		// microsecond the step would measure its own sampling.
		bad("SampleEvery", c.SampleEvery, fmt.Sprintf("must be at least %v (each sample stops the program to read its heap)", MinSampleEvery))
	}
	switch {
	case c.MemDuration < 0: // the step is skipped: no warm-up to judge
	case c.MemWarmup < 0:
		bad("MemWarmup", c.MemWarmup, "must be ≥ 0 (0: DefaultMemWarmup or a tenth of the memory step)")
	case c.MemWarmup >= c.MemDuration:
		bad("MemWarmup", c.MemWarmup, fmt.Sprintf("must be shorter than the memory step (--memory-duration %v): no sample after it to judge the growth by", c.MemDuration))
	case c.SampleEvery > 0 && firstWarmSample(c.SampleEvery, c.MemWarmup) >= c.MemDuration:
		// The end's sample would then be the warm one too: growth 1, judged
		// on nothing.
		bad("SampleEvery", c.SampleEvery, fmt.Sprintf("the first sample at or after the warm-up (--memory-warmup %v) comes at %v, not before the memory step ends (--memory-duration %v): no growth could be seen",
			c.MemWarmup, firstWarmSample(c.SampleEvery, c.MemWarmup), c.MemDuration))
	}
	if c.SkipThroughput && c.MemDuration < 0 {
		bad("MemDuration", c.MemDuration, "with the throughput steps skipped (--skip-throughput), skipping the memory step too leaves nothing to measure")
	}
	if c.MemProfile != "" {
		// Found now, not when the warm-up's profile is due minutes later.
		dir := filepath.Dir(c.MemProfile)
		switch fi, err := os.Stat(dir); {
		case err != nil || !fi.IsDir():
			bad("MemProfile", c.MemProfile, "the prefix's directory does not exist")
		case c.MemDuration < 0:
			bad("MemProfile", c.MemProfile, "the memory step is skipped (--memory-duration negative): no profile would be written")
		default:
			// Writable? A file of its own, removed at once.
			f, err := os.CreateTemp(dir, ".noisysim-memprofile-*")
			if err != nil {
				bad("MemProfile", c.MemProfile, "its directory is not writable: "+err.Error())
				break
			}
			f.Close()
			os.Remove(f.Name())
		}
	}
	return errors.Join(errs...)
}

// Result holds every figure of one Run. Rates are ops/s (pgbench:
// transactions/s of the one-statement script), latencies are measured from
// the intended start on both sides.
type Result struct {
	Config Config `json:"-"`
	// Query is the statement both tools run.
	Query string
	// PgBenchMax is pgbench unthrottled (-M prepared -c PoolSize -j Threads).
	PgBenchMax PgBenchRun
	// PgBenchSustained is the highest rate pgbench sustained held at a
	// rate (-R, its own open loop), found as noisysim's is (the same
	// probes, the same criterion: see Config.SearchSteps and SustainP99),
	// the best of PgBenchProbes; the lowest probe (Sustained false) when
	// none sustained its rate. Its probes log a tenth of the transactions
	// (--sampling-rate 0.1).
	PgBenchSustained PgBenchRun
	PgBenchProbes    []PgBenchRun
	// NoisysimMax is the highest rate noisysim's open loop sustained
	// alone (PoolSize workers, each holding one connection of a bare
	// pgxpool pool: the generator), the
	// best of NoisysimProbes (see Config.SearchSteps); StackMax the same
	// through the naive isolation stack (one pool of PoolSize, tagging and
	// reset), as `noisysim run` drives a shared configuration. When no
	// probe sustained its rate they hold the lowest probe (Sustained false).
	NoisysimMax, StackMax OpenLoopRun
	// NoisysimProbes and StackProbes are the probes of the searches, in
	// the order they ran; pgbench's and noisysim's probes alternate.
	NoisysimProbes, StackProbes []OpenLoopRun
	// MaxRatio is NoisysimMax.Rate / PgBenchSustained.Rate (goal ≥ 0.9):
	// both maxima sustained by an open loop and judged alike.
	// UnthrottledRatio is NoisysimMax.Rate / PgBenchMax.Rate, against
	// pgbench's closed loop, which no criterion judges; StackMaxRatio is
	// StackMax.Rate / PgBenchSustained.Rate.
	MaxRatio, UnthrottledRatio, StackMaxRatio float64
	// PgBenchFixed, NoisysimFixed and StackFixed are held at
	// Config.FixedRate.
	PgBenchFixed              PgBenchRun
	NoisysimFixed, StackFixed OpenLoopRun
	// P99Ratio is NoisysimFixed.P99 / PgBenchFixed.P99 (goal ≤ 2);
	// StackP99Ratio is StackFixed.P99 / PgBenchFixed.P99.
	P99Ratio, StackP99Ratio float64
	// Memory is the memory step.
	Memory MemoryRun
}

// OpenLoopRun is one run of noisysim's open loop.
type OpenLoopRun struct {
	Offered   float64 // ops/s scheduled
	Rate      float64 // completed ops/s over the run (start to last completion)
	Scheduled int64
	Completed int64
	Errors    int64
	Dropped   int64
	// DropShare is Dropped / Scheduled.
	DropShare float64
	P50, P99  time.Duration
	MaxLag    time.Duration
	Took      time.Duration
	// Sustained: fewer than 0.1% of arrivals dropped and P99 within
	// Config.SustainP99 (set in the maximum's search only). Retry marks
	// a probe that repeated the previous one's rate after it missed; the
	// rate counts as sustained when the retry sustains it.
	Sustained, Retry bool
	// CPU is the user and system CPU time noisysim's process spent over
	// the run (getrusage, all threads: the open loop, pgx, the GC), and
	// CPUPerKOp that per 1,000 completed ops.
	CPU, CPUPerKOp time.Duration
	// Switches is the context switches of noisysim's process over the run
	// (getrusage, all threads, voluntary and not), SwitchesPerOp that per
	// completed op.
	Switches      int64
	SwitchesPerOp float64
}

// Run loads the data set into schema Schema of the database at dsn (it
// refuses a schema of that name it did not create, and drops it at the
// end), then runs the steps Config selects: pgbench and noisysim at their
// maximum, both at FixedRate, and the memory step. It returns the figures so
// far with the first error.
func Run(ctx context.Context, dsn string, cfg Config) (Result, error) {
	if err := cfg.fill(); err != nil {
		return Result{}, fmt.Errorf("bench: %w", err)
	}
	res := Result{Config: cfg, Query: lookupSQL}
	if cfg.MemDuration < 0 {
		res.Memory.Skipped = fmt.Sprintf("--memory-duration %v: a negative length skips it", cfg.MemDuration)
	}
	log := cfg.Logger
	tenants := max(cfg.Tenants, cfg.MemTenants)
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: tenants}, cfg.Seed)
	if err != nil {
		return res, fmt.Errorf("bench: %w: %w", ErrInvalid, err)
	}
	shares := make([]float64, pop.Len())
	for i, t := range pop.Tenants {
		shares[i] = t.Share
	}
	params := dataset.Params{Orders: dataset.Counts(shares, int64(cfg.Orders)), Customers: 100}
	plan := footprint.Plan{Schema: Schema, Run: "bench"}
	if err := load(ctx, dsn, plan, params); err != nil {
		return res, err
	}
	defer func() {
		// Drop what bench created, whatever happened.
		conn, err := pgx.Connect(context.WithoutCancel(ctx), dsn)
		if err != nil {
			log.Warn("bench: connect to drop schema "+Schema, "err", err)
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if err := footprint.Remove(context.WithoutCancel(ctx), conn, plan); err != nil {
			log.Warn("bench: drop schema "+Schema, "err", err)
		}
	}()
	raw := dsn // pgbench's: libpq takes no search_path in a DSN; its script names the schema
	dsn = withSearchPath(dsn, Schema)
	log.Info("data set loaded", "tenants", tenants, "orders", cfg.Orders)

	if !cfg.SkipThroughput {
		if err := throughput(ctx, raw, dsn, cfg, params, &res); err != nil {
			return res, err
		}
	}
	if res.Memory.Skipped == "" {
		if res.Memory, err = memory(ctx, dsn, cfg, params); err != nil {
			return res, err
		}
	}
	return res, nil
}

// lookupSQL is dataset.KindLookup's statement, the one both tools run.
const lookupSQL = `SELECT id, created_at, amount, status, customer FROM orders WHERE tenant_id = $1 AND id = $2`

// Schema is the schema bench creates its tables in (and drops at the end);
// it refuses to start when the schema exists and noisysim did not create it.
const Schema = "noisysim_bench"

// withSearchPath returns dsn whose pgx sessions resolve unqualified names in
// schema alone.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

func load(ctx context.Context, dsn string, plan footprint.Plan, p dataset.Params) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("bench: %w", backend.ConnectError(ctx, "the bench database", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := footprint.Claim(ctx, conn, "the bench database", plan); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := dataset.Load(ctx, conn, dataset.Spec{Schema: plan.Schema, Orders: p.Orders, Days: 365, Customers: p.Customers}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		return fmt.Errorf("bench: load data set: %w", err)
	}
	return nil
}

func throughput(ctx context.Context, pgbenchDSN, dsn string, cfg Config, params dataset.Params, res *Result) error {
	log := cfg.Logger
	// The throughput steps use the first cfg.Tenants tenants; every one of
	// them has order 1, which pgbench looks up.
	script := fmt.Sprintf("\\set tenant random(1, %d)\nSELECT id, created_at, amount, status, customer FROM %s.orders WHERE tenant_id = :tenant AND id = 1;\n", cfg.Tenants, Schema)
	pb := pgBench{bin: cfg.PgBench, dsn: pgbenchDSN, clients: cfg.PoolSize, threads: cfg.Threads, script: script}
	var err error
	log.Info("pgbench at its maximum", "duration", cfg.Duration)
	if res.PgBenchMax, err = pb.run(ctx, cfg.Duration, 0, 1); err != nil {
		return err
	}
	// pgbench's sustained maximum and noisysim's are searched alike, their
	// probes alternating so that a change in the machine's load moves both.
	pgs, nss := newBisection(res.PgBenchMax.Rate, cfg.Overload), newBisection(res.PgBenchMax.Rate, cfg.Overload)
	for range cfg.SearchSteps {
		best, err := pgs.step(func(rate float64, retry bool) (bool, error) {
			p, err := pb.run(ctx, cfg.SearchStep, rate, pgbenchSampling)
			if err != nil {
				return false, err
			}
			p.Sustained, p.Retry = p.P99 <= cfg.SustainP99, retry
			res.PgBenchProbes = append(res.PgBenchProbes, p)
			log.Info("pgbench probe", "offered", math.Round(p.Offered), "rate", math.Round(p.Rate), "unstarted", p.Unstarted,
				"p99_ms", float64(p.P99)/float64(time.Millisecond), "sustained", p.Sustained, "retry", p.Retry)
			return p.Sustained, nil
		})
		if err != nil {
			return err
		}
		if best {
			res.PgBenchSustained = res.PgBenchProbes[len(res.PgBenchProbes)-1]
		}
		best, err = nss.step(func(rate float64, retry bool) (bool, error) {
			r, err := probe(ctx, dsn, cfg, params, viaWorkers, rate, retry)
			if err != nil {
				return false, err
			}
			res.NoisysimProbes = append(res.NoisysimProbes, r)
			return r.Sustained, nil
		})
		if err != nil {
			return err
		}
		if best {
			res.NoisysimMax = res.NoisysimProbes[len(res.NoisysimProbes)-1]
		}
	}
	if !res.PgBenchSustained.Sustained {
		res.PgBenchSustained = res.PgBenchProbes[len(res.PgBenchProbes)-1] // the lowest tried
	}
	if !res.NoisysimMax.Sustained {
		res.NoisysimMax = res.NoisysimProbes[len(res.NoisysimProbes)-1]
	}
	res.MaxRatio = res.NoisysimMax.Rate / res.PgBenchSustained.Rate
	res.UnthrottledRatio = res.NoisysimMax.Rate / res.PgBenchMax.Rate
	if res.StackProbes, res.StackMax, err = search(ctx, dsn, cfg, params, viaStack, res.PgBenchMax.Rate); err != nil {
		return err
	}
	res.StackMaxRatio = res.StackMax.Rate / res.PgBenchSustained.Rate
	if cfg.FixedRate < 0 {
		return nil
	}
	log.Info("pgbench at a fixed rate", "rate", cfg.FixedRate)
	if res.PgBenchFixed, err = pb.run(ctx, cfg.Duration, cfg.FixedRate, 1); err != nil {
		return err
	}
	log.Info("noisysim open loop at a fixed rate", "rate", cfg.FixedRate)
	if res.NoisysimFixed, err = openLoop(ctx, dsn, cfg, params, viaWorkers, cfg.Tenants, 1, cfg.FixedRate, cfg.Duration, nil); err != nil {
		return err
	}
	if res.StackFixed, err = openLoop(ctx, dsn, cfg, params, viaStack, cfg.Tenants, 1, cfg.FixedRate, cfg.Duration, nil); err != nil {
		return err
	}
	if res.PgBenchFixed.P99 > 0 {
		res.P99Ratio = float64(res.NoisysimFixed.P99) / float64(res.PgBenchFixed.P99)
		res.StackP99Ratio = float64(res.StackFixed.P99) / float64(res.PgBenchFixed.P99)
	}
	return nil
}

// pgbenchSampling is the share of transactions pgbench's probes log.
const pgbenchSampling = 0.1

// bisection is the search for a maximum rate: the first rate at the
// reference rate, then halfway between the highest rate sustained so far (at
// first 0) and the lowest not (at first overload × the reference).
type bisection struct{ lo, hi, rate float64 }

func newBisection(ref, overload float64) *bisection {
	return &bisection{hi: overload * ref, rate: ref}
}

// step probes b.rate, and once more at that rate when the probe missed (one
// stall of a shared machine should not fix a ceiling), then moves b.rate on
// with next. It reports whether the rate was sustained: the last probe is
// then the best so far.
func (b *bisection) step(probe func(rate float64, retry bool) (sustained bool, err error)) (bool, error) {
	sustained, err := probe(b.rate, false)
	if err == nil && !sustained {
		sustained, err = probe(b.rate, true)
	}
	if err != nil {
		return false, err
	}
	return b.next(sustained), nil
}

// next takes the outcome of the probe at b.rate, moves b.rate to the next
// probe's and reports whether that probe is the best sustained so far.
func (b *bisection) next(sustained bool) (best bool) {
	if sustained {
		b.lo = b.rate
	} else {
		b.hi = b.rate
	}
	b.rate = (b.lo + b.hi) / 2
	return sustained
}

// probe runs the open loop along via at rate for cfg.SearchStep and judges
// whether it sustained its rate (see Config.SustainP99); retry marks the
// second probe at a rate.
func probe(ctx context.Context, dsn string, cfg Config, params dataset.Params, via path, rate float64, retry bool) (OpenLoopRun, error) {
	r, err := openLoop(ctx, dsn, cfg, params, via, cfg.Tenants, 1, rate, cfg.SearchStep, nil)
	if err != nil {
		return r, err
	}
	r.Sustained, r.Retry = r.DropShare < 0.001 && r.P99 <= cfg.SustainP99, retry
	what := "noisysim open loop"
	if via == viaStack {
		what += " through the stack"
	}
	cfg.Logger.Info(what+" probe", "offered", math.Round(rate), "rate", math.Round(r.Rate), "dropped", r.Dropped,
		"p99_ms", float64(r.P99)/float64(time.Millisecond), "sustained", r.Sustained, "retry", retry)
	return r, nil
}

// search finds the highest rate the open loop sustains along via (see
// Config.SustainP99) by a bisection of cfg.SearchSteps probes from
// pgbench's rate. An open loop offered more than it can serve queues up to
// its MaxInFlight ops (through the stack, as many goroutines on the pool,
// whose CPU is spent on them): its completion rate then is not its capacity.
func search(ctx context.Context, dsn string, cfg Config, params dataset.Params, via path, pgbenchRate float64) (probes []OpenLoopRun, best OpenLoopRun, err error) {
	b := newBisection(pgbenchRate, cfg.Overload)
	for range cfg.SearchSteps {
		sustained, err := b.step(func(rate float64, retry bool) (bool, error) {
			r, err := probe(ctx, dsn, cfg, params, via, rate, retry)
			if err != nil {
				return false, err
			}
			probes = append(probes, r)
			return r.Sustained, nil
		})
		if err != nil {
			return probes, best, err
		}
		if sustained {
			best = probes[len(probes)-1]
		}
	}
	if !best.Sustained {
		best = probes[len(probes)-1] // the lowest tried
	}
	return probes, best, nil
}

// path is the way an open loop's ops reach the server.
type path int

const (
	// viaWorkers: cfg.PoolSize workers (OpenLoopConfig.Workers), each
	// holding one connection of a bare pgxpool pool for the run, as
	// pgbench's clients do: the generator alone.
	viaWorkers path = iota
	// viaPool: a goroutine per op, each acquiring a connection of a bare
	// pgxpool pool of cfg.PoolSize per op (the generator before workers;
	// kept for BenchmarkGeneratorPath).
	viaPool
	// viaStack: a goroutine per op through a naive stack (one pool of
	// cfg.PoolSize, tagging and reset), as `noisysim run` runs a shared
	// configuration.
	viaStack
)

// openLoop runs dataset lookups for the first tenants tenants in classes
// classes at rate ops/s for d along via. tick, if not nil, is called every
// cfg.SampleEvery while the run lasts (final false) and once when it has
// ended (final true), from one goroutine at a time, with the run's recorder.
func openLoop(ctx context.Context, dsn string, cfg Config, params dataset.Params, via path, tenants, classes int, rate float64, d time.Duration, tick func(elapsed time.Duration, final bool, rec *metrics.Recorder)) (OpenLoopRun, error) {
	out := OpenLoopRun{Offered: rate}
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: tenants}, cfg.Seed)
	if err != nil {
		return out, fmt.Errorf("bench: %w: %w", ErrInvalid, err)
	}
	specs := make([]workload.ClassSpec, classes)
	for i := range specs {
		specs[i] = workload.ClassSpec{Name: "lookup" + strconv.Itoa(i+1), Rate: rate / float64(classes)}
	}
	src, err := workload.NewStream(pop, specs, d, cfg.Seed, nil)
	if err != nil {
		return out, fmt.Errorf("bench: %w: %w", ErrInvalid, err)
	}
	stack, err := pools.New(ctx, pools.Config{
		Pools:   []pools.PoolConfig{{Name: "shared", DSN: dsn, Size: int32(cfg.PoolSize)}},
		Classes: map[pools.Class]pools.ClassConfig{pools.Interactive: {Pool: "shared"}},
	})
	if err != nil {
		return out, fmt.Errorf("bench: open the naive stack: %w", err)
	}
	defer stack.Close()
	// As a run's windows: the tenant series at 2 significant digits, the
	// figures printed from an aggregate of every series at 3.
	rec, err := metrics.New(metrics.Config{Interval: -1, SeriesSigFigs: metrics.TenantSigFigs,
		Aggregates: []metrics.Aggregate{{Name: benchAll}}})
	if err != nil {
		return out, err
	}
	// Every series of the population up front: its rare tenants would
	// otherwise keep adding series (and the recorder's memory) for as long
	// as the run lasts.
	keys := make([]metrics.Key, 0, len(pop.Tenants)*len(specs))
	for _, t := range pop.Tenants {
		for _, c := range specs {
			keys = append(keys, metrics.Key{Tenant: t.ID, Class: c.Name})
		}
	}
	rec.Reserve(keys...)
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return out, fmt.Errorf("bench: %w", err)
	}
	pc.MaxConns = int32(cfg.PoolSize)
	bare, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return out, fmt.Errorf("bench: open pool: %w", err)
	}
	defer bare.Close()
	lookup, err := dataset.Script(dataset.KindLookup, []string{"tenant", "rows_orders"}, dataset.ScriptParams{Customers: params.Customers})
	if err != nil {
		return out, fmt.Errorf("bench: %w", err)
	}
	// The generator alone runs as pgbench does: PoolSize workers, each
	// holding one of the pool's connections for the run (conns never
	// blocks: a worker takes one and puts it back before its next op), so
	// an op costs no start of a goroutine, no hand-off to one and no pool
	// acquire. The stack keeps a goroutine per op, as `noisysim run`.
	var conns chan *workerConn
	olc := workload.OpenLoopConfig{Logger: cfg.Logger}
	if via == viaWorkers {
		olc.Workers = cfg.PoolSize
		conns = make(chan *workerConn, cfg.PoolSize)
		for range cfg.PoolSize {
			c, err := bare.Acquire(ctx)
			if err != nil {
				return out, fmt.Errorf("bench: acquire a connection: %w", err)
			}
			defer c.Release()
			conns <- &workerConn{conn: c.Conn()}
		}
	}
	exec := func(ctx context.Context, op workload.Op) error {
		if via == viaWorkers {
			c := <-conns
			defer func() { conns <- c }()
			return c.lookup(ctx, lookup, cfg.Seed, op, params.Orders[op.Tenant])
		}
		rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(op.Seq)))
		sql, args, _, err := lookup.Single(rng, []pgscript.Value{pgscript.Int(int64(op.Tenant)), pgscript.Int(max(params.Orders[op.Tenant], 1))})
		if err != nil {
			return err
		}
		for i, a := range args {
			args[i] = strconv.FormatInt(a.(int64), 10) // as text, as pgbench sends it
		}
		if via == viaPool {
			rows, err := bare.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}
		_, err = stack.Query(ctx, pools.Interactive, strconv.Itoa(op.Tenant), sql, args...)
		return err
	}
	// The sampler calls tick every cfg.SampleEvery from the start (warming
	// the pool included), and once more at the end of the run, while its
	// pool and recorder are still live.
	stopSampler := func() {}
	if tick != nil {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		t0 := time.Now()
		stopSampler = sync.OnceFunc(func() {
			close(stop)
			wg.Wait()
			tick(time.Since(t0), true, rec)
		})
		defer stopSampler()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(cfg.SampleEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					tick(time.Since(t0), false, rec)
				}
			}
		}()
	}
	// Open and prepare every connection first, as a long run finds them:
	// the first ops of a short probe would otherwise wait for connections
	// to be opened and count that in its p99.
	if err := warm(ctx, cfg.PoolSize, func(ctx context.Context, i int) error {
		return exec(ctx, workload.Op{Seq: -1 - int64(i), Tenant: 1 + i%tenants})
	}); err != nil {
		return out, fmt.Errorf("bench: warm the pool: %w", err)
	}
	if cfg.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.Procs))
	}
	if cfg.SchedBatch {
		restore, err := schedBatch()
		defer restore()
		if err != nil {
			return out, fmt.Errorf("bench: --sched-batch: %w", err)
		}
	}
	cpu0, sw0 := selfUsage()
	stats, err := workload.RunOpenLoopSource(ctx, src, exec, rec, olc)
	cpu1, sw1 := selfUsage()
	out.CPU, out.Switches = cpu1-cpu0, sw1-sw0
	stopSampler()
	if err != nil {
		return out, fmt.Errorf("bench: open loop: %w", err)
	}
	sum, _ := rec.Aggregate(benchAll)
	out.Scheduled, out.Completed, out.Errors, out.Dropped = stats.Scheduled, stats.Completed, stats.Errors, stats.Dropped
	out.Took = stats.End.Sub(stats.Start)
	out.Rate = float64(stats.Completed) / out.Took.Seconds()
	if stats.Scheduled > 0 {
		out.DropShare = float64(stats.Dropped) / float64(stats.Scheduled)
	}
	out.P50, out.P99, out.MaxLag = sum.P50, sum.P99, stats.MaxLag
	out.CPUPerKOp = perKOp(out.CPU, stats.Completed)
	out.SwitchesPerOp = perOp(out.Switches, stats.Completed)
	if stats.Errors > 0 {
		cfg.Logger.Warn("open loop ops failed", "errors", stats.Errors, "by_class", sum.ErrorsByClass)
	}
	return out, nil
}

// benchAll names the open loop recorder's aggregate of every series.
const benchAll = "all"

// workerConn is one worker's connection and what it reuses from op to op:
// the lookup's prepared statement, its random source, its script's drawer,
// the buffers of its parameters and the watch of the ops' context.
type workerConn struct {
	conn   *pgx.Conn
	stmt   *pgconn.StatementDescription
	pcg    rand.PCG
	rng    *rand.Rand
	drawer *pgscript.Drawer // of the script of the first lookup
	// builtins are the script's: the tenant and its order count.
	builtins [2]pgscript.Value
	params   [][]byte
	buf      []byte
	// watched is the context of the ops so far; its cancellation sets a
	// past deadline on the connection (as pgx does for a cancelled query),
	// so that an op in flight returns at once. pgx would otherwise watch
	// each op's context itself, which registers and removes a callback on
	// the run's context per op (6.6% of the workers' CPU).
	watched context.Context
	stop    func() bool
}

// lookup runs op's lookup on c as pgx's Query would, the statement prepared
// once per connection and the parameters sent as text (as pgbench sends
// them), without pgx's per-op type mapping: the parameters are drawn as by
// the script (the same seed, so the same values), encoded into c's buffers,
// and every row of the result is read and its error returned. rows is the
// tenant's order count.
func (c *workerConn) lookup(ctx context.Context, script *pgscript.Script, seed int64, op workload.Op, rows int64) error {
	sql, err := c.draw(script, seed, op, rows)
	if err != nil {
		return err
	}
	if c.stmt == nil || c.stmt.SQL != sql {
		if c.stmt, err = c.conn.Prepare(ctx, "noisysim_bench_lookup", sql); err != nil {
			return err
		}
	}
	if ctx != c.watched {
		if c.stop != nil {
			c.stop()
		}
		nc := c.conn.PgConn().Conn()
		c.watched, c.stop = ctx, context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err = c.conn.PgConn().ExecStatement(context.Background(), c.stmt, c.params, nil, nil).Close()
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("bench: lookup: %w: %w", ctx.Err(), err)
	}
	return err
}

// draw draws op's lookup from the script (seeded by seed and op.Seq) and
// encodes its parameters as text into c.params; rows is the tenant's order
// count.
func (c *workerConn) draw(script *pgscript.Script, seed int64, op workload.Op, rows int64) (string, error) {
	if c.drawer == nil {
		var ok bool
		if c.drawer, ok = script.Drawer(); !ok {
			return "", fmt.Errorf("bench: %s: not a single statement", script.File)
		}
		c.rng = rand.New(&c.pcg)
	}
	c.pcg.Seed(uint64(seed), uint64(op.Seq))
	c.builtins[0], c.builtins[1] = pgscript.Int(int64(op.Tenant)), pgscript.Int(max(rows, 1))
	sql, args, err := c.drawer.Draw(c.rng, c.builtins[:])
	if err != nil {
		return "", err
	}
	c.buf, c.params = c.buf[:0], c.params[:0]
	for _, a := range args {
		start := len(c.buf)
		c.buf = a.AppendText(c.buf)
		c.params = append(c.params, c.buf[start:])
	}
	return sql, nil
}

// warm calls f from size goroutines at once, four times each, so that a pool
// of size opens (and prepares a statement on) every connection it will use.
func warm(ctx context.Context, size int, f func(ctx context.Context, i int) error) error {
	errs := make([]error, size)
	var wg sync.WaitGroup
	for g := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				if err := f(ctx, g*4+i); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// MemoryRun is the memory step: RSS and Go heap sampled during a long run.
type MemoryRun struct {
	// Skipped, when not "", says why the step did not run (a negative
	// Config.MemDuration, named by its flag); the other fields are then
	// zero.
	Skipped          string `json:",omitempty"`
	Tenants, Classes int
	Rate             float64
	Duration         time.Duration
	Run              OpenLoopRun
	// Samples are taken every Config.SampleEvery from the start of the
	// run, and once at its end.
	Samples []MemorySample
	// MaxRSS is the largest RSS sampled (bytes).
	MaxRSS uint64
	// WarmRSS is the first RSS sampled at or after the warm-up and LastRSS
	// the last one; Growth is LastRSS / WarmRSS (flat: close to 1).
	WarmRSS, LastRSS uint64
	Growth           float64
	// Profiles are the heap profiles written (Config.MemProfile): at the
	// warm-up's sample and at the end of the run.
	Profiles []string
}

// MemorySample is one sample of the process's memory. The Heap and Stack
// fields are runtime.MemStats' of the same names (bytes).
type MemorySample struct {
	Elapsed time.Duration
	// RSS is the process's resident set size (bytes, /proc/self/status
	// VmRSS); 0 where /proc is not available.
	RSS uint64
	// HeapInuse is the Go heap in use: spans holding at least one object,
	// live or not yet swept. HeapAlloc is the bytes of the objects in it
	// (live and unswept garbage), HeapSys the heap's address space from the
	// OS, HeapIdle its spans holding no object, HeapReleased the part of
	// HeapIdle returned to the OS (not in RSS).
	HeapInuse, HeapAlloc, HeapSys, HeapIdle, HeapReleased uint64
	// StackInuse is the goroutine stacks' spans.
	StackInuse uint64
	// NumGC is the number of GC cycles completed since the process began.
	NumGC uint32
	// Goroutines is the number of goroutines alive.
	Goroutines int
	// Series is the number of tenant × class series the run's recorder
	// holds (each series keeps two histograms).
	Series int
}

// sampleMemory returns the process's memory at elapsed.
func sampleMemory(elapsed time.Duration) MemorySample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return MemorySample{Elapsed: elapsed, RSS: rss(), HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, HeapSys: ms.HeapSys,
		HeapIdle: ms.HeapIdle, HeapReleased: ms.HeapReleased, StackInuse: ms.StackInuse, NumGC: ms.NumGC,
		Goroutines: runtime.NumGoroutine()}
}

func memory(ctx context.Context, dsn string, cfg Config, params dataset.Params) (MemoryRun, error) {
	m := MemoryRun{Tenants: cfg.MemTenants, Classes: cfg.MemClasses, Rate: cfg.MemRate, Duration: cfg.MemDuration}
	debug.FreeOSMemory() // start from what this step needs, not what earlier steps left
	var profErr error
	profile := func(name string) {
		if cfg.MemProfile == "" || profErr != nil {
			return
		}
		path := cfg.MemProfile + "-" + name + ".pprof"
		if profErr = writeHeapProfile(path); profErr == nil {
			m.Profiles = append(m.Profiles, path)
		}
	}
	warm := false
	sample := func(elapsed time.Duration, final bool, rec *metrics.Recorder) {
		s := sampleMemory(elapsed)
		s.Series = rec.Len()
		m.Samples = append(m.Samples, s)
		cfg.Logger.Info("memory", "elapsed", elapsed.Round(time.Second), "rss_mb", s.RSS>>20, "heap_inuse_mb", s.HeapInuse>>20,
			"heap_alloc_mb", s.HeapAlloc>>20, "heap_idle_mb", s.HeapIdle>>20, "heap_released_mb", s.HeapReleased>>20,
			"stack_mb", s.StackInuse>>20, "gc", s.NumGC, "goroutines", s.Goroutines, "series", s.Series)
		if !warm && elapsed >= cfg.MemWarmup {
			warm = true
			profile("warmup")
		}
		if final {
			profile("end")
		}
	}
	cfg.Logger.Info("memory step", "tenants", cfg.MemTenants, "classes", cfg.MemClasses, "rate", cfg.MemRate, "duration", cfg.MemDuration)
	var err error
	m.Run, err = openLoop(ctx, dsn, cfg, params, viaStack, cfg.MemTenants, cfg.MemClasses, cfg.MemRate, cfg.MemDuration, sample)
	if err != nil {
		return m, err
	}
	if profErr != nil {
		return m, fmt.Errorf("bench: memory profile (--memprofile): %w", profErr)
	}
	for _, s := range m.Samples {
		m.MaxRSS = max(m.MaxRSS, s.RSS)
		if m.WarmRSS == 0 && s.Elapsed >= cfg.MemWarmup {
			m.WarmRSS = s.RSS
		}
		m.LastRSS = s.RSS
	}
	if m.WarmRSS > 0 {
		m.Growth = float64(m.LastRSS) / float64(m.WarmRSS)
	}
	return m, nil
}

// writeHeapProfile writes the heap profile (as of the last GC: inuse_space,
// inuse_objects and the allocations since the start) to path, for go tool
// pprof.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// firstWarmSample is when the memory step's sampler, ticking every every
// from the start, first samples at or after warmup.
func firstWarmSample(every, warmup time.Duration) time.Duration {
	n := max(1, (warmup+every-1)/every)
	if n > math.MaxInt64/every {
		return math.MaxInt64
	}
	return n * every
}

// orDefault sets *v to d when *v is its type's zero value.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}
