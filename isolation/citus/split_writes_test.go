package citus_test

import (
	"context"
	"fmt"
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

// TestIsolateUnderUpdates isolates tenant 1 with each split mode, then
// moves its shard to the other worker (force_logical), while a writer
// inserts and updates tenant 1's rows through the coordinator: each step
// must finish within a minute and no write fail; with force_logical the
// tenant's new shard is on the other worker. (Citus 13.2's own
// force_logical isolate_tenant_to_new_shard never finished here once the
// rows were updated: see DefaultSplitMode.) The writer's longest write is
// logged, not checked: a timing on a shared machine.
func TestIsolateUnderUpdates(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts a Citus cluster (-short)")
	}
	for _, mode := range []citus.TransferMode{citus.TransferBlockWrites, citus.TransferLogical} {
		t.Run(string(mode), func(t *testing.T) { isolateUnderUpdates(t, mode) })
	}
}

func isolateUnderUpdates(t *testing.T, splitMode citus.TransferMode) {
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus, Nodes: 2})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	shares := []float64{0.6, 0.1, 0.1, 0.1, 0.1}
	if err := dataset.Load(ctx, conn, dataset.Spec{Schema: "public", Orders: dataset.Counts(shares, 5000), Days: 30, Customers: 50}, time.Unix(1.7e9, 0)); err != nil {
		t.Fatal(err)
	}
	if err := citus.Distribute(ctx, conn, citus.Distribution{Tables: []string{"tenants", "orders"}, ShardCount: 4}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// The writer: every 10 ms an insert of a new row of tenant 1, every
	// fifth write an update of one written before.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var longest time.Duration
	var writes, updates int
	errs := map[string]int{}
	wg.Go(func() {
		next := int64(-1)
		for i := 0; wctx.Err() == nil; i++ {
			t0 := time.Now()
			var err error
			update := i%5 == 4
			if update {
				_, err = pool.Exec(wctx, "UPDATE orders SET note = $3 WHERE tenant_id = $1 AND id = $2", 1, next+1, fmt.Sprint(i))
			} else {
				_, err = pool.Exec(wctx, "INSERT INTO orders (tenant_id, id, created_at, amount, status, customer, note) VALUES (1, $1, now(), 1, 'paid', 'w', 'x')", next)
				next--
			}
			mu.Lock()
			writes++
			if update {
				updates++
			}
			longest = max(longest, time.Since(t0))
			if err != nil && wctx.Err() == nil {
				errs[errClass(err)]++
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	})
	defer func() { stop(); wg.Wait() }()
	time.Sleep(500 * time.Millisecond)

	l := citus.Ladder{DB: conn, Table: "orders", Mode: citus.TransferLogical, SplitMode: splitMode}
	first, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		t.Fatal(err)
	}
	home, err := first.TenantShard(ctx, conn, "1")
	if err != nil {
		t.Fatal(err)
	}
	step := func(s citus.Step) {
		t.Helper()
		layout, err := citus.Inspect(ctx, conn, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if s.Action == citus.ActionMove {
			shard, err := layout.TenantShard(ctx, conn, "1")
			if err != nil {
				t.Fatal(err)
			}
			s.ShardID = shard
			for _, w := range layout.Workers {
				if w.Name != layout.Placements[shard] {
					s.To = w.Name
				}
			}
		}
		sctx, scancel := context.WithTimeout(ctx, time.Minute)
		defer scancel()
		rec, err := l.Execute(sctx, layout, s)
		mu.Lock()
		t.Logf("%s: %v in %v; writer so far %d writes (%d updates), longest %v, errors %v", s.Action, err, rec.Took.Round(time.Millisecond),
			writes, updates, longest.Round(time.Millisecond), errs)
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	step(citus.Step{Action: citus.ActionIsolate, Tenant: "1"})
	isolated, err := citus.Inspect(ctx, conn, "orders")
	if err != nil {
		t.Fatal(err)
	}
	own, err := isolated.TenantShard(ctx, conn, "1")
	if err != nil {
		t.Fatal(err)
	}
	sameWorker := isolated.Placements[own] == first.Placements[home]
	if !isolated.Single[own] || sameWorker != (splitMode == citus.TransferBlockWrites) {
		t.Errorf("after the isolation tenant 1's shard %d is on %s (single value: %v), its shard was on %s; want a shard of its own, on the same worker only with block_writes",
			own, isolated.Placements[own], isolated.Single[own], first.Placements[home])
	}
	step(citus.Step{Action: citus.ActionMove, Tenant: "1"})
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 || updates == 0 {
		t.Errorf("writer: %d writes, %d updates, errors %v; want updates and no error", writes, updates, errs)
	}
}
