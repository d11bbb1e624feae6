package workload_test

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/noisysim/noisysim/workload"
)

var oneClass = []workload.ClassSpec{{Name: "c", Rate: 1}}

func TestClosedLoopUsersByShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pop := mustPopulation(t, workload.PopulationConfig{Tenants: 5}, 1)
		// Shares: 0.6, then 0.4 × (1/2, 1/3, 1/4, 1/5) / 1.2833 = .156 .104 .078 .062.
		// 10 users: floors 6,1,1,0,0 (8); remainders .56 .04 .78 .62 → tenants 4, 5.
		stats, err := workload.RunClosedLoop(t.Context(), workload.ClosedLoopConfig{Users: 10, ThinkTime: time.Second, Duration: time.Second},
			pop, oneClass, func(context.Context, workload.Op) error { return nil }, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]int{1: 6, 2: 1, 3: 1, 4: 1, 5: 1}
		if !mapsEqual(stats.UsersByTenant, want) {
			t.Errorf("users by tenant %v, want %v", stats.UsersByTenant, want)
		}
	})
}

func TestClosedLoopThinkTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pop := mustPopulation(t, workload.PopulationConfig{Tenants: 2, DominantShare: 0.5}, 1)
		var rec results
		exec := func(context.Context, workload.Op) error { time.Sleep(time.Millisecond); return nil }
		stats, err := workload.RunClosedLoop(t.Context(), workload.ClosedLoopConfig{
			Users: 2, ThinkTime: 9 * time.Millisecond, Think: workload.FixedThink, Duration: 95 * time.Millisecond,
		}, pop, oneClass, exec, &rec, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Each user: a request every 1 ms + 9 ms, at 0, 10, ..., 90 ms.
		if stats.Requests != 20 || stats.Queries != 20 || stats.Errors != 0 {
			t.Errorf("stats %+v, want 20 requests and queries", stats)
		}
		for _, r := range rec.bySeq() {
			if r.Op.At%(10*time.Millisecond) != 0 || r.Latency() != time.Millisecond || r.Service() != time.Millisecond {
				t.Errorf("op %+v: latency %v, service %v; want at a multiple of 10 ms, 1 ms each", r.Op, r.Latency(), r.Service())
			}
		}
	})
}

func TestClosedLoopRetries(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		failFirst int64 // the first failFirst queries fail
		cfg       workload.ClosedLoopConfig
		want      workload.ClosedLoopStats
	}{
		{"no retries", 1, workload.ClosedLoopConfig{},
			workload.ClosedLoopStats{Requests: 1, Queries: 1, Errors: 1, GaveUp: 1}},
		{"each retry re-issues k queries, then gives up", 1 << 30, workload.ClosedLoopConfig{RetryQueries: 3, MaxRetries: 2},
			workload.ClosedLoopStats{Requests: 1, Queries: 7, Errors: 7, Retries: 2, GaveUp: 1}},
		{"succeeds on the first retry", 1, workload.ClosedLoopConfig{RetryQueries: 3, MaxRetries: 2},
			workload.ClosedLoopStats{Requests: 1, Queries: 4, Errors: 1, Retries: 1}},
		{"a retry fails if any of its queries fails", 2, workload.ClosedLoopConfig{RetryQueries: 3, MaxRetries: 2},
			workload.ClosedLoopStats{Requests: 1, Queries: 7, Errors: 2, Retries: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pop := mustPopulation(t, workload.PopulationConfig{Tenants: 2}, 1)
				var n atomic.Int64
				exec := func(context.Context, workload.Op) error {
					time.Sleep(time.Millisecond)
					if n.Add(1) <= tc.failFirst {
						return boom
					}
					return nil
				}
				var rec results
				cfg := tc.cfg
				cfg.Users, cfg.ThinkTime, cfg.Think, cfg.Duration = 1, time.Second, workload.FixedThink, 500*time.Millisecond
				stats, err := workload.RunClosedLoop(t.Context(), cfg, pop, oneClass, exec, &rec, 1)
				if err != nil {
					t.Fatal(err)
				}
				got := stats
				got.Start, got.End, got.UsersByTenant = time.Time{}, time.Time{}, nil
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("stats %+v, want %+v", got, tc.want)
				}
				// A retry's k queries start together, 1 ms after the previous attempt.
				for _, r := range rec.bySeq() {
					if r.Op.Seq > 0 && r.Op.At != time.Duration((r.Op.Seq-1)/int64(max(cfg.RetryQueries, 1))+1)*time.Millisecond {
						t.Errorf("query %d started at %v", r.Op.Seq, r.Op.At)
					}
				}
			})
		})
	}
}

