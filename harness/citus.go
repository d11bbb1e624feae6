package harness

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// coordinator returns the cluster's Citus coordinator with every session
// in schema, and false when it has none.
func coordinator(c backend.Cluster, schema string) (backend.Node, bool) {
	n, ok := backend.First(c, backend.RoleCoordinator)
	if !ok {
		return backend.Node{}, false
	}
	return footprint.InSchema(n, schema), true
}

// distribute makes the data set's tables distributed on the tenant
// column, co-located, with the scenario's shard count (the built-in data
// set's tenants and orders on tenant_id, or data.citus.tables on
// data.citus.column, and data.citus.reference copied to every worker),
// and takes planner statistics of the shards now rather than by
// autovacuum during the first window. A table or column of data.citus
// that the setup did not create is bad input naming its key.
func (r *runner) distribute(ctx context.Context, conn *pgx.Conn) error {
	cd := r.sc.Data.Citus
	d := citus.Distribution{Tables: dataset.Tables, ShardCount: cd.Shards}
	if !r.sc.Data.Builtin() {
		if err := r.checkCitusTables(ctx, conn); err != nil {
			return err
		}
		d = citus.Distribution{Tables: cd.Tables, Reference: cd.Reference, Column: cd.Column, ShardCount: cd.Shards}
	}
	if err := citus.Distribute(ctx, conn, d); err != nil {
		return fmt.Errorf("%w: distribute the data set: %w", ErrRun, err)
	}
	tables := append(slices.Clone(d.Tables), d.Reference...)
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = pgx.Identifier{t}.Sanitize()
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+strings.Join(quoted, ", ")); err != nil {
		return fmt.Errorf("%w: analyze the distributed tables: %w", ErrRun, err)
	}
	return nil
}

