package hotshard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/workload"
)

// Defaults of Config fields left zero.
const (
	DefaultTenants      = 20
	DefaultHotShare     = 0.6
	DefaultRows         = 20000
	DefaultRate         = 200.0 // queries/s
	DefaultQueryTime    = 10 * time.Millisecond
	DefaultSolo         = 3 * time.Second
	DefaultBefore       = 5 * time.Second
	DefaultAfter        = 5 * time.Second
	DefaultDetectEvery  = 500 * time.Millisecond
	DefaultDetectWithin = 3 * time.Second
	DefaultWriterRate   = 100.0 // writes/s
	DefaultMaxPause     = time.Second
	DefaultP99Factor    = 1.5
	DefaultP99Slack     = 5 * time.Millisecond
	DefaultMaxInFlight  = 64
	// DefaultStepSample is how long worker load is sampled before and
	// after each ladder step.
	DefaultStepSample = 300 * time.Millisecond
	// DefaultSampleInterval is the time between pg_stat_activity samples
	// (through the coordinator, citus.MinViaInterval at least).
	DefaultSampleInterval = 20 * time.Millisecond
	// DefaultWarmup is run before the solo window and discarded.
	DefaultWarmup = time.Second
	// MaxRate bounds Config.Rate (queries/s) and MaxWriterRate
	// Config.WriterRate (writes/s), as a scenario's hot_shard section
	// does.
	MaxRate       = 10000.0
	MaxWriterRate = 5000.0
)

// DefaultKind is the data set's page query (a customer's latest orders of
// the tenant: an index scan whose cost does not grow with the tenant's
// rows), so that the hot tenant is hot by its share of the queries, as in
// the power law, and its shard's worker by the DB time it takes.
// Per-worker load comes from the ledger (Attribute), not from sampling
// alone: page queries are too short to be caught active often by
// pg_stat_activity samples, which are kept beside it as a cross-check.
const DefaultKind = dataset.KindPage

// Assertion names.
const (
	AssertDetected   = "detected_in_window"
	AssertAlone      = "hot_shard_alone"
	AssertOtherSkew  = "other_workers_skew"
	AssertQuietP99   = "quiet_p99_after"
	AssertZeroLoss   = "zero_loss"
	AssertWritePause = "write_pause"
)

// Config is one hot-shard run. Zero fields take the Default constants.
type Config struct {
	// Tenants is the tenant count (ids 1..Tenants); tenant 1 is hot.
	Tenants int
	// HotShare is tenant 1's share of queries and rows, in (0, 1); the
	// rest goes to tenants 2..Tenants by a power law (Distribution,
	// Exponent: workload.NewPopulation, drawn with Seed), so that a few
	// quiet tenants have most of it.
	HotShare float64
	// Distribution and Exponent shape the quiet tenants' power law;
	// "" and 0 mean workload.DefaultDistribution and its default
	// parameter. Shares pins some quiet tenants' shares by id (optional).
	Distribution workload.Distribution
	Exponent     float64
	Shares       map[int]float64
	// Rows is the orders row count.
	Rows int64
	// ShardCount is the shard count (0: citus.DefaultShardCount).
	ShardCount int
	// Rate is the open-loop query rate, queries/s, at most MaxRate.
	Rate float64
	// Kind is each query: a data-set query of the tenant's own orders
	// (dataset.KindLookup, KindPage or KindReport, whose cost grows with
	// the tenant's rows), or dataset.KindSleep: a pg_sleep of QueryTime
	// on the tenant's shard, a query of exact cost. "" means DefaultKind.
	Kind      dataset.Kind
	QueryTime time.Duration
	// Solo is the quiet tenants' window alone (their baseline p99);
	// Before the window with the hot tenant before the ladder, After the
	// window after it.
	Solo, Before, After time.Duration
	// DetectEvery is the detection sampling window; DetectWithin the
	// bound on time from the hot tenant's start to the first alert.
	DetectEvery, DetectWithin time.Duration
	// Thresholds of detection and of the ladder.
	Thresholds citus.Thresholds
	// Mode is the shard transfer mode ("" means citus.DefaultTransferMode).
	Mode citus.TransferMode
	// Apply runs the ladder; false stops after detection and the plan.
	Apply bool
	// WriterRate is the hot tenant's checked inserts per second (at most
	// MaxWriterRate);
	// MaxPause bounds the longest gap between acknowledgements.
	WriterRate float64
	MaxPause   time.Duration
	// P99Factor and P99Slack: quiet tenants' p99 after the ladder must be
	// <= P99Factor × their solo p99 + P99Slack.
	P99Factor float64
	P99Slack  time.Duration
	// Seed seeds tenant choice.
	Seed uint64
	// Schema holds the data set's tables; it must exist on the coordinator
	// (footprint.Claim makes it). Every session of the run has it as its
	// search_path. Empty means footprint.DefaultSchema.
	Schema string
	// Log gets progress; nil is silent.
	Log *slog.Logger
	// OnPhase, if set, is called as each phase starts (PhaseLoad,
	// PhaseWarmup, PhaseSolo, PhaseBefore, PhaseLadder, PhaseAfter) with
	// its planned length, 0 when it has none; OnQuery once per query
	// issued. For a progress display; they must not block.
	OnPhase func(phase string, planned time.Duration)
	OnQuery func()
}

