package promotion

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/directory"
	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// ErrRun marks a promotion run that could not complete (as opposed to one
// whose assertions failed).
var ErrRun = errors.New("run promotion scenario")

// Window names, as Outcome and the samples use them.
const (
	WindowBefore = "before"
	WindowMove   = "move"
	WindowAfter  = "after"
)

// Options tunes Run.
type Options struct {
	// Logger receives the run's notes; nil is silent.
	Logger *slog.Logger
	// Now anchors the generated data's timestamps; zero means time.Now.
	Now time.Time
	// Phase, when set, is called at each window change.
	Phase func(window string, total time.Duration)
	// Run names the run in the marks on the roles it creates
	// (footprint.Mark); the data set's schema, data.schema, must exist on
	// every node (footprint.Claim).
	Run string
}

// Node is one node's measured load in a window.
type Node struct {
	Name string
	// Active is the mean number of active t:* backends sampled in
	// pg_stat_activity; DBTime the ledger's DB time of the tenants routed
	// there, in s.
	Active float64
	DBTime float64
}

// Load is the nodes' load in one window and its skew.
type Load struct {
	Window string
	Nodes  []Node
	// Samples is the number of pg_stat_activity samples per node.
	Samples int
	// Skew is max/median of Active over the ring nodes; Hot the node with
	// the max. DBTimeSkew is the same over DBTime.
	Skew, DBTimeSkew float64
	Hot              string
}

// Checker is the zero-loss checker's verdict.
type Checker struct {
	// Inserts and Updates are the acknowledged writes; Errors the writes
	// that failed (not acknowledged); MaxWait the longest write, in s.
	Inserts, Updates, Errors int64
	MaxWait                  float64
	// Lost are acknowledged rows missing at the destination, Duplicated
	// rows present more than once, Stale rows whose value is neither the
	// last acknowledged one nor a later unanswered one.
	Lost, Duplicated, Stale int64
	// Vanished are acknowledged updates of an acknowledged row that
	// matched no row (a write routed to a node without the row).
	Vanished int64
	// LeftAtSource is the tenant's rows still at the source after the
	// grace delete.
	LeftAtSource int64
	// OthersChanged lists the nodes whose other tenants' rows changed.
	OthersChanged []string
}

// OK reports a clean verdict.
func (c Checker) OK() bool {
	return c.Lost == 0 && c.Duplicated == 0 && c.Stale == 0 && c.Vanished == 0 && c.LeftAtSource == 0 && len(c.OthersChanged) == 0
}

// Outcome is everything a promotion run measured.
type Outcome struct {
	Tenant, Source, Target string
	// Triggered is when the promotion fired, from the before window's
	// start, in s; Trigger says how ("ledger share 0.61 > 0.25 for 2s").
	Triggered float64
	Trigger   string
	Move      *directory.Figures
	Loads     []Load
	Checker   Checker
	// QuietBefore and QuietAfter merge the quiet tenants of the formerly
	// hot node over every class.
	QuietBefore, QuietAfter metrics.Summary
	QuietTenants            []int
}

type runner struct {
	sc      *scenario.Scenario
	p       *scenario.Promotion
	opts    Options
	log     *slog.Logger
	cluster backend.Cluster

	pop       workload.Population
	classes   map[string]*scenario.Class
	specs     []workload.ClassSpec
	params    dataset.Params
	nodes     []backend.Node
	dsn       map[string]string
	target    string
	tenant    string
	cat       *directory.Catalog
	router    *directory.Router
	stack     *pools.Stack
	passwords map[string]string
	window    atomic.Value // string
	out       Outcome
	notes     []string
	hash      string
}

// Run runs a promotion scenario on cluster (the scenario's shards) and
// returns its report and outcome. A report with Passed false means an
// assertion failed; an error means the run could not complete.
func Run(ctx context.Context, sc *scenario.Scenario, cluster backend.Cluster, opts Options) (*reports.Report, *Outcome, error) {
	if !sc.Promoting() {
		return nil, nil, fmt.Errorf("%w: the scenario has no promotion section", scenario.ErrInvalid)
	}
	r := &runner{sc: sc, p: &sc.Promotion, opts: opts, log: opts.Logger, cluster: cluster}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	started := time.Now()
	if err := r.plan(); err != nil {
		return nil, nil, err
	}
	if err := r.setup(ctx); err != nil {
		return nil, nil, err
	}
	defer r.close()
	rep, err := r.run(ctx)
	if err != nil {
		if rep != nil { // interrupted: what was measured, incomplete
			rep.StartedAt = started.UTC()
			rep.Duration = time.Since(started).Seconds()
		}
		return rep, nil, err
	}
	rep.StartedAt = started.UTC()
	rep.Duration = time.Since(started).Seconds()
	return rep, &r.out, nil
}

