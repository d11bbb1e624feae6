package pools

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/isolation/limiter"
)

// BenchmarkQuery compares one "SELECT 1" through a bare pgxpool pool with
// the same through the Stack (tag and reset add two round trips), with and
// without a limiter, one goroutine at a time (the overhead per call).
func BenchmarkQuery(b *testing.B) {
	c := localtest.Start(b, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx := context.Background()

	b.Run("pgxpool", func(b *testing.B) {
		p, err := pgxpool.New(ctx, primary.DSN())
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		for b.Loop() {
			if _, err := p.Exec(ctx, "SELECT 1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, withLimiter := range []bool{false, true} {
		name := "stack"
		cfg := onePool(primary.DSN(), 4)
		if withLimiter {
			name = "stack+limiter"
			lim, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: lim}
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for b.Loop() {
				if _, err := s.Query(ctx, Interactive, "t", "SELECT 1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
