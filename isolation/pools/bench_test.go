package pools

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/isolation/limiter"
)

// BenchmarkQuery compares one "SELECT 1" through a bare pgxpool pool with
// the same through the Stack, one goroutine at a time (the overhead per
// call): Query (tag, statement and reset in one flight and one implicit
// transaction: one round trip), with and without a
// limiter, and WithConn running the same statement (tag, statement and reset
// each a round trip of their own, as every call did before Query batched
// them). Compare ns/op against pgxpool's from the same run.
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
	b.Run("stack-withconn", func(b *testing.B) {
		s, err := New(ctx, onePool(primary.DSN(), 4))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for b.Loop() {
			if _, err := s.WithConn(ctx, Interactive, "t", func(ctx context.Context, conn *pgx.Conn) error {
				_, err := conn.Exec(ctx, "SELECT 1")
				return err
			}); err != nil {
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

// BenchmarkQueryRatio measures the Stack's cost as a ratio to a bare
// pgxpool pool that holds up on a busy machine: each iteration runs one
// "SELECT 1" through every variant in turn (bare pgxpool, Stack.Query,
// Stack.Query with a limiter, and Stack.WithConn: tag, statement and reset
// each its own round trip), in blocks of 50 calls so that a call pays for
// the reset its own variant's previous call left to the server, and load
// from elsewhere falls on all of them alike. It reports each variant's
// median µs per call and its median over the bare pool's (goal: Query ≤
// 1.2). Each iteration is 50 calls of each variant.
func BenchmarkQueryRatio(b *testing.B) {
	c := localtest.Start(b, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx := context.Background()

	bare, err := pgxpool.New(ctx, primary.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	plain, err := New(ctx, onePool(primary.DSN(), 4))
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	cfg := onePool(primary.DSN(), 4)
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: lim}
	limited, err := New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer limited.Close()

	variants := []struct {
		name string
		call func() error
	}{
		{"pgxpool", func() error { _, err := bare.Exec(ctx, "SELECT 1"); return err }},
		{"query", func() error { _, err := plain.Query(ctx, Interactive, "t", "SELECT 1"); return err }},
		{"query+limiter", func() error { _, err := limited.Query(ctx, Interactive, "t", "SELECT 1"); return err }},
		{"withconn", func() error {
			_, err := plain.WithConn(ctx, Interactive, "t", func(ctx context.Context, conn *pgx.Conn) error {
				_, err := conn.Exec(ctx, "SELECT 1")
				return err
			})
			return err
		}},
	}
	const block = 50
	times := make([][]time.Duration, len(variants))
	for b.Loop() {
		for i, v := range variants {
			for range block {
				t0 := time.Now()
				if err := v.call(); err != nil {
					b.Fatal(err)
				}
				times[i] = append(times[i], time.Since(t0))
			}
		}
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	base := median(times[0])
	for i, v := range variants {
		m := median(times[i])
		b.ReportMetric(float64(m)/float64(time.Microsecond), v.name+"-µs")
		if i > 0 {
			b.ReportMetric(float64(m)/float64(base), v.name+"/pgxpool")
		}
	}
}
