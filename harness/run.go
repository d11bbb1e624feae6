package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/external"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/guard"
	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/promotion"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// Phase names, as Progress reports them.
const (
	PhaseStart = "start"
	PhaseLoad  = "load"
	PhaseSolo  = "solo"
	PhaseRun   = "run"
)

// Progress is a snapshot of a running scenario, for a progress display.
type Progress struct {
	// Phase is PhaseStart, PhaseLoad, PhaseSolo or PhaseRun.
	Phase string
	// Configuration is the configuration running (solo: the one hosting the
	// baseline); empty before the first.
	Configuration string
	// Elapsed and Total are the phase's time so far and its planned length
	// (warm-up included, drain excluded).
	Elapsed, Total time.Duration
	// Issued is the number of operations issued in the phase so far, and
	// Rate the rate over the last report interval in ops/s.
	Issued int64
	Rate   float64
}

// Options tunes Run. The zero value runs every configuration on the
// scenario's own backend, silently.
type Options struct {
	// Only runs just the named configuration and applies the assertions to
	// it (its expectation is ignored). Empty runs all.
	Only string
	// Cluster, when not nil, is used instead of starting the scenario's
	// backend; Run does not close it.
	Cluster backend.Cluster
	// OnCluster, when not nil, is called with the cluster Run started,
	// before anything else runs on it (e.g. to register it for teardown on
	// a second signal). Run still closes it.
	OnCluster func(backend.Cluster)
	// Progress, when not nil, is called about every ProgressEvery and at
	// each phase change, from one goroutine.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Logger receives the run's notes and debug records; nil is silent.
	Logger *slog.Logger
	// Now anchors the generated data's timestamps; zero means time.Now.
	Now time.Time
	// MaxForeignCPU is the disturbance guard's threshold in CPUs (see
	// package guard); 0 means guard.DefaultMaxForeignCPU, negative turns
	// the guard off.
	MaxForeignCPU float64
	// Concurrent, when not empty, is put in the report: the run was
	// measured beside other measured runs.
	Concurrent string
}

// ErrRun marks a run that could not complete (as opposed to one whose
// assertions failed, which returns a report with Passed false).
var ErrRun = errors.New("run scenario")

// Run runs sc end to end and returns its report: it starts the backend (or
// uses Options.Cluster), loads the data set, measures the quiet tenants'
// solo baseline, runs the full mix under each configuration and evaluates
// the assertions. A report with Passed false means an assertion failed; an
// error means the run could not complete (backend, data load, database
// errors outside the workload, ctx cancelled), and nothing is left running
// either way.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) (*reports.Report, error) {
	if opts.Only != "" {
		one, err := sc.Only(opts.Only)
		if err != nil {
			return nil, err
		}
		sc = one
	}
	r := &runner{sc: sc, opts: opts, log: opts.Logger, started: time.Now()}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := r.plan(); err != nil {
		return nil, err
	}
	stopProgress := r.startProgress()
	defer stopProgress()

	r.setPhase(PhaseStart, "", 0)
	cluster := opts.Cluster
	if cluster == nil {
		c, err := StartBackend(ctx, sc, r.log)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if opts.OnCluster != nil {
			opts.OnCluster(c)
		}
		cluster = c
	}
	r.cluster = cluster
	r.watchMachine()
	var rep *reports.Report
	var err error
	switch {
	case sc.Promoting():
		rep, err = runPromotion(ctx, r)
	case sc.HotSharding():
		rep, err = runHotShard(ctx, r)
	default:
		rep, err = r.run(ctx)
	}
	r.machineReport(rep)
	return rep, err
}

// runPromotion hands a scenario with a promotion section to its runner.
func runPromotion(ctx context.Context, r *runner) (*reports.Report, error) {
	rep, _, err := promotion.Run(ctx, r.sc, r.cluster, promotion.Options{Logger: r.log, Now: r.opts.Now,
		Phase: func(window string, total time.Duration) { r.setPhase(window, "promotion", total) }})
	if errors.Is(err, promotion.ErrRun) {
		err = fmt.Errorf("%w: %w", ErrRun, err)
	}
	return rep, err
}

