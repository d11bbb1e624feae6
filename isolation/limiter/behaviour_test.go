package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/noisysim/noisysim/isolation/limiter"
)

// A freed slot goes to the waiters in the order they queued, and a
// newcomer does not overtake a waiter that was handed a slot.
func TestFIFOHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, limiter.Config{MaxPerTenant: 1, MaxQueue: 10})
		ctx := context.Background()
		release, err := l.Acquire(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		record := func(i int) func(context.Context) error {
			return func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				return nil
			}
		}
		for i := range 5 {
			wg.Go(func() {
				if err := l.Do(ctx, "t", record(i)); err != nil {
					t.Errorf("waiter %d: %v", i, err)
				}
			})
			synctest.Wait() // queued before the next one starts
		}
		release()
		wg.Go(func() { _ = l.Do(ctx, "t", record(5)) }) // arrives as the slot is handed over
		wg.Wait()
		if fmt.Sprint(order) != "[0 1 2 3 4 5]" {
			t.Errorf("admission order %v, want [0 1 2 3 4 5]", order)
		}
	})
}

func TestWaitExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, limiter.Config{MaxPerTenant: 1, MaxQueue: 2, MaxWait: time.Second})
		ctx := context.Background()
		var wg sync.WaitGroup
		wg.Go(func() { _ = l.Do(ctx, "t", sleeper(5*time.Second)) })
		synctest.Wait()
		start := time.Now()
		err := l.Do(ctx, "t", func(context.Context) error { t.Error("work ran"); return nil })
		if took := time.Since(start); took != time.Second {
			t.Errorf("waited %v, want exactly MaxWait (1s)", took)
		}
		le := limitError(t, err)
		if le.Reason != limiter.ReasonWaitExceeded || le.RetryAfter != time.Second {
			t.Errorf("rejection %+v, want wait_exceeded with RetryAfter = MaxWait", le)
		}
		if got := l.TenantStat("t"); got.RejectedWaitExceeded != 1 || got.Queued != 0 || got.Cancelled != 0 {
			t.Errorf("stat %+v", got)
		}
		wg.Wait()
	})
}

// A caller's context that ends while it waits counts as cancelled, not as
// wait_exceeded, even when its deadline is the same as MaxWait.
func TestContextEndsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, limiter.Config{MaxPerTenant: 1, MaxQueue: 2, MaxWait: time.Second})
		var wg sync.WaitGroup
		wg.Go(func() { _ = l.Do(context.Background(), "t", sleeper(5*time.Second)) })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := l.Acquire(ctx, "t"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", err)
		}
		if got := l.TenantStat("t"); got.Cancelled != 1 || got.Rejected() != 0 {
			t.Errorf("stat %+v, want 1 cancelled, 0 rejected", got)
		}
		wg.Wait()
	})
}

func TestReleaseIsIdempotent(t *testing.T) {
	l := mustNew(t, limiter.Config{MaxPerTenant: 1, MaxQueue: 1})
	ctx := context.Background()
	first, err := l.Acquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	first()
	second, err := l.Acquire(ctx, "t") // may reuse the first call's bookkeeping
	if err != nil {
		t.Fatal(err)
	}
	first() // stale: must not release the second call's slot
	if got := l.TenantStat("t"); got.InFlight != 1 || got.Released != 1 {
		t.Fatalf("after a stale release: %+v, want 1 in flight, 1 released", got)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(second) // concurrent duplicates release once
	}
	wg.Wait()
	if got := l.TenantStat("t"); got.InFlight != 0 || got.Released != 2 || got.Admitted != 2 {
		t.Fatalf("after duplicate releases: %+v, want 2 admitted and released", got)
	}
}