func (r *runner) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.notes = append(r.notes, s)
	r.log.Info(s)
}

func (r *runner) plan() error {
	sc := r.sc
	pop, err := workload.NewPopulation(workload.PopulationConfig{
		Tenants: sc.Tenants.Count, DominantShare: sc.Tenants.DominantShare,
		Distribution: workload.Distribution(sc.Tenants.Distribution), Exponent: sc.Tenants.Exponent,
		Shares: sc.Tenants.Shares,
	}, sc.Seed)
	if err != nil {
		return fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	r.pop = pop
	r.classes = map[string]*scenario.Class{}
	for i := range sc.Classes {
		c := &sc.Classes[i]
		r.classes[c.Name] = c
		r.specs = append(r.specs, workload.ClassSpec{Name: c.Name, Rate: c.Rate,
			Arrival: workload.Arrival(c.Arrival), Senders: workload.Senders(c.Senders)})
	}
	shares := make([]float64, pop.Len())
	for i, t := range pop.Tenants {
		shares[i] = t.Share
	}
	r.params = dataset.Params{Orders: dataset.Counts(shares, int64(sc.Data.Orders)), Customers: sc.Data.Customers}
	r.tenant = strconv.Itoa(r.p.Tenant)
	return nil
}

// schedule builds the load of one window (warm-up included), seeded per
// window so before and after differ but each is reproducible.
func (r *runner) schedule(d time.Duration, salt int64) (workload.Schedule, error) {
	s, err := workload.BuildSchedule(r.pop, r.specs, r.sc.Phases.Warmup.Duration()+d, r.sc.Seed+salt, nil)
	if err != nil {
		return s, fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	return s, nil
}

// setup installs the catalog, loads every node's share of the data, creates
// the roles and opens the routed stack.
func (r *runner) setup(ctx context.Context) error {
	r.nodes = nil
	for _, n := range r.cluster.Nodes() {
		// Every session finds the data set in the run's schema alone.
		r.nodes = append(r.nodes, footprint.InSchema(n, r.sc.Data.SchemaName()))
	}
	if len(r.nodes) < 2 {
		return fmt.Errorf("%w: topology shards needs at least 2 nodes, the cluster has %d", ErrRun, len(r.nodes))
	}
	r.dsn = map[string]string{}
	for _, n := range r.nodes {
		r.dsn[n.Name] = n.DSN()
	}
	r.target = r.p.Target
	if r.target == "" {
		r.target = r.nodes[len(r.nodes)-1].Name
	}
	if _, ok := r.dsn[r.target]; !ok {
		return fmt.Errorf("%w: promotion target %q is not a node of the cluster", scenario.ErrInvalid, r.target)
	}
	var specs []directory.NodeSpec
	for _, n := range r.nodes {
		specs = append(specs, directory.NodeSpec{Name: n.Name, Ring: n.Name != r.target})
	}
	var err error
	if r.cat, err = directory.OpenCatalog(ctx, r.nodes[0].DSN(), r.log); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	if err := r.cat.Install(ctx, specs...); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	snap, err := r.cat.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	r.out.Tenant, r.out.Target = r.tenant, r.target
	r.out.Source = snap.Resolve(r.tenant)
	if r.out.Source == r.target {
		return fmt.Errorf("%w: tenant %s already lives on the target %s", scenario.ErrInvalid, r.tenant, r.target)
	}

	// Every node gets the whole data set, then keeps only its tenants:
	// the simplest way to the same rows a per-node load would give.
	now := r.opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	place := map[string][]int64{}
	for _, t := range r.pop.Tenants {
		n := snap.Resolve(strconv.Itoa(t.ID))
		place[n] = append(place[n], int64(t.ID))
	}
	r.passwords = map[string]string{}
	roles := r.roles()
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range r.nodes {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, n.DSN())
			if err != nil {
				return fmt.Errorf("connect to %s: %w", n.Name, err)
			}
			defer conn.Close(context.Background())
			if err := dataset.Load(gctx, conn, dataset.Spec{Schema: r.sc.Data.SchemaName(), Orders: r.params.Orders, Days: r.sc.Data.Days, Customers: r.sc.Data.Customers}, now); err != nil {
				return fmt.Errorf("load data on %s: %w", n.Name, err)
			}
			keep := place[n.Name]
			if keep == nil {
				keep = []int64{}
			}
			if _, err := conn.Exec(gctx, "DELETE FROM orders WHERE tenant_id <> ALL ($1)", keep); err != nil {
				return fmt.Errorf("keep %s's tenants: %w", n.Name, err)
			}
			if _, err := conn.Exec(gctx, "DELETE FROM tenants WHERE tenant_id <> ALL ($1)", keep); err != nil {
				return fmt.Errorf("keep %s's tenants: %w", n.Name, err)
			}
			if _, err := conn.Exec(gctx, "ANALYZE orders, tenants"); err != nil {
				return fmt.Errorf("analyze %s: %w", n.Name, err)
			}
			where := fmt.Sprintf("database %q on %s", n.Database, n.Name)
			if _, err := footprint.EnsureRoles(gctx, conn, where, n.Database, r.opts.Run, roles...); err != nil {
				return fmt.Errorf("create roles on %s: %w", n.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	for _, ro := range roles {
		r.passwords[ro.Name] = ro.Password
	}
	r.log.Info("shards loaded", "nodes", len(r.nodes), "tenant", r.tenant, "source", r.out.Source, "target", r.target)

	if r.router, err = directory.NewRouter(ctx, directory.RouterConfig{Catalog: r.cat, PollInterval: 100 * time.Millisecond, Logger: r.log}); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	return r.openStack(ctx)
}

func (r *runner) config() *scenario.Configuration { return &r.sc.Configurations[0] }

func roleName(pool string) string { return "noisysim_shard_" + pool }

// RoleNames are the login roles a run of sc creates on every node.
func RoleNames(sc *scenario.Scenario) []string {
	c := &sc.Configurations[0]
	if c.Mode == scenario.ModeShared {
		return []string{roleName("shared")}
	}
	return []string{roleName(string(pools.Interactive)), roleName(string(pools.Heavy))}
}

// roles are the configuration's roles, with write access to orders (the
// checked writes) and the same password on every node.
func (r *runner) roles() []pools.RoleConfig {
	c := r.config()
	mk := func(pool string, ro scenario.Role) pools.RoleConfig {
		b := make([]byte, 18)
		rand.Read(b)
		return pools.RoleConfig{
			Name: roleName(pool), Password: hex.EncodeToString(b),
			StatementTimeout:                ro.StatementTimeout.Duration(),
			IdleInTransactionSessionTimeout: ro.IdleInTransactionSessionTimeout.Duration(),
			WorkMem:                         string(ro.WorkMem),
			Schemas:                         []string{r.sc.Data.SchemaName()},
			ReadTables:                      []string{r.sc.Data.SchemaName() + ".tenants"},
			WriteTables:                     []string{r.sc.Data.SchemaName() + ".orders"},
		}
	}
	if c.Mode == scenario.ModeShared {
		return []pools.RoleConfig{mk("shared", c.Shared.Role)}
	}
	return []pools.RoleConfig{mk(string(pools.Interactive), c.Interactive.Role), mk(string(pools.Heavy), c.Heavy.Role)}
}

// openStack builds the configuration's pools on every node, routed by the
// catalog.
func (r *runner) openStack(ctx context.Context) error {
	c := r.config()
	cfg := pools.Config{Router: r.router, Classes: map[pools.Class]pools.ClassConfig{}, Logger: r.log,
		Ledger: pools.LedgerConfig{ShareThreshold: r.p.Threshold, Window: r.p.Window.Duration(), Bucket: r.p.Bucket.Duration()}}
	add := func(pool string, size int, timeout time.Duration) {
		for _, n := range r.nodes {
			cfg.Pools = append(cfg.Pools, pools.PoolConfig{Name: pool, Node: n.Name, DSN: n.DSNFor(roleName(pool), r.passwords[roleName(pool)]),
				Size: int32(size), AcquireTimeout: timeout})
		}
	}
	if c.Mode == scenario.ModeShared {
		add("shared", c.Shared.PoolSize, c.Shared.AcquireTimeout.Duration())
		cfg.Classes[pools.Interactive] = pools.ClassConfig{Pool: "shared"}
		cfg.Classes[pools.Heavy] = pools.ClassConfig{Pool: "shared"}
	} else {
		for _, class := range []pools.Class{pools.Interactive, pools.Heavy} {
			p := c.Pool(scenario.IsolationClass(class))
			add(string(class), p.PoolSize, p.AcquireTimeout.Duration())
			cc := pools.ClassConfig{Pool: string(class)}
			if p.Limiter.Enabled {
				l, err := limiter.New(limiter.Config{MaxPerTenant: p.Limiter.MaxPerTenant, MaxQueue: p.Limiter.MaxQueue,
					MaxWait: p.Limiter.MaxWait.Duration(), MaxGlobal: p.Limiter.MaxGlobal})
				if err != nil {
					return fmt.Errorf("%w: %s limiter: %w", scenario.ErrInvalid, class, err)
				}
				cc.Limiter = l
			}
			cfg.Classes[class] = cc
		}
	}
	s, err := pools.New(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w: open pools: %w", ErrRun, err)
	}
	r.stack = s
	return nil
}

func (r *runner) close() {
	if r.stack != nil {
		r.stack.Close()
	}
	if r.router != nil {
		r.router.Close()
	}
	if r.cat != nil {
		r.cat.Close()
	}
}

// exec runs one op of the schedule through the routed stack.
func (r *runner) exec(ctx context.Context, op workload.Op) error {
	c := r.classes[op.Class]
	class := pools.Class(c.IsolationClass)
	tenant := strconv.Itoa(op.Tenant)
	if dataset.Kind(c.Query) == dataset.KindExport {
		_, err := r.stack.Tx(ctx, class, tenant, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
			func(ctx context.Context, tx pgx.Tx) error {
				_, err := dataset.Export(ctx, tx, op.Tenant, c.Batch)
				return err
			})
		return err
	}
	p := r.params
	p.Sleep = c.Sleep.Duration()
	q, err := dataset.Query(dataset.Kind(c.Query), op.Tenant, op.Seq, p)
	if err != nil {
		return err
	}
	_, err = r.stack.Query(ctx, class, tenant, q.SQL, q.Args...)
	return err
}

// measured is one window's run: its recorder, the generator's counters,
// the schedule it ran, the ledger's usage at its start and end, and how
// long it took.
type measured struct {
	rec            *metrics.Recorder
	stats          workload.RunStats
	sched          workload.Schedule
	usage0, usage1 []pools.Usage
	seconds        float64
}

// runWindow runs schedule s and returns what it measured.
func (r *runner) runWindow(ctx context.Context, name string, s workload.Schedule) (*measured, error) {
	rec, err := metrics.New(metrics.Config{Warmup: r.sc.Phases.Warmup.Duration(), Classify: func(err error) string { return string(pools.Classify(err)) }})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRun, err)
	}
	if r.opts.Phase != nil {
		r.opts.Phase(name, s.Duration)
	}
	m := &measured{rec: rec, sched: s, usage0: r.stack.Ledger().Usage()}
	t0 := time.Now()
	m.stats, err = workload.RunOpenLoop(ctx, s, r.exec, rec, workload.OpenLoopConfig{Drain: max(r.sc.Phases.Drain.Duration(), time.Millisecond), Logger: r.log})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s window: %w", ErrRun, name, err)
	}
	m.seconds = time.Since(t0).Seconds()
	m.usage1 = r.stack.Ledger().Usage()
	return m, nil
}

// sampler counts active t:* backends per node every SampleEvery, by
// window.
type sampler struct {
	mu     sync.Mutex
	sums   map[string]map[string]float64 // window → node → sum
	counts map[string]int
}

func (r *runner) sample(ctx context.Context, s *sampler) error {
	conns := map[string]*pgx.Conn{}
	for _, n := range r.nodes {
		c, err := pgx.Connect(ctx, n.DSN())
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		conns[n.Name] = c
	}
	t := time.NewTicker(r.p.SampleEvery.Duration())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		w, _ := r.window.Load().(string)
		got := map[string]float64{}
		for name, c := range conns {
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND application_name LIKE 't:%'`).Scan(&n); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			got[name] = float64(n)
		}
		if w == "" {
			continue
		}
		s.mu.Lock()
		if s.sums[w] == nil {
			s.sums[w] = map[string]float64{}
		}
		for n, v := range got {
			s.sums[w][n] += v
		}
		s.counts[w]++
		s.mu.Unlock()
	}
}

// dbTime returns the ledger's DB time per tenant, in s.
func (r *runner) dbTime() map[string]float64 {
	out := map[string]float64{}
	for _, u := range r.stack.Ledger().Usage() {
		out[u.Tenant] += u.DBTime.Seconds()
	}
	return out
}

func (r *runner) load(window string, s *sampler, before, after map[string]float64, snap directory.Snapshot) Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Load{Window: window, Samples: s.counts[window]}
	byNode := map[string]float64{}
	for t, v := range after {
		byNode[snap.Resolve(t)] += v - before[t]
	}
	var active, dbt []float64
	for _, n := range r.nodes {
		nd := Node{Name: n.Name, DBTime: byNode[n.Name]}
		if l.Samples > 0 {
			nd.Active = s.sums[window][n.Name] / float64(l.Samples)
		}
		l.Nodes = append(l.Nodes, nd)
		if slices.Contains(snap.Ring, n.Name) {
			active = append(active, nd.Active)
			dbt = append(dbt, nd.DBTime)
			if l.Hot == "" || nd.Active > l.Nodes[slices.IndexFunc(l.Nodes, func(x Node) bool { return x.Name == l.Hot })].Active {
				l.Hot = n.Name
			}
		}
	}
	l.Skew, l.DBTimeSkew = skew(active), skew(dbt)
	return l
}

// skew is max/median; +Inf-safe: a zero median with load gives a large
// finite value (max/ε) so reports stay readable.
func skew(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	mx := s[len(s)-1]
	if mx == 0 {
		return 1
	}
	if med < 1e-3 {
		med = 1e-3
	}
	return mx / med
}