// check returns an error wrapping backend.ErrBadInput, naming the field,
// for a Config no run can be carried out with: NaN or infinite figures
// (no "0 means the default" check catches them), rates above MaxRate and
// MaxWriterRate, more than workload.MaxTenants tenants.
func (c Config) check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"HotShare", c.HotShare}, {"Rate", c.Rate}, {"WriterRate", c.WriterRate}, {"P99Factor", c.P99Factor},
		{"Thresholds.Skew", c.Thresholds.Skew}, {"Thresholds.Isolate", c.Thresholds.Isolate},
		{"Thresholds.Dedicate", c.Thresholds.Dedicate}, {"Thresholds.Cluster", c.Thresholds.Cluster}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("run hot shard: %s %v: not a finite number: %w", f.name, f.v, backend.ErrBadInput)
		}
	}
	switch {
	case c.Rate > MaxRate:
		return fmt.Errorf("run hot shard: Rate %v queries/s: at most %v: %w", c.Rate, MaxRate, backend.ErrBadInput)
	case c.WriterRate > MaxWriterRate:
		return fmt.Errorf("run hot shard: WriterRate %v writes/s: at most %v: %w", c.WriterRate, MaxWriterRate, backend.ErrBadInput)
	case c.Tenants > workload.MaxTenants:
		return fmt.Errorf("run hot shard: Tenants %d: at most %d: %w", c.Tenants, workload.MaxTenants, backend.ErrBadInput)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = footprint.DefaultSchema
	}
	d := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	f := func(v *float64, def float64) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.Tenants <= 1 {
		c.Tenants = DefaultTenants
	}
	if c.HotShare <= 0 || c.HotShare >= 1 {
		c.HotShare = DefaultHotShare
	}
	if c.Rows <= 0 {
		c.Rows = DefaultRows
	}
	if c.Kind == "" {
		c.Kind = DefaultKind
	}
	f(&c.Rate, DefaultRate)
	f(&c.WriterRate, DefaultWriterRate)
	f(&c.P99Factor, DefaultP99Factor)
	d(&c.QueryTime, DefaultQueryTime)
	d(&c.Solo, DefaultSolo)
	d(&c.Before, DefaultBefore)
	d(&c.After, DefaultAfter)
	d(&c.DetectEvery, DefaultDetectEvery)
	d(&c.DetectWithin, DefaultDetectWithin)
	d(&c.MaxPause, DefaultMaxPause)
	d(&c.P99Slack, DefaultP99Slack)
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.OnPhase == nil {
		c.OnPhase = func(string, time.Duration) {}
	}
	if c.OnQuery == nil {
		c.OnQuery = func() {}
	}
	return c
}

// Window is what one measured window saw.
type Window struct {
	// Length is the window's wall-clock length.
	Length time.Duration
	// Workers is each worker's load by worker name: the DB time of the
	// tenants whose shard it holds, from the ledger, over the window's
	// length (citus.Attribute), in mean busy backends.
	Workers map[string]float64
	// Sampled is each worker's mean active client backends sampled in
	// pg_stat_activity on the worker: a cross-check of Workers that also
	// sees traffic outside the isolation stack.
	Sampled map[string]float64
	// Samples is the number of pg_stat_activity samples in Sampled.
	Samples int
	// SharedSkew is max / median of Workers over the workers that take
	// shards; SampledSkew the same of Sampled. A skew over idle workers
	// (median 0, some load) is the largest float64, as in Point.
	SharedSkew, SampledSkew float64
	// HotWorkerShare is the hot tenant's worker's share of all workers'
	// load, 0..1, from Workers; SampledHotWorkerShare from Sampled.
	HotWorkerShare, SampledHotWorkerShare float64
	// QuietP50, QuietP99 and QuietMax are the quiet tenants' latencies
	// from intended start (HdrHistogram, harness/metrics), over QuietCount
	// queries; QuietServiceP99 their service time's p99 (from the
	// actual start).
	QuietP50, QuietP99, QuietMax, QuietServiceP99 time.Duration
	QuietCount                                    int64
	// Queries and Dropped count the window's queries and arrivals dropped
	// because DefaultMaxInFlight queries were running; Errors the queries
	// that failed.
	Queries, Dropped, Errors int64
	// DBTime is each tenant's DB time the isolation stack's ledger
	// recorded in the window, and Shares its share (0..1) of the total:
	// the tenant's share of cluster DB time.
	DBTime map[string]time.Duration
	Shares map[string]float64
}

// Phases of a run, in order; a Point is in PhaseBefore or PhaseAfter.
const (
	PhaseLoad   = "load"
	PhaseWarmup = "warmup"
	PhaseSolo   = "solo"
	PhaseBefore = "before"
	PhaseLadder = "ladder"
	PhaseAfter  = "after"
)

// Point is the load over one detection interval.
type Point struct {
	// Phase is PhaseBefore or PhaseAfter; At is the interval's end from
	// the phase's start.
	Phase string
	At    time.Duration
	// Workers is each worker's load over the interval (DB time
	// attributed through the placements, as Window.Workers); Sampled its
	// mean active backends sampled in pg_stat_activity.
	Workers, Sampled map[string]float64
	// Shards is each shard's load over the interval (DB time attributed
	// as for Workers) by orders shard id, shards with load only; HotShard
	// is tenant 1's shard then.
	Shards   map[int64]float64
	HotShard int64
	// WorkerSkew is max / median of Workers over the workers that take
	// shards, ShardSkew the same over the shards with a measured load (a
	// shard's load is the sum of its tenants' shares of DB time).
	WorkerSkew, ShardSkew float64
	// HotShare is tenant 1's share of cluster DB time in the interval,
	// from the ledger.
	HotShare float64
}

