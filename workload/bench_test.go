package workload_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"syscall"
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
		// Paced at 20,000 ops/s with 8 workers, as noisysim bench runs the
		// generator; cpu-ns/op (this process's user and system time) is the
		// figure to compare.
		{"paced-20k-per-s-8-workers", workload.OpenLoopConfig{Workers: 8}, 50 * time.Microsecond},
		// At 40,000 ops/s, about noisysim bench's sustained maximum.
		{"paced-40k-per-s-8-workers", workload.OpenLoopConfig{Workers: 8}, 25 * time.Microsecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := workload.Schedule{Ops: make([]workload.Op, b.N)}
			for i := range s.Ops {
				s.Ops[i] = workload.Op{Seq: int64(i), Tenant: 1 + i%50, Class: "c", At: time.Duration(i) * bc.gap}
			}
			s.Duration = time.Duration(b.N) * bc.gap
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, sw0 := usage()
			stats, err := workload.RunOpenLoop(context.Background(), s, noop, discard, bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			cpu1, sw1 := usage()
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(sw1-sw0)/float64(b.N), "switches/op")
			if stats.Completed != int64(b.N) {
				b.Fatalf("completed %d of %d (dropped %d)", stats.Completed, b.N, stats.Dropped)
			}
			if bc.gap > 0 { // with every op due at once, lag is just the time to get through them
				b.ReportMetric(float64(stats.MaxLag.Microseconds()), "max-lag-µs")
			}
		})
	}
}

// usage returns this process's user and system CPU time so far and its
// context switches (all threads, voluntary and not).
func usage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nvcsw + ru.Nivcsw)
}

// fastSource drives a schedule without sleeping: every op is due at once
// (At 0), at most 64 ops are in flight at a time, and the heap in use is
// sampled (after a GC, with nothing in flight) when the first op at or past
// each checkpoint of schedule time is reached and at the end.
type fastSource struct {
	src         workload.Source
	inflight    *atomic.Int64
	checkpoints []time.Duration
	heap        []uint64 // HeapInuse at each checkpoint, then at the end
}

func (f *fastSource) Next() (workload.Op, bool) {
	for f.inflight.Load() > 64 {
		runtime.Gosched()
	}
	op, ok := f.src.Next()
	if len(f.checkpoints) > 0 && (!ok || op.At >= f.checkpoints[0]) {
		f.checkpoints = f.checkpoints[1:]
		f.sample()
	}
	if !ok {
		f.sample()
		return op, false
	}
	f.inflight.Add(1)
	op.At = 0
	return op, true
}

func (f *fastSource) sample() {
	for f.inflight.Load() > 0 {
		runtime.Gosched()
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f.heap = append(f.heap, ms.HeapInuse)
}

func (f *fastSource) Duration() time.Duration { return 0 }

// BenchmarkOpenLoopMemory runs 10 minutes of a 1,000 ops/s schedule (50
// tenants × 2 classes, 600,000 ops) through RunOpenLoop without sleeping
// (see fastSource) and reports the heap in use after 1 minute and after 10
// minutes of schedule time, and their ratio: "schedule" builds the schedule
// in memory first (BuildSchedule), "stream" draws it as it is consumed
// (NewStream). Run it with -benchtime=1x; ns/op is the whole run.
func BenchmarkOpenLoopMemory(b *testing.B) {
	pop := mustPopulation(b, workload.PopulationConfig{}, 1)
	const d = 10 * time.Minute
	for _, name := range []string{"schedule", "stream"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var src workload.Source
				if name == "schedule" {
					src = mustSchedule(b, pop, twoClasses, d, 1, nil).Source()
				} else {
					s, err := workload.NewStream(pop, twoClasses, d, 1, nil)
					if err != nil {
						b.Fatal(err)
					}
					src = s
				}
				var inflight atomic.Int64
				fs := &fastSource{src: src, inflight: &inflight, checkpoints: []time.Duration{time.Minute}}
				exec := func(context.Context, workload.Op) error { inflight.Add(-1); return nil }
				stats, err := workload.RunOpenLoopSource(context.Background(), fs, exec, nil, workload.OpenLoopConfig{})
				if err != nil {
					b.Fatal(err)
				}
				if stats.Completed < 590_000 || stats.Dropped > 0 {
					b.Fatalf("stats %+v", stats)
				}
				at1, at10 := float64(fs.heap[0]), float64(fs.heap[1])
				b.ReportMetric(at1/(1<<20), "heap-MB-1min")
				b.ReportMetric(at10/(1<<20), "heap-MB-10min")
				b.ReportMetric(at10/at1, "heap-ratio-10/1")
			}
		})
	}
}