// StartBackend starts the cluster sc's backend section names.
func StartBackend(ctx context.Context, sc *scenario.Scenario, log *slog.Logger) (backend.Cluster, error) {
	var b backend.Backend
	switch sc.Backend.Kind {
	case scenario.BackendExternal:
		primary, replica, err := sc.Backend.ResolveDSNs()
		if err != nil {
			return nil, err
		}
		b = external.New(external.Config{Primary: primary, Replica: replica, Logger: log})
	case scenario.BackendDocker:
		b = dockerBackend(sc, log)
	default:
		b = local.New(local.WithLogger(log))
	}
	c, err := b.Start(ctx, sc.Backend.Spec())
	if err != nil {
		return nil, fmt.Errorf("start %s backend: %w", sc.Backend.Kind, err)
	}
	return c, nil
}

// runner is one run's state.
type runner struct {
	sc      *scenario.Scenario
	opts    Options
	log     *slog.Logger
	started time.Time
	cluster backend.Cluster

	pop         workload.Population
	classes     map[string]*scenario.Class
	specs       []workload.ClassSpec
	solo, full  workload.Schedule
	hash        string
	params      dataset.Params
	primary     backend.Node
	replica     backend.Node
	hasReplica  bool
	notes       []string
	progressMu  sync.Mutex
	progress    Progress
	issued      atomic.Int64
	phaseStart  time.Time
	passwords   map[string]string
	soloSummary []metrics.Summary
	soloRec     *metrics.Recorder
	guard       *guard.Guard // nil: off
}

