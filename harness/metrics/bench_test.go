package metrics_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
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

// BenchmarkSeriesMemory reports the heap a series holds (B/series) and
// its latency histogram's populated buckets, at 2 and 3 significant
// digits, for series of 20, 200 and 2,000 ops (a power law's rare, middling
// and hot tenants): 1,000 series × 1 class per recorder, latencies
// log-normal around 2 ms (σ 0.6: 90% within 0.75..5.4 ms), as a point
// lookup's under load.
func BenchmarkSeriesMemory(b *testing.B) {
	const tenants = 1000
	for _, ops := range []int{20, 200, 2000} {
		rng := rand.New(rand.NewPCG(1, uint64(ops)))
		lats := make([]time.Duration, tenants*ops)
		for i := range lats {
			lats[i] = time.Duration(2e6 * math.Exp(0.6*rng.NormFloat64()))
		}
		for _, figs := range []int{2, 3} {
			b.Run(fmt.Sprintf("ops=%d/sigfigs=%d", ops, figs), func(b *testing.B) {
				var held, buckets int64
				for b.Loop() {
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					rec := newRecorder(b, metrics.Config{SeriesSigFigs: figs, Interval: -1})
					for i, d := range lats {
						rec.Record(result(1+i%tenants, "c", time.Duration(i), 0, d, nil))
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					held += int64(after.HeapAlloc) - int64(before.HeapAlloc)
					for t := 1; t <= tenants; t++ {
						buckets += int64(rec.LatencyHistogram(metrics.Key{Tenant: t, Class: "c"}).Populated())
					}
					runtime.KeepAlive(rec)
				}
				b.ReportMetric(float64(held)/float64(b.N)/tenants, "B/series")
				b.ReportMetric(float64(buckets)/float64(b.N)/tenants, "buckets/series")
			})
		}
	}
}