func TestClosedLoopSeeded(t *testing.T) {
	run := func(seed int64) []workload.Op {
		var ops []workload.Op
		synctest.Test(t, func(t *testing.T) {
			pop := mustPopulation(t, workload.PopulationConfig{Tenants: 4}, 1)
			classes := []workload.ClassSpec{{Name: "a", Rate: 3}, {Name: "b", Rate: 1}, {Name: "solo", Rate: 1, Senders: workload.DominantTenant}}
			var rec results
			exec := func(_ context.Context, op workload.Op) error {
				time.Sleep(time.Duration(op.Tenant) * time.Millisecond)
				return nil
			}
			_, err := workload.RunClosedLoop(t.Context(), workload.ClosedLoopConfig{Users: 8, ThinkTime: 20 * time.Millisecond, Duration: time.Second},
				pop, classes, exec, &rec, seed)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rec.bySeq() {
				r.Op.Seq = 0 // users interleave seqs in any order at equal instants
				ops = append(ops, r.Op)
			}
		})
		slices.SortFunc(ops, func(a, b workload.Op) int {
			return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Class, b.Class))
		})
		return ops
	}
	a, b, c := run(1), run(1), run(2)
	if len(a) < 100 {
		t.Fatalf("only %d ops", len(a))
	}
	if !slices.Equal(a, b) {
		t.Error("same seed gave different closed-loop runs")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds gave the same closed-loop run")
	}
	for _, op := range a {
		if op.Class == "solo" && op.Tenant != 1 {
			t.Fatalf("tenant %d sent the dominant tenant's class", op.Tenant)
		}
	}
}

func TestClosedLoopDrainAndCancel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool
	}{{"drain expires", false}, {"caller cancels", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancel {
					time.AfterFunc(5*time.Millisecond, cancel)
				}
				pop := mustPopulation(t, workload.PopulationConfig{Tenants: 2}, 1)
				stall := func(ctx context.Context, _ workload.Op) error { <-ctx.Done(); return ctx.Err() }
				var rec results
				stats, err := workload.RunClosedLoop(ctx, workload.ClosedLoopConfig{Users: 3, Duration: 10 * time.Millisecond, Drain: 20 * time.Millisecond},
					pop, oneClass, stall, &rec, 1)
				if tc.cancel != errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v", err)
				}
				if stats.Incomplete != 3 || stats.Errors != 0 || stats.GaveUp != 0 {
					t.Errorf("stats %+v, want 3 incomplete, no errors", stats)
				}
				wantEnd := 30 * time.Millisecond
				if tc.cancel {
					wantEnd = 5 * time.Millisecond
				}
				for _, r := range rec.bySeq() {
					if !errors.Is(r.Err, workload.ErrIncomplete) || r.Latency() != wantEnd {
						t.Errorf("query %d: %v after %v, want incomplete after %v", r.Op.Seq, r.Err, r.Latency(), wantEnd)
					}
				}
			})
		})
	}
}

func TestClosedLoopInvalid(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	noop := func(context.Context, workload.Op) error { return nil }
	ok := workload.ClosedLoopConfig{Users: 1, Duration: time.Second}
	for _, tc := range []struct {
		name   string
		mutate func(*workload.ClosedLoopConfig)
		exec   workload.Executor
		fields []string
	}{
		{"no users", func(c *workload.ClosedLoopConfig) { c.Users = 0 }, noop, []string{"Users"}},
		{"no duration", func(c *workload.ClosedLoopConfig) { c.Duration = 0 }, noop, []string{"Duration"}},
		{"negative think", func(c *workload.ClosedLoopConfig) { c.ThinkTime = -1 }, noop, []string{"ThinkTime"}},
		{"unknown think", func(c *workload.ClosedLoopConfig) { c.Think = "gamma" }, noop, []string{"Think"}},
		{"negative k", func(c *workload.ClosedLoopConfig) { c.RetryQueries = -1 }, noop, []string{"RetryQueries"}},
		{"negative retries", func(c *workload.ClosedLoopConfig) { c.MaxRetries = -1 }, noop, []string{"MaxRetries"}},
		{"nil executor", func(*workload.ClosedLoopConfig) {}, nil, []string{"Executor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mutate(&cfg)
			_, err := workload.RunClosedLoop(t.Context(), cfg, pop, oneClass, tc.exec, nil, 1)
			if !errors.Is(err, workload.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if got := fieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Errorf("error names %q, want %q", got, tc.fields)
			}
		})
	}
}
