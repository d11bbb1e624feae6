package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
)

var _ isolation.Limiter = (*limiter.Limiter)(nil)

func mustNew(t testing.TB, cfg limiter.Config) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return l
}

func noop(context.Context) error { return nil }

// sleeper returns work that holds its slot for d.
func sleeper(d time.Duration) func(context.Context) error {
	return func(context.Context) error { time.Sleep(d); return nil }
}

func limitError(t *testing.T, err error) *limiter.LimitError {
	t.Helper()
	var le *limiter.LimitError
	if !errors.As(err, &le) || !errors.Is(err, limiter.ErrLimited) {
		t.Fatalf("err = %v, want a *LimitError matching ErrLimited", err)
	}
	return le
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name   string
		cfg    limiter.Config
		fields []string // invalid fields, in order; none for a valid config
	}{
		{"minimal", limiter.Config{MaxPerTenant: 1}, nil},
		{"full", limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: 1500 * time.Millisecond, MaxGlobal: 30, RetryAfter: 2 * time.Second}, nil},
		{"zero value", limiter.Config{}, []string{"MaxPerTenant"}},
		{"negative cap", limiter.Config{MaxPerTenant: -1}, []string{"MaxPerTenant"}},
		{"negative queue", limiter.Config{MaxPerTenant: 1, MaxQueue: -1}, []string{"MaxQueue"}},
		{"negative wait", limiter.Config{MaxPerTenant: 1, MaxWait: -time.Millisecond}, []string{"MaxWait"}},
		{"negative global", limiter.Config{MaxPerTenant: 1, MaxGlobal: -2}, []string{"MaxGlobal"}},
		{"negative retry after", limiter.Config{MaxPerTenant: 1, RetryAfter: -time.Second}, []string{"RetryAfter"}},
		{"several", limiter.Config{MaxQueue: -1, MaxGlobal: -1}, []string{"MaxPerTenant", "MaxQueue", "MaxGlobal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := limiter.New(tt.cfg)
			if len(tt.fields) == 0 {
				if err != nil || l == nil {
					t.Fatalf("New = %v, %v; want a limiter", l, err)
				}
				return
			}
			if l != nil || !errors.Is(err, limiter.ErrInvalidConfig) {
				t.Fatalf("New = %v, %v; want nil and ErrInvalidConfig", l, err)
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() error }).Unwrap().(interface{ Unwrap() []error }).Unwrap() {
				var ce *limiter.ConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("error %v is not a *ConfigError", e)
				}
				got = append(got, ce.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.fields) {
				t.Errorf("invalid fields = %v, want %v (err: %v)", got, tt.fields, err)
			}
		})
	}
}

// L1: a waiter that gives up must not strand the ones behind it.
func TestL1WaiterGivingUpDoesNotStrandOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, limiter.Config{MaxPerTenant: 2, MaxQueue: 4, MaxWait: time.Second})
		ctx := context.Background()
		start := time.Now()
		var wg sync.WaitGroup

		aReturns := make(chan struct{})
		wg.Go(func() { // A: holds 500 ms, returns early at t=60 ms
			_ = l.Do(ctx, "t", func(context.Context) error {
				select {
				case <-time.After(500 * time.Millisecond):
				case <-aReturns:
				}
				return nil
			})
		})
		wg.Go(func() { _ = l.Do(ctx, "t", sleeper(500*time.Millisecond)) }) // B
		synctest.Wait()

		time.Sleep(10 * time.Millisecond)
		w1ctx, cancelW1 := context.WithCancel(ctx)
		var w1err error
		wg.Go(func() {
			w1err = l.Do(w1ctx, "t", func(context.Context) error { t.Error("W1's work ran"); return nil })
		})
		synctest.Wait()

		time.Sleep(10 * time.Millisecond)
		var w2admitted time.Time
		wg.Go(func() {
			err := l.Do(ctx, "t", func(context.Context) error { w2admitted = time.Now(); return nil })
			if err != nil {
				t.Errorf("W2: %v", err)
			}
		})
		synctest.Wait()
		if got := l.TenantStat("t"); got.InFlight != 2 || got.Queued != 2 {
			t.Fatalf("at t=20ms: %+v, want 2 in flight and 2 queued", got)
		}

		time.Sleep(30 * time.Millisecond) // t=50 ms
		cancelW1()
		synctest.Wait()
		if !errors.Is(w1err, context.Canceled) {
			t.Errorf("W1 err = %v, want context.Canceled", w1err)
		}
		if got := l.TenantStat("t"); got.Queued != 1 || got.Cancelled != 1 || got.Rejected() != 0 {
			t.Errorf("after W1 gave up: %+v, want 1 queued, 1 cancelled, 0 rejected", got)
		}

		time.Sleep(10 * time.Millisecond) // t=60 ms
		close(aReturns)
		wg.Wait()
		if got := w2admitted.Sub(start); got != 60*time.Millisecond {
			t.Errorf("W2 admitted at %v, want 60ms (A's return)", got)
		}
	})
}

