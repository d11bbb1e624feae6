package limiter_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/sync/semaphore"

	"github.com/noisysim/noisysim/isolation/limiter"
)

// The three benchmarks below are meant to run together
// (go test -bench . ./isolation/limiter) so the limiter's figures sit beside
// x/sync/semaphore's from the same run. Targets: Uncontended < 1 µs/op and
// within 2× of SemaphoreBaseline.

// BenchmarkUncontended is one Acquire and its release for one tenant with
// free slots.
func BenchmarkUncontended(b *testing.B) {
	l, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: 1500e6})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		release, err := l.Acquire(ctx, "t1")
		if err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// BenchmarkUncontendedDo is Uncontended through Do, which needs no release
// func.
func BenchmarkUncontendedDo(b *testing.B) {
	l, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: 1500e6})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	work := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Do(ctx, "t1", work); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSemaphoreBaseline is x/sync/semaphore's Acquire+Release of
// weight 1, the baseline for Uncontended.
func BenchmarkSemaphoreBaseline(b *testing.B) {
	s := semaphore.NewWeighted(4)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		s.Release(1)
	}
}

// BenchmarkContended runs 8 tenants × 32 goroutines, each doing
// Acquire+release in a loop; with 4 slots per tenant most calls queue and
// are admitted by hand-off. Queue and wait are large enough that nothing is
// rejected, so ns/op is the cost of one admission under contention.
func BenchmarkContended(b *testing.B) {
	const tenants, perTenant = 8, 32
	l, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: perTenant})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, tenants)
	for i := range names {
		names[i] = "t" + strconv.Itoa(i)
	}
	var next atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(max(1, tenants*perTenant/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		name := names[next.Add(1)%tenants]
		for pb.Next() {
			release, err := l.Acquire(ctx, name)
			if err != nil {
				b.Error(err)
				return
			}
			release()
		}
	})
}

// BenchmarkNewTenant is one Do for a tenant never seen before: record
// creation and the amortized sweep of idle records. It also reports the
// heap kept per idle tenant (its counters) and what ForgetIdle leaves.
func BenchmarkNewTenant(b *testing.B) {
	l, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: 1500e6})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, b.N)
	for i := range names {
		names[i] = "tenant-" + strconv.Itoa(i)
	}
	ctx := context.Background()
	work := func(context.Context) error { return nil }
	before := heapAlloc()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := l.Do(ctx, names[i], work); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	idle := heapAlloc()
	l.ForgetIdle()
	forgotten := heapAlloc()
	b.ReportMetric(float64(int64(idle)-int64(before))/float64(b.N), "B-kept/idle-tenant")
	b.ReportMetric(float64(int64(forgotten)-int64(before))/float64(b.N), "B-kept/forgotten-tenant")
	runtime.KeepAlive(names)
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
