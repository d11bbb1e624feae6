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
	// RetryAfter is a 429's or 503's Retry-After (seconds, or an HTTP
	// date from now); RetryAfterForm says how it was given: "seconds",
	// "date", "missing" or "malformed" (empty on other statuses).
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
	// vars returns a template variable's value for op. Every value but
	// seq's depends on op.Tenant only: prepared caches them per tenant.
	vars  func(op workload.Op, name string) string
	plans map[string]*httpPlan // by class name, read only after newHTTPTarget

	mu         sync.Mutex
	outcomes   map[string]int64 // but 2xx, counted in ok
	ok         atomic.Int64
	retryAfter map[string]int64
	raSum      float64 // seconds: a sum of durations would overflow on a few huge values
	raN        int64
	// arrivals are the calls of the open loop, requests the HTTP requests
	// sent for them, retries the attempts after a first.
	arrivals, requests, retries atomic.Int64
	seed                        int64
	// now and sleep are the clock the retries read and wait on; nil: the
	// wall clock and a timer (tests give their own).
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// httpPlan is what an HTTP class's requests share, prepared once: its
// headers' canonical names, and per tenant the parts of its requests that
// do not use seq (URLs for each instance, headers, body), expanded at the
// tenant's first request and then reused, so that a request expands and
// allocates only what varies per request.
type httpPlan struct {
	names                    []string // header names, canonical, sorted
	heads                    []scenario.Template
	seqURL, seqHead, seqBody bool                            // a template of that part uses seq
	tenants                  []atomic.Pointer[tenantRequest] // by op.Tenant-1

	// slot is the timeout context of the requests sent last: those whose
	// deadlines fall in the same slot share it (see deadline).
	slotMu sync.Mutex
	slot   deadlineSlot
}

// deadlineSlot is a timeout context shared by requests of one parent
// context whose deadlines fall in [end-grain, end].
type deadlineSlot struct {
	parent context.Context
	end    time.Time
	ctx    context.Context
	cancel context.CancelFunc // never called: the slot's timer ends it at end, or its parent before
}

// maxTimeoutGrain is the most a request's timeout is rounded up by.
const maxTimeoutGrain = 10 * time.Millisecond

// deadline returns the timeout context of a request of timeout d sent at
// now under parent: a request times out between d and d plus a grain of
// d/100 (at most maxTimeoutGrain) after now, so that the requests sent in
// the same grain share one context and one timer instead of making their
// own (its cause ErrHTTPTimeout, as its parent's end ends it).
func (p *httpPlan) deadline(parent context.Context, d time.Duration, now time.Time) context.Context {
	grain := min(d/100, maxTimeoutGrain)
	due := now.Add(d)
	p.slotMu.Lock()
	defer p.slotMu.Unlock()
	if s := &p.slot; s.parent == parent && !due.After(s.end) && s.end.Sub(due) <= grain {
		return s.ctx
	}
	end := due
	if grain > 0 {
		end = due.Truncate(grain).Add(grain) // the end of due's grain: never before due
	}
	ctx, cancel := context.WithDeadlineCause(parent, end, ErrHTTPTimeout)
	p.slot = deadlineSlot{parent: parent, end: end, ctx: ctx, cancel: cancel}
	return ctx
}

// tenantRequest is one tenant's prepared request parts. header is shared
// read only by the tenant's requests (the client has no cookie jar and
// follows no redirect, so net/http does not write to it).
type tenantRequest struct {
	urls   []string // by instance; nil when the URL uses seq
	header http.Header
	body   string
}

func newHTTPPlan(c *scenario.Class, tenants int) *httpPlan {
	usesSeq := func(t scenario.Template) bool { return slices.Contains(t.Vars(), "seq") }
	p := &httpPlan{seqBody: usesSeq(c.HTTP.BodyTemplate()), tenants: make([]atomic.Pointer[tenantRequest], tenants)}
	for _, t := range c.HTTP.Templates() {
		p.seqURL = p.seqURL || usesSeq(t)
	}
	hs := c.HTTP.HeaderTemplates()
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		p.names = append(p.names, http.CanonicalHeaderKey(name))
		p.heads = append(p.heads, hs[name])
		p.seqHead = p.seqHead || usesSeq(hs[name])
	}
	return p
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
	plans := map[string]*httpPlan{}
	for i := range sc.Classes {
		if c := &sc.Classes[i]; c.HTTP != nil {
			plans[c.Name] = newHTTPPlan(c, sc.Tenants.Count)
		}
	}
	return &httpTarget{client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, bases: trimmed, vars: vars, plans: plans, outcomes: map[string]int64{}, retryAfter: map[string]int64{}, seed: sc.Seed}
}

// close drops the idle connections.
func (h *httpTarget) close() { h.client.CloseIdleConnections() }

// url returns the URL of op's request: the class's template for the
// instance its balance picks, its variables' values from value.
func (h *httpTarget) url(c *scenario.Class, op workload.Op, value func(string) string) string {
	return h.urlAt(c, h.pick(c, op), value)
}