// checkCitusTables checks that every table of data.citus is a table of the
// run's schema, after the setup ran, and that each of data.citus.tables
// has data.citus.column: else bad input at the key's file:line:col.
func (r *runner) checkCitusTables(ctx context.Context, conn *pgx.Conn) error {
	cd := r.sc.Data.Citus
	schema := r.sc.Data.SchemaName()
	check := func(key, table string, column bool) error {
		var isTable, hasColumn bool
		err := conn.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			        WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')),
			EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = $3)`,
			schema, table, cd.Column).Scan(&isTable, &hasColumn)
		switch {
		case err != nil:
			return fmt.Errorf("%w: look up table %s: %w", ErrRun, table, err)
		case !isTable:
			return fmt.Errorf("%w: %s: no table %s in the run's schema %s after data.setup ran: name a table your setup files create",
				scenario.ErrInvalid, r.sc.Where(key), table, schema)
		case column && !hasColumn:
			return fmt.Errorf("%w: %s: table %s has no column %s (data.citus.column, the tenant column every distributed table needs)",
				scenario.ErrInvalid, r.sc.Where(key), table, cd.Column)
		}
		return nil
	}
	for i, t := range cd.Tables {
		if err := check(fmt.Sprintf("data.citus.tables[%d]", i), t, true); err != nil {
			return err
		}
	}
	for i, t := range cd.Reference {
		if err := check(fmt.Sprintf("data.citus.reference[%d]", i), t, false); err != nil {
			return err
		}
	}
	return nil
}

// citusLayout is the anchor table's placements at one moment and the
// shard of each tenant then.
type citusLayout struct {
	citus.Layout
	shardOf map[string]int64
	at      time.Time
}

// readLayout reads the placements of anchor, the distributed table whose
// shards the Citus steps name, and the shards of tenants (their keys).
func readLayout(ctx context.Context, db citus.DB, anchor string, tenants []string) (*citusLayout, error) {
	l, err := citus.Inspect(ctx, db, anchor)
	if err != nil {
		return nil, err
	}
	shardOf, err := l.TenantShards(ctx, db, tenants)
	if err != nil {
		return nil, err
	}
	return &citusLayout{Layout: l, shardOf: shardOf, at: time.Now()}, nil
}

// workerLoad is per-worker load attributed through a layout.
type workerLoad struct {
	// Workers is each worker's load, mean busy backends, by pg_dist_node
	// name.
	Workers map[string]float64
	// Skew is max / median of Workers over the workers that take shards
	// (the largest float64 over idle ones with some load).
	Skew float64
	// Hot is the worker holding tenant's shard, HotShare its share of all
	// workers' load.
	Hot      string
	HotShare float64
}

// load attributes dbTime (per tenant, over over) to the workers holding
// the tenants' shards; hot names the tenant whose worker is Hot.
func (l *citusLayout) load(dbTime map[string]time.Duration, over time.Duration, hot string) workerLoad {
	w, _, _ := citus.Attribute(l.Workers, l.Placements, l.shardOf, dbTime, over)
	out := workerLoad{Workers: w, Hot: l.Placements[l.shardOf[hot]]}
	var shared []float64
	var total float64
	for _, wk := range l.Workers {
		total += w[wk.Name]
		if wk.ShouldHaveShards {
			shared = append(shared, w[wk.Name])
		}
	}
	if total > 0 {
		out.HotShare = w[out.Hot] / total
	}
	out.Skew = finiteSkew(citus.Skew(shared))
	return out
}

// finiteSkew maps +Inf (a skew over idle workers) to the largest float64,
// so that reports stay valid JSON.
func finiteSkew(v float64) float64 {
	if math.IsInf(v, 1) {
		return math.MaxFloat64
	}
	return v
}

// tenantsOn returns the tenants (by number, through their keys' index
// in keys: key n-1 is tenant n's), other than except, whose shard is on
// worker.
func (l *citusLayout) tenantsOn(worker, except string, keys []string) map[int]bool {
	out := map[int]bool{}
	for i, t := range keys {
		if shard, ok := l.shardOf[t]; ok && t != except && l.Placements[shard] == worker {
			out[i+1] = true
		}
	}
	return out
}

// dbTimes returns each tenant's DB time in a ledger window.
func dbTimes(w map[string]*pools.Window) map[string]time.Duration {
	out := make(map[string]time.Duration, len(w))
	for t, x := range w {
		out[t] = x.Total
	}
	return out
}

// citusRun is the Citus side of one run on topology citus: a pool to the
// coordinator (in the run's schema) for the layout reads, the tenants, and
// the worker names of the report.
type citusRun struct {
	db *pgxpool.Pool
	// anchor is the distributed table whose placements are read.
	anchor string
	// tenants are the tenants' keys, tenant 1's first.
	tenants []string
	names   reports.WorkerNames
	// hotQuiet are the quiet tenants whose shard was on the dominant
	// tenant's worker at the start of the first phase it sends in; nil
	// until then.
	hotQuiet map[int]bool
	// hotWorker is the short name of the worker hotQuiet are on.
	hotWorker string
	// latest is the layout read last (followLayout), for the series'
	// per-second worker loads; nil before the first read.
	latest atomic.Pointer[citusLayout]
}

// citusFollowEvery is how often followLayout reads the placements; a read
// that takes longer than citusFollowLimit is given up (the last one
// stays).
const (
	citusFollowEvery = time.Second
	citusFollowLimit = 2 * time.Second
)

// followLayout reads the placements every citusFollowEvery into
// r.citus.latest until the returned func is called (once or more), so
// that each second's load is counted on the workers that held the
// tenants' shards then, through the ladder's moves. A read that fails is
// logged and the last layout kept.
func (r *runner) followLayout(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			rctx, rcancel := context.WithTimeout(ctx, citusFollowLimit)
			l, err := readLayout(rctx, r.citus.db, r.citus.anchor, r.citus.tenants)
			rcancel()
			switch {
			case err == nil:
				r.citus.latest.Store(l)
			case ctx.Err() == nil:
				r.log.Debug("read the Citus layout for the series", "err", err)
			}
			if !sleepUntil(ctx, time.Now().Add(citusFollowEvery)) {
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// workerPoints are the per-worker loads of one step of the series:
// dbTime (per tenant key, over over seconds) on the workers that held the
// tenants' shards in l, by the workers' short names in their order.
func (l *citusLayout) workerPoints(dbTime map[string]time.Duration, over float64) []reports.WorkerPoint {
	if over <= 0 {
		return nil
	}
	w, _, _ := citus.Attribute(l.Workers, l.Placements, l.shardOf, dbTime, time.Duration(over*float64(time.Second)))
	names := reports.NewWorkerNames(workerAddrs(l))
	out := make([]reports.WorkerPoint, 0, len(l.Workers))
	for _, addr := range names.Addrs {
		wp := reports.WorkerPoint{Worker: names.Name(addr), Load: w[addr]}
		for _, wk := range l.Workers {
			if wk.Name == addr {
				wp.Dedicated = !wk.ShouldHaveShards
			}
		}
		out = append(out, wp)
	}
	return out
}

// openCitus opens the coordinator pool of a run on topology citus.
func (r *runner) openCitus(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(r.primary.DSN())
	if err != nil {
		return fmt.Errorf("%w: coordinator: %w", ErrRun, err)
	}
	cfg.MaxConns = 2
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%w: connect to coordinator: %w", ErrRun, err)
	}
	r.citus = &citusRun{db: db, anchor: r.sc.Data.Citus.Anchor(), tenants: slices.Clone(r.keys)}
	return nil
}

// snapshotLayout reads the layout at a phase's start; an error is noted
// and leaves the window without worker figures.
func (r *runner) snapshotLayout(ctx context.Context, phase string) *citusLayout {
	if r.citus == nil {
		return nil
	}
	l, err := readLayout(ctx, r.citus.db, r.citus.anchor, r.citus.tenants)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("read the Citus layout", "phase", phase, "err", err)
		}
		return nil
	}
	return l
}

// citusWindows fills the worker figures of a configuration's windows and
// notes the workers' short names once.
func (r *runner) citusWindows(tr *timelineRun, out []reports.Window) {
	if r.citus == nil {
		return
	}
	dom := r.key(scenario.DominantTenant)
	var addrs []string
	for _, w := range tr.windows {
		if w.layout != nil {
			for _, wk := range w.layout.Workers {
				addrs = append(addrs, wk.Name)
			}
		}
	}
	slices.Sort(addrs)
	r.citus.names = reports.NewWorkerNames(slices.Compact(addrs))
	if len(r.citus.names.Addrs) > 0 {
		r.note("workers: %s", r.citus.names.List())
	}
	for i, w := range tr.windows {
		if w.layout == nil {
			continue
		}
		wl := w.layout.load(dbTimes(tr.shares(i)), w.step.Length.Duration(), dom)
		rw := &out[i]
		rw.Workers = map[string]float64{}
		for k, v := range wl.Workers {
			rw.Workers[r.citus.names.Name(k)] = v
		}
		rw.Skew, rw.HotWorker = wl.Skew, r.citus.names.Name(wl.Hot)
	}
}

// windowSkew returns the per-worker load skew of window name.
func (r *runner) windowSkew(tr *timelineRun, name string) (float64, bool) {
	for i, w := range tr.windows {
		if w.step.Name == name && w.layout != nil {
			return w.layout.load(dbTimes(tr.shares(i)), w.step.Length.Duration(), r.key(scenario.DominantTenant)).Skew, true
		}
	}
	return 0, false
}

func (c *citusRun) close() {
	if c != nil {
		c.db.Close()
	}
}

// citusWarmTenant tags the warm-up calls, each with its own number
// ("warmup-3") so that a per-tenant limiter (max_per_tenant, max_queue)
// admits all of them at once; it is no tenant of the data set, and they
// end before the timeline's first ledger reading.
const citusWarmTenant = "warmup"

// warmCitus opens every pooled connection of configuration c's stack and
// each one's Citus connections to every worker (a query on every shard),
// so that no window pays for them: on a worker with a small CPU budget a
// new connection costs tens of ms. Each call holds its connection until
// all have one, for at most 5 s. Connections that could not be opened are
// noted, not an error: only ctx ending is.
func (r *runner) warmCitus(ctx context.Context, c *scenario.Configuration, st *stack) error {
	sizes := map[string]int{}
	for _, p := range st.Stat().Pools {
		sizes[p.Name] = int(p.MaxConns)
	}
	byClass := map[pools.Class]int{pools.Interactive: sizes["shared"]}
	if c.Mode != scenario.ModeShared {
		byClass = map[pools.Class]int{pools.Interactive: sizes[string(pools.Interactive)], pools.Heavy: sizes[string(pools.Heavy)]}
	}
	var n int
	for _, k := range byClass {
		n += k
	}
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	var g sync.WaitGroup
	errs := make(chan error, n)
	warm := "SELECT count(*) FROM " + pgx.Identifier{r.sc.Data.Citus.Anchor()}.Sanitize()
	i := 0
	for class, k := range byClass {
		for range k {
			i++
			tenant := fmt.Sprintf("%s-%d", citusWarmTenant, i)
			g.Go(func() {
				_, err := st.WithConn(ctx, class, tenant, func(ctx context.Context, conn *pgx.Conn) error {
					_, err := conn.Exec(ctx, warm)
					arrived.Done()
					select {
					case <-all:
					case <-time.After(5 * time.Second):
					}
					return err
				})
				errs <- err
			})
		}
	}
	g.Wait()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrRun, ctx.Err())
	}
	if failed > 0 {
		// A cold connection costs the first window some latency, no more:
		// the run goes on and says so.
		r.note("%s: %d of %d pooled connections not warmed on the coordinator (%v): the first window may pay for opening them", c.Name, failed, n, first)
	}
	return nil
}