// L2: a call whose context is already done takes nothing.
func TestL2DoneContextTakesNothing(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	ctxs := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"deadline passed", expired, context.DeadlineExceeded},
	}
	calls := []struct {
		name string
		call func(l *limiter.Limiter, ctx context.Context, ran *bool) error
	}{
		{"Acquire", func(l *limiter.Limiter, ctx context.Context, ran *bool) error {
			release, err := l.Acquire(ctx, "t")
			if release != nil {
				*ran = true
				release()
			}
			return err
		}},
		{"Do", func(l *limiter.Limiter, ctx context.Context, ran *bool) error {
			return l.Do(ctx, "t", func(context.Context) error { *ran = true; return nil })
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			l := mustNew(t, limiter.Config{MaxPerTenant: 2})
			for i, tc := range ctxs {
				var ran bool
				err := c.call(l, tc.ctx, &ran)
				if !errors.Is(err, tc.want) || errors.Is(err, limiter.ErrLimited) {
					t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
				}
				if ran {
					t.Errorf("%s: the work ran", tc.name)
				}
				if _, _, ok := limiter.HTTPError(err); ok {
					t.Errorf("%s: HTTPError maps a cancelled call to a response", tc.name)
				}
				got := l.TenantStat("t")
				want := limiter.TenantStat{Cancelled: int64(i + 1)}
				if got != want {
					t.Errorf("%s: stat %+v, want %+v", tc.name, got, want)
				}
			}
		})
	}
}

