package metrics_test

import (
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/workload"
)

// BenchmarkRecord records from every P goroutine into 50 tenants × 2
// classes with a 1 s time series.
func BenchmarkRecord(b *testing.B) {
	rec := newRecorder(b, metrics.Config{})
	classes := []string{"interactive", "heavy"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			at := time.Duration(i) * time.Millisecond
			intended := t0.Add(at)
			rec.Record(workload.Result{
				Op:       workload.Op{Tenant: 1 + i%50, Class: classes[i/50%2], At: at},
				Intended: intended, Start: intended, End: intended.Add(time.Duration(100+i%5000) * time.Microsecond),
			})
			i++
		}
	})
}

// BenchmarkSummary summarises 100 keys holding 10,000 results each.
func BenchmarkSummary(b *testing.B) {
	rec := newRecorder(b, metrics.Config{})
	for i := range 1_000_000 {
		rec.Record(result(1+i%50, []string{"a", "b"}[i/50%2], 0, 0, time.Duration(100+i%20000)*time.Microsecond, nil))
	}
	for b.Loop() {
		_ = rec.Summary()
	}
}
