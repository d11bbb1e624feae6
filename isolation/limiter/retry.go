package limiter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultMinBackoff is Retrier's wait when a rejection carries no usable
// Retry-After (absent, malformed, 0 or a date already past).
const DefaultMinBackoff = 100 * time.Millisecond

// ErrBadRetryAfter is returned by ParseRetryAfter for a value that is
// neither delta-seconds nor an HTTP date.
var ErrBadRetryAfter = errors.New("bad Retry-After")

// ParseRetryAfter parses a Retry-After header value: delta-seconds ("3") or
// an HTTP date ("Wed, 21 Oct 2015 07:28:00 GMT"), relative to now. A date
// already past gives 0. Errors match ErrBadRetryAfter.
func ParseRetryAfter(v string, now time.Time) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, fmt.Errorf("parse retry-after %q: %w", v, ErrBadRetryAfter)
		}
		if s > int64(1<<63-1)/int64(time.Second) {
			s = int64(1<<63-1) / int64(time.Second)
		}
		return time.Duration(s) * time.Second, nil
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, fmt.Errorf("parse retry-after %q: %w", v, ErrBadRetryAfter)
	}
	return max(at.Sub(now), 0), nil
}

// Retrier is a client model that honours Retry-After: after a rejection it
// waits what the server asked for, never less than MinBackoff. It sees a
// rejection the way an HTTP client would, through HTTPError, so the waits
// are whole seconds.
type Retrier struct {
	// MinBackoff is the shortest wait between attempts; 0 means
	// DefaultMinBackoff (100 ms).
	MinBackoff time.Duration
	// MaxAttempts bounds the attempts of one Do; 0 means no bound other than
	// ctx.
	MaxAttempts int
}

// Delay is how long to wait before retrying after a response carrying the
// Retry-After value retryAfter ("" if absent), received at now: the parsed
// value, but at least MinBackoff. A malformed value, 0, or a date already
// past all give MinBackoff.
func (r Retrier) Delay(retryAfter string, now time.Time) time.Duration {
	minWait := r.MinBackoff
	if minWait <= 0 {
		minWait = DefaultMinBackoff
	}
	d, err := ParseRetryAfter(retryAfter, now)
	if err != nil {
		return minWait
	}
	return max(d, minWait)
}

// Do calls call until it returns something other than a rejection
// (errors.Is(err, ErrLimited)), waiting Delay between attempts. It returns
// the number of attempts and the last call's result. When MaxAttempts is
// reached it returns the last rejection; when ctx ends during a wait, an
// error matching both ctx.Err() and the last rejection.
func (r Retrier) Do(ctx context.Context, call func(ctx context.Context) error) (attempts int, err error) {
	for {
		attempts++
		err = call(ctx)
		_, header, ok := HTTPError(err)
		if !ok || (r.MaxAttempts > 0 && attempts >= r.MaxAttempts) {
			return attempts, err
		}
		tm := time.NewTimer(r.Delay(header.Get("Retry-After"), time.Now()))
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return attempts, fmt.Errorf("retry: %w (last attempt: %w)", ctx.Err(), err)
		}
	}
}
