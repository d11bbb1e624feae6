package dataset_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
)

func TestCounts(t *testing.T) {
	got := dataset.Counts([]float64{0.6, 0.3, 0.1, 0.00001}, 1000)
	want := map[int]int64{1: 600, 2: 300, 3: 100, 4: 1}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("tenant %d: got %d rows, want %d", id, got[id], n)
		}
	}
}

func TestQueryKinds(t *testing.T) {
	p := dataset.Params{Orders: map[int]int64{1: 10}, Customers: 3, Sleep: 20 * time.Millisecond}
	for _, k := range []dataset.Kind{dataset.KindLookup, dataset.KindPage, dataset.KindReport, dataset.KindSleep} {
		if _, err := dataset.Query(k, 1, 7, p); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if _, err := dataset.Query(dataset.KindExport, 1, 7, p); err == nil {
		t.Error("export: want an error (it is several statements)")
	}
	a, _ := dataset.Query(dataset.KindLookup, 1, 7, p)
	b, _ := dataset.Query(dataset.KindLookup, 1, 7, p)
	if a.Args[1] != b.Args[1] {
		t.Errorf("lookup is not deterministic in seq: %v vs %v", a.Args[1], b.Args[1])
	}
	for seq := int64(0); seq < 1000; seq++ {
		s, _ := dataset.Query(dataset.KindLookup, 1, seq, p)
		if id := s.Args[1].(int64); id < 1 || id > 10 {
			t.Fatalf("seq %d: lookup id %d outside 1..10", seq, id)
		}
	}
}

// TestLoad loads a small data set into real PostgreSQL and runs every kind.
func TestLoad(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	counts := dataset.Counts([]float64{0.6, 0.3, 0.1}, 5000)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := dataset.Spec{Schema: "public", Orders: counts, Days: 365, Customers: 50}
	if err := dataset.Load(ctx, conn, spec, now); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT tenant_id, count(*), min(id), max(id), sum(amount)::text FROM orders GROUP BY 1 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[int64]string{}
	for rows.Next() {
		var tenant, n, lo, hi int64
		var sum string
		if err := rows.Scan(&tenant, &n, &lo, &hi, &sum); err != nil {
			t.Fatal(err)
		}
		if n != counts[int(tenant)] || lo != 1 || hi != n {
			t.Errorf("tenant %d: %d rows, ids %d..%d; want %d rows, ids 1..%d", tenant, n, lo, hi, counts[int(tenant)], counts[int(tenant)])
		}
		sums[tenant] = sum
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// Reloading gives the same rows: values are functions of (tenant, id).
	if err := dataset.Load(ctx, conn, spec, now); err != nil {
		t.Fatal(err)
	}
	var again string
	if err := conn.QueryRow(ctx, `SELECT sum(amount)::text FROM orders WHERE tenant_id = 1`).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if again != sums[1] {
		t.Errorf("reload changed tenant 1's data: sum %s, was %s", again, sums[1])
	}

	p := dataset.Params{Orders: counts, Customers: 50, Sleep: 10 * time.Millisecond}
	for _, k := range []dataset.Kind{dataset.KindLookup, dataset.KindPage, dataset.KindReport, dataset.KindSleep} {
		q, err := dataset.Query(k, 1, 42, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := conn.Query(ctx, q.SQL, q.Args...)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		n := 0
		for r.Next() {
			n++
		}
		if err := r.Err(); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if n == 0 {
			t.Errorf("%s returned no rows", k)
		}
		if k == dataset.KindLookup && n != 1 {
			t.Errorf("lookup returned %d rows, want 1", n)
		}
	}
	// An export in batches reads every row exactly once, in key order.
	var seen int64
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if seen, err = dataset.Export(ctx, tx, 1, 700); err != nil {
		t.Fatal(err)
	}
	if seen != counts[1] {
		t.Errorf("export read %d rows, want %d", seen, counts[1])
	}
}
