package citus_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/isolation/citus"
)

// startCitus starts a local coordinator and 4 workers, or skips t with one
// line when PostgreSQL or Citus is missing, and returns a connection to the
// coordinator (closed at the test's end).
func startCitus(t *testing.T) (*local.Cluster, *pgx.Conn) {
	t.Helper()
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(t.Context(), coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return c, conn
}

// TestHotShardLadder reproduces the hot shard: tenant 1 has 60% of the
// rows and most of the traffic. Sampling must find it and the hot worker;
// the ladder must isolate it, dedicate its worker and move every other
// shard off it, while a writer for tenant 1 loses and duplicates nothing;
// running the ladder again must do nothing.
func TestHotShardLadder(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: the hot-shard ladder takes about 45 s (-short)")
	}
	c, conn := startCitus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	coord, _ := backend.First(c, backend.RoleCoordinator)

	shares := []float64{0.6}
	for range 19 {
		shares = append(shares, 0.4/19)
	}
	const rows = 20000
	if err := dataset.Load(ctx, conn, dataset.Spec{Schema: "public", Orders: dataset.Counts(shares, rows), Days: 30, Customers: 50}, time.Unix(1.7e9, 0)); err != nil {
		t.Fatal(err)
	}
	dist := citus.Distribution{Tables: []string{"tenants", "orders"}}
	if err := citus.Distribute(ctx, conn, dist); err != nil {
		t.Fatal(err)
	}
	if err := citus.Distribute(ctx, conn, dist); err != nil {
		t.Fatalf("second Distribute is not idempotent: %v", err)
	}
	var total int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&total); err != nil || total < rows-20 {
		t.Fatalf("distributed orders = %d (%v)", total, err)
	}
	layout, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(layout.Placements) != citus.DefaultShardCount || len(layout.Workers) != 4 {
		t.Fatalf("%d shards on %d workers, want %d on 4", len(layout.Placements), len(layout.Workers), citus.DefaultShardCount)
	}
	// Each shard group is the orders shard and its co-located tenants shard
	// (a non-empty table: 8 kB at least).
	for id, b := range layout.Bytes {
		if g, ok := layout.GroupBytes[id]; !ok || g < b+8192 {
			t.Errorf("shard %d: group %d bytes (%v), want its own %d bytes plus its tenants shard's", id, g, ok, b)
		}
	}

	// Load: 6 sessions for tenant 1, one for each of tenants 2..5; every
	// query sleeps 20 ms on the worker holding the tenant's shard.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, tenant := range []int{1, 1, 1, 1, 1, 1, 2, 3, 4, 5} {
		cfg, _ := pgx.ParseConfig(coord.DSN())
		cfg.RuntimeParams["application_name"] = "t:" + strconv.Itoa(tenant)
		wc, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer wc.Close(context.Background())
			for loadCtx.Err() == nil {
				wc.Exec(loadCtx, "SELECT pg_sleep(0.02) FROM orders WHERE tenant_id = $1 AND id = $2", tenant, 1+i)
			}
		})
	}
	workers := map[string]citus.DB{}
	for _, n := range c.Nodes() {
		if n.Role != backend.RoleWorker {
			continue
		}
		p, err := pgxpool.New(ctx, n.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		workers[n.Host+":"+strconv.Itoa(n.Port)] = p
	}
	load, err := citus.Sample(ctx, citus.Sampling{Coordinator: conn, Workers: workers, Interval: 20 * time.Millisecond}, 1500*time.Millisecond)
	stopLoad()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	st, err := citus.StatTenants(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("citus_stat_tenants shares: %v", st)
	if st["1"] < 0.4 {
		t.Errorf("citus_stat_tenants share of tenant 1 = %.2f, want > 0.4 (6 of 10 sessions)", st["1"])
	}
	state, err := layout.State(ctx, conn, load)
	if err != nil {
		t.Fatal(err)
	}
	plan := citus.Decide(state, citus.Thresholds{})
	t.Logf("sampled %d times over %v: workers %v, tenants %v; worker skew %.2f, alerts %v", load.Samples, load.Duration, load.Workers, load.Tenants, plan.WorkerSkew, plan.Alerts)
	if load.Tenants["1"] < 0.5 {
		t.Fatalf("tenant 1 share = %.2f, want > 0.5", load.Tenants["1"])
	}
	hotShard, err := layout.TenantShard(ctx, conn, "1")
	if err != nil {
		t.Fatal(err)
	}
	hotWorker := layout.Placements[hotShard]
	if plan.WorkerSkew <= citus.DefaultSkew || len(plan.Alerts) == 0 || plan.Alerts[0].Subject != hotWorker {
		t.Fatalf("worker skew %.2f, alerts %v: want a worker-skew alert on %s", plan.WorkerSkew, plan.Alerts, hotWorker)
	}

	// A writer for tenant 1 at a fixed rate while the ladder runs.
	_, advice, w := runLadder(ctx, t, conn, coord.DSN(), load)
	acked := w.acked
	if len(advice) != 1 || advice[0].Action != citus.ActionRecommend {
		t.Errorf("advice = %v, want one recommendation (share > 50%%)", advice)
	}

	after, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		t.Fatal(err)
	}
	shard, err := after.TenantShard(ctx, conn, "1")
	if err != nil {
		t.Fatal(err)
	}
	home := after.Placements[shard]
	if !after.Single[shard] {
		t.Errorf("tenant 1's shard %d is not isolated", shard)
	}
	counts := map[string]int{}
	for id, wk := range after.Placements {
		counts[wk]++
		if wk == home && id != shard {
			t.Errorf("shard %d shares worker %s with tenant 1", id, home)
		}
	}
	var others []float64
	for _, wk := range after.Workers {
		if wk.Name == home {
			if wk.ShouldHaveShards {
				t.Errorf("tenant 1's worker %s still takes shards", home)
			}
			continue
		}
		others = append(others, float64(counts[wk.Name]))
	}
	if s := citus.Skew(others); s > citus.DefaultSkew {
		t.Errorf("shard-count skew over the other workers = %.2f (%v), want <= %.1f", s, counts, citus.DefaultSkew)
	}

	// Every acknowledged write is there exactly once.
	missing, dup := checkWrites(ctx, t, conn, acked)
	if missing != 0 || dup != 0 {
		t.Errorf("writer: %d acknowledged rows missing, %d duplicated", missing, dup)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE id < 1000000000").Scan(&total); err != nil || total < rows-20 {
		t.Errorf("orders after the ladder = %d (%v)", total, err)
	}

	again, _, err := citus.Ladder{DB: conn, Table: "orders", Mode: citus.TransferLogical}.Run(ctx, load, "", 0)
	if err != nil || len(again) != 0 {
		t.Errorf("second run: %d steps (%v), want none", len(again), err)
	}
}

