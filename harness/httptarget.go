package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// HTTPError is a non-2xx answer of an HTTP class's request.
type HTTPError struct {
	Status int
	// RetryAfter is a 429's Retry-After (seconds, or an HTTP date from
	// now); RetryAfterForm says how it was given: "seconds", "date",
	// "missing" or "malformed".
	RetryAfter     time.Duration
	RetryAfterForm string
}

func (e *HTTPError) Error() string {
	if e.Status == http.StatusTooManyRequests {
		return fmt.Sprintf("HTTP 429 (Retry-After %s %s)", e.RetryAfterForm, e.RetryAfter)
	}
	return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
}

// Errors of an HTTP request that got no full answer.
var (
	// ErrHTTPTimeout: no full answer within the class's http.timeout.
	ErrHTTPTimeout = errors.New("http timeout")
	// ErrHTTPTransport: refused, reset or broken connection.
	ErrHTTPTransport = errors.New("http transport")
)

// httpErrorClass names an HTTP outcome for the report and allowed_errors;
// ok false when err is not one.
func httpErrorClass(err error) (string, bool) {
	var he *HTTPError
	switch {
	case errors.As(err, &he):
		switch {
		case he.Status == http.StatusTooManyRequests:
			return string(scenario.ErrorHTTP429), true
		case he.Status >= 500:
			return string(scenario.ErrorHTTP5xx), true
		case he.Status >= 400:
			return string(scenario.ErrorHTTP4xx), true
		}
		return string(scenario.ErrorOther), true
	case errors.Is(err, ErrHTTPTimeout):
		return string(scenario.ErrorHTTPTimeout), true
	case errors.Is(err, ErrHTTPTransport):
		return string(scenario.ErrorHTTPTransport), true
	}
	return "", false
}

// parseRetryAfter reads a Retry-After header (RFC 9110 10.2.3): delay
// seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, string) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, "missing"
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if n < 0 {
			return 0, "malformed"
		}
		// Clamped: a value of 9223372037 s or more would overflow to a
		// negative wait, a retry at once.
		return time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second, "seconds"
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), "date"
	}
	return 0, "malformed"
}

// httpTarget runs HTTP classes: one keep-alive client for the
// configuration, the instances' base URLs for path URLs, and counters.
type httpTarget struct {
	client *http.Client
	bases  []string // service instances without a trailing '/', for URLs that are paths
	rr     sync.Map // class name → *atomic.Uint64
	vars   func(op workload.Op, name string) string

	mu         sync.Mutex
	outcomes   map[string]int64
	retryAfter map[string]int64
	raSum      float64 // seconds: a sum of durations would overflow on a few huge values
	raN        int64
	// arrivals are the calls of the open loop, requests the HTTP requests
	// sent for them, retries the attempts after a first.
	arrivals, requests, retries atomic.Int64
	seed                        int64
}