func TestGlobalCap(t *testing.T) {
	cfg := limiter.Config{MaxPerTenant: 2, MaxQueue: 2, MaxWait: time.Second, MaxGlobal: 2}
	// fill makes tenant a hold both global slots until the returned func is called.
	fill := func(t *testing.T, l *limiter.Limiter) func() {
		var releases []func()
		for range 2 {
			r, err := l.Acquire(context.Background(), "a")
			if err != nil {
				t.Fatal(err)
			}
			releases = append(releases, r)
		}
		return func() {
			for _, r := range releases {
				r()
			}
		}
	}
	t.Run("waits, then admitted by hand-off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, cfg)
			release := fill(t, l)
			var admittedAt time.Duration
			start := time.Now()
			var wg sync.WaitGroup
			wg.Go(func() {
				err := l.Do(context.Background(), "b", func(context.Context) error { admittedAt = time.Since(start); return nil })
				if err != nil {
					t.Errorf("b: %v", err)
				}
			})
			synctest.Wait()
			if got := l.TenantStat("b"); got.Queued != 1 || got.InFlight != 0 {
				t.Errorf("b while the global cap is full: %+v, want 1 queued", got)
			}
			time.Sleep(100 * time.Millisecond)
			release()
			wg.Wait()
			if admittedAt != 100*time.Millisecond {
				t.Errorf("b admitted at %v, want 100ms", admittedAt)
			}
		})
	})
	t.Run("wait exceeded returns the tenant slot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, cfg)
			release := fill(t, l)
			err := l.Do(context.Background(), "b", noop)
			if le := limitError(t, err); le.Reason != limiter.ReasonWaitExceeded {
				t.Errorf("b: %+v, want wait_exceeded", le)
			}
			release()
			if err := l.Do(context.Background(), "b", noop); err != nil {
				t.Errorf("b after the cap freed: %v", err)
			}
			if got := l.TenantStat("b"); got.RejectedWaitExceeded != 1 || got.Admitted != 1 || got.InFlight != 0 {
				t.Errorf("b: %+v", got)
			}
		})
	})
	t.Run("cancel while waiting for the cap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, cfg)
			release := fill(t, l)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			if err := l.Do(ctx, "b", noop); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("b: %v, want DeadlineExceeded", err)
			}
			release()
			if got := l.Stat().Total; got.Cancelled != 1 || got.InFlight != 0 || got.Queued != 0 {
				t.Errorf("total %+v", got)
			}
		})
	})
	t.Run("no queue rejects at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, limiter.Config{MaxPerTenant: 2, MaxGlobal: 2})
			release := fill(t, l)
			err := l.Do(context.Background(), "b", noop)
			if le := limitError(t, err); le.Reason != limiter.ReasonQueueFull || le.RetryAfter != limiter.DefaultRetryAfter {
				t.Errorf("b: %+v, want queue_full with the default hint", le)
			}
			release()
			if err := l.Do(context.Background(), "b", noop); err != nil {
				t.Errorf("b after the cap freed: %v", err)
			}
		})
	})
}

// Idle tenants' records are reclaimed; their counters stay readable.
func TestIdleTenantsAreFreed(t *testing.T) {
	const n = 1000
	l := mustNew(t, limiter.Config{MaxPerTenant: 1})
	ctx := context.Background()
	busy, err := l.Acquire(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := l.Do(ctx, fmt.Sprintf("t%d", i), noop); err != nil {
			t.Fatal(err)
		}
	}
	st := l.Stat()
	if st.Records > 128 {
		t.Errorf("%d tenant records held for %d idle tenants, want <= 128", st.Records, n)
	}
	if len(st.Tenants) != n+1 || st.Total.Admitted != n+1 || st.Total.InFlight != 1 {
		t.Errorf("%d tenants, total %+v; want %d tenants, %d admitted, 1 in flight", len(st.Tenants), st.Total, n+1, n+1)
	}
	if got := l.TenantStat("t7"); got.Admitted != 1 || got.Released != 1 {
		t.Errorf("t7: %+v, want 1 admitted and released", got)
	}
	busy()
	if got := l.TenantStat("busy"); got.Admitted != 1 || got.InFlight != 0 {
		t.Errorf("busy: %+v", got)
	}

	if got := l.ForgetIdle(); got != n+1 {
		t.Errorf("ForgetIdle = %d, want %d", got, n+1)
	}
	st = l.Stat()
	if len(st.Tenants) != 0 || st.Records != 0 || st.Total.Admitted != n+1 {
		t.Errorf("after ForgetIdle: %d tenants, %d records, total %+v", len(st.Tenants), st.Records, st.Total)
	}
	if err := l.Do(ctx, "t7", noop); err != nil {
		t.Fatal(err)
	}
	if got := l.TenantStat("t7"); got.Admitted != 1 {
		t.Errorf("t7 after ForgetIdle: %+v, want to count from zero", got)
	}
	if got := l.Stat().Total.Admitted; got != n+2 {
		t.Errorf("total admitted %d, want %d", got, n+2)
	}
}