// plan draws the population and the schedules: everything seeded.
func (r *runner) plan() error {
	sc := r.sc
	pop, err := workload.NewPopulation(workload.PopulationConfig{
		Tenants:       sc.Tenants.Count,
		DominantShare: sc.Tenants.DominantShare,
		Distribution:  workload.Distribution(sc.Tenants.Distribution),
		Exponent:      sc.Tenants.Exponent,
		Shares:        sc.Tenants.Shares,
	}, sc.Seed)
	if err != nil {
		return fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	r.pop = pop
	r.classes = map[string]*scenario.Class{}
	for i := range sc.Classes {
		c := &sc.Classes[i]
		r.classes[c.Name] = c
		r.specs = append(r.specs, workload.ClassSpec{
			Name: c.Name, Rate: c.Rate,
			Arrival: workload.Arrival(c.Arrival), Senders: workload.Senders(c.Senders),
		})
	}
	warm := sc.Phases.Warmup.Duration()
	quiet := func(op workload.Op) bool { return op.Tenant != scenario.DominantTenant }
	// The solo baseline is the same draw without the dominant tenant: the
	// quiet tenants send exactly what they send in the full mix.
	if r.solo, err = workload.BuildSchedule(pop, r.specs, warm+sc.Phases.Solo.Duration(), sc.Seed, quiet); err != nil {
		return fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	if r.full, err = workload.BuildSchedule(pop, r.specs, warm+sc.Phases.Run.Duration(), sc.Seed, nil); err != nil {
		return fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	h := sha256.New()
	io.WriteString(h, r.solo.Hash())
	io.WriteString(h, r.full.Hash())
	r.hash = hex.EncodeToString(h.Sum(nil))[:16]

	shares := make([]float64, pop.Len())
	for i, t := range pop.Tenants {
		shares[i] = t.Share
	}
	r.params = dataset.Params{
		Orders:    dataset.Counts(shares, int64(sc.Data.Orders)),
		Customers: sc.Data.Customers,
	}
	return nil
}

// note records a line for the report's notes, once.
func (r *runner) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if slices.Contains(r.notes, s) {
		return
	}
	r.notes = append(r.notes, s)
	r.log.Info(s)
}

func (r *runner) run(ctx context.Context) (*reports.Report, error) {
	var ok bool
	if r.primary, ok = backend.First(r.cluster, backend.RolePrimary); !ok {
		return nil, fmt.Errorf("%w: the cluster has no primary node", ErrRun)
	}
	r.replica, r.hasReplica = backend.First(r.cluster, backend.RoleReplica)

	r.setPhase(PhaseLoad, "", 0)
	if err := r.load(ctx); err != nil {
		return nil, err
	}
	version, _ := r.serverVersion(ctx)

	rep := &reports.Report{
		Scenario: r.sc.Name, File: r.sc.File, Seed: r.sc.Seed, ScheduleHash: r.hash,
		StartedAt: r.started.UTC(), Dominant: strconv.Itoa(scenario.DominantTenant),
		Backend: fmt.Sprintf("%s %s (PostgreSQL %s)", r.sc.Backend.Kind, r.topology(), version),
	}

	// The solo baseline runs once, through the first configuration that is
	// expected to pass (the one under test), or the first.
	host := &r.sc.Configurations[0]
	for i := range r.sc.Configurations {
		if r.sc.Configurations[i].Expect == scenario.ExpectPass {
			host = &r.sc.Configurations[i]
			break
		}
	}
	if err := r.runSolo(ctx, host); err != nil {
		return nil, err
	}

	for i := range r.sc.Configurations {
		cr, err := r.runConfiguration(ctx, &r.sc.Configurations[i])
		if err != nil {
			return nil, err
		}
		rep.Configurations = append(rep.Configurations, cr.report)
		rep.Assertions = append(rep.Assertions, cr.assertions...)
	}
	rep.Assertions = append(rep.Assertions, r.expectations(rep)...)
	rep.Passed = true
	for _, a := range rep.Assertions {
		if !a.Passed {
			// A control's own failures are expected; its expectation
			// assertion carries the verdict.
			if c, ok := r.sc.Configuration(a.Configuration); ok && c.Expect == scenario.ExpectFail && r.opts.Only == "" && a.Name != AssertControlFails {
				continue
			}
			rep.Passed = false
		}
	}
	rep.Notes = r.notes
	rep.Duration = time.Since(r.started).Seconds()
	return rep, nil
}

func (r *runner) topology() backend.Topology {
	if r.hasReplica {
		return backend.TopologyReplica
	}
	return backend.TopologySingle
}

func (r *runner) serverVersion(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, r.primary.DSN())
	if err != nil {
		return "?", err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return v, err
}

// load creates the data set and the roles, then waits until a replica has
// replayed it.
func (r *runner) load(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.primary.DSN())
	if err != nil {
		return fmt.Errorf("%w: connect to primary %s: %w", ErrRun, r.primary.RedactedDSN(), err)
	}
	defer conn.Close(context.Background())
	now := r.opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	t0 := time.Now()
	if err := dataset.Load(ctx, conn, dataset.Spec{
		Orders: r.params.Orders, Days: r.sc.Data.Days, Customers: r.sc.Data.Customers,
	}, now); err != nil {
		return fmt.Errorf("%w: load data set: %w", ErrRun, err)
	}
	r.log.Info("data set loaded", "orders", r.sc.Data.Orders, "tenants", r.pop.Len(), "took", time.Since(t0).Round(time.Millisecond))

	var roles []pools.RoleConfig
	for i := range r.sc.Configurations {
		roles = append(roles, rolesOf(&r.sc.Configurations[i])...)
	}
	if r.passwords, err = pools.EnsureRoles(ctx, conn, r.primary.Database, roles...); err != nil {
		return fmt.Errorf("%w: create roles: %w", ErrRun, err)
	}
	if r.hasReplica {
		if err := waitReplay(ctx, conn, r.replica, 30*time.Second); err != nil {
			return fmt.Errorf("%w: %w", ErrRun, err)
		}
	}
	return nil
}

// waitReplay waits until replica has replayed the primary's current WAL
// position.
func waitReplay(ctx context.Context, primary *pgx.Conn, replica backend.Node, limit time.Duration) error {
	var lsn string
	if err := primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return fmt.Errorf("read primary WAL position: %w", err)
	}
	rc, err := pgx.Connect(ctx, replica.DSN())
	if err != nil {
		return fmt.Errorf("connect to replica %s: %w", replica.RedactedDSN(), err)
	}
	defer rc.Close(context.Background())
	deadline := time.Now().Add(limit)
	for {
		var done bool
		if err := rc.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done); err != nil {
			return fmt.Errorf("read replica replay position: %w", err)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s has not replayed WAL %s after %s", replica.Name, lsn, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// roleName is the database role of one configuration's pool.
func roleName(config, pool string) string { return "noisysim_" + config + "_" + pool }

// rolesOf returns the least-privilege roles configuration c logs in as.
func rolesOf(c *scenario.Configuration) []pools.RoleConfig {
	mk := func(pool string, r scenario.Role) pools.RoleConfig {
		return pools.RoleConfig{
			Name:                            roleName(c.Name, pool),
			StatementTimeout:                r.StatementTimeout.Duration(),
			IdleInTransactionSessionTimeout: r.IdleInTransactionSessionTimeout.Duration(),
			WorkMem:                         string(r.WorkMem),
			ConnectionLimit:                 r.ConnectionLimit,
			Schemas:                         []string{"public"},
			ReadTables:                      dataset.Tables,
		}
	}
	if c.Mode == scenario.ModeShared {
		return []pools.RoleConfig{mk("shared", c.Shared.Role)}
	}
	return []pools.RoleConfig{
		mk(string(pools.Interactive), c.Interactive.Role),
		mk(string(pools.Heavy), c.Heavy.Role),
	}
}

// stack is one configuration's isolation stack and its limiters.
type stack struct {
	*pools.Stack
	limiters map[pools.Class]*limiter.Limiter
}

// newStack builds configuration c's isolation stack on the cluster.
func (r *runner) newStack(ctx context.Context, c *scenario.Configuration) (*stack, error) {
	dsn := func(node backend.Node, pool string) string {
		role := roleName(c.Name, pool)
		return node.DSNFor(role, r.passwords[role])
	}
	cfg := pools.Config{Classes: map[pools.Class]pools.ClassConfig{}, Logger: r.log}
	st := &stack{limiters: map[pools.Class]*limiter.Limiter{}}
	if c.Mode == scenario.ModeShared {
		cfg.Pools = []pools.PoolConfig{{
			Name: "shared", DSN: dsn(r.primary, "shared"),
			Size: int32(c.Shared.PoolSize), AcquireTimeout: c.Shared.AcquireTimeout.Duration(),
		}}
		cfg.Classes[pools.Interactive] = pools.ClassConfig{Pool: "shared"}
		cfg.Classes[pools.Heavy] = pools.ClassConfig{Pool: "shared"}
	} else {
		for _, class := range []pools.Class{pools.Interactive, pools.Heavy} {
			p := c.Pool(scenario.IsolationClass(class))
			node := r.primary
			if p.Target == scenario.TargetReplica {
				if r.hasReplica {
					node = r.replica
				} else {
					r.note("%s: the %s class targets the replica, but the topology has none: it runs on the primary", c.Name, class)
				}
			}
			cfg.Pools = append(cfg.Pools, pools.PoolConfig{
				Name: string(class), DSN: dsn(node, string(class)),
				Size: int32(p.PoolSize), AcquireTimeout: p.AcquireTimeout.Duration(),
			})
			cc := pools.ClassConfig{Pool: string(class)}
			if p.Limiter.Enabled {
				l, err := limiter.New(limiter.Config{
					MaxPerTenant: p.Limiter.MaxPerTenant, MaxQueue: p.Limiter.MaxQueue,
					MaxWait: p.Limiter.MaxWait.Duration(), MaxGlobal: p.Limiter.MaxGlobal,
				})
				if err != nil {
					return nil, fmt.Errorf("%w: configuration %s: %s limiter: %w", scenario.ErrInvalid, c.Name, class, err)
				}
				st.limiters[class] = l
				cc.Limiter = l
			}
			cfg.Classes[class] = cc
		}
	}
	s, err := pools.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: configuration %s: open pools: %w", ErrRun, c.Name, err)
	}
	st.Stack = s
	return st, nil
}

// limiterStat sums the limiters' per-tenant counters.
func (s *stack) limiterStat() map[string]limiter.TenantStat {
	out := map[string]limiter.TenantStat{}
	for _, l := range s.limiters {
		for t, ts := range l.Stat().Tenants {
			o := out[t]
			o.InFlight += ts.InFlight
			o.Queued += ts.Queued
			o.Admitted += ts.Admitted
			o.Released += ts.Released
			o.RejectedQueueFull += ts.RejectedQueueFull
			o.RejectedWaitExceeded += ts.RejectedWaitExceeded
			o.Cancelled += ts.Cancelled
			out[t] = o
		}
	}
	return out
}

// executor turns a schedule's ops into calls on the stack, counting the
// limiter rejections each tenant's clients saw.
type executor struct {
	r     *runner
	stack *stack
	seen  sync.Map // tenant string → *[2]atomic.Int64 (queue_full, wait_exceeded)
	// wrapped, when set, is do observed by a fault run.
	wrapped workload.Executor
}

func (e *executor) exec(ctx context.Context, op workload.Op) error {
	if e.wrapped != nil {
		return e.wrapped(ctx, op)
	}
	return e.do(ctx, op)
}

func (e *executor) do(ctx context.Context, op workload.Op) error {
	e.r.issued.Add(1)
	c := e.r.classes[op.Class]
	tenant := strconv.Itoa(op.Tenant)
	class := pools.Class(c.IsolationClass)
	var err error
	switch dataset.Kind(c.Query) {
	case dataset.KindExport:
		_, err = e.stack.Tx(ctx, class, tenant, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
			func(ctx context.Context, tx pgx.Tx) error {
				_, err := dataset.Export(ctx, tx, op.Tenant, c.Batch)
				return err
			})
	default:
		p := e.r.params
		p.Sleep = c.Sleep.Duration()
		var q dataset.Statement
		if q, err = dataset.Query(dataset.Kind(c.Query), op.Tenant, op.Seq, p); err == nil {
			_, err = e.stack.Query(ctx, class, tenant, q.SQL, q.Args...)
		}
	}
	var le *limiter.LimitError
	if errors.As(err, &le) {
		v, _ := e.seen.LoadOrStore(tenant, new([2]atomic.Int64))
		counts := v.(*[2]atomic.Int64)
		if le.Reason == limiter.ReasonWaitExceeded {
			counts[1].Add(1)
		} else {
			counts[0].Add(1)
		}
	}
	return err
}

func (e *executor) seenBy(tenant string) (queueFull, waitExceeded int64) {
	v, ok := e.seen.Load(tenant)
	if !ok {
		return 0, 0
	}
	c := v.(*[2]atomic.Int64)
	return c[0].Load(), c[1].Load()
}

// errorClass names an op's error for the report and allowed_errors.
func errorClass(err error) string {
	switch c := pools.Classify(err); c {
	case pools.ErrorLimitedQueueFull:
		return string(scenario.ErrorQueueFull)
	case pools.ErrorLimitedWaitExceeded:
		return string(scenario.ErrorWaitExceeded)
	case "":
		return string(scenario.ErrorOther)
	default:
		return string(c)
	}
}

// phase runs one schedule through st and returns its recorder and stats.
func (r *runner) phase(ctx context.Context, name, config string, s workload.Schedule, st *stack, faults *faultRun) (*metrics.Recorder, *executor, workload.RunStats, error) {
	rec, err := metrics.New(metrics.Config{Warmup: r.sc.Phases.Warmup.Duration(), Classify: errorClass})
	if err != nil {
		return nil, nil, workload.RunStats{}, fmt.Errorf("%w: %w", ErrRun, err)
	}
	ex := &executor{r: r, stack: st}
	r.setPhase(name, config, s.Duration)
	if faults != nil {
		ex.wrapped = faults.wrap(ex.do)
	}
	drain := max(r.sc.Phases.Drain.Duration(), time.Millisecond)
	var stats workload.RunStats
	if r.sc.Load.Model == scenario.ModelClosed {
		stats, err = r.closedLoop(ctx, name, s.Duration, drain, ex, rec)
	} else {
		stats, err = workload.RunOpenLoop(ctx, s, ex.exec, rec, workload.OpenLoopConfig{Drain: drain, Logger: r.log})
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, stats, fmt.Errorf("%w: %s phase of %s: %w", ErrRun, name, config, err)
	}
	return rec, ex, stats, nil
}

// closedLoop runs the phase with simulated users instead of a schedule. The
// solo phase keeps the quiet tenants' users only: each quiet tenant gets
// about as many users as in the full mix.
func (r *runner) closedLoop(ctx context.Context, phase string, d, drain time.Duration, ex *executor, rec *metrics.Recorder) (workload.RunStats, error) {
	l := r.sc.Load
	pop, users := r.pop, l.Users
	if phase == PhaseSolo {
		pop = workload.Population{Config: r.pop.Config, Seed: r.pop.Seed}
		quiet := 1 - r.pop.Dominant().Share
		for _, t := range r.pop.Quiet() {
			t.Share /= quiet
			pop.Tenants = append(pop.Tenants, t)
		}
		users = max(1, int(math.Round(float64(users)*quiet)))
	}
	cs, err := workload.RunClosedLoop(ctx, workload.ClosedLoopConfig{
		Users: users, ThinkTime: l.ThinkTime.Duration(), RetryQueries: l.RetryQueries, MaxRetries: l.MaxRetries,
		Duration: d, Drain: drain, Logger: r.log,
	}, pop, r.specs, ex.exec, rec, r.sc.Seed)
	return workload.RunStats{
		Start: cs.Start, End: cs.End, Scheduled: cs.Queries, Issued: cs.Queries,
		Completed: cs.Queries - cs.Incomplete, Errors: cs.Errors, Incomplete: cs.Incomplete,
	}, err
}

func (r *runner) runSolo(ctx context.Context, host *scenario.Configuration) error {
	st, err := r.newStack(ctx, host)
	if err != nil {
		return err
	}
	defer st.Close()
	rec, _, _, err := r.phase(ctx, PhaseSolo, host.Name, r.solo, st, nil)
	if err != nil {
		return err
	}
	r.soloRec = rec
	r.soloSummary = rec.Summary()
	return nil
}

// configResult is what one configuration's run contributes to the report.
type configResult struct {
	report     reports.Configuration
	assertions []reports.Assertion
}

func (r *runner) runConfiguration(ctx context.Context, c *scenario.Configuration) (configResult, error) {
	st, err := r.newStack(ctx, c)
	if err != nil {
		return configResult{}, err
	}
	defer st.Close()
	for _, class := range []pools.Class{pools.Interactive, pools.Heavy} {
		if p, ok := st.Placement(class); ok {
			r.note("%s: %s", c.Name, p)
		}
	}
	before := st.limiterStat()
	usageBefore := st.Ledger().Usage()
	t0 := time.Now()
	faults, err := r.startFaults(ctx, c)
	if err != nil {
		return configResult{}, err
	}
	rec, ex, stats, err := r.phase(ctx, PhaseRun, c.Name, r.full, st, faults)
	faultReports := faults.finish()
	if err != nil {
		return configResult{}, err
	}
	after := st.limiterStat()
	clean, err := r.cleanAfter(ctx, st)
	if err != nil {
		return configResult{}, err
	}
	shares := pools.UsageWindow(usageBefore, st.Ledger().Usage())

	res := configResult{report: reports.Configuration{
		Name: c.Name, Expect: string(c.Expect), Duration: time.Since(t0).Seconds(),
	}}
	summaries := rec.Summary()
	res.report.Tenants = r.rows(summaries, shares)
	res.report.Solo = r.rows(r.soloSummary, nil)
	res.report.QuietAll = r.quietAllRows(rec, shares)
	res.report.SoloQuietAll = r.quietAllRows(r.soloRec, nil)
	planned := r.full
	if r.sc.Load.Model == scenario.ModelClosed {
		planned = workload.Schedule{} // users set the pace: no target rate
	}
	res.report.Stats = runStats(stats, summaries, planned)
	res.report.TopDBTime = topShares(shares, 10)
	res.report.Intervals = intervals(rec)
	res.report.Faults = faultReports
	res.assertions = r.assertions(c, rec, ex, before, after, clean)
	res.report.Passed, _ = verdict(res.assertions)
	return res, nil
}