func point(phase string, at time.Duration, t tick, plan citus.Plan, hotShard int64) Point {
	return Point{Phase: phase, At: at, Workers: t.load.Workers, Sampled: t.sampled.Workers, Shards: t.shards, HotShard: hotShard,
		WorkerSkew: finite(plan.WorkerSkew), ShardSkew: finite(plan.ShardSkew), HotShare: t.load.Tenants["1"]}
}

// Shard is tenant 1's shard of orders as citus_shards shows it.
type Shard struct {
	ID     int64
	Worker string
	// Bytes is the shard's size, bytes.
	Bytes int64
	// Isolated is true when the shard holds tenant 1 alone.
	Isolated bool
}

// Writes is the hot tenant's checked writer's outcome.
type Writes struct {
	Acked, Lost, Duplicated int
	// MaxPause is the longest gap between two acknowledgements, ending
	// PauseEnd after the writer started.
	MaxPause, PauseEnd time.Duration
	// Errors counts failed writes by SQLSTATE (or "other").
	Errors map[string]int
}

// Assertion is one checked outcome: Observed Op Limit, in Unit ("s",
// "ms", "x" for a skew, "" for counts).
type Assertion struct {
	Name            string
	OK              bool
	Observed, Limit float64
	Unit, Op        string
	Detail          string
}

// Result is a run's outcome.
type Result struct {
	// Detected is the time from the hot tenant's start to the first alert
	// (0 and DetectedOK false when none fired).
	Detected   time.Duration
	DetectedOK bool
	Alerts     []citus.Alert
	// LedgerShare is tenant 1's share of cluster DB time in the before
	// window, from the isolation stack's ledger: what detection and the
	// ladder decide on. SampledShare is its share of the active tagged
	// backends sampled on the coordinator, and StatTenantsShare its share
	// of the queries citus_stat_tenants counted: cross-checks
	// (StatTenantsOK false when Citus counted nothing or could not be
	// read).
	LedgerShare, SampledShare, StatTenantsShare float64
	StatTenantsOK                               bool
	// ShardBefore is tenant 1's shard once distributed, ShardAfter once
	// the ladder is done (with Apply).
	ShardBefore, ShardAfter Shard
	// Timeline is the load over time: one Point per DetectEvery of the
	// before window and (with Apply) of the after window.
	Timeline []Point
	// Workers are the cluster's active primary workers once distributed
	// (pg_dist_node names).
	Workers []string
	// Plan is the ladder decided from the before window.
	Plan                citus.Plan
	Solo, Before, After Window
	Steps               []citus.Record
	Advice              []citus.Step
	LadderTook          time.Duration
	Writes              Writes
	Assertions          []Assertion
}

// Failed returns the assertions that failed.
func (r Result) Failed() []Assertion {
	var out []Assertion
	for _, a := range r.Assertions {
		if !a.OK {
			out = append(out, a)
		}
	}
	return out
}