// TestLadderDedicatesCheaperWorker drives the ladder down the path where
// the worker dedicated to the hot tenant is not the one its shard lives on
// (home): home also holds big shards of other tenants (about 2 MB), two
// other workers hold a few hundred kB each and one (W) holds almost
// nothing, so emptying W and moving the small tenant's shard there moves
// fewer bytes than emptying home. After Run the tenant's shard is isolated
// and alone on W, W takes no shards, home still does, no row is lost and a
// writer for the tenant loses and duplicates nothing; a second Run does
// nothing.
func TestLadderDedicatesCheaperWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: the cheaper-worker ladder takes about 30 s (-short)")
	}
	c, conn := startCitus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	coord, _ := backend.First(c, backend.RoleCoordinator)

	// Eight small tenants; tenant 1 is the hot one (the writer's tenant).
	orders := map[int]int64{1: 200}
	for id := 2; id <= 8; id++ {
		orders[id] = 20
	}
	if err := dataset.Load(ctx, conn, dataset.Spec{Schema: "public", Orders: orders, Days: 30, Customers: 20}, time.Unix(1.7e9, 0)); err != nil {
		t.Fatal(err)
	}
	if err := citus.Distribute(ctx, conn, citus.Distribution{Tables: dataset.Tables}); err != nil {
		t.Fatal(err)
	}
	layout, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(layout.Workers) != 4 {
		t.Fatalf("%d workers, want 4", len(layout.Workers))
	}
	hotShard, err := layout.TenantShard(ctx, conn, "1")
	if err != nil {
		t.Fatal(err)
	}
	home := layout.Placements[hotShard]
	var others []string
	for _, w := range layout.Workers {
		if w.Name != home {
			others = append(others, w.Name)
		}
	}
	// W is the last other worker by name, so it wins on bytes, not on the
	// name order of ties.
	wantW := others[len(others)-1]

	// Big tenants: three on home (each in a shard of its own, not tenant
	// 1's, 3000 rows each), one on each other worker but W (1000 rows).
	candidates := make([]string, 0, 400)
	for id := 100; id < 500; id++ {
		candidates = append(candidates, strconv.Itoa(id))
	}
	shardOf, err := layout.TenantShards(ctx, conn, candidates)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{home: 3, others[0]: 1, others[1]: 1}
	used := map[int64]bool{hotShard: true}
	var bigIDs, bigRows []int64
	for _, cand := range candidates {
		shard := shardOf[cand]
		w := layout.Placements[shard]
		if want[w] == 0 || used[shard] {
			continue
		}
		want[w]--
		used[shard] = true
		id, _ := strconv.ParseInt(cand, 10, 64)
		n := int64(1000)
		if w == home {
			n = 3000
		}
		bigIDs, bigRows = append(bigIDs, id), append(bigRows, n)
	}
	if len(bigIDs) != 5 {
		t.Fatalf("found %d big tenants among ids 100..499 (%v), want 5", len(bigIDs), bigIDs)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO tenants SELECT t.id, 'big-' || t.id, 'standard', t.n, now() FROM unnest($1::bigint[], $2::bigint[]) t(id, n)`, bigIDs, bigRows); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO orders (tenant_id, id, created_at, amount, status, customer, note)
		SELECT t.id, g, now(), 1, 'paid', 'c' || (g % 20), repeat('x', 200) FROM unnest($1::bigint[], $2::bigint[]) t(id, n), generate_series(1, t.n) g`, bigIDs, bigRows); err != nil {
		t.Fatal(err)
	}
	// Visibility map and free space map now, so that autovacuum does not
	// grow the shards while the test compares their sizes.
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE tenants"); err != nil {
		t.Fatal(err)
	}
	before, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		t.Fatal(err)
	}
	bytesBefore := map[string]int64{}
	for id, w := range before.Placements {
		bytesBefore[w] += before.GroupBytes[id]
	}
	homeOthers := bytesBefore[home] - before.GroupBytes[hotShard]
	costW := bytesBefore[wantW] + before.GroupBytes[hotShard]
	t.Logf("home %s: %d bytes besides tenant 1's shard %d (%d bytes); W %s: %d bytes; bytes per worker %v",
		home, homeOthers, hotShard, before.GroupBytes[hotShard], wantW, bytesBefore[wantW], bytesBefore)
	for _, w := range others[:2] {
		if bytesBefore[w] <= bytesBefore[wantW] {
			t.Fatalf("setup: worker %s holds %d bytes, not more than W %s (%d)", w, bytesBefore[w], wantW, bytesBefore[wantW])
		}
	}
	if 2*costW >= homeOthers {
		t.Fatalf("setup: dedicating W moves %d bytes, not well below home's %d", costW, homeOthers)
	}
	for _, w := range before.Workers {
		if !w.ShouldHaveShards {
			t.Fatalf("setup: worker %s already takes no shards", w.Name)
		}
	}
	counts := func() (orders, tenants int64) {
		t.Helper()
		if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM orders WHERE id < 1000000000), (SELECT count(*) FROM tenants)").Scan(&orders, &tenants); err != nil {
			t.Fatal(err)
		}
		return orders, tenants
	}
	ordersBefore, tenantsBefore := counts()

	// The ladder decides on shares only; the worker loads are synthetic.
	load := citus.Load{Samples: 1, Duration: time.Second,
		Workers: map[string]float64{home: 3, others[0]: 0.5, others[1]: 0.5, wantW: 0.5},
		Tenants: map[string]float64{"1": 0.3}}
	records, advice, w := runLadder(ctx, t, conn, coord.DSN(), load)
	acked := w.acked
	if len(advice) != 0 {
		t.Errorf("advice = %v, want none (share 30%% < 50%%)", advice)
	}

	after, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		t.Fatal(err)
	}
	shard, err := after.TenantShard(ctx, conn, "1")
	if err != nil {
		t.Fatal(err)
	}
	if !after.Single[shard] {
		t.Errorf("tenant 1's shard %d is not isolated", shard)
	}
	if got := after.Placements[shard]; got != wantW {
		t.Errorf("tenant 1's shard %d is on %s, want W %s (home %s)", shard, got, wantW, home)
	}
	var dedicated []string
	for _, wk := range after.Workers {
		if !wk.ShouldHaveShards {
			dedicated = append(dedicated, wk.Name)
		}
		if wk.Name == home && !wk.ShouldHaveShards {
			t.Errorf("home %s takes no shards", home)
		}
	}
	if len(dedicated) != 1 || dedicated[0] != wantW {
		t.Errorf("workers taking no shards: %v, want [%s]", dedicated, wantW)
	}
	for id, wk := range after.Placements {
		if wk == wantW && id != shard {
			t.Errorf("shard %d of orders shares W %s with tenant 1", id, wantW)
		}
	}
	tenantsLayout, err := citus.Inspect(ctx, conn, "tenants")
	if err != nil {
		t.Fatal(err)
	}
	tenantsShard, err := tenantsLayout.TenantShard(ctx, conn, "1")
	if err != nil {
		t.Fatal(err)
	}
	for id, wk := range tenantsLayout.Placements {
		if (wk == wantW) != (id == tenantsShard) {
			t.Errorf("tenants shard %d is on %s; only tenant 1's (%d) belongs on W %s", id, wk, tenantsShard, wantW)
		}
	}

	// The records: one dedication, of W; every move empties W, but the last,
	// which brings tenant 1's shard from home.
	var dedications []citus.Record
	for i, r := range records {
		switch r.Step.Action {
		case citus.ActionDedicate:
			dedications = append(dedications, r)
		case citus.ActionMove:
			last := i == len(records)-1
			if last && (r.Step.ShardID != shard || r.Step.From != home || r.Step.To != wantW) {
				t.Errorf("last step %v, want tenant 1's shard %d moved from %s to %s", r.Step, shard, home, wantW)
			}
			if !last && (r.Step.From != wantW || r.Step.To == wantW) {
				t.Errorf("step %v does not empty W %s", r.Step, wantW)
			}
		}
		if r.Skipped {
			t.Errorf("step %v skipped in the first run", r.Step)
		}
	}
	if len(dedications) != 1 || dedications[0].Step.To != wantW {
		t.Fatalf("dedications %v, want one of W %s", dedications, wantW)
	}
	// The bytes compared: home's cost is its shards but tenant 1's, the
	// split remainders included (they stay on home, unwritten); W's is at
	// least its own shards.
	reason := dedications[0].Step.Reason
	m := regexp.MustCompile(`dedicating (\S+) moves ([0-9.]+ [kMGT]?B) vs ([0-9.]+ [kMGT]?B) to dedicate its current worker (\S+)$`).FindStringSubmatch(reason)
	if m == nil || m[1] != wantW || m[4] != home {
		t.Fatalf("dedication reason %q names no bytes of W %s against home %s", reason, wantW, home)
	}
	gotW, gotHome := parseSize(t, m[2]), parseSize(t, m[3])
	var wantHome int64
	for id, wk := range after.Placements {
		_, old := before.Placements[id]
		if wk == home && id != shard && (before.Placements[id] == home || !old) {
			wantHome += after.GroupBytes[id]
		}
	}
	slack := func(n int64) int64 { return n/20 + 64<<10 } // a rounded decimal, a free space map
	if d := gotHome - wantHome; d > slack(wantHome) || -d > slack(wantHome) {
		t.Errorf("dedication compares %s for home, want about %d bytes (%q)", m[3], wantHome, reason)
	}
	if gotW < bytesBefore[wantW]-slack(bytesBefore[wantW]) || gotW >= gotHome {
		t.Errorf("dedication compares %s for W, want at least W's %d bytes and below home's %s (%q)", m[2], bytesBefore[wantW], m[3], reason)
	}

	// Every row is there: the data, and each acknowledged write once.
	if o, tn := counts(); o != ordersBefore || tn != tenantsBefore {
		t.Errorf("rows after the ladder: orders %d, tenants %d; want %d and %d", o, tn, ordersBefore, tenantsBefore)
	}
	missing, dup := checkWrites(ctx, t, conn, acked)
	if missing != 0 || dup != 0 || len(acked) == 0 {
		t.Errorf("writer: %d acknowledged, %d missing, %d duplicated", len(acked), missing, dup)
	}
	var written int64
	// The insert in flight when the writer stopped may have committed
	// unacknowledged; no other row may be there.
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE tenant_id = 1 AND id >= 1000000000 AND id <> $1", w.unsure).Scan(&written); err != nil || written != int64(len(acked)) {
		t.Errorf("writer rows = %d (%v, besides the unacknowledged insert in flight at the stop, id %d), want the %d acknowledged", written, err, w.unsure, len(acked))
	}

	again, _, err := citus.Ladder{DB: conn, Table: "orders", Mode: citus.TransferLogical}.Run(ctx, load, "", 0)
	if err != nil || len(again) != 0 {
		t.Errorf("second run: %d steps (%v), want none", len(again), err)
	}
}

