package workload_test

import (
	"context"
	"testing"
	"time"

	"github.com/noisysim/noisysim/workload"
)

// BenchmarkBuildSchedule: 50 tenants × 2 classes over 60 s at 1,000 ops/s
// in all (about 60,000 ops per schedule).
func BenchmarkBuildSchedule(b *testing.B) {
	pop := mustPopulation(b, workload.PopulationConfig{}, 1)
	var n int
	for b.Loop() {
		s, err := workload.BuildSchedule(pop, twoClasses, time.Minute, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		n = len(s.Ops)
	}
	b.ReportMetric(float64(n), "ops/schedule")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/scheduled-op")
}

// BenchmarkScheduleHash hashes the same 60,000-op schedule.
func BenchmarkScheduleHash(b *testing.B) {
	pop := mustPopulation(b, workload.PopulationConfig{}, 1)
	s := mustSchedule(b, pop, twoClasses, time.Minute, 1, nil)
	for b.Loop() {
		_ = s.Hash()
	}
}

// BenchmarkOpenLoopDispatch measures the engine's cost per op with a no-op
// executor and recorder: every op is due at once, so no timer fires and the
// figure is dispatch, execution hand-off and bookkeeping alone.
func BenchmarkOpenLoopDispatch(b *testing.B) {
	noop := func(context.Context, workload.Op) error { return nil }
	discard := workload.RecorderFunc(func(workload.Result) {})
	for _, bc := range []struct {
		name string
		cfg  workload.OpenLoopConfig
		gap  time.Duration
	}{
		{"goroutine-per-op", workload.OpenLoopConfig{MaxInFlight: 1 << 20}, 0},
		{"4-workers", workload.OpenLoopConfig{Workers: 4, MaxInFlight: 1 << 20}, 0},
		// Paced at 50,000 ops/s: a timer per op; ns/op is then mostly the pace.
		{"paced-50k-per-s", workload.OpenLoopConfig{}, 20 * time.Microsecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := workload.Schedule{Ops: make([]workload.Op, b.N)}
			for i := range s.Ops {
				s.Ops[i] = workload.Op{Seq: int64(i), Tenant: 1 + i%50, Class: "c", At: time.Duration(i) * bc.gap}
			}
			s.Duration = time.Duration(b.N) * bc.gap
			b.ReportAllocs()
			b.ResetTimer()
			stats, err := workload.RunOpenLoop(context.Background(), s, noop, discard, bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			if stats.Completed != int64(b.N) {
				b.Fatalf("completed %d of %d (dropped %d)", stats.Completed, b.N, stats.Dropped)
			}
			if bc.gap > 0 { // with every op due at once, lag is just the time to get through them
				b.ReportMetric(float64(stats.MaxLag.Microseconds()), "max-lag-µs")
			}
		})
	}
}
