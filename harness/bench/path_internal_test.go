package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/workload"
)

// BenchmarkGeneratorPath runs the bench's lookup open loop at a fixed rate
// (2,000 ops/s for 3 s per iteration, 50 tenants, pool of 8) along each path
// to the server and reports the client CPU per op (getrusage of this
// process, µs), the completed rate and the p99 from the intended start:
// "workers" is the generator as `noisysim bench` measures it (8 workers,
// each holding a connection), "goroutine-per-op" the same through a pgxpool
// Acquire per op on a goroutine per op, "stack" the naive stack. Compare the
// CPU per op of the paths in one run; on a busy machine all of them rise.
//
//	go test -run '^$' -bench BenchmarkGeneratorPath -benchtime=2x ./harness/bench/
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
			var ops int64
			var rate, p99 float64
			for b.Loop() {
				r, err := openLoop(ctx, dsn, cfg, params, p.via, cfg.Tenants, 1, 2000, 3*time.Second, nil)
				if err != nil {
					b.Fatal(err)
				}
				if r.Errors > 0 {
					b.Fatalf("%d ops failed", r.Errors)
				}
				cpu += r.CPU
				ops += r.Completed
				rate += r.Rate
				p99 = max(p99, float64(r.P99)/float64(time.Millisecond))
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(ops), "cpu-µs/op")
			b.ReportMetric(rate/float64(b.N), "ops/s")
			b.ReportMetric(p99, "p99-ms")
		})
	}
}