// parseSize parses a size as the ladder formats it ("812 B", "1.5 kB",
// "2.3 MB"; units of 1024) into bytes.
func parseSize(t *testing.T, s string) int64 {
	t.Helper()
	num, unit, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		t.Fatalf("parse size %q: %v", s, err)
	}
	mult := map[string]float64{"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}[unit]
	if mult == 0 {
		t.Fatalf("parse size %q: unknown unit", s)
	}
	return int64(v * mult)
}

type writer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  []int64
	pause  time.Duration
	errs   map[string]int
	// unsure is the id whose insert was in flight when the writer was
	// stopped (0: none): it may or may not have committed.
	unsure int64
}

// startWriter inserts one orders row for tenant every interval (ids from
// 1e9 up) and records each acknowledged id and the longest gap between
// acknowledgements.
func startWriter(ctx context.Context, t *testing.T, dsn string, tenant int, interval time.Duration) *writer {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{cancel: cancel, done: make(chan struct{}), errs: map[string]int{}}
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		last := time.Now()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for id := int64(1e9); ; id++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := conn.Exec(ctx, `INSERT INTO orders (tenant_id, id, created_at, amount, status, customer, note)
				VALUES ($1, $2, now(), 1, 'paid', 'w', 'writer')`, tenant, id)
			if ctx.Err() != nil {
				w.mu.Lock()
				w.unsure = id
				w.mu.Unlock()
				return
			}
			w.mu.Lock()
			if err != nil {
				w.errs[errClass(err)]++
			} else {
				now := time.Now()
				w.pause = max(w.pause, now.Sub(last))
				last = now
				w.acked = append(w.acked, id)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *writer) stop() ([]int64, time.Duration, map[string]int) {
	w.cancel()
	<-w.done
	return w.acked, w.pause, w.errs
}

func errClass(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func checkWrites(ctx context.Context, t *testing.T, conn *pgx.Conn, acked []int64) (missing, dup int) {
	t.Helper()
	rows, err := conn.Query(ctx, "SELECT a.id, count(o.id) FROM unnest($1::bigint[]) a(id) LEFT JOIN orders o ON o.tenant_id = 1 AND o.id = a.id GROUP BY a.id", acked)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, n int64
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		switch {
		case n == 0:
			missing++
		case n > 1:
			dup++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(fmt.Errorf("check writes: %w", err))
	}
	return missing, dup
}

// runLadder runs the ladder on the cluster of conn (force_logical) while a
// writer inserts tenant 1 rows every 5 ms, logs each step and the writer's
// figures, and fails t if the ladder fails. The writer is stopped.
func runLadder(ctx context.Context, t *testing.T, conn *pgx.Conn, dsn string, load citus.Load) ([]citus.Record, []citus.Step, *writer) {
	t.Helper()
	w := startWriter(ctx, t, dsn, 1, 5*time.Millisecond)
	t0 := time.Now()
	records, advice, err := citus.Ladder{DB: conn, Table: "orders", Mode: citus.TransferLogical}.Run(ctx, load, "", 0)
	took := time.Since(t0)
	w.stop()
	logLadder(t, records, took, w.acked, w.pause, w.errs, advice)
	if err != nil {
		t.Fatal(err)
	}
	return records, advice, w
}

// logLadder logs each step of a ladder run and the writer's figures.
func logLadder(t *testing.T, records []citus.Record, took time.Duration, acked []int64, pause time.Duration, errs map[string]int, advice []citus.Step) {
	t.Helper()
	for _, r := range records {
		t.Logf("%-8s %v in %v; shards before %v after %v", r.Step.Action, r.Step, r.Took.Round(time.Millisecond), r.Before.Shards, r.After.Shards)
	}
	t.Logf("ladder: %d steps in %v; writer: %d acknowledged, longest pause %v, errors %v; advice %v",
		len(records), took.Round(time.Millisecond), len(acked), pause.Round(time.Millisecond), errs, advice)
}
