package metrics_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/workload"
)

func ExampleRecorder() {
	errRejected := errors.New("rejected")
	rec, err := metrics.New(metrics.Config{
		Warmup: time.Second, // ops intended in the first second are discarded
		Classify: func(err error) string {
			if errors.Is(err, errRejected) {
				return "rejected"
			}
			return "other"
		},
	})
	if err != nil {
		panic(err)
	}
	start := time.Now()
	record := func(tenant int, at, wait, service time.Duration, err error) {
		intended := start.Add(at)
		rec.Record(workload.Result{
			Op:       workload.Op{Tenant: tenant, Class: "interactive", At: at},
			Intended: intended, Start: intended.Add(wait), End: intended.Add(wait + service), Err: err,
		})
	}
	record(2, 500*time.Millisecond, 0, time.Hour, nil) // warm-up: discarded
	for i := range 99 {
		record(2, time.Second+time.Duration(i)*time.Millisecond, 0, 2*time.Millisecond, nil)
	}
	record(2, 2*time.Second, 8*time.Millisecond, 2*time.Millisecond, nil) // queued 8 ms behind a stall
	record(1, 2*time.Second, 0, time.Millisecond, errRejected)

	for _, s := range rec.Summary() {
		fmt.Printf("tenant %d %s: count %d, errors %v, p50 %.1fms, p99 %.1fms, max %v, service p99 %.1fms\n",
			s.Tenant, s.Class, s.Count, s.ErrorsByClass, ms(s.P50), ms(s.P99), s.Max, ms(s.ServiceP99))
	}
	quiet := rec.Merged(func(tenant int, _ string) bool { return tenant != 1 })
	fmt.Println("quiet tenants:", quiet.Count, "ops; discarded:", rec.Totals().Discarded)
	// Output:
	// tenant 1 interactive: count 1, errors map[rejected:1], p50 1.0ms, p99 1.0ms, max 1ms, service p99 1.0ms
	// tenant 2 interactive: count 100, errors map[], p50 2.0ms, p99 2.0ms, max 10ms, service p99 2.0ms
	// quiet tenants: 100 ops; discarded: 1
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