// L3: no check-then-act over the caps. Run with -race. Callers that are
// rejected back off 1 ms, a fifth of the calls give up after 2 ms, so all
// outcomes occur and the 100,000 calls take a few seconds. (The real clock:
// under -race this volume inside a synctest bubble crashes ThreadSanitizer
// now and then, Go 1.26.)
func TestL3NoCheckThenAct(t *testing.T) {
	const (
		tenants   = 3
		perTenant = 50
		calls     = 100_000
		maxGlobal = 10
		maxTenant = 4
	)
	l := mustNew(t, limiter.Config{MaxPerTenant: maxTenant, MaxQueue: 16, MaxWait: 3 * time.Millisecond, MaxGlobal: maxGlobal})
	var (
		global, globalMax atomic.Int64
		inFlight, maxSeen [tenants]atomic.Int64
		attempts          atomic.Int64
		admitted          [tenants]atomic.Int64
		rejected          [tenants]atomic.Int64
		cancelled         [tenants]atomic.Int64
	)
	raise := func(m *atomic.Int64, v int64) {
		for {
			old := m.Load()
			if v <= old || m.CompareAndSwap(old, v) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	for i := range tenants {
		name := fmt.Sprintf("tenant-%d", i)
		work := func(context.Context) error {
			raise(&globalMax, global.Add(1))
			raise(&maxSeen[i], inFlight[i].Add(1))
			time.Sleep(time.Millisecond)
			inFlight[i].Add(-1)
			global.Add(-1)
			return nil
		}
		for g := range perTenant {
			wg.Go(func() {
				for n := attempts.Add(1); n <= calls; n = attempts.Add(1) {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if n%5 == 0 { // some callers give up while queued
						ctx, cancel = context.WithTimeout(ctx, 2*time.Millisecond)
					}
					var err error
					if g%2 == 0 {
						err = l.Do(ctx, name, work)
					} else {
						var release func()
						if release, err = l.Acquire(ctx, name); err == nil {
							_ = work(ctx)
							release()
							release() // no-op
						}
					}
					cancel()
					switch {
					case err == nil:
						admitted[i].Add(1)
					case errors.Is(err, limiter.ErrLimited):
						rejected[i].Add(1)
						time.Sleep(time.Millisecond) // client backoff
					case errors.Is(err, context.DeadlineExceeded):
						cancelled[i].Add(1)
					default:
						t.Errorf("unexpected error %v", err)
					}
				}
			})
		}
	}
	wg.Wait()

	if got := globalMax.Load(); got > maxGlobal {
		t.Errorf("global max in flight %d > %d", got, maxGlobal)
	}
	st := l.Stat()
	var sum int64
	for i := range tenants {
		name := fmt.Sprintf("tenant-%d", i)
		if got := maxSeen[i].Load(); got > maxTenant {
			t.Errorf("%s: max in flight %d > %d", name, got, maxTenant)
		}
		s := st.Tenants[name]
		if s.Admitted != admitted[i].Load() || s.Rejected() != rejected[i].Load() || s.Cancelled != cancelled[i].Load() {
			t.Errorf("%s: stat %+v, callers saw admitted %d rejected %d cancelled %d",
				name, s, admitted[i].Load(), rejected[i].Load(), cancelled[i].Load())
		}
		if s.InFlight != 0 || s.Queued != 0 || s.Released != s.Admitted {
			t.Errorf("%s: not quiescent: %+v", name, s)
		}
		sum += s.Admitted + s.Rejected() + s.Cancelled
	}
	if sum != calls {
		t.Errorf("admitted + rejected + cancelled = %d, want %d", sum, calls)
	}
	t.Logf("global max %d; totals %+v", globalMax.Load(), st.Total)
	if st.Total.Admitted == 0 || st.Total.Rejected() == 0 || st.Total.Cancelled == 0 {
		t.Errorf("the mix lacks an outcome: %+v", st.Total)
	}
}

// L4: Retry-After is whole seconds, rounded up, never 0.
func TestL4RetryAfter(t *testing.T) {
	t.Run("slot held, no queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, limiter.Config{MaxPerTenant: 1})
			var wg sync.WaitGroup
			wg.Go(func() { _ = l.Do(context.Background(), "t", sleeper(300*time.Millisecond)) })
			synctest.Wait()
			_, err := l.Acquire(context.Background(), "t")
			if le := limitError(t, err); le.Reason != limiter.ReasonQueueFull || le.Tenant != "t" {
				t.Errorf("rejection %+v, want queue_full for t", le)
			}
			status, h, ok := limiter.HTTPError(err)
			if !ok || status != 429 || h.Get("Retry-After") != "1" {
				t.Errorf("HTTPError = %d, %v, %v; want 429, Retry-After 1", status, h, ok)
			}
			wg.Wait()
		})
	})
	t.Run("queue full, head waiter has 2.5s left", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, limiter.Config{MaxPerTenant: 1, MaxQueue: 1, MaxWait: 3 * time.Second})
			ctx := context.Background()
			var wg sync.WaitGroup
			wg.Go(func() { _ = l.Do(ctx, "t", sleeper(10*time.Second)) })
			synctest.Wait()
			wg.Go(func() { // the head waiter; it gives up at 3 s
				if err := l.Do(ctx, "t", noop); limitError(t, err).Reason != limiter.ReasonWaitExceeded {
					t.Errorf("head waiter: %v, want wait_exceeded", err)
				}
			})
			synctest.Wait()
			time.Sleep(500 * time.Millisecond)
			_, err := l.Acquire(ctx, "t")
			if le := limitError(t, err); le.Reason != limiter.ReasonQueueFull || le.RetryAfter != 2500*time.Millisecond {
				t.Errorf("rejection %+v, want queue_full with RetryAfter 2.5s", le)
			}
			if _, h, _ := limiter.HTTPError(err); h.Get("Retry-After") != "3" {
				t.Errorf("Retry-After %q, want 3", h.Get("Retry-After"))
			}
			wg.Wait()
		})
	})
	t.Run("client honours Retry-After", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Only rejections for the first 2 s: a slot held 2.5 s, no queue.
			l := mustNew(t, limiter.Config{MaxPerTenant: 1, RetryAfter: 300 * time.Millisecond})
			ctx := context.Background()
			var wg sync.WaitGroup
			wg.Go(func() { _ = l.Do(ctx, "t", sleeper(2500*time.Millisecond)) })
			synctest.Wait()
			start := time.Now()
			var at []time.Duration
			n, err := limiter.Retrier{}.Do(ctx, func(ctx context.Context) error {
				at = append(at, time.Since(start))
				return l.Do(ctx, "t", noop)
			})
			if err != nil {
				t.Fatalf("Retrier.Do: %v after %d attempts", err, n)
			}
			within := 0
			for i, d := range at {
				if d <= 2*time.Second {
					within++
				}
				if i > 0 && d-at[i-1] < time.Second {
					t.Errorf("attempt %d %v after the previous one, want >= 1s (Retry-After 1)", i, d-at[i-1])
				}
			}
			if within > 3 {
				t.Errorf("%d attempts in the first 2 s (at %v), want <= 3", within, at)
			}
			wg.Wait()
		})
	})
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 1},
		{0, 1},
		{time.Nanosecond, 1},
		{300 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{2500 * time.Millisecond, 3},
		{10 * time.Second, 10},
		{time.Duration(1<<63 - 1), int((1<<63-1)/int64(time.Second)) + 1},
	}
	for _, tt := range tests {
		if got := limiter.RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestRetrierDelay(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name  string
		r     limiter.Retrier
		value string
		want  time.Duration
	}{
		{"seconds", limiter.Retrier{}, "3", 3 * time.Second},
		{"seconds with spaces", limiter.Retrier{}, " 1 ", time.Second},
		{"zero gets the minimum", limiter.Retrier{}, "0", limiter.DefaultMinBackoff},
		{"absent", limiter.Retrier{}, "", limiter.DefaultMinBackoff},
		{"malformed", limiter.Retrier{}, "soon", limiter.DefaultMinBackoff},
		{"fraction is malformed", limiter.Retrier{}, "1.5", limiter.DefaultMinBackoff},
		{"negative", limiter.Retrier{}, "-1", limiter.DefaultMinBackoff},
		{"future date", limiter.Retrier{}, date(5 * time.Second), 5 * time.Second},
		{"past date gets the minimum", limiter.Retrier{}, date(-time.Hour), limiter.DefaultMinBackoff},
		{"past date, own minimum", limiter.Retrier{MinBackoff: 250 * time.Millisecond}, date(-time.Second), 250 * time.Millisecond},
		{"minimum above the value", limiter.Retrier{MinBackoff: 2 * time.Second}, "1", 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Delay(tt.value, now); got != tt.want {
				t.Errorf("Delay(%q) = %v, want %v", tt.value, got, tt.want)
			}
		})
	}
	if _, err := limiter.ParseRetryAfter("soon", now); !errors.Is(err, limiter.ErrBadRetryAfter) {
		t.Errorf("ParseRetryAfter(soon) err = %v, want ErrBadRetryAfter", err)
	}
}

