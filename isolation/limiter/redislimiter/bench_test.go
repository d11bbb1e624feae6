package redislimiter_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/limiter/redislimiter"
)

// BenchmarkAcquireRelease compares one uncontended Acquire+release of the
// local limiter with the Redis limiter's (loopback redis-server), reporting
// p50 and p99 in µs beside ns/op.
func BenchmarkAcquireRelease(b *testing.B) {
	local, err := limiter.New(limiter.Config{MaxPerTenant: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("local", func(b *testing.B) { benchAcquire(b, local) })
	b.Run("redis", func(b *testing.B) {
		srv := startRedis(b)
		benchAcquire(b, newLimiter(b, srv, redislimiter.Config{MaxPerTenant: 4}))
	})
}

func benchAcquire(b *testing.B, l isolation.Limiter) {
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		rel, err := l.Acquire(ctx, "t")
		if err != nil {
			b.Fatal(err)
		}
		rel()
		took = append(took, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(took)
	q := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))]) / 1e3 }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
