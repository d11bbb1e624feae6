package citus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/isolation/citus"
)

// startCitus starts a local coordinator and 4 workers, or skips t with one
// line when PostgreSQL or Citus is missing.
func startCitus(t *testing.T) *local.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := local.Start(ctx, backend.Spec{Topology: local.TopologyCitus})
	if errors.Is(err, local.ErrCitusNotInstalled) {
		t.Skip("skipping: Citus is not installed for the local PostgreSQL")
	}
	if errors.Is(err, backend.ErrNotInstalled) {
		t.Skip("skipping: PostgreSQL server binaries not found")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	return c
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
	c := startCitus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	shares := []float64{0.6}
	for range 19 {
		shares = append(shares, 0.4/19)
	}
	const rows = 20000
	if err := dataset.Load(ctx, conn, dataset.Spec{Orders: dataset.Counts(shares, rows), Days: 30, Customers: 50}, time.Unix(1.7e9, 0)); err != nil {
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
	w := startWriter(ctx, t, coord.DSN(), 1, 5*time.Millisecond)
	ladder := citus.Ladder{DB: conn, Table: "orders", Mode: citus.TransferLogical}
	t0 := time.Now()
	records, advice, err := ladder.Run(ctx, load, "", 0)
	took := time.Since(t0)
	acked, pause, errs := w.stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		t.Logf("%-8s %v in %v; shards before %v after %v", r.Step.Action, r.Step, r.Took.Round(time.Millisecond), r.Before.Shards, r.After.Shards)
	}
	t.Logf("ladder: %d steps in %v; writer: %d acknowledged, longest pause %v, errors %v; advice %v", len(records), took.Round(time.Millisecond), len(acked), pause.Round(time.Millisecond), errs, advice)
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

	again, _, err := ladder.Run(ctx, load, "", 0)
	if err != nil || len(again) != 0 {
		t.Errorf("second run: %d steps (%v), want none", len(again), err)
	}
}

type writer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  []int64
	pause  time.Duration
	errs   map[string]int
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