func TestRetrierStops(t *testing.T) {
	rejection := &limiter.LimitError{Tenant: "t", Reason: limiter.ReasonQueueFull, RetryAfter: time.Second}
	t.Run("max attempts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n, err := limiter.Retrier{MaxAttempts: 3}.Do(context.Background(), func(context.Context) error { return rejection })
			if n != 3 || err != rejection {
				t.Errorf("Do = %d, %v; want 3 attempts and the rejection", n, err)
			}
		})
	})
	t.Run("other error", func(t *testing.T) {
		boom := errors.New("boom")
		n, err := limiter.Retrier{}.Do(context.Background(), func(context.Context) error { return boom })
		if n != 1 || err != boom {
			t.Errorf("Do = %d, %v; want 1 attempt and boom", n, err)
		}
	})
	t.Run("context ends while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			n, err := limiter.Retrier{}.Do(ctx, func(context.Context) error { return rejection })
			if n != 2 || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, limiter.ErrLimited) {
				t.Errorf("Do = %d, %v; want 2 attempts and an error matching both", n, err)
			}
		})
	})
}

// Property test 1: a noisy tenant does not delay a quiet one.
func TestPropertyQuietTenantUnaffected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, limiter.Config{MaxPerTenant: 2, MaxQueue: 5, MaxWait: 300 * time.Millisecond})
		ctx := context.Background()
		var (
			wg       sync.WaitGroup
			rejected atomic.Int64
		)
		for range 40 {
			wg.Go(func() {
				err := l.Do(ctx, "noisy", sleeper(200*time.Millisecond))
				switch {
				case err == nil:
				case errors.Is(err, limiter.ErrLimited):
					limitError(t, err)
					rejected.Add(1)
				default:
					t.Errorf("noisy call failed otherwise: %v", err)
				}
			})
		}
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		if err := l.Do(ctx, "quiet", sleeper(10*time.Millisecond)); err != nil {
			t.Errorf("quiet call: %v", err)
		}
		if took := time.Since(start); took >= 60*time.Millisecond {
			t.Errorf("quiet call took %v, want < 60ms", took)
		}
		wg.Wait()
		st := l.TenantStat("noisy")
		if rejected.Load() == 0 || st.Rejected() != rejected.Load() {
			t.Errorf("noisy rejected counter %d, callers saw %d; want equal and > 0", st.Rejected(), rejected.Load())
		}
	})
}

