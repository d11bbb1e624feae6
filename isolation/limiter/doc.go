// Package limiter is noisysim's per-tenant concurrency limiter: at most
// MaxPerTenant calls of one tenant run at once, up to MaxQueue more wait in
// that tenant's FIFO queue for at most MaxWait, and an optional MaxGlobal
// caps all tenants together (one application instance's share). A freed
// slot passes straight to the next waiter of the same tenant, so a noisy
// tenant queues behind itself while quiet tenants keep their own slots.
//
// It implements isolation.Limiter and is importable by services:
//
//	lim, err := limiter.New(limiter.Config{
//		MaxPerTenant: 4,                       // concurrent calls per tenant
//		MaxQueue:     20,                      // waiters per tenant beyond that
//		MaxWait:      1500 * time.Millisecond, // longest wait for a slot
//	})
//	if err != nil {
//		return err // matches ErrInvalidConfig; *ConfigError names the field
//	}
//	err = lim.Do(ctx, tenant, func(ctx context.Context) error {
//		return runQuery(ctx)
//	})
//	if limiter.WriteHTTP(w, err) { // 429 + Retry-After in whole seconds
//		return
//	}
//
// Errors: a call rejected by the limiter returns a *LimitError (reason
// queue_full or wait_exceeded, and a RetryAfter hint) matching ErrLimited;
// a call whose context ends before admission returns ctx.Err() and is
// counted as cancelled, never as rejected, and never gets a 429.
//
// Stat and TenantStat give exact counters: in flight, queued, admitted,
// released, rejected by reason, cancelled. Retrier is a client model that
// honours Retry-After (delta-seconds or HTTP date, never sooner than its
// minimum backoff), for load generators that behave like polite clients.
package limiter
