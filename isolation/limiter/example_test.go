package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/noisysim/noisysim/isolation/limiter"
)

// A tenant at its cap with a full queue is rejected; the rejection maps to
// HTTP 429 with Retry-After in whole seconds.
func Example() {
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 1, MaxQueue: 0})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	release, err := lim.Acquire(ctx, "tenant-42") // takes the only slot
	if err != nil {
		panic(err)
	}
	defer release()

	err = lim.Do(ctx, "tenant-42", func(ctx context.Context) error {
		return nil // not reached: the tenant is at its cap
	})
	var le *limiter.LimitError
	if errors.As(err, &le) {
		fmt.Println("rejected:", le.Reason)
	}
	status, header, ok := limiter.HTTPError(err)
	fmt.Println(status, header.Get("Retry-After"), ok)

	// Another tenant is not affected.
	err = lim.Do(ctx, "tenant-7", func(ctx context.Context) error { return nil })
	fmt.Println("tenant-7:", err)
	// Output:
	// rejected: queue_full
	// 429 1 true
	// tenant-7: <nil>
}

func ExampleLimiter_Acquire() {
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 2, MaxQueue: 10, MaxWait: time.Second})
	if err != nil {
		panic(err)
	}
	release, err := lim.Acquire(context.Background(), "tenant-42")
	if err != nil {
		fmt.Println("not admitted:", err)
		return
	}
	fmt.Println("in flight:", lim.TenantStat("tenant-42").InFlight)
	release()
	release() // further calls are no-ops
	fmt.Printf("%+v\n", lim.TenantStat("tenant-42"))
	// Output:
	// in flight: 1
	// {InFlight:0 Queued:0 Admitted:1 Released:1 RejectedQueueFull:0 RejectedWaitExceeded:0 RejectedUnavailable:0 Cancelled:0}
}

func ExampleLimiter_Do() {
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxQueue: 20, MaxWait: 1500 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	err = lim.Do(context.Background(), "tenant-42", func(ctx context.Context) error {
		return errors.New("query failed") // the slot is returned all the same
	})
	fmt.Println(err, lim.TenantStat("tenant-42").InFlight)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err = lim.Do(cancelled, "tenant-42", func(ctx context.Context) error { return nil })
	fmt.Println(err, lim.TenantStat("tenant-42").Cancelled)
	// Output:
	// query failed 0
	// context canceled 1
}

func ExampleLimiter_Stat() {
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, tenant := range []string{"a", "b", "a"} {
		_ = lim.Do(ctx, tenant, func(ctx context.Context) error { return nil })
	}
	st := lim.Stat()
	fmt.Println(st.Tenants["a"].Admitted, st.Tenants["b"].Admitted, st.Total.Admitted)
	// Output: 2 1 3
}

func ExampleNew() {
	_, err := limiter.New(limiter.Config{MaxPerTenant: 0, MaxQueue: 20})
	var ce *limiter.ConfigError
	fmt.Println(errors.Is(err, limiter.ErrInvalidConfig), errors.As(err, &ce) && ce.Field == "MaxPerTenant")
	fmt.Println(err)
	// Output:
	// true true
	// new limiter: limiter config MaxPerTenant = 0: must be >= 1
}

func ExampleWriteHTTP() {
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 1})
	if err != nil {
		panic(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := lim.Do(r.Context(), r.Header.Get("X-Tenant"), func(ctx context.Context) error {
			time.Sleep(10 * time.Millisecond) // the request's work
			return nil
		})
		if limiter.WriteHTTP(w, err) {
			return // 429 written
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})

	release, _ := lim.Acquire(context.Background(), "t1") // t1 is busy
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Tenant", "t1")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	release()
	fmt.Println(rec.Code, rec.Header().Get("Retry-After"))
	// Output: 429 1
}

func ExampleRetryAfterSeconds() {
	for _, d := range []time.Duration{0, 300 * time.Millisecond, time.Second, 2500 * time.Millisecond} {
		fmt.Print(limiter.RetryAfterSeconds(d), " ")
	}
	fmt.Println()
	// Output: 1 1 1 3
}

func ExampleRetrier_Delay() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := limiter.Retrier{MinBackoff: 200 * time.Millisecond}
	fmt.Println(r.Delay("3", now))
	fmt.Println(r.Delay("Sun, 01 Mar 2026 12:00:05 GMT", now))
	fmt.Println(r.Delay("Sun, 01 Mar 2026 11:00:00 GMT", now)) // past: the minimum, not 0
	fmt.Println(r.Delay("", now))
	// Output:
	// 3s
	// 5s
	// 200ms
	// 200ms
}

func ExampleRetrier_Do() {
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	calls := 0
	attempts, err := limiter.Retrier{MaxAttempts: 5}.Do(ctx, func(ctx context.Context) error {
		calls++
		if calls == 1 { // the first attempt meets a busy tenant
			release, _ := lim.Acquire(ctx, "t1")
			defer release()
		}
		return lim.Do(ctx, "t1", func(ctx context.Context) error { return nil })
	})
	fmt.Println(attempts, err) // the retry came after Retry-After: 1 s
	// Output: 2 <nil>
}
