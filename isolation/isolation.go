package isolation

import "context"

// Limiter admits work for a tenant. It is the seam through which noisysim
// puts a user's own admission control under test; limiter.Limiter is the
// implementation noisysim ships.
//
// Acquire blocks until the tenant may run one unit of work, ctx is done, or
// the implementation rejects the call. On success the caller must call
// release exactly once when the work is done; further calls are no-ops.
// Errors, with release nil:
//   - ctx.Err() when ctx is done before admission; no slot is taken.
//   - an error matching errors.Is(err, limiter.ErrLimited) when rejected.
type Limiter interface {
	Acquire(ctx context.Context, tenant string) (release func(), err error)
}

// LimiterFunc adapts a function to the Limiter interface.
type LimiterFunc func(ctx context.Context, tenant string) (release func(), err error)

// Acquire calls f(ctx, tenant).
func (f LimiterFunc) Acquire(ctx context.Context, tenant string) (func(), error) {
	return f(ctx, tenant)
}

// Unlimited returns a Limiter that admits every call at once, as a stack
// without a limiter does (the "naive" picture). It still honours the
// contract: a call whose ctx is already done returns ctx.Err().
func Unlimited() Limiter {
	return LimiterFunc(func(ctx context.Context, _ string) (func(), error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return noop, nil
	})
}

func noop() {}
