package redislimiter_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/limiter/redislimiter"
)

// TestCapAcrossInstances is L3 across instances: four limiters (four app
// instances, each its own connection) share one cap per tenant; the
// in-flight count seen inside the work never exceeds it, and every call is
// counted once.
func TestCapAcrossInstances(t *testing.T) {
	srv := startRedis(t)
	const cap, instances, workers, calls = 3, 4, 8, 25
	var lims []*redislimiter.Limiter
	for range instances {
		lims = append(lims, newLimiter(t, srv, redislimiter.Config{MaxPerTenant: cap, MaxQueue: workers * instances, MaxWait: 5 * time.Second}))
	}
	tenants := []string{"a", "b"}
	var inFlight, peak [2]atomic.Int64
	var attempts, errs atomic.Int64
	var wg sync.WaitGroup
	for i, l := range lims {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range calls {
					ti := (i + w) % len(tenants)
					attempts.Add(1)
					release, err := l.Acquire(context.Background(), tenants[ti])
					if err != nil {
						errs.Add(1)
						continue
					}
					n := inFlight[ti].Add(1)
					for p := peak[ti].Load(); n > p && !peak[ti].CompareAndSwap(p, n); p = peak[ti].Load() {
					}
					time.Sleep(time.Millisecond)
					inFlight[ti].Add(-1)
					release()
				}
			}()
		}
	}
	wg.Wait()
	var total limiter.TenantStat
	for _, l := range lims {
		total.Add(l.Stat().Total)
	}
	for i := range tenants {
		if p := peak[i].Load(); p > cap {
			t.Errorf("tenant %s: %d calls in flight at once across %d instances, cap %d", tenants[i], p, instances, cap)
		}
	}
	if got := total.Admitted + total.Rejected() + total.Cancelled; got != attempts.Load() {
		t.Errorf("admitted %d + rejected %d + cancelled %d = %d, want %d attempts", total.Admitted, total.Rejected(), total.Cancelled, got, attempts.Load())
	}
	if total.InFlight != 0 || total.Admitted != total.Released {
		t.Errorf("after the run: in flight %d, admitted %d, released %d", total.InFlight, total.Admitted, total.Released)
	}
	for _, tn := range tenants {
		if n, err := lims[0].Held(context.Background(), tn); err != nil || n != 0 {
			t.Errorf("tenant %s: %d leases left in Redis (%v)", tn, n, err)
		}
	}
	t.Logf("peaks %d %d (cap %d), %d attempts, %d rejected", peak[0].Load(), peak[1].Load(), cap, attempts.Load(), errs.Load())
}

// TestGiveUpStrandsNoOne is L1: a waiter that gives up leaves, and the
// next one is admitted as soon as a slot frees.
func TestGiveUpStrandsNoOne(t *testing.T) {
	srv := startRedis(t)
	l := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 2, MaxQueue: 4, MaxWait: time.Second})
	ctx := context.Background()
	relA, err := l.Acquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	relB, err := l.Acquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer relB()
	w1ctx, cancelW1 := context.WithCancel(ctx)
	w1 := make(chan error, 1)
	go func() {
		rel, err := l.Acquire(w1ctx, "t")
		if rel != nil {
			rel()
		}
		w1 <- err
	}()
	time.Sleep(10 * time.Millisecond)
	type res struct {
		err error
		at  time.Time
	}
	w2 := make(chan res, 1)
	go func() {
		rel, err := l.Acquire(ctx, "t")
		at := time.Now()
		if rel != nil {
			defer rel()
		}
		w2 <- res{err, at}
	}()
	time.Sleep(30 * time.Millisecond)
	cancelW1()
	if err := <-w1; !errors.Is(err, context.Canceled) {
		t.Fatalf("W1: %v, want context.Canceled", err)
	}
	time.Sleep(10 * time.Millisecond)
	freed := time.Now()
	relA()
	r := <-w2
	if r.err != nil {
		t.Fatalf("W2: %v", r.err)
	}
	// L1 asks 5 ms; the bound here leaves room for a loaded machine while
	// staying far below the 440 ms A would still have held its slot.
	if d := r.at.Sub(freed); d > 50*time.Millisecond {
		t.Errorf("W2 admitted %v after A released", d)
	}
	st := l.TenantStat("t")
	if st.Cancelled != 1 || st.Rejected() != 0 {
		t.Errorf("cancelled %d, rejected %d; want 1, 0", st.Cancelled, st.Rejected())
	}
}

