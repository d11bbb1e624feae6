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

// BenchmarkMemoryStepRecorder replays the recording of `noisysim bench`'s
// memory step without a database: 10,000 tenants (the power law, tenant 1
// at its default share) × 3 classes at 5,000 ops/s for 10 minutes of
// arrivals, every series reserved, response times log-normal around 2 ms
// (σ 0.6). It reports the live heap (MB, after a GC) once the first minute's
// ops are recorded and at the end, and their ratio, with the series at 2
// significant digits and an aggregate of all at 3 (as the bench records)
// and with every series at 3.
func BenchmarkMemoryStepRecorder(b *testing.B) {
	const tenants, rate, d = 10_000, 5000.0, 10 * time.Minute
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: tenants}, 1)
	if err != nil {
		b.Fatal(err)
	}
	specs := []workload.ClassSpec{{Name: "c1", Rate: rate / 3}, {Name: "c2", Rate: rate / 3}, {Name: "c3", Rate: rate / 3}}
	for _, tc := range []struct {
		name string
		cfg  metrics.Config
	}{
		{"series=2,all=3", metrics.Config{Interval: -1, SeriesSigFigs: metrics.TenantSigFigs, Aggregates: []metrics.Aggregate{{Name: "all"}}}},
		{"series=3", metrics.Config{Interval: -1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			heap := func() float64 {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				return float64(ms.HeapAlloc) / (1 << 20)
			}
			var atMin, atEnd float64
			for b.Loop() {
				src, err := workload.NewStream(pop, specs, d, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				base := heap()
				rec := newRecorder(b, tc.cfg)
				var keys []metrics.Key
				for _, t := range pop.Tenants {
					for _, c := range specs {
						keys = append(keys, metrics.Key{Tenant: t.ID, Class: c.Name})
					}
				}
				rec.Reserve(keys...)
				rng := rand.New(rand.NewPCG(1, 2))
				minute := false
				for op, ok := src.Next(); ok; op, ok = src.Next() {
					if !minute && op.At >= time.Minute {
						atMin += heap() - base
						minute = true
					}
					lat := time.Duration(2e6 * math.Exp(0.6*rng.NormFloat64()))
					intended := t0.Add(op.At)
					rec.Record(workload.Result{Op: op, Intended: intended, Start: intended, End: intended.Add(lat)})
				}
				atEnd += heap() - base
				runtime.KeepAlive(rec)
			}
			n := float64(b.N)
			b.ReportMetric(atMin/n, "MB@1m")
			b.ReportMetric(atEnd/n, "MB@10m")
			b.ReportMetric(atEnd/atMin, "growth")
		})
	}
}