// Property test 2: a call whose work fails (or panics) returns its slot.
func TestPropertyFailedWorkReturnsSlot(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		fail func(l *limiter.Limiter) error
	}{
		{"Do, error", func(l *limiter.Limiter) error {
			return l.Do(context.Background(), "t", func(context.Context) error { return boom })
		}},
		{"Do, panic", func(l *limiter.Limiter) (err error) {
			defer func() {
				r := recover()
				if r != boom {
					panic(r)
				}
				if got := l.TenantStat("t").InFlight; got != 0 {
					err = fmt.Errorf("panic went on with %d in flight", got)
					return
				}
				err = boom
			}()
			return l.Do(context.Background(), "t", func(context.Context) error { panic(boom) })
		}},
		{"Acquire, deferred release", func(l *limiter.Limiter) error {
			release, err := l.Acquire(context.Background(), "t")
			if err != nil {
				return err
			}
			defer release()
			return boom
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustNew(t, limiter.Config{MaxPerTenant: 1, MaxQueue: 1, MaxWait: 100 * time.Millisecond})
			if err := tt.fail(l); err != boom {
				t.Fatalf("failing call: %v, want boom", err)
			}
			if err := l.Do(context.Background(), "t", noop); err != nil {
				t.Fatalf("next call: %v", err)
			}
			st := l.Stat()
			for name, s := range st.Tenants {
				if s.InFlight != 0 || s.Queued != 0 {
					t.Errorf("tenant %s: %+v, want nothing in flight", name, s)
				}
			}
			if st.Total.InFlight != 0 || st.Total.Admitted != 2 || st.Total.Released != 2 {
				t.Errorf("total %+v, want 2 admitted and released, none in flight", st.Total)
			}
		})
	}
}