// TestDoneContextTakesNothing is L2.
func TestDoneContextTakesNothing(t *testing.T) {
	srv := startRedis(t)
	l := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 2})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"cancelled", cancelled, context.Canceled}, {"deadline passed", past, context.DeadlineExceeded}} {
		before := l.TenantStat("t")
		rel, err := l.Acquire(tc.ctx, "t")
		if !errors.Is(err, tc.want) || rel != nil {
			t.Errorf("%s: release %v, err %v; want nil, %v", tc.name, rel != nil, err, tc.want)
		}
		after := l.TenantStat("t")
		if after.Cancelled != before.Cancelled+1 || after.Rejected() != before.Rejected() || after.InFlight != 0 {
			t.Errorf("%s: %+v after, %+v before", tc.name, after, before)
		}
		if _, _, ok := limiter.HTTPError(err); ok {
			t.Errorf("%s: a client that left got a 429", tc.name)
		}
	}
	if n, err := l.Held(context.Background(), "t"); err != nil || n != 0 {
		t.Errorf("%d leases in Redis (%v), want 0", n, err)
	}
}

// TestRetryAfter is L4: whole seconds, rounded up, never 0.
func TestRetryAfter(t *testing.T) {
	srv := startRedis(t)
	ctx := context.Background()
	header := func(err error) string {
		t.Helper()
		_, h, ok := limiter.HTTPError(err)
		if !ok {
			t.Fatalf("not a rejection: %v", err)
		}
		return h.Get("Retry-After")
	}

	l := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 1, KeyPrefix: "l4a"})
	rel, err := l.Acquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(ctx, "t")
	var le *limiter.LimitError
	if !errors.As(err, &le) || le.Reason != limiter.ReasonQueueFull {
		t.Fatalf("second call: %v, want queue_full", err)
	}
	if h := header(err); h != "1" {
		t.Errorf("Retry-After %q, want 1", h)
	}
	rel()

	// Queue full while the head waiter has about 2.5 s of its 3 s left.
	l2 := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 1, MaxQueue: 1, MaxWait: 3 * time.Second, KeyPrefix: "l4b"})
	rel, err = l2.Acquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() { defer close(waited); l2.Acquire(wctx, "t") }()
	time.Sleep(500 * time.Millisecond)
	_, err = l2.Acquire(ctx, "t")
	if h := header(err); h != "3" {
		t.Errorf("queue full with 2.5 s left: Retry-After %q, want 3", h)
	}
	cancel()
	<-waited
}

// TestCrashedInstanceLeasesReturn: an instance that dies holding slots
// (its connection gone, no release, no renewal) gives them back within one
// lease TTL, and the cap holds meanwhile.
func TestCrashedInstanceLeasesReturn(t *testing.T) {
	srv := startRedis(t)
	const ttl = 600 * time.Millisecond
	crashedClient := client(t, srv)
	crashed := newLimiter(t, srv, redislimiter.Config{Client: crashedClient, MaxPerTenant: 2, LeaseTTL: ttl})
	other := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 2, MaxQueue: 10, MaxWait: 5 * time.Second, LeaseTTL: ttl})
	ctx := context.Background()
	for range 2 {
		if _, err := crashed.Acquire(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	crashedClient.Close() // the instance is gone: its releases and renewals never reach Redis
	start := time.Now()

	var maxHeld atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if n, err := other.Held(ctx, "t"); err == nil && n > maxHeld.Load() {
				maxHeld.Store(n)
			}
		}
	}()
	var wg sync.WaitGroup
	admitted := make([]time.Duration, 3)
	for i := range admitted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := other.Acquire(ctx, "t")
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			admitted[i] = time.Since(start)
			time.Sleep(100 * time.Millisecond)
			rel()
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	first := min(admitted[0], admitted[1], admitted[2])
	if first < ttl/2 {
		t.Errorf("first waiter admitted %v after the crash: the crashed instance's leases were not held", first)
	}
	if first > ttl+200*time.Millisecond {
		t.Errorf("first waiter admitted %v after the crash, want within one TTL (%v)", first, ttl)
	}
	if m := maxHeld.Load(); m > 2 {
		t.Errorf("%d leases live at once, cap 2", m)
	}
	t.Logf("admitted after %v (TTL %v); at most %d leases live", admitted, ttl, maxHeld.Load())
}