// Many short-lived tenants under -race: records are swept while others are
// admitted, queued and released; every call is counted once.
func TestChurnWhileSweeping(t *testing.T) {
	const (
		workers = 8
		calls   = 4000
		names   = 300
	)
	l := mustNew(t, limiter.Config{MaxPerTenant: 1, MaxQueue: 2, MaxWait: 50 * time.Millisecond, MaxGlobal: 4})
	var attempts, seen atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range calls {
				name := fmt.Sprintf("c%d", rng.IntN(names))
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3))*time.Millisecond)
				attempts.Add(1)
				err := l.Do(ctx, name, func(context.Context) error { time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond); return nil })
				cancel()
				if err != nil && !errors.Is(err, limiter.ErrLimited) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s: %v", name, err)
				}
				seen.Add(1)
				if rng.IntN(500) == 0 {
					l.ForgetIdle()
				}
			}
		})
	}
	wg.Wait()
	st := l.Stat()
	var sum limiter.TenantStat
	for _, s := range st.Tenants {
		if s.InFlight != 0 || s.Queued != 0 {
			t.Errorf("tenant not quiescent: %+v", s)
		}
		sum.Admitted += s.Admitted
	}
	total := st.Total
	if got := total.Admitted + total.Rejected() + total.Cancelled; got != attempts.Load() {
		t.Errorf("admitted + rejected + cancelled = %d, want %d (%+v)", got, attempts.Load(), total)
	}
	if total.Released != total.Admitted || total.InFlight != 0 || total.Queued != 0 {
		t.Errorf("total not quiescent: %+v", total)
	}
	if sum.Admitted > total.Admitted {
		t.Errorf("tenants admitted %d > total %d", sum.Admitted, total.Admitted)
	}
}

func TestHTTPError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		ok         bool
		retryAfter string
	}{
		{"queue full", &limiter.LimitError{Tenant: "t", Reason: limiter.ReasonQueueFull, RetryAfter: 300 * time.Millisecond}, true, "1"},
		{"wrapped", fmt.Errorf("query: %w", &limiter.LimitError{Reason: limiter.ReasonWaitExceeded, RetryAfter: 1500 * time.Millisecond}), true, "2"},
		{"zero hint", &limiter.LimitError{}, true, "1"},
		{"nil", nil, false, ""},
		{"cancelled", context.Canceled, false, ""},
		{"bare sentinel", limiter.ErrLimited, false, ""},
		{"other", errors.New("boom"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, ok := limiter.HTTPError(tt.err)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if status != http.StatusTooManyRequests || h.Get("Retry-After") != tt.retryAfter {
				t.Errorf("HTTPError = %d, Retry-After %q; want 429, %q", status, h.Get("Retry-After"), tt.retryAfter)
			}
			rec := httptest.NewRecorder()
			if !limiter.WriteHTTP(rec, tt.err) {
				t.Fatal("WriteHTTP = false")
			}
			if rec.Code != 429 || rec.Header().Get("Retry-After") != tt.retryAfter {
				t.Errorf("WriteHTTP wrote %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
			}
		})
	}
	rec := httptest.NewRecorder()
	if limiter.WriteHTTP(rec, context.Canceled) || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Error("WriteHTTP wrote a response for a cancelled call")
	}
}
