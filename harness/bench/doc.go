// Package bench measures noisysim's own cost against a named baseline on the
// same server, in one run: pgbench and noisysim's open loop (through the
// naive isolation stack) each at its maximum on the data set's point lookup,
// both held at a fixed rate, and the process's memory during a long run with
// many tenants and classes. The noisysim bench command prints its Result.
//
//	res, err := bench.Run(ctx, primary.DSN(), bench.Config{Duration: 10 * time.Second})
//	if err != nil { ... }
//	fmt.Printf("noisysim %.0f/s, pgbench %.0f/s: %.2f×\n", res.NoisysimMax.Rate, res.PgBenchMax.Rate, res.MaxRatio)
//
// Rates are ops/s; latencies are measured from each op's intended (pgbench:
// scheduled) start, so a generator that falls behind shows it. Run loads
// the data set into its own schema, Schema ("noisysim_bench"), of the
// database it is given and drops it at the end; it refuses to start when a
// schema of that name exists that noisysim did not create.
package bench
