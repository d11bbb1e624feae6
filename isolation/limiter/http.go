package limiter

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// RetryAfterSeconds turns a Retry-After hint into the whole seconds of an
// HTTP Retry-After header: rounded up, never below 1 (RFC 9110 §10.2.3
// allows only whole seconds; 0 would invite an immediate retry).
func RetryAfterSeconds(d time.Duration) int {
	if d <= time.Second {
		return 1
	}
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int(s)
}

// HTTPError maps a limiter rejection to an HTTP response: status 429 (Too
// Many Requests) and a Retry-After header in whole seconds (see
// RetryAfterSeconds). ok is false for any other error, including ctx.Err():
// a client that left is not rejected.
func HTTPError(err error) (status int, header http.Header, ok bool) {
	var le *LimitError
	if !errors.As(err, &le) {
		return 0, nil, false
	}
	header = http.Header{}
	header.Set("Retry-After", strconv.Itoa(RetryAfterSeconds(le.RetryAfter)))
	return http.StatusTooManyRequests, header, true
}

// WriteHTTP writes the HTTPError response for err to w (headers, status and
// a one-line text body) and reports whether err was a rejection. For any
// other error it writes nothing and returns false.
func WriteHTTP(w http.ResponseWriter, err error) bool {
	status, header, ok := HTTPError(err)
	if !ok {
		return false
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(http.StatusText(status) + "\n"))
	return true
}
