// Package redislimiter is a distributed per-tenant concurrency limiter on
// Redis with the contract of limiter.Limiter: at most MaxPerTenant calls of
// a tenant run at once across every process sharing the Redis, up to
// MaxQueue more wait in each process for at most MaxWait, rejections are
// *limiter.LimitError with a Retry-After hint, a call whose context ends
// before admission returns ctx.Err() and is counted as cancelled, never as
// rejected.
//
//	lim, err := redislimiter.New(redislimiter.Config{
//		Client:       redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}),
//		MaxPerTenant: 4,                // across all instances
//		MaxQueue:     20,               // waiters per tenant in this process
//		MaxWait:      time.Second,      // longest wait for a slot
//		LeaseTTL:     10 * time.Second, // > the statement_timeout
//	})
//	if err != nil {
//		return err
//	}
//	defer lim.Close()
//	release, err := lim.Acquire(ctx, tenant)
//	if err != nil {
//		return err // ctx.Err() or *limiter.LimitError
//	}
//	defer release()
//
// Slots are leases. Each tenant has one sorted set in Redis: a member per
// lease (the limiter's owner id and a sequence number), scored by its
// expiry in milliseconds of the Redis server's clock (TIME inside the
// script), never the instances' clocks. Acquire runs one script: drop
// expired leases, count, add if below the cap. While a call runs its lease
// is renewed every LeaseTTL/3; a renewal that finds the lease gone (it
// expired or the set was lost) counts it lost and does not put it back:
// the call then runs unprotected until it ends (Stat's LeasesLost). So an
// instance that crashes, or loses its connection, holds its slots for at
// most one LeaseTTL; choose LeaseTTL longer than the class's
// statement_timeout so that a slow query never outlives its lease.
//
// Waiting. A call that finds its tenant full waits in this process (at most
// MaxQueue waiters per tenant, else queue_full) and retries the script with
// a backoff from 1 ms to 20 ms, and at once when this process releases a
// slot of the tenant. Waiters are not FIFO across processes: the first retry
// that finds room wins. MaxWait bounds the wait (wait_exceeded).
//
// Redis failures. Every Redis call is bounded by OpTimeout. When Redis
// cannot be reached, FailOpen false (the default) rejects the call
// (reason unavailable, Retry-After 1 s) and FailOpen true admits it without
// a lease; both are counted (Stat: RejectedUnavailable, Unprotected,
// RedisErrors). Nothing waits on Redis longer than OpTimeout per attempt.
// After a Redis restart (its data lost) the sets are empty: leases held
// before are reported lost on renewal and the cap counts only leases taken
// since, so until those calls end up to twice the cap may run.
package redislimiter
