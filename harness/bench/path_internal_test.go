package bench

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/workload"
	"github.com/noisysim/noisysim/workload/pgscript"
)

var pathRate = flag.Float64("path.rate", 2000, "BenchmarkGeneratorPath: the open loops' rate (ops/s)")

// BenchmarkGeneratorPath runs the bench's lookup open loop at a fixed rate
// (-path.rate, default 2,000 ops/s, for 3 s per iteration, 50 tenants, pool
// of 8) along each path
// to the server and reports the client CPU per op (getrusage of this
// process, µs), its context switches per op (all threads, voluntary and
// not), the completed rate and the p99 from the intended start:
// "workers" is the generator as `noisysim bench` measures it (8 workers,
// each holding a connection), "goroutine-per-op" the same through a pgxpool
// Acquire per op on a goroutine per op, "stack" the naive stack. "floor" is no
// generator at all: 8 goroutines, each holding a connection, run the same
// query as fast as they can for 3 s, the least CPU per op pgx can cost.
// Compare the CPU per op of the paths in one run; on a busy machine all of
// them rise.
//
//	go test -run '^$' -bench BenchmarkGeneratorPath -benchtime=2x ./harness/bench/ -path.rate 15000
func BenchmarkGeneratorPath(b *testing.B) {
	c := localtest.Start(b, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	cfg := Config{Orders: 20000}
	if err := cfg.fill(); err != nil {
		b.Fatal(err)
	}
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: cfg.Tenants}, cfg.Seed)
	if err != nil {
		b.Fatal(err)
	}
	shares := make([]float64, pop.Len())
	for i, t := range pop.Tenants {
		shares[i] = t.Share
	}
	params := dataset.Params{Orders: dataset.Counts(shares, int64(cfg.Orders)), Customers: 100}
	plan := footprint.Plan{Schema: Schema, Run: "bench"}
	ctx := context.Background()
	if err := load(ctx, primary.DSN(), plan, params); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, primary.DSN()); err == nil {
			_ = footprint.Remove(ctx, conn, plan)
			conn.Close(ctx)
		}
	})
	dsn := withSearchPath(primary.DSN(), Schema)
	for _, p := range []struct {
		name string
		via  path
	}{{"workers", viaWorkers}, {"goroutine-per-op", viaPool}, {"stack", viaStack}} {
		b.Run(p.name, func(b *testing.B) {
			var cpu time.Duration
			var ops, sw int64
			var rate, p99 float64
			for b.Loop() {
				r, err := openLoop(ctx, dsn, cfg, params, p.via, cfg.Tenants, 1, *pathRate, 3*time.Second, nil)
				if err != nil {
					b.Fatal(err)
				}
				if r.Errors > 0 {
					b.Fatalf("%d ops failed", r.Errors)
				}
				cpu += r.CPU
				sw += r.Switches
				ops += r.Completed
				rate += r.Rate
				p99 = max(p99, float64(r.P99)/float64(time.Millisecond))
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(ops), "cpu-µs/op")
			b.ReportMetric(perOp(sw, ops), "switches/op")
			b.ReportMetric(rate/float64(b.N), "ops/s")
			b.ReportMetric(p99, "p99-ms")
		})
	}

	b.Run("floor", func(b *testing.B) {
		var cpu time.Duration
		var ops, sw int64
		var rate float64
		for b.Loop() {
			_, sw0 := selfUsage()
			n, took, used := floor(ctx, b, dsn, cfg, 3*time.Second)
			_, sw1 := selfUsage()
			cpu += used
			sw += sw1 - sw0
			ops += n
			rate += float64(n) / took.Seconds()
		}
		b.ReportMetric(float64(cpu.Microseconds())/float64(ops), "cpu-µs/op")
		b.ReportMetric(perOp(sw, ops), "switches/op")
		b.ReportMetric(rate/float64(b.N), "ops/s")
	})
}

// floor runs the bench's lookup on cfg.PoolSize connections, each looped on
// by one goroutine for d as fast as it can (pgx's prepared statement cache,
// the parameters as text as the bench sends them), and returns the ops done,
// the time taken and this process's CPU meanwhile.
func floor(ctx context.Context, b *testing.B, dsn string, cfg Config, d time.Duration) (int64, time.Duration, time.Duration) {
	const sql = "SELECT id, created_at, amount, status, customer FROM orders WHERE tenant_id = $1 AND id = $2"
	conns := make([]*pgx.Conn, cfg.PoolSize)
	for i := range conns {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		conns[i] = c
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	cpu0, t0 := selfCPU(), time.Now()
	stop := t0.Add(d)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 0))
			for time.Now().Before(stop) {
				rows, err := c.Query(ctx, sql, strconv.Itoa(1+rng.IntN(cfg.Tenants)), "1")
				if err != nil {
					b.Error(err)
					return
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load(), time.Since(t0), selfCPU() - cpu0
}

// TestWorkerConnCancel: a lookup in flight on a worker's connection returns
// soon after the run's context is cancelled (the connection watches it once,
// not pgx per op), with an error wrapping ctx.Err(); a lookup on the same
// connection before that returns its rows' outcome.
func TestWorkerConnCancel(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	conn, err := pgx.Connect(t.Context(), primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	src := "\\set id random(1, :rows_orders)\nSELECT pg_sleep(:id / 1000.0 * :tenant);\n"
	script, err := pgscript.Parse([]byte(src), "sleep.sql", pgscript.Options{Builtins: []string{"tenant", "rows_orders"}})
	if err != nil {
		t.Fatal(err)
	}
	w := &workerConn{conn: conn}
	// Tenant 1, one order: sleeps 1 ms.
	if err := w.lookup(t.Context(), script, 1, workload.Op{Seq: 1, Tenant: 1}, 1); err != nil {
		t.Fatalf("short lookup: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	// Tenant 30,000, one order: sleeps 30 s unless cancelled.
	err = w.lookup(ctx, script, 1, workload.Op{Seq: 2, Tenant: 30000}, 1)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cancelled lookup returned after %v, want soon after the cancel at 100 ms", took)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled lookup: %v, want an error wrapping context.Canceled", err)
	}
}