// Run loads the data set into the Citus cluster c (coordinator and
// workers), distributes it, and runs the windows: quiet tenants alone
// (solo), then with the hot tenant (detection, before), then — with Apply —
// the ladder under a checked writer, then after. It returns an error for a
// run that could not be carried out (wrapping backend.ErrBadInput for a
// cluster without a coordinator, a Kind other than sleep, lookup, page or
// report, or a Config outside its fields' bounds: NaN or infinite figures,
// Rate above MaxRate, WriterRate above MaxWriterRate, Tenants above
// workload.MaxTenants); failed assertions are in the Result.
func Run(ctx context.Context, c backend.Cluster, cfg Config) (Result, error) {
	var res Result
	if err := cfg.check(); err != nil {
		return res, err
	}
	cfg = cfg.withDefaults()
	switch cfg.Kind {
	case dataset.KindSleep, dataset.KindLookup, dataset.KindPage, dataset.KindReport:
	default:
		return res, fmt.Errorf("run hot shard: query kind %q (want sleep, lookup, page or report): %w", cfg.Kind, backend.ErrBadInput)
	}
	coord, ok := backend.First(c, backend.RoleCoordinator)
	if !ok {
		return res, fmt.Errorf("run hot shard: no coordinator: %w", backend.ErrBadInput)
	}
	// Unqualified names (tables, and the regclass arguments of Citus's
	// functions) resolve in the run's schema alone.
	coord = footprint.InSchema(coord, cfg.Schema)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		return res, fmt.Errorf("connect to coordinator: %w", err)
	}
	defer conn.Close(context.Background())

	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: cfg.Tenants, DominantShare: cfg.HotShare,
		Distribution: cfg.Distribution, Exponent: cfg.Exponent, Shares: cfg.Shares}, int64(cfg.Seed))
	if err != nil {
		return res, fmt.Errorf("run hot shard: %w: %w", err, backend.ErrBadInput)
	}
	rowShares := make([]float64, 0, pop.Len())
	for _, t := range pop.Tenants {
		rowShares = append(rowShares, t.Share)
	}
	spec := dataset.Spec{Schema: cfg.Schema, Orders: dataset.Counts(rowShares, cfg.Rows), Days: 30, Customers: 50}
	cfg.OnPhase(PhaseLoad, 0)
	if err := dataset.Load(ctx, conn, spec, time.Now()); err != nil {
		return res, fmt.Errorf("load data set: %w", err)
	}
	if err := citus.Distribute(ctx, conn, citus.Distribution{Tables: []string{"tenants", "orders"}, ShardCount: cfg.ShardCount}); err != nil {
		return res, err
	}
	// Planner statistics of the shards now, not from autovacuum during
	// the solo window.
	if _, err := conn.Exec(ctx, "ANALYZE tenants, orders"); err != nil {
		return res, fmt.Errorf("analyze the distributed tables: %w", err)
	}
	layout, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		return res, err
	}
	// Sampling has connections of its own to the coordinator (the
	// tagged backends, and the workers through it where they cannot be
	// reached directly: WorkerSampling).
	sampler, err := pgxpool.New(ctx, coord.DSN())
	if err != nil {
		return res, fmt.Errorf("connect to coordinator: %w", err)
	}
	defer sampler.Close()
	sampling, closeWorkers, err := WorkerSampling(ctx, c, sampler)
	defer closeWorkers()
	if err != nil {
		return res, err
	}
	sampling.Coordinator, sampling.Interval = sampler, DefaultSampleInterval

	for _, w := range layout.Workers {
		res.Workers = append(res.Workers, w.Name)
	}
	hotShard, err := layout.TenantShard(ctx, conn, "1")
	if err != nil {
		return res, err
	}
	res.ShardBefore = shardOf(layout, hotShard)

	d, err := newDriver(ctx, coord, cfg, pop, dataset.Params{Orders: spec.Orders, Customers: spec.Customers})
	if err != nil {
		return res, err
	}
	defer d.close()
	m := &meter{d: d, db: conn, sampling: sampling}
	for t := 1; t <= cfg.Tenants; t++ {
		m.tenants = append(m.tenants, strconv.Itoa(t))
	}
	if err := m.setLayout(ctx, layout); err != nil {
		return res, err
	}

	// Warm-up (connections open, caches warm; discarded), then solo: the
	// quiet tenants only.
	d.setHot(false)
	cfg.OnPhase(PhaseWarmup, DefaultWarmup)
	if _, err := d.runFor(ctx, DefaultWarmup); err != nil {
		return res, err
	}
	d.window()
	cfg.Log.Info("solo window", "duration", cfg.Solo)
	cfg.OnPhase(PhaseSolo, cfg.Solo)
	if _, err := d.runFor(ctx, cfg.Solo); err != nil {
		return res, err
	}
	res.Solo = d.window()

	// The hot tenant starts; detect. citus_stat_tenants restarts its counts
	// so that its cross-check covers this window alone.
	statReset := citus.ResetStatTenants(ctx, conn)
	if statReset != nil {
		cfg.Log.Warn("citus_stat_tenants cross-check off", "err", statReset)
	}
	d.setHot(true)
	cfg.OnPhase(PhaseBefore, cfg.Before)
	t0 := time.Now()
	bg, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { d.runFor(bg, cfg.Before+cfg.After+24*time.Hour) })
	defer wg.Wait()
	defer stop()
	// Every DetectEvery: each tenant's DB time from the stack's ledger,
	// attributed to the worker holding its shard (per-worker load), its
	// share of cluster DB time, and pg_stat_activity sampled on every
	// worker as a cross-check.
	var sampled citus.Load
	m.start()
	for time.Since(t0) < cfg.Before {
		t, err := m.measure(ctx, cfg.DetectEvery)
		if err != nil {
			return res, err
		}
		sampled = merge(sampled, t.sampled)
		state, err := layout.State(ctx, conn, t.load)
		if err != nil {
			return res, err
		}
		plan := citus.Decide(state, cfg.Thresholds)
		if !res.DetectedOK && len(plan.Alerts) > 0 {
			res.Detected, res.DetectedOK, res.Alerts = time.Since(t0), true, plan.Alerts
			cfg.Log.Info("hot shard detected", "after", res.Detected, "alerts", len(plan.Alerts))
		}
		res.Timeline = append(res.Timeline, point(PhaseBefore, time.Since(t0), t, plan, hotShard))
	}
	res.Before = d.window()
	beforeLoad := m.fill(&res.Before, sampled, layout.Placements[hotShard])
	res.LedgerShare, res.SampledShare = res.Before.Shares["1"], sampled.Tenants["1"]
	if st, err := citus.StatTenants(ctx, conn); err != nil {
		cfg.Log.Warn("citus_stat_tenants cross-check failed", "err", err)
	} else if statReset == nil {
		res.StatTenantsShare, res.StatTenantsOK = st["1"], len(st) > 0
	}
	state, err := layout.State(ctx, conn, beforeLoad)
	if err != nil {
		return res, err
	}
	res.Plan = citus.Decide(state, cfg.Thresholds)
	res.Assertions = append(res.Assertions, Assertion{Name: AssertDetected, OK: res.DetectedOK && res.Detected <= cfg.DetectWithin+cfg.DetectEvery,
		Observed: res.Detected.Seconds(), Limit: (cfg.DetectWithin + cfg.DetectEvery).Seconds(), Unit: "s", Op: "<=",
		Detail: fmt.Sprintf("first alert %.2f s after the hot tenant started (bound %.1f s, sampled every %.1f s)", res.Detected.Seconds(), cfg.DetectWithin.Seconds(), cfg.DetectEvery.Seconds())})
	if !cfg.Apply {
		return res, nil
	}

	// The ladder under a checked writer.
	w, err := startWriter(ctx, coord.DSN(), cfg.WriterRate)
	if err != nil {
		return res, err
	}
	// Each step is logged with the per-worker load (DB time attributed
	// through the placements of that moment) before and after it.
	ladder := citus.Ladder{DB: conn, Table: "orders", Mode: cfg.Mode, Thresholds: cfg.Thresholds, Log: cfg.Log,
		Measure: func(ctx context.Context) (map[string]float64, error) {
			l, err := citus.Inspect(ctx, conn, "orders")
			if err != nil {
				return nil, err
			}
			sm := &meter{d: d, db: conn, sampling: citus.Sampling{Workers: sampling.Workers, WorkersVia: sampling.WorkersVia, Interval: sampling.Interval}, tenants: m.tenants}
			if err := sm.setLayout(ctx, l); err != nil {
				return nil, err
			}
			sm.start()
			t, err := sm.measure(ctx, DefaultStepSample)
			return t.load.Workers, err
		}}
	cfg.OnPhase(PhaseLadder, 0)
	lt := time.Now()
	res.Steps, res.Advice, err = ladder.Run(ctx, beforeLoad, "", 0)
	res.LadderTook = time.Since(lt)
	res.Writes = w.stop()
	if err != nil {
		return res, err
	}
	after, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		return res, err
	}
	hotShard, err = after.TenantShard(ctx, conn, "1")
	if err != nil {
		return res, err
	}
	if err := m.setLayout(ctx, after); err != nil {
		return res, err
	}
	home := after.Placements[hotShard]
	res.ShardAfter = shardOf(after, hotShard)
	// Steady state: the moved shards' old copies dropped now rather than
	// by the background cleaner during the after window, the new shards'
	// planner statistics taken now rather than by autovacuum during it (a
	// shard move copies rows, not statistics), then a discarded warm-up.
	if _, err := conn.Exec(ctx, "CALL citus_cleanup_orphaned_resources()"); err != nil {
		return res, fmt.Errorf("clean up after the ladder: %w", err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE tenants, orders"); err != nil {
		return res, fmt.Errorf("analyze after the ladder: %w", err)
	}
	if err := sleep(ctx, DefaultWarmup); err != nil {
		return res, err
	}
	d.window()
	// The after window, measured in DetectEvery steps for the timeline.
	cfg.OnPhase(PhaseAfter, cfg.After)
	sampled = citus.Load{}
	m.start()
	for t1 := time.Now(); time.Since(t1) < cfg.After; {
		t, err := m.measure(ctx, min(cfg.DetectEvery, cfg.After-time.Since(t1)))
		if err != nil {
			return res, err
		}
		sampled = merge(sampled, t.sampled)
		state, err := after.State(ctx, conn, t.load)
		if err != nil {
			return res, err
		}
		res.Timeline = append(res.Timeline, point(PhaseAfter, time.Since(t1), t, citus.Decide(state, cfg.Thresholds), hotShard))
	}
	res.After = d.window()
	m.fill(&res.After, sampled, home)
	if err := w.check(ctx, conn, &res.Writes); err != nil {
		return res, err
	}

	var sharing []int64
	for id, wk := range after.Placements {
		if wk == home && id != hotShard {
			sharing = append(sharing, id)
		}
	}
	dedicated := false
	for _, wk := range after.Workers {
		if wk.Name == home {
			dedicated = !wk.ShouldHaveShards
		}
	}
	res.Assertions = append(res.Assertions,
		Assertion{Name: AssertAlone, OK: after.Single[hotShard] && len(sharing) == 0 && dedicated,
			Observed: float64(len(sharing)), Op: "==",
			Detail: fmt.Sprintf("tenant 1 on shard %d (isolated %v) on %s (dedicated %v, %d other shards there)", hotShard, after.Single[hotShard], home, dedicated, len(sharing))},
		Assertion{Name: AssertOtherSkew, OK: res.After.SharedSkew <= skewBound(cfg.Thresholds),
			Observed: finite(res.After.SharedSkew), Limit: skewBound(cfg.Thresholds), Unit: "x", Op: "<=",
			Detail: fmt.Sprintf("load skew over the other workers %s (bound %.2fx), before %s over all", fmtSkew(res.After.SharedSkew), skewBound(cfg.Thresholds), fmtSkew(res.Before.SharedSkew))},
		Assertion{Name: AssertQuietP99, OK: res.After.QuietP99 <= time.Duration(cfg.P99Factor*float64(res.Solo.QuietP99))+cfg.P99Slack,
			Observed: ms(res.After.QuietP99), Limit: ms(time.Duration(cfg.P99Factor*float64(res.Solo.QuietP99)) + cfg.P99Slack), Unit: "ms", Op: "<=",
			Detail: fmt.Sprintf("quiet p99 after %.1f ms, before %.1f ms, solo %.1f ms (bound %.1f × solo + %.0f ms)", ms(res.After.QuietP99), ms(res.Before.QuietP99), ms(res.Solo.QuietP99), cfg.P99Factor, ms(cfg.P99Slack))},
		Assertion{Name: AssertZeroLoss, OK: res.Writes.Lost == 0 && res.Writes.Duplicated == 0 && res.Writes.Acked > 0,
			Observed: float64(res.Writes.Lost + res.Writes.Duplicated), Op: "==",
			Detail: fmt.Sprintf("%d acknowledged writes: %d lost, %d duplicated", res.Writes.Acked, res.Writes.Lost, res.Writes.Duplicated)},
		Assertion{Name: AssertWritePause, OK: res.Writes.MaxPause <= cfg.MaxPause,
			Observed: ms(res.Writes.MaxPause), Limit: ms(cfg.MaxPause), Unit: "ms", Op: "<=",
			Detail: fmt.Sprintf("longest gap between acknowledgements %.0f ms, ending %.1f s into the ladder (bound %.0f ms)", ms(res.Writes.MaxPause), res.Writes.PauseEnd.Seconds(), ms(cfg.MaxPause))},
	)
	return res, nil
}

