package pools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/isolation/limiter"
)

// BenchmarkQuery compares one "SELECT 1" through a bare pgxpool pool with
// the same through the Stack, one goroutine at a time (the overhead per
// call): Query (tag, statement and reset in one flight and one implicit
// transaction: one round trip), with and without a
// limiter, and WithConn running the same statement (tag, statement and reset
// each a round trip of their own, as every call did before Query batched
// them). Compare ns/op against pgxpool's from the same run.
func BenchmarkQuery(b *testing.B) {
	c := localtest.Start(b, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx := context.Background()

	b.Run("pgxpool", func(b *testing.B) {
		p, err := pgxpool.New(ctx, primary.DSN())
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		for b.Loop() {
			if _, err := p.Exec(ctx, "SELECT 1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stack-withconn", func(b *testing.B) {
		s, err := New(ctx, onePool(primary.DSN(), 4))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for b.Loop() {
			if _, err := s.WithConn(ctx, Interactive, "t", func(ctx context.Context, conn *pgx.Conn) error {
				_, err := conn.Exec(ctx, "SELECT 1")
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, withLimiter := range []bool{false, true} {
		name := "stack"
		cfg := onePool(primary.DSN(), 4)
		if withLimiter {
			name = "stack+limiter"
			lim, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: lim}
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for b.Loop() {
				if _, err := s.Query(ctx, Interactive, "t", "SELECT 1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQueryRatio measures the Stack's cost as a ratio to a bare
// pgxpool pool that holds up on a busy machine: each iteration runs one
// "SELECT 1" through every variant in turn (bare pgxpool, Stack.Query,
// Stack.Query with a limiter, and Stack.WithConn: tag, statement and reset
// each its own round trip), then the data set's point lookup through a
// bare pool and through Stack.Query, in blocks of 50 calls so that a call
// pays for the reset its own variant's previous call left to the server,
// and load from elsewhere falls on all of them alike. It reports each
// variant's median µs per call and its median over the bare pool's for
// the same statement (goal: Query ≤ 1.2). Each iteration is 50 calls of
// each variant.
func BenchmarkQueryRatio(b *testing.B) {
	ctx := context.Background()
	primary, bare := benchBarePool(b)
	plain, err := New(ctx, onePool(primary.DSN(), 4))
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	cfg := onePool(primary.DSN(), 4)
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: lim}
	limited, err := New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer limited.Close()

	type variant struct {
		name string
		call func() error
	}
	variants := []variant{
		{"pgxpool", func() error { _, err := bare.Exec(ctx, "SELECT 1"); return err }},
		{"query", func() error { _, err := plain.Query(ctx, Interactive, "t", "SELECT 1"); return err }},
		{"query+limiter", func() error { _, err := limited.Query(ctx, Interactive, "t", "SELECT 1"); return err }},
		{"withconn", func() error {
			_, err := plain.WithConn(ctx, Interactive, "t", func(ctx context.Context, conn *pgx.Conn) error {
				_, err := conn.Exec(ctx, "SELECT 1")
				return err
			})
			return err
		}},
	}
	// The same through the data set's point lookup (an order by tenant
	// and key, five columns back): the short query a real API runs, where
	// the statement's own work weighs beside the Stack's commands.
	if _, err := bare.Exec(ctx, lookupTable); err != nil {
		b.Fatal(err)
	}
	lookupArgs := func(i int) (int, int) { return 1 + i%50, 1 + i%20000 }
	var li int
	variants = append(variants,
		variant{"pgxpool-lookup", func() error {
			li++
			t, id := lookupArgs(li)
			rows, err := bare.Query(ctx, lookupSQL, t, id)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}},
		variant{"query-lookup", func() error {
			li++
			t, id := lookupArgs(li)
			_, err := plain.Query(ctx, Interactive, "t", lookupSQL, t, id)
			return err
		}})
	const block = 50
	times := make([][]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			for range block {
				t0 := time.Now()
				if err := v.call(); err != nil {
					b.Fatal(err)
				}
				times[i] = append(times[i], time.Since(t0))
			}
		}
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	base := median(times[0])
	for i, v := range variants {
		m := median(times[i])
		b.ReportMetric(float64(m)/float64(time.Microsecond), v.name+"-µs")
		switch {
		case v.name == "query-lookup":
			b.ReportMetric(float64(m)/float64(median(times[i-1])), "query-lookup/pgxpool-lookup")
		case i > 0 && v.name != "pgxpool-lookup":
			b.ReportMetric(float64(m)/float64(base), v.name+"/pgxpool")
		}
	}
}

// lookupTable is the data set's orders table, smaller: 50 tenants of 400
// orders each (20,000 rows), keyed as the data set keys it.
const lookupTable = `DROP TABLE IF EXISTS bench_orders;
CREATE TABLE bench_orders (tenant_id int NOT NULL, id bigint NOT NULL, created_at timestamptz NOT NULL,
	amount numeric(12,2) NOT NULL, status text NOT NULL, customer int NOT NULL, PRIMARY KEY (tenant_id, id));
INSERT INTO bench_orders SELECT 1 + i % 50, i, now() - (i % 365) * interval '1 day', (i % 1000) / 10.0,
	(ARRAY['new','paid','shipped'])[1 + i % 3], i % 1000 FROM generate_series(1, 20000) i;
ANALYZE bench_orders`

// lookupSQL is the data set's point lookup (the lookup query) on it.
const lookupSQL = "SELECT id, created_at, amount, status, customer FROM bench_orders WHERE tenant_id = $1 AND id = $2"

// BenchmarkQueryReset measures what Query's reset costs and each of its
// commands: "SELECT 1" through Stack.Query with its reset (queryReset),
// with the eight commands of resetCommands instead, with the eight minus
// each one in turn, and with no reset; the same flights sent straight on a
// pgconn (tag, statement and reset, one Sync, no Stack around them); the
// flight of a deferred reset (two Syncs) read at once and with the reset's
// replies read at the next call; and
// WithConn with its reset (resetSQL) and with queryReset's commands joined
// instead. A bare pgxpool pool is the baseline. The variants run in turn
// in blocks of 50 calls, as in BenchmarkQueryRatio. It reports each
// variant's median µs per call, its median over the bare pool's, and each
// command's cost: the eight commands' median minus the median of the
// seven without it. Only the full resets keep the guarantees.
func BenchmarkQueryReset(b *testing.B) {
	ctx := context.Background()
	primary, bare := benchBarePool(b)
	type variant struct {
		name string
		call func() error
	}
	variants := []variant{{"pgxpool", func() error { _, err := bare.Exec(ctx, "SELECT 1"); return err }}}
	withReset := func(name string, reset []string) {
		s, err := New(ctx, onePool(primary.DSN(), 1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		s.queryReset = reset
		variants = append(variants, variant{name, func() error { _, err := s.Query(ctx, Interactive, "t", "SELECT 1"); return err }})
	}
	withReset("query", queryReset)
	withReset("query-unfolded", resetCommands)
	withReset("query-noreset", nil)
	for i, r := range resetCommands {
		withReset("query-minus-"+resetShort[r], slices.Delete(slices.Clone(resetCommands), i, i+1))
	}
	// WithConn's reset: the commands joined in one simple-protocol query.
	withConn := func(name string, reset []string) {
		s, err := New(ctx, onePool(primary.DSN(), 1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Close)
		sql := strings.Join(reset, "; ")
		s.reset = func(ctx context.Context, c *pgx.Conn) error { _, err := c.Exec(ctx, sql); return err }
		variants = append(variants, variant{name, func() error {
			_, err := s.WithConn(ctx, Interactive, "t", func(ctx context.Context, conn *pgx.Conn) error {
				_, err := conn.Exec(ctx, "SELECT 1")
				return err
			})
			return err
		}})
	}
	withConn("withconn", resetCommands)
	withConn("withconn-folded", queryReset)

	// The flights alone: one connection, every statement prepared.
	conn, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	prep := func(qs ...string) []*pgconn.StatementDescription {
		var sds []*pgconn.StatementDescription
		for _, q := range qs {
			sd, err := conn.Prepare(ctx, q, q)
			if err != nil {
				b.Fatal(err)
			}
			sds = append(sds, sd)
		}
		return sds
	}
	head := prep(tagLocalSQL, "SELECT 1")
	flight := func(name string, reset []string) {
		sds := prep(reset...)
		tag := [][]byte{[]byte(TagPrefix + "t")}
		variants = append(variants, variant{name, func() error {
			bt := &pgconn.Batch{}
			bt.ExecStatement(head[0], tag, nil, nil)
			bt.ExecStatement(head[1], nil, nil, nil)
			for _, sd := range sds {
				bt.ExecStatement(sd, nil, nil, nil)
			}
			mrr := conn.PgConn().ExecBatch(ctx, bt)
			for mrr.NextResult() {
				if _, err := mrr.ResultReader().Close(); err != nil {
					return err
				}
			}
			return mrr.Close()
		}})
	}
	flight("flight", queryReset)
	flight("flight-unfolded", resetCommands)
	flight("flight-noreset", nil)

	// The flight of a deferred reset, through pgconn's Pipeline: a Sync
	// after the statement (its transaction commits, the local tag ends)
	// and one after the reset. "twosync" reads every reply before the
	// call ends; "deferred" reads up to the first Sync's and leaves the
	// reset's replies to the start of the next call on the same
	// connection, which is what a deferred reset saves at best for one
	// caller (README: the second Sync costs more than that).
	conn2, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer conn2.Close(ctx)
	var pending *pgconn.Pipeline
	drain := func(pl *pgconn.Pipeline, syncs int) error {
		for syncs > 0 {
			r, err := pl.GetResults()
			if err != nil {
				return err
			}
			switch r := r.(type) {
			case *pgconn.ResultReader:
				if _, err := r.Close(); err != nil {
					return err
				}
			case *pgconn.PipelineSync:
				syncs--
			default:
				return fmt.Errorf("pipeline: %T before the Sync", r)
			}
		}
		return nil
	}
	twoSync := func(name string, deferred bool) {
		var sds []*pgconn.StatementDescription
		for _, q := range append([]string{tagLocalSQL, "SELECT 1"}, queryReset...) {
			sd, err := conn2.Prepare(ctx, q, q)
			if err != nil {
				b.Fatal(err)
			}
			sds = append(sds, sd)
		}
		tag := [][]byte{[]byte(TagPrefix + "t")}
		variants = append(variants, variant{name, func() error {
			if pending != nil {
				if err := drain(pending, 1); err != nil {
					return err
				}
				if err := pending.Close(); err != nil {
					return err
				}
				pending = nil
			}
			pl := conn2.PgConn().StartPipeline(context.Background())
			pl.SendQueryStatement(sds[0], tag, nil, nil)
			pl.SendQueryStatement(sds[1], nil, nil, nil)
			pl.SendPipelineSync()
			for _, sd := range sds[2:] {
				pl.SendQueryStatement(sd, nil, nil, nil)
			}
			pl.SendPipelineSync()
			if err := pl.Flush(); err != nil {
				return err
			}
			if deferred {
				pending = pl
				return drain(pl, 1)
			}
			if err := drain(pl, 2); err != nil {
				return err
			}
			return pl.Close()
		}})
	}
	twoSync("flight-twosync", false)
	twoSync("flight-deferred", true)

	const block = 50
	times := make([][]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			for range block {
				t0 := time.Now()
				if err := v.call(); err != nil {
					b.Fatal(err)
				}
				times[i] = append(times[i], time.Since(t0))
			}
		}
	}
	med := map[string]time.Duration{}
	for i, v := range variants {
		d := slices.Clone(times[i])
		slices.Sort(d)
		med[v.name] = d[len(d)/2]
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, v := range variants {
		b.ReportMetric(us(med[v.name]), v.name+"-µs")
		if v.name != "pgxpool" {
			b.ReportMetric(float64(med[v.name])/float64(med["pgxpool"]), v.name+"/pgxpool")
		}
	}
	for _, r := range resetCommands {
		b.ReportMetric(us(med["query-unfolded"]-med["query-minus-"+resetShort[r]]), "cost-"+resetShort[r]+"-µs")
	}
}

// resetShort names each of resetCommands in benchmark metrics.
var resetShort = map[string]string{
	"RESET ALL": "reset-all", "CLOSE ALL": "close-all", "SET SESSION AUTHORIZATION DEFAULT": "session-auth",
	"RESET ROLE": "reset-role", "UNLISTEN *": "unlisten", "SELECT pg_advisory_unlock_all()": "unlock-all",
	"DISCARD TEMP": "discard-temp", "DISCARD SEQUENCES": "discard-seq",
}

// benchBarePool starts a local cluster for a benchmark and opens a bare
// pgxpool pool on its primary, the baseline of the Stack's ratios; the
// pool is closed when the benchmark ends.
func benchBarePool(b *testing.B) (backend.Node, *pgxpool.Pool) {
	b.Helper()
	c := localtest.Start(b, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	bare, err := pgxpool.New(context.Background(), primary.DSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bare.Close)
	return primary, bare
}
