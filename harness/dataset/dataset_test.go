package dataset_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/workload/pgscript"
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

// builtins are the variables the shipped scripts are parsed with here.
var builtins = []string{"tenant", "rows_orders"}

func TestScripts(t *testing.T) {
	p := dataset.ScriptParams{Customers: 3, Sleep: 20 * time.Millisecond}
	for _, k := range dataset.Kinds {
		if _, err := dataset.Script(k, builtins, p); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if _, err := dataset.Script("nope", builtins, p); err == nil {
		t.Error("unknown kind: want an error")
	}
	// A lookup addresses one of the tenant's ids, 1..rows_orders, every
	// one of them over many runs; the same seq draws the same id.
	lookup, _ := dataset.Script(dataset.KindLookup, builtins, p)
	seen := map[int64]bool{}
	for seq := uint64(0); seq < 1000; seq++ {
		sql, args, ok, err := lookup.Single(rand.New(rand.NewPCG(1, seq)), []pgscript.Value{pgscript.Int(1), pgscript.Int(10)})
		if err != nil || !ok {
			t.Fatalf("lookup: ok %v, %v", ok, err)
		}
		if want := `SELECT id, created_at, amount, status, customer FROM orders WHERE tenant_id = $1 AND id = $2`; sql != want {
			t.Fatalf("lookup sends %q, want %q", sql, want)
		}
		id := args[1].(int64)
		if id < 1 || id > 10 {
			t.Fatalf("seq %d: lookup id %d outside 1..10", seq, id)
		}
		seen[id] = true
		_, again, _, _ := lookup.Single(rand.New(rand.NewPCG(1, seq)), []pgscript.Value{pgscript.Int(1), pgscript.Int(10)})
		if again[1] != args[1] {
			t.Fatalf("seq %d: lookup id %v then %v", seq, args[1], again[1])
		}
	}
	if len(seen) != 10 {
		t.Errorf("lookup drew %d of the 10 ids", len(seen))
	}
}

// countingConn runs a script's statements on a pgx connection and counts
// the rows each returns.
type countingConn struct {
	c     *pgx.Conn
	stmts int
	rows  int64
}

func (cc *countingConn) Exec(ctx context.Context, sql string, args []any) error {
	_, _, _, err := cc.Query(ctx, sql, args)
	return err
}

func (cc *countingConn) Query(ctx context.Context, sql string, args []any) ([]string, []any, int, error) {
	for i, a := range args {
		if v, ok := a.(int64); ok {
			args[i] = strconv.FormatInt(v, 10)
		} else if v, ok := a.(float64); ok {
			args[i] = strconv.FormatFloat(v, 'g', 15, 64)
		}
	}
	rows, err := cc.c.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	cc.stmts++
	cc.rows += int64(n)
	return nil, nil, n, rows.Err()
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
	// Vacuumed, not only analyzed: the pages are marked all-visible (a
	// fresh load that is only analyzed has relallvisible 0), so no measured
	// run meets autovacuum's first pass over the rows.
	var pages, visible int64
	if err := conn.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class WHERE oid = 'orders'::regclass`).Scan(&pages, &visible); err != nil {
		t.Fatal(err)
	}
	if pages == 0 || visible < pages {
		t.Errorf("orders after Load: %d of %d pages all-visible, want every page (VACUUM after the load)", visible, pages)
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

	p := dataset.ScriptParams{Customers: 50, Sleep: 10 * time.Millisecond, Batch: 700}
	bind := []pgscript.Value{pgscript.Int(1), pgscript.Int(counts[1])}
	for _, k := range dataset.Kinds {
		prog, err := dataset.Script(k, builtins, p)
		if err != nil {
			t.Fatal(err)
		}
		cc := &countingConn{c: conn}
		if err := prog.Run(ctx, cc, rand.New(rand.NewPCG(1, 42)), bind); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		switch k {
		case dataset.KindLookup:
			if cc.rows != 1 {
				t.Errorf("lookup returned %d rows, want 1", cc.rows)
			}
		case dataset.KindExport:
			// Every row exactly once, in batches of 700: 3,000 rows are
			// 5 batches (the last short), between BEGIN and COMMIT.
			if cc.rows != counts[1] {
				t.Errorf("export read %d rows, want %d", cc.rows, counts[1])
			}
			if want := int(counts[1]/700) + 1 + 2; cc.stmts != want {
				t.Errorf("export ran %d statements, want %d (BEGIN, %d batches, COMMIT)", cc.stmts, want, want-2)
			}
		default:
			if cc.rows == 0 {
				t.Errorf("%s returned no rows", k)
			}
		}
	}
	if tx := conn.PgConn().TxStatus(); tx != 'I' {
		t.Errorf("export left a transaction open (status %c)", tx)
	}
}
