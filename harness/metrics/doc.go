// Package metrics records workload results in HdrHistograms, one per tenant ×
// class: response time measured from the intended start (so it already
// includes queueing; the recorder never applies a second coordinated-omission
// correction such as RecordCorrectedValue) and service time beside it, with
// errors counted by class, drops and incomplete ops counted, warm-up
// discarded, and a time series of per-interval snapshots. Series may keep
// fewer significant digits (Config.SeriesSigFigs) than aggregates of them
// recorded apart (Config.Aggregates), which keep Config.SigFigs.
//
// Use one Recorder per configuration and phase (naive, isolated, solo
// baseline), and read it after the run:
//
//	rec, err := metrics.New(metrics.Config{Warmup: 10 * time.Second, Classify: classify})
//	if err != nil { ... }
//	stats, err := workload.RunOpenLoop(ctx, sched, exec, rec, workload.OpenLoopConfig{})
//	for _, s := range rec.Summary() {
//		fmt.Println(s.Tenant, s.Class, s.Count, s.P99)
//	}
//	quiet := rec.Merged(func(tenant int, class string) bool { return tenant != 1 })
package metrics