// TestSlowCallKeepsLease: renewal keeps a lease alive past its TTL while
// the call runs.
func TestSlowCallKeepsLease(t *testing.T) {
	srv := startRedis(t)
	const ttl = 300 * time.Millisecond
	a := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 1, LeaseTTL: ttl})
	b := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 1, LeaseTTL: ttl})
	rel, err := a.Acquire(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl)
	if _, err := b.Acquire(context.Background(), "t"); !errors.Is(err, limiter.ErrLimited) {
		t.Errorf("another instance's call after 3 TTLs: %v, want a rejection", err)
	}
	rel()
	if e := a.Extra(); e.LeasesLost != 0 {
		t.Errorf("%d leases lost", e.LeasesLost)
	}
	rel2, err := b.Acquire(context.Background(), "t")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	rel2()
}

// TestRedisRestart: Redis killed and restarted mid-run. Fail closed
// rejects while it is down (reason unavailable, counted) and fail open
// admits without a lease (counted); no call waits longer than a few
// OpTimeouts; after the restart admission works again and the lease held
// across it is reported lost on renewal.
func TestRedisRestart(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		name := map[bool]string{false: "fail closed", true: "fail open"}[failOpen]
		t.Run(name, func(t *testing.T) {
			srv := startRedis(t)
			const op = 100 * time.Millisecond
			l := newLimiter(t, srv, redislimiter.Config{MaxPerTenant: 2, MaxQueue: 4, MaxWait: time.Second,
				LeaseTTL: 300 * time.Millisecond, OpTimeout: op, FailOpen: failOpen})
			ctx := context.Background()
			held, err := l.Acquire(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			srv.Kill()
			start := time.Now()
			rel, err := l.Acquire(ctx, "t")
			took := time.Since(start)
			if took > 5*op {
				t.Errorf("acquire with Redis down took %v", took)
			}
			st, ex := l.TenantStat("t"), l.Extra()
			if failOpen {
				if err != nil {
					t.Fatalf("fail open: %v", err)
				}
				rel()
				if ex.Unprotected != 1 {
					t.Errorf("unprotected %d, want 1", ex.Unprotected)
				}
			} else {
				var le *limiter.LimitError
				if !errors.As(err, &le) || le.Reason != limiter.ReasonUnavailable {
					t.Fatalf("fail closed: %v, want an unavailable rejection", err)
				}
				if st.RejectedUnavailable != 1 {
					t.Errorf("rejected unavailable %d, want 1", st.RejectedUnavailable)
				}
			}
			if ex.RedisErrors == 0 {
				t.Error("no Redis error counted")
			}
			if err := srv.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			// A renewal (every 100 ms) reaches the new, empty Redis and
			// finds the held lease gone. Waited for, not slept on: one
			// that times out on a busy machine (OpTimeout 100 ms, the
			// reconnect and the script's load on the new Redis included)
			// is tried again at the next tick.
			restarted := time.Now()
			for deadline := restarted.Add(2 * time.Second); l.Extra().LeasesLost == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no renewal found the held lease lost within 2 s of the restart: %+v", l.Extra())
				}
			}
			t.Logf("the held lease was found lost %v after the restart", time.Since(restarted))
			rel, err = l.Acquire(ctx, "t")
			if err != nil {
				t.Fatalf("after restart: %v", err)
			}
			rel()
			held()
			if ex := l.Extra(); ex.LeasesLost != 1 {
				t.Errorf("leases lost %d, want 1 (the one held across the restart)", ex.LeasesLost)
			}
			if st := l.TenantStat("t"); st.InFlight != 0 {
				t.Errorf("in flight %d after all released", st.InFlight)
			}
		})
	}
}

// TestConfigErrors: every bad field named.
func TestConfigErrors(t *testing.T) {
	_, err := redislimiter.New(redislimiter.Config{MaxPerTenant: 0, MaxQueue: -1, LeaseTTL: time.Millisecond})
	if !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Fatalf("%v", err)
	}
	for _, f := range []string{"Client", "MaxPerTenant", "MaxQueue", "LeaseTTL"} {
		var found bool
		for _, e := range err.(interface{ Unwrap() error }).Unwrap().(interface{ Unwrap() []error }).Unwrap() {
			var ce *limiter.ConfigError
			if errors.As(e, &ce) && ce.Field == f {
				found = true
			}
		}
		if !found {
			t.Errorf("no error for %s in %v", f, err)
		}
	}
}