func shardOf(l citus.Layout, id int64) Shard {
	return Shard{ID: id, Worker: l.Placements[id], Bytes: l.Bytes[id], Isolated: l.Single[id]}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func skewBound(th citus.Thresholds) float64 {
	if th.Skew > 0 {
		return th.Skew
	}
	return citus.DefaultSkew
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fmtSkew formats a skew as "1.28x", one over idle workers as "inf".
func fmtSkew(v float64) string {
	if math.IsInf(v, 1) || v == math.MaxFloat64 {
		return "inf"
	}
	return fmt.Sprintf("%.2fx", v)
}

// finite maps +Inf (a skew over idle workers) to the largest float64, so
// that reports stay valid JSON.
func finite(v float64) float64 {
	if math.IsInf(v, 1) {
		return math.MaxFloat64
	}
	return v
}

// merge averages two loads weighted by their sample counts.
func merge(a, b citus.Load) citus.Load {
	if a.Samples == 0 {
		return b
	}
	n := float64(a.Samples + b.Samples)
	out := citus.Load{Samples: a.Samples + b.Samples, Duration: a.Duration + b.Duration, Workers: map[string]float64{}, Tenants: map[string]float64{}}
	for _, m := range []struct {
		in  citus.Load
		dst map[string]float64
		get func(citus.Load) map[string]float64
	}{
		{a, out.Workers, func(l citus.Load) map[string]float64 { return l.Workers }},
		{b, out.Workers, func(l citus.Load) map[string]float64 { return l.Workers }},
		{a, out.Tenants, func(l citus.Load) map[string]float64 { return l.Tenants }},
		{b, out.Tenants, func(l citus.Load) map[string]float64 { return l.Tenants }},
	} {
		for k, v := range m.get(m.in) {
			m.dst[k] += v * float64(m.in.Samples) / n
		}
	}
	return out
}

// meter measures load over an interval: each tenant's DB time from the
// driver's ledger, attributed to the worker and shard that hold it
// (citus.Attribute, through layout), and per-worker active backends
// sampled in pg_stat_activity (citus.Sample) as a cross-check.
type meter struct {
	d        *driver
	db       citus.DB
	sampling citus.Sampling
	// tenants are the tenant ids whose shards are looked up.
	tenants []string
	layout  citus.Layout
	shardOf map[string]int64
	// mark and at are the ledger's reading and its time at the
	// interval's start.
	mark []pools.Usage
	at   time.Time
}

// tick is one interval's measurement.
type tick struct {
	// load has the attributed per-worker load and the tenants' shares of
	// DB time (ledger): what detection decides on.
	load citus.Load
	// sampled is what citus.Sample saw over the interval.
	sampled citus.Load
	// shards is the attributed load per shard.
	shards map[int64]float64
}

// setLayout makes l the placements load is attributed through.
func (m *meter) setLayout(ctx context.Context, l citus.Layout) error {
	shardOf, err := l.TenantShards(ctx, m.db, m.tenants)
	if err != nil {
		return err
	}
	m.layout, m.shardOf = l, shardOf
	return nil
}

// start starts an interval.
func (m *meter) start() { m.mark, m.at = m.d.usage(), time.Now() }

// measure samples for dur, then closes the interval and starts the next.
func (m *meter) measure(ctx context.Context, dur time.Duration) (tick, error) {
	sampled, err := citus.Sample(ctx, m.sampling, dur)
	if err != nil {
		return tick{}, err
	}
	now, at := m.d.usage(), time.Now()
	dbT, shares := dbTime(m.mark, now)
	over := at.Sub(m.at)
	m.mark, m.at = now, at
	workers, shards, _ := citus.Attribute(m.layout.Workers, m.layout.Placements, m.shardOf, dbT, over)
	return tick{load: citus.Load{Samples: sampled.Samples, Duration: over, Workers: workers, Tenants: shares}, sampled: sampled, shards: shards}, nil
}

// fill sets a window's worker figures: attributed from its DB time over
// its length, and sampled; hot is the hot tenant's worker. It returns the
// window's load as Decide takes it.
func (m *meter) fill(w *Window, sampled citus.Load, hot string) citus.Load {
	w.Workers, _, _ = citus.Attribute(m.layout.Workers, m.layout.Placements, m.shardOf, w.DBTime, w.Length)
	w.Sampled, w.Samples = sampled.Workers, sampled.Samples
	w.SharedSkew, w.HotWorkerShare = spread(w.Workers, m.layout, hot)
	w.SampledSkew, w.SampledHotWorkerShare = spread(w.Sampled, m.layout, hot)
	w.SharedSkew, w.SampledSkew = finite(w.SharedSkew), finite(w.SampledSkew)
	return citus.Load{Samples: sampled.Samples, Duration: w.Length, Workers: w.Workers, Tenants: w.Shares}
}

// spread returns the skew of load over the workers of l that take shards,
// and hot's share of all workers' load.
func spread(load map[string]float64, l citus.Layout, hot string) (skew, hotShare float64) {
	var shared []float64
	var total float64
	for _, wk := range l.Workers {
		total += load[wk.Name]
		if wk.ShouldHaveShards {
			shared = append(shared, load[wk.Name])
		}
	}
	if total > 0 {
		hotShare = load[hot] / total
	}
	return citus.Skew(shared), hotShare
}

// driver sends open-loop queries through the isolation stack
// (pools.Stack: tagged application_name t:<tenant> on borrow, DB time in
// its ledger): arrivals every 1/Rate s from its start, the tenant drawn by
// share (the hot tenant only while hot is set), each query of Kind on the
// tenant's own rows, latency from the intended start.
type driver struct {
	cfg    Config
	stack  *pools.Stack
	params dataset.Params
	rng    *rand.Rand
	// quietCum is the quiet tenants' cumulative shares, tenant 2 first.
	quietCum []float64
	hot      atomic.Bool
	seq      atomic.Int64

	mu sync.Mutex
	// rec holds the window's response and service times per tenant
	// (HdrHistogram).
	rec     *metrics.Recorder
	queries int64
	dropped int64
	errs    int64
	// mark and markAt are the ledger's reading and its time at the
	// window's start.
	mark   []pools.Usage
	markAt time.Time
}

// newRecorder returns a window's recorder: no time series, no warm-up cut
// (windows are cut by the driver).
func newRecorder() *metrics.Recorder {
	r, err := metrics.New(metrics.Config{Interval: -1})
	if err != nil {
		panic(err) // the configuration is constant and valid
	}
	return r
}

// warmTenant tags the warm-up calls; it is no tenant of the data set.
const warmTenant = "warmup"

func newDriver(ctx context.Context, coord backend.Node, cfg Config, pop workload.Population, params dataset.Params) (*driver, error) {
	d := &driver{cfg: cfg, params: params, rng: rand.New(rand.NewPCG(cfg.Seed, 7)), rec: newRecorder()}
	var sum float64
	for _, t := range pop.Quiet() {
		sum += t.Share
		d.quietCum = append(d.quietCum, sum)
	}
	size := int32(DefaultMaxInFlight / 2)
	// No limiter: a per-tenant cap would throttle the hot tenant at the
	// coordinator, a remedy other than the ladder's.
	stack, err := pools.New(ctx, pools.Config{
		Pools:   []pools.PoolConfig{{Name: string(pools.Interactive), DSN: coord.DSN(), Size: size}},
		Classes: map[pools.Class]pools.ClassConfig{pools.Interactive: {Pool: string(pools.Interactive)}},
		Logger:  cfg.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("open isolation stack: %w", err)
	}
	d.stack = stack
	// Open every pooled connection and its Citus connections to every
	// worker (a multi-shard count), so that no window pays for them: each
	// call holds its connection until all have one (or 5 s passed).
	var arrived sync.WaitGroup
	arrived.Add(int(size))
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	var g sync.WaitGroup
	errs := make([]error, size)
	for i := range size {
		g.Go(func() {
			_, errs[i] = d.stack.WithConn(ctx, pools.Interactive, warmTenant, func(ctx context.Context, c *pgx.Conn) error {
				_, err := c.Exec(ctx, "SELECT count(*) FROM orders")
				arrived.Done()
				select {
				case <-all:
				case <-time.After(5 * time.Second):
				}
				return err
			})
		})
	}
	g.Wait()
	if err := errors.Join(errs...); err != nil {
		d.close()
		return nil, fmt.Errorf("warm pool: %w", err)
	}
	d.mark, d.markAt = d.usage(), time.Now()
	return d, nil
}

func (d *driver) close() { d.stack.Close() }

// shardSleep is KindSleep on Citus: a pg_sleep on the shard of tenant
// (the row id 1 every tenant has), not on the coordinator.
const shardSleep = "SELECT pg_sleep($3) FROM orders WHERE tenant_id = $1 AND id = $2"

// query runs one query of tenant through the stack.
func (d *driver) query(ctx context.Context, tenant int, seq int64) error {
	st := dataset.Statement{SQL: shardSleep, Args: []any{int64(tenant), int64(1), d.cfg.QueryTime.Seconds()}}
	if d.cfg.Kind != dataset.KindSleep {
		var err error
		if st, err = dataset.Query(d.cfg.Kind, tenant, seq, d.params); err != nil {
			return err
		}
	}
	_, err := d.stack.Query(ctx, pools.Interactive, strconv.Itoa(tenant), st.SQL, st.Args...)
	return err
}

// usage reads the ledger: DB time per tenant and class so far.
func (d *driver) usage() []pools.Usage { return d.stack.Ledger().Usage() }

// dbTime returns each tenant's DB time between two ledger readings and
// its share (0..1) of all tenants' DB time then (pools.UsageWindow).
// Warm-up calls end before the first reading and never count.
func dbTime(from, to []pools.Usage) (map[string]time.Duration, map[string]float64) {
	total, share := map[string]time.Duration{}, map[string]float64{}
	for t, w := range pools.UsageWindow(from, to) {
		total[t], share[t] = w.Total, w.Share
	}
	return total, share
}

func (d *driver) setHot(on bool) { d.hot.Store(on) }

// window returns the figures since the last call and starts a new window.
func (d *driver) window() Window {
	now := d.usage()
	d.mu.Lock()
	defer d.mu.Unlock()
	w := Window{Queries: d.queries, Dropped: d.dropped, Errors: d.errs, Length: time.Since(d.markAt)}
	w.DBTime, w.Shares = dbTime(d.mark, now)
	q := d.rec.Merged(func(tenant int, _ string) bool { return tenant != 1 })
	w.QuietP50, w.QuietP99, w.QuietMax, w.QuietServiceP99, w.QuietCount = q.P50, q.P99, q.Max, q.ServiceP99, q.Count
	d.rec, d.queries, d.dropped, d.errs, d.mark, d.markAt = newRecorder(), 0, 0, 0, now, time.Now()
	return w
}

// pick draws the next query's tenant: tenant 1 with HotShare while hot is
// set, else a quiet tenant by its share of the quiet tenants' traffic.
func (d *driver) pick() int {
	if d.hot.Load() && d.rng.Float64() < d.cfg.HotShare {
		return 1
	}
	return pickQuiet(d.quietCum, d.rng.Float64())
}

// pickQuiet returns the quiet tenant (2..) whose slot of the cumulative
// shares cum holds u × cum's total, u in [0, 1).
func pickQuiet(cum []float64, u float64) int {
	i, _ := slices.BinarySearch(cum, u*cum[len(cum)-1])
	return 2 + min(i, len(cum)-1)
}

// runFor sends arrivals for dur or until ctx ends; it returns the count
// sent when every query it sent has finished, with ctx.Err() if ctx ended
// first.
func (d *driver) runFor(ctx context.Context, dur time.Duration) (int64, error) {
	start := time.Now()
	gap := time.Duration(float64(time.Second) / d.cfg.Rate)
	sem := make(chan struct{}, DefaultMaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	var n int64
	for i := int64(0); ; i++ {
		intended := start.Add(time.Duration(i) * gap)
		// ctx is checked on every arrival, not only while waiting for
		// one: a loop behind its schedule never waits.
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if intended.Sub(start) >= dur {
			return n, nil
		}
		if wait := time.Until(intended); wait > 0 {
			select {
			case <-ctx.Done():
				return n, ctx.Err()
			case <-time.After(wait):
			}
		}
		tenant := d.pick()
		select {
		case sem <- struct{}{}:
		default:
			d.mu.Lock()
			d.dropped++
			d.mu.Unlock()
			continue
		}
		n++
		d.cfg.OnQuery()
		seq := d.seq.Add(1)
		wg.Go(func() {
			defer func() { <-sem }()
			began := time.Now()
			err := d.query(ctx, tenant, seq)
			ended := time.Now()
			if err != nil && ctx.Err() != nil {
				return // the run ended, not the query
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			d.queries++
			if err != nil {
				d.errs++
			}
			d.rec.Record(workload.Result{Op: workload.Op{Seq: seq, Tenant: tenant, Class: string(d.cfg.Kind), At: intended.Sub(start)},
				Intended: intended, Start: began, End: ended, Err: err})
		})
	}
}

// writer inserts tenant 1 rows (ids from 2e9 up) at a fixed rate and keeps
// the acknowledged ids.
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}
	acked  []int64
	out    Writes
}

func startWriter(ctx context.Context, dsn string, rate float64) (*writer, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect writer: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{cancel: cancel, done: make(chan struct{}), out: Writes{Errors: map[string]int{}}}
	go func() {
		defer close(w.done)
		defer func() { conn.Close(context.Background()) }()
		gap := time.Duration(float64(time.Second) / rate)
		start := time.Now()
		last := start
		for i := int64(0); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(time.Duration(i) * gap))):
			}
			id := int64(2e9) + i
			_, err := conn.Exec(ctx, `INSERT INTO orders (tenant_id, id, created_at, amount, status, customer, note)
				VALUES (1, $1, now(), 1, 'paid', 'writer', 'checked')`, id)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				w.out.Errors[sqlState(err)]++
				if conn.IsClosed() {
					c, cerr := pgx.Connect(ctx, dsn)
					if cerr != nil {
						continue
					}
					conn = c
				}
				continue
			}
			now := time.Now()
			if gap := now.Sub(last); gap > w.out.MaxPause {
				w.out.MaxPause, w.out.PauseEnd = gap, now.Sub(start)
			}
			last = now
			w.acked = append(w.acked, id)
		}
	}()
	return w, nil
}

func sqlState(err error) string {
	var pe interface{ SQLState() string }
	if errors.As(err, &pe) {
		return pe.SQLState()
	}
	return "other"
}

func (w *writer) stop() Writes {
	w.cancel()
	<-w.done
	w.out.Acked = len(w.acked)
	return w.out
}

// check counts acknowledged rows missing or present more than once.
func (w *writer) check(ctx context.Context, conn *pgx.Conn, out *Writes) error {
	rows, err := conn.Query(ctx, `SELECT count(o.id) FROM unnest($1::bigint[]) a(id)
		LEFT JOIN orders o ON o.tenant_id = 1 AND o.id = a.id GROUP BY a.id`, w.acked)
	if err != nil {
		return fmt.Errorf("check writes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return fmt.Errorf("check writes: %w", err)
		}
		switch {
		case n == 0:
			out.Lost++
		case n > 1:
			out.Duplicated++
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check writes: %w", err)
	}
	return nil
}
