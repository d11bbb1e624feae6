package limiter

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// checkTenant verifies a quiescent tenant's books: no waiter, slots taken
// equal to the calls in flight (in_flight + free == cap), and
// admitted − released == in_flight.
func checkTenant(t *testing.T, l *Limiter, name string, inFlight int) {
	t.Helper()
	v, ok := l.tenants.Load(name)
	if !ok {
		t.Fatalf("tenant %q has no record", name)
	}
	tn := v.(*tenant)
	tn.mu.Lock()
	defer tn.mu.Unlock()
	free := l.cfg.MaxPerTenant - tn.slots
	if tn.inFlight != inFlight || tn.reserved != 0 || tn.queue.n != 0 ||
		tn.inFlight+free != l.cfg.MaxPerTenant ||
		tn.c.admitted-tn.c.released != int64(tn.inFlight) {
		t.Fatalf("tenant %q: in_flight %d (want %d), free %d, reserved %d, queued %d, admitted %d, released %d",
			name, tn.inFlight, inFlight, free, tn.reserved, tn.queue.n, tn.c.admitted, tn.c.released)
	}
}

// L1, second part: a release and a waiter's cancel race, 10,000 times. No
// slot may be lost or duplicated, and no waiter waits past MaxWait + 10 ms.
func TestL1ReleaseCancelRace(t *testing.T) {
	const (
		rounds  = 10_000
		maxWait = time.Second
	)
	l, err := New(Config{MaxPerTenant: 2, MaxQueue: 4, MaxWait: maxWait})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	releaseP, err := l.Acquire(ctx, "t") // holds the other slot throughout
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		release func()
		err     error
		waited  time.Duration
	}
	var admittedW, cancelledW int
	for range rounds {
		releaseH, err := l.Acquire(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan result, 1)
		go func() {
			start := time.Now()
			release, err := l.Acquire(wctx, "t")
			res <- result{release, err, time.Since(start)}
		}()
		for l.TenantStat("t").Queued != 1 {
			runtime.Gosched()
		}
		var wg sync.WaitGroup
		wg.Go(releaseH)
		wg.Go(cancel)
		wg.Wait()
		r := <-res
		switch {
		case r.err == nil:
			admittedW++
			checkTenant(t, l, "t", 2)
			r.release()
		case errors.Is(r.err, context.Canceled):
			cancelledW++
		default:
			t.Fatalf("waiter: %v", r.err)
		}
		if r.waited > maxWait+10*time.Millisecond {
			t.Fatalf("waiter waited %v > max wait + 10ms", r.waited)
		}
		checkTenant(t, l, "t", 1)
	}
	releaseP()
	checkTenant(t, l, "t", 0)
	st := l.TenantStat("t")
	if st.Admitted != int64(1+rounds+admittedW) || st.Cancelled != int64(cancelledW) {
		t.Errorf("stat %+v; want %d admitted, %d cancelled", st, 1+rounds+admittedW, cancelledW)
	}
	t.Logf("waiter admitted %d times, cancelled %d times", admittedW, cancelledW)
}

// The global cap's release/wait race, many times: no slot lost.
func TestGlobalReleaseWaitRace(t *testing.T) {
	const rounds = 5_000
	l, err := New(Config{MaxPerTenant: 1, MaxQueue: 1, MaxGlobal: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range rounds {
		releaseA, err := l.Acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		bctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			release, err := l.Acquire(bctx, "b")
			if err == nil {
				release()
			}
			done <- err
		}()
		for l.TenantStat("b").Queued != 1 {
			runtime.Gosched()
		}
		var wg sync.WaitGroup
		wg.Go(releaseA)
		wg.Go(cancel)
		wg.Wait()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("b: %v", err)
		}
		if cur, n := l.global.cur.Load(), l.global.nwait.Load(); cur != 0 || n != 0 || l.global.queue.n != 0 {
			t.Fatalf("global: cur %d, nwait %d, queued %d; want all 0", cur, n, l.global.queue.n)
		}
		checkTenant(t, l, "a", 0)
		checkTenant(t, l, "b", 0)
	}
}