// newHTTPTarget returns a target whose transport keeps about as many idle
// connections per host as the HTTP classes' arrivals in flight at their
// timeout (at least 64, at most 4096).
func newHTTPTarget(sc *scenario.Scenario, bases []string, vars func(workload.Op, string) string) *httpTarget {
	inflight := 0.0
	for _, c := range sc.Classes {
		if c.HTTP != nil {
			inflight += c.Rate * min(c.HTTP.Timeout.Duration().Seconds(), 1)
		}
	}
	idle := min(max(int(inflight), 64), 4096)
	trimmed := make([]string, len(bases))
	for i, b := range bases {
		trimmed[i] = strings.TrimSuffix(b, "/")
	}
	tr := &http.Transport{
		Proxy:               nil, // the service under test is reached directly
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        idle * max(len(bases), 1),
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	return &httpTarget{client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, bases: trimmed, vars: vars, outcomes: map[string]int64{}, retryAfter: map[string]int64{}, seed: sc.Seed}
}

// close drops the idle connections.
func (h *httpTarget) close() { h.client.CloseIdleConnections() }

// url returns the URL of op's request: the class's template for the
// instance its balance picks, its variables' values from value.
func (h *httpTarget) url(c *scenario.Class, op workload.Op, value func(string) string) string {
	ts := c.HTTP.Templates()
	n := len(ts)
	relative := n == 1 && strings.HasPrefix(c.HTTP.URL, "/")
	if relative {
		n = len(h.bases)
	}
	i := 0
	if n > 1 {
		if c.HTTP.Balance == scenario.BalanceSticky {
			i = (op.Tenant - 1) % n
		} else {
			v, _ := h.rr.LoadOrStore(c.Name, new(atomic.Uint64))
			i = int((v.(*atomic.Uint64).Add(1) - 1) % uint64(n))
		}
	}
	if relative {
		return expandAfter(h.bases[i], ts[0], value)
	}
	return ts[i].Expand(value)
}

// values returns the values of op's template variables by name.
func (h *httpTarget) values(op workload.Op) func(string) string {
	return func(name string) string { return h.vars(op, name) }
}

// expandAfter returns prefix followed by t expanded with value, built in
// one buffer.
func expandAfter(prefix string, t scenario.Template, value func(string) string) string {
	n := len(prefix)
	for i := 0; i < len(t.Parts); i += 2 {
		n += len(t.Parts[i])
	}
	var b strings.Builder
	b.Grow(n + 8*(len(t.Parts)/2)) // room for short values such as tenant keys
	b.WriteString(prefix)
	for i, p := range t.Parts {
		if i%2 == 0 {
			b.WriteString(p)
		} else {
			b.WriteString(value(p))
		}
	}
	return b.String()
}

// do runs op's HTTP call: one attempt of Fanout requests, and with a
// retry policy further attempts after a backoff (or the Retry-After)
// while the outcome is one it retries. The error is the last attempt's.
func (h *httpTarget) do(ctx context.Context, c *scenario.Class, op workload.Op) error {
	h.arrivals.Add(1)
	r := c.HTTP.Retry
	if r == nil {
		return h.send(ctx, c, op)
	}
	rng := rand.New(rand.NewPCG(uint64(h.seed), uint64(op.Seq)))
	delay := r.Backoff.Duration()
	for try := 0; ; try++ {
		err := h.fan(ctx, c, op, r.Fanout)
		outcome := outcomeOf(err)
		if err == nil || try == r.Max || ctx.Err() != nil || !slices.Contains(r.On, outcome) {
			return err
		}
		wait := time.Duration(rng.Int64N(int64(delay) + 1))
		var he *HTTPError
		if r.HonourRetryAfter && errors.As(err, &he) {
			switch he.RetryAfterForm {
			case "seconds", "date":
				wait = min(he.RetryAfter, r.MaxBackoff.Duration())
			default:
				// Missing or malformed (counted in stats): the client
				// still backs off, at least the minimum backoff.
				wait = max(wait, r.Backoff.Duration())
			}
		}
		delay = min(2*delay, r.MaxBackoff.Duration())
		h.retries.Add(1)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// fan sends n requests of op at once; the first error, if any.
func (h *httpTarget) fan(ctx context.Context, c *scenario.Class, op workload.Op, n int) error {
	if n <= 1 {
		return h.send(ctx, c, op)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.send(ctx, c, op)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// outcomeOf names an attempt's outcome as retry.on does.
func outcomeOf(err error) string {
	var he *HTTPError
	switch {
	case err == nil:
		return "2xx"
	case errors.As(err, &he) && he.Status == http.StatusTooManyRequests:
		return "429"
	case errors.As(err, &he):
		return fmt.Sprintf("%dxx", he.Status/100)
	case errors.Is(err, ErrHTTPTimeout):
		return "timeout"
	case errors.Is(err, ErrHTTPTransport):
		return "transport"
	}
	return "other"
}

// send sends one request of op and reads its answer to the end.
func (h *httpTarget) send(ctx context.Context, c *scenario.Class, op workload.Op) error {
	h.requests.Add(1)
	rctx, cancel := context.WithTimeoutCause(ctx, c.HTTP.Timeout.Duration(), ErrHTTPTimeout)
	defer cancel()
	value := h.values(op) // one closure for the URL, body and headers
	var body io.Reader
	if b := c.HTTP.BodyTemplate().Expand(value); b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(rctx, c.HTTP.Method, h.url(c, op, value), body)
	if err != nil {
		h.count("transport", nil)
		return fmt.Errorf("%w: build request: %w", ErrHTTPTransport, err)
	}
	for name, t := range c.HTTP.HeaderTemplates() {
		req.Header.Set(name, t.Expand(value))
	}
	resp, err := h.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return ctx.Err() // the run ended: not the service's fault
		case context.Cause(rctx) == ErrHTTPTimeout:
			h.count("timeout", nil)
			return fmt.Errorf("%w after %s: %s", ErrHTTPTimeout, c.HTTP.Timeout, req.URL.Path)
		}
		h.count("transport", nil)
		return fmt.Errorf("%w: %w", ErrHTTPTransport, err)
	}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		h.count("2xx", nil)
		return nil
	case s == http.StatusTooManyRequests:
		he := &HTTPError{Status: s}
		he.RetryAfter, he.RetryAfterForm = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		h.count("429", he)
		return he
	default:
		h.count(fmt.Sprintf("%dxx", s/100), nil)
		return &HTTPError{Status: s}
	}
}

func (h *httpTarget) count(outcome string, he *HTTPError) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outcomes[outcome]++
	if he != nil {
		h.retryAfter[he.RetryAfterForm]++
		if he.RetryAfterForm == "seconds" || he.RetryAfterForm == "date" {
			h.raSum += he.RetryAfter.Seconds()
			h.raN++
		}
	}
}

// stats returns the counters for the report.
func (h *httpTarget) stats() *reports.HTTPStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &reports.HTTPStats{Arrivals: h.arrivals.Load(), Requests: h.requests.Load(), Retries: h.retries.Load(),
		Outcomes: maps.Clone(h.outcomes)}
	if s.Arrivals > 0 {
		s.Amplification = float64(s.Requests) / float64(s.Arrivals)
	}
	if len(h.retryAfter) > 0 {
		s.RetryAfter = maps.Clone(h.retryAfter)
	}
	if h.raN > 0 {
		s.RetryAfterMean = h.raSum / float64(h.raN)
	}
	return s
}