// instances returns how many URLs c's balance picks from: its urls, or
// the service's instances for a path.
func (h *httpTarget) instances(c *scenario.Class) (n int, relative bool) {
	n = len(c.HTTP.Templates())
	if n == 1 && strings.HasPrefix(c.HTTP.URL, "/") {
		return len(h.bases), true
	}
	return n, false
}

// pick returns the instance of op's request: round robin over the
// class's requests, or by tenant (sticky).
func (h *httpTarget) pick(c *scenario.Class, op workload.Op) int {
	n, _ := h.instances(c)
	if n <= 1 {
		return 0
	}
	if c.HTTP.Balance == scenario.BalanceSticky {
		return (op.Tenant - 1) % n
	}
	v, ok := h.rr.Load(c.Name)
	if !ok {
		v, _ = h.rr.LoadOrStore(c.Name, new(atomic.Uint64))
	}
	return int((v.(*atomic.Uint64).Add(1) - 1) % uint64(n))
}

// urlAt returns the URL of c for instance i, its variables' values from
// value.
func (h *httpTarget) urlAt(c *scenario.Class, i int, value func(string) string) string {
	ts := c.HTTP.Templates()
	if _, relative := h.instances(c); relative {
		return expandAfter(h.bases[i], ts[0], value)
	}
	return ts[i].Expand(value)
}

// prepared returns op's tenant's request parts (the URLs, headers and
// body of c that do not use seq), expanded at its first request.
func (h *httpTarget) prepared(c *scenario.Class, p *httpPlan, op workload.Op) *tenantRequest {
	var slot *atomic.Pointer[tenantRequest]
	if op.Tenant >= 1 && op.Tenant <= len(p.tenants) {
		slot = &p.tenants[op.Tenant-1]
		if tr := slot.Load(); tr != nil {
			return tr
		}
	}
	value := h.values(op)
	tr := &tenantRequest{}
	if !p.seqURL {
		n, _ := h.instances(c)
		tr.urls = make([]string, max(n, 1))
		for i := range tr.urls {
			tr.urls[i] = h.urlAt(c, i, value)
		}
	}
	if !p.seqHead {
		tr.header = p.header(value)
	}
	if !p.seqBody {
		tr.body = c.HTTP.BodyTemplate().Expand(value)
	}
	if slot != nil {
		slot.CompareAndSwap(nil, tr) // a request of the tenant at the same time may have set an equal one
	}
	return tr
}

// header returns the plan's headers expanded with value.
func (p *httpPlan) header(value func(string) string) http.Header {
	hd := make(http.Header, len(p.names))
	for i, name := range p.names {
		hd[name] = []string{p.heads[i].Expand(value)}
	}
	return hd
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
		wait := delay
		if r.Jitter != scenario.JitterNone {
			wait = time.Duration(rng.Int64N(int64(delay) + 1))
		}
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
		if err := h.wait(ctx, wait); err != nil {
			return err
		}
	}
}

// wait waits d before a retry, or returns ctx's error.
func (h *httpTarget) wait(ctx context.Context, d time.Duration) error {
	if h.sleep != nil {
		return h.sleep(ctx, d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// clock returns the time Retry-After dates are read against.
func (h *httpTarget) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
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
	p := h.plans[c.Name]
	if p == nil { // a class the target was not made for: nothing prepared
		p = newHTTPPlan(c, 0)
	}
	rctx := p.deadline(ctx, c.HTTP.Timeout.Duration(), time.Now())
	tr := h.prepared(c, p, op)
	var value func(string) string // for the parts that use seq
	if p.seqURL || p.seqHead || p.seqBody {
		value = h.values(op)
	}
	b := tr.body
	if p.seqBody {
		b = c.HTTP.BodyTemplate().Expand(value)
	}
	var body io.Reader
	if b != "" {
		body = strings.NewReader(b)
	}
	var u string
	if p.seqURL {
		u = h.url(c, op, value)
	} else {
		u = tr.urls[h.pick(c, op)]
	}
	req, err := http.NewRequestWithContext(rctx, c.HTTP.Method, u, body)
	if err != nil {
		h.count("transport", nil)
		return fmt.Errorf("%w: build request: %w", ErrHTTPTransport, err)
	}
	if p.seqHead {
		req.Header = p.header(value)
	} else {
		req.Header = tr.header
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
		h.ok.Add(1)
		return nil
	case s == http.StatusTooManyRequests:
		he := &HTTPError{Status: s}
		he.RetryAfter, he.RetryAfterForm = parseRetryAfter(resp.Header.Get("Retry-After"), h.clock())
		h.count("429", he)
		return he
	case s == http.StatusServiceUnavailable:
		// A 503 may say when to come back too (RFC 9110 §10.2.3); its
		// Retry-After is honoured as a 429's, but only a 429's is counted
		// in the report's retry_after.
		he := &HTTPError{Status: s}
		he.RetryAfter, he.RetryAfterForm = parseRetryAfter(resp.Header.Get("Retry-After"), h.clock())
		h.count("5xx", nil)
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
	if n := h.ok.Load(); n > 0 {
		s.Outcomes["2xx"] = n
	}
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
