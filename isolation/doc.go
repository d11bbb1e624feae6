// Package isolation holds the small interfaces through which noisysim puts a
// multi-tenant PostgreSQL stack under test, so users can run the harness
// against their own implementations as well as the ones noisysim ships.
//
// The shipped implementations live in subpackages:
//
//   - limiter: per-tenant concurrency limiter with bounded FIFO queues, a
//     maximum wait, an optional global cap and the HTTP 429 mapping.
//   - pools: interactive/heavy pools and roles, application_name tagging and
//     the per-tenant DB-time ledger.
//
// A user plugs in an own limiter by implementing Limiter, or by adapting a
// function:
//
//	var lim isolation.Limiter = isolation.LimiterFunc(
//		func(ctx context.Context, tenant string) (func(), error) {
//			return myLimiter.Take(ctx, tenant) // release func, or an error
//		})
//
// The contract every implementation must keep: a call whose context is done
// before admission returns ctx.Err() and takes nothing; a rejection is an
// error matching errors.Is(err, limiter.ErrLimited); release is called
// exactly once per admission and is idempotent.
package isolation
