package limiter

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// checkTenant verifies a tenant's books: the calls in flight and queued,
// no slot lost or duplicated (in_flight + free == cap, counting a slot
// handed to a waiter as taken), and admitted − released == in_flight.
func checkTenant(t *testing.T, l *Limiter, name string, inFlight, queued int) {
	t.Helper()
	v, ok := l.tenants.Load(name)
	if !ok {
		t.Fatalf("tenant %q has no record", name)
	}
	tn := v.(*tenant)
	tn.mu.Lock()
	defer tn.mu.Unlock()
	free := l.cfg.MaxPerTenant - tn.slots
	if tn.inFlight != inFlight || tn.queue.n+tn.reserved != queued ||
		tn.inFlight+tn.reserved+free != l.cfg.MaxPerTenant ||
		tn.c.admitted-tn.c.released != int64(tn.inFlight) {
		t.Fatalf("tenant %q: in_flight %d (want %d), queued %d+%d (want %d), free %d, admitted %d, released %d",
			name, tn.inFlight, inFlight, tn.queue.n, tn.reserved, queued, free, tn.c.admitted, tn.c.released)
	}
}

// L1, second part: a release and a waiter's cancel race, 10,000 times,
// with a second waiter queued behind. No slot may be lost or duplicated,
// the waiter behind is never stranded, and no waiter waits past MaxWait +
// 10 ms.
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
	wait := func(wctx context.Context) <-chan result {
		res := make(chan result, 1)
		go func() {
			start := time.Now()
			release, err := l.Acquire(wctx, "t")
			res <- result{release, err, time.Since(start)}
		}()
		return res
	}
	var admittedW, cancelledW int
	for i := range rounds {
		releaseH, err := l.Acquire(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		w := wait(wctx)
		for l.TenantStat("t").Queued != 1 {
			runtime.Gosched()
		}
		w2 := wait(ctx)
		for l.TenantStat("t").Queued != 2 {
			runtime.Gosched()
		}
		var wg sync.WaitGroup
		wg.Go(releaseH)
		wg.Go(cancel)
		wg.Wait()
		r := <-w
		switch {
		case r.err == nil:
			admittedW++
			checkTenant(t, l, "t", 2, 1)
			r.release()
		case errors.Is(r.err, context.Canceled):
			cancelledW++
		default:
			t.Fatalf("round %d: waiter: %v", i, r.err)
		}
		var r2 result
		select {
		case r2 = <-w2:
		case <-time.After(maxWait + 10*time.Millisecond):
			t.Fatalf("round %d: the waiter behind was stranded", i)
		}
		if r2.err != nil {
			t.Fatalf("round %d: waiter behind: %v", i, r2.err)
		}
		checkTenant(t, l, "t", 2, 0)
		r2.release()
		for _, d := range []time.Duration{r.waited, r2.waited} {
			if d > maxWait+10*time.Millisecond {
				t.Fatalf("round %d: a waiter waited %v > max wait + 10ms", i, d)
			}
		}
		checkTenant(t, l, "t", 1, 0)
	}
	releaseP()
	checkTenant(t, l, "t", 0, 0)
	st := l.TenantStat("t")
	if want := int64(1 + 2*rounds + admittedW); st.Admitted != want || st.Cancelled != int64(cancelledW) {
		t.Errorf("stat %+v; want %d admitted, %d cancelled", st, want, cancelledW)
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
		checkTenant(t, l, "a", 0, 0)
		checkTenant(t, l, "b", 0, 0)
	}
}
