package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		form string
	}{
		{"", 0, "missing"},
		{"3", 3 * time.Second, "seconds"},
		{" 0 ", 0, "seconds"},
		{"-1", 0, "malformed"},
		{"1.5", 0, "malformed"},
		{"10000000000", math.MaxInt64 / time.Second * time.Second, "seconds"},          // 1e19 ns would wrap negative
		{"99999999999999999999", math.MaxInt64 / time.Second * time.Second, "seconds"}, // beyond int64
		{"-99999999999999999999", 0, "malformed"},
		{"soon", 0, "malformed"},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second, "date"},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, "date"},
	} {
		d, form := parseRetryAfter(tc.in, now)
		if d != tc.want || form != tc.form {
			t.Errorf("%q: %s %s, want %s %s", tc.in, d, form, tc.want, tc.form)
		}
	}
}

// TestHTTPTargetOutcomes sends one request per outcome to a test server
// and checks each error class and the counters.
func TestHTTPTargetOutcomes(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-Tenant"))
		mu.Unlock()
		switch r.URL.Path {
		case "/ok/7":
		case "/busy/7":
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/bad/7":
			w.Header().Set("Retry-After", "later")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/fail/7":
			w.WriteHeader(http.StatusBadGateway)
		case "/slow/7":
			time.Sleep(300 * time.Millisecond)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	cases := []struct{ path, class string }{
		{"/ok/{tenant}", ""}, {"/busy/{tenant}", "http_429"}, {"/bad/{tenant}", "http_429"},
		{"/fail/{tenant}", "http_5xx"}, {"/nope/{tenant}", "http_4xx"}, {"/slow/{tenant}", "http_timeout"},
	}
	yaml := "name: h\ntenants: {count: 8}\n" + externalBackend + "service: {url: \"" + srv.URL + "\"}\nconfigurations: [{name: c, mode: isolated}]\nclasses:\n"
	for i, tc := range cases {
		yaml += fmt.Sprintf("  - {name: c%d, isolation_class: interactive, rate: 1, http: {url: %q, headers: {X-Tenant: \"{tenant}\"}, timeout: 100ms}}\n", i, tc.path)
	}
	yaml += "  - {name: closed, isolation_class: heavy, rate: 1, http: {urls: [\"http://" + closed + "/x\"]}}\n"
	sc, err := scenario.Parse([]byte(yaml), "h.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ht := newHTTPTarget(sc, []string{srv.URL}, func(op workload.Op, name string) string { return "7" })
	defer ht.close()
	for i, tc := range cases {
		err := ht.do(context.Background(), &sc.Classes[i], workload.Op{Tenant: 7})
		got := ""
		if err != nil {
			got = errorClass(err)
		}
		if got != tc.class {
			t.Errorf("%s: class %q (%v), want %q", tc.path, got, err, tc.class)
		}
	}
	cl := &sc.Classes[0]
	if err := ht.do(context.Background(), &sc.Classes[len(cases)], workload.Op{Tenant: 7}); errorClass(err) != "http_transport" {
		t.Errorf("closed port: %v (%s), want transport", err, errorClass(err))
	}
	var he *HTTPError
	st := ht.stats()
	if st.Requests != 7 || st.Outcomes["2xx"] != 1 || st.Outcomes["429"] != 2 || st.Outcomes["timeout"] != 1 ||
		st.Outcomes["transport"] != 1 || st.RetryAfter["seconds"] != 1 || st.RetryAfter["malformed"] != 1 || st.RetryAfterMean != 2 {
		t.Errorf("stats %+v", st)
	}
	// A cancelled run is not the service's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ht.do(ctx, cl, workload.Op{Tenant: 7}); !errors.Is(err, context.Canceled) || errors.As(err, &he) {
		t.Errorf("cancelled: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0] != "GET /ok/7 7" {
		t.Errorf("requests seen %q", seen)
	}
}

// externalBackend is the backend a scenario with a service already
// running (service.url) needs; these tests only parse it.
const externalBackend = "backend: {kind: external, primary_dsn: \"postgres://app@127.0.0.1:1/app\"}\n"

// TestHTTPTargetRetry: a client that retries 429s sends each failed
// arrival again up to max times, fanout requests per attempt, and the
// stats say how much the retries amplified the arrivals.
func TestHTTPTargetRetry(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/flaky" && n <= 2, r.URL.Path == "/busy":
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/broken":
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	sc, err := scenario.Parse([]byte(`name: r
tenants: {count: 3}
`+externalBackend+`service: {url: "`+srv.URL+`"}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: a, isolation_class: interactive, rate: 1, http: {url: /flaky, retry: {on: ["429"], max: 3, backoff: 1ms, honour_retry_after: true}}}
  - {name: b, isolation_class: interactive, rate: 1, http: {url: /busy, retry: {on: ["429", 5xx], max: 2, backoff: 1ms, fanout: 3}}}
  - {name: c, isolation_class: interactive, rate: 1, http: {url: /broken, retry: {on: ["429"], max: 5, backoff: 1ms}}}
`), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ht := newHTTPTarget(sc, []string{srv.URL}, func(workload.Op, string) string { return "" })
	defer ht.close()
	if err := ht.do(context.Background(), &sc.Classes[0], workload.Op{Tenant: 1}); err != nil {
		t.Errorf("flaky: %v, want success on the third attempt", err)
	}
	if err := ht.do(context.Background(), &sc.Classes[1], workload.Op{Tenant: 1}); errorClass(err) != "http_429" {
		t.Errorf("busy: %v, want http_429 after its retries", err)
	}
	if err := ht.do(context.Background(), &sc.Classes[2], workload.Op{Tenant: 1}); errorClass(err) != "http_5xx" {
		t.Errorf("broken: %v, want http_5xx without retry (5xx not in on)", err)
	}
	st := ht.stats()
	// flaky 3 requests (2 retries), busy 3 attempts × 3 (2 retries), broken 1.
	if st.Arrivals != 3 || st.Requests != 13 || st.Retries != 4 || st.Amplification < 4.33 || st.Amplification > 4.34 {
		t.Errorf("stats %+v: want 3 arrivals, 13 requests, 4 retries", st)
	}
	if hits["/busy"] != 9 || hits["/broken"] != 1 {
		t.Errorf("hits %v", hits)
	}
}

// TestHTTPTargetBalance: a path goes round robin over the service's
// instances, or sticky per tenant; urls are chosen the same way.
func TestHTTPTargetBalance(t *testing.T) {
	sc, err := scenario.Parse([]byte(`name: b
tenants: {count: 5}
service: {command: [x], instances: 3}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: rr, isolation_class: interactive, rate: 1, http: {url: "/t/{tenant}"}}
  - {name: sticky, isolation_class: interactive, rate: 1, http: {url: "/t/{tenant}", balance: sticky}}
  - {name: urls, isolation_class: heavy, rate: 1, http: {urls: ["http://a/{tenant}", "http://b/{tenant}"], balance: sticky}}
`), "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ht := newHTTPTarget(sc, []string{"http://i0", "http://i1", "http://i2"}, func(op workload.Op, _ string) string {
		return fmt.Sprint(op.Tenant)
	})
	var got []string
	for i := range 4 {
		got = append(got, ht.url(&sc.Classes[0], workload.Op{Tenant: 1 + i%2}, ht.values(workload.Op{Tenant: 1 + i%2})))
	}
	if want := "http://i0/t/1 http://i1/t/2 http://i2/t/1 http://i0/t/2"; fmt.Sprint(got) != "["+want+"]" {
		t.Errorf("round robin %v, want %s", got, want)
	}
	for tenant, want := range map[int]string{1: "http://i0/t/1", 2: "http://i1/t/2", 4: "http://i0/t/4"} {
		for range 2 {
			if got := ht.url(&sc.Classes[1], workload.Op{Tenant: tenant}, ht.values(workload.Op{Tenant: tenant})); got != want {
				t.Errorf("sticky tenant %d: %s, want %s", tenant, got, want)
			}
		}
	}
	if got := ht.url(&sc.Classes[2], workload.Op{Tenant: 2}, ht.values(workload.Op{Tenant: 2})); got != "http://b/2" {
		t.Errorf("sticky urls tenant 2: %s", got)
	}
}

// TestHTTPTargetHonourRetryAfter measures the two client models of the
// retry storm against the same overload: a service that answers every
// request 429 with Retry-After: 2 for its first two seconds, then serves. Ten
// arrivals at once, three retries each. The client that ignores
// Retry-After spends its retries inside the overload (10 ms backoff,
// doubled) and fails every arrival with four requests each; the one that
// honours it retries once, after the overload, and succeeds. Honouring
// must send fewer requests and succeed more.
func TestHTTPTargetHonourRetryAfter(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: waits out a two-second overload in -short mode")
	}
	const arrivals = 10
	measure := func(honour bool) (requests int64, amplification float64, ok int) {
		var mu sync.Mutex
		var start time.Time
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if start.IsZero() {
				start = time.Now()
			}
			overloaded := time.Since(start) < 2*time.Second
			mu.Unlock()
			if overloaded {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}))
		defer srv.Close()
		sc, err := scenario.Parse([]byte(fmt.Sprintf(`name: storm
tenants: {count: 3}
%sservice: {url: %q}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: screen, isolation_class: interactive, rate: 1, http: {url: /s, retry: {on: ["429"], max: 3, backoff: 10ms, max_backoff: 5s, honour_retry_after: %v}}}
`, externalBackend, srv.URL, honour)), "storm.yaml")
		if err != nil {
			t.Fatal(err)
		}
		ht := newHTTPTarget(sc, []string{srv.URL}, func(workload.Op, string) string { return "" })
		defer ht.close()
		var wg sync.WaitGroup
		var okMu sync.Mutex
		for i := range arrivals {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := ht.do(context.Background(), &sc.Classes[0], workload.Op{Tenant: 1, Seq: int64(i)}); err == nil {
					okMu.Lock()
					ok++
					okMu.Unlock()
				}
			}()
		}
		wg.Wait()
		st := ht.stats()
		return st.Requests, st.Amplification, ok
	}
	ignReq, ignAmp, ignOK := measure(false)
	honReq, honAmp, honOK := measure(true)
	t.Logf("ignoring Retry-After: %d requests for %d arrivals (amplification %.1fx), %d succeeded", ignReq, arrivals, ignAmp, ignOK)
	t.Logf("honouring Retry-After: %d requests for %d arrivals (amplification %.1fx), %d succeeded", honReq, arrivals, honAmp, honOK)
	if ignReq != 4*arrivals || ignOK != 0 {
		t.Errorf("ignoring: %d requests, %d succeeded; want %d, 0 (every retry inside the overload)", ignReq, ignOK, 4*arrivals)
	}
	if honReq != 2*arrivals || honOK != arrivals {
		t.Errorf("honouring: %d requests, %d succeeded; want %d, %d (one retry, after the overload)", honReq, honOK, 2*arrivals, arrivals)
	}
	if honReq >= ignReq {
		t.Errorf("honouring Retry-After sent %d requests, ignoring it %d: want fewer", honReq, ignReq)
	}
}

// TestHTTPTargetMalformedRetryAfter: a client that honours Retry-After
// and gets a malformed one counts it and waits the minimum backoff (here
// 150 ms) before its retry, neither at once nor max_backoff.
func TestHTTPTargetMalformedRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		first := len(at) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "in a moment")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	sc, err := scenario.Parse([]byte(`name: m
tenants: {count: 3}
`+externalBackend+`service: {url: "`+srv.URL+`"}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: a, isolation_class: interactive, rate: 1, http: {url: /m, retry: {on: ["429"], max: 1, backoff: 150ms, max_backoff: 10s, honour_retry_after: true}}}
`), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ht := newHTTPTarget(sc, []string{srv.URL}, func(workload.Op, string) string { return "" })
	defer ht.close()
	if err := ht.do(context.Background(), &sc.Classes[0], workload.Op{Tenant: 1}); err != nil {
		t.Fatalf("%v, want success on the retry", err)
	}
	st := ht.stats()
	if st.RetryAfter["malformed"] != 1 || st.Retries != 1 || st.Requests != 2 {
		t.Errorf("stats %+v: want one malformed Retry-After, one retry", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if wait := at[1].Sub(at[0]); wait < 150*time.Millisecond || wait > 5*time.Second {
		t.Errorf("retried after %s, want the minimum backoff (150ms), not max_backoff", wait)
	}
}

// TestHTTPTargetPrepared: a tenant's parts that do not use seq are
// prepared once and reused, each tenant with its own values, while a
// part that uses seq is expanded per request.
func TestHTTPTargetPrepared(t *testing.T) {
	var seen []string // requests arrive one at a time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, fmt.Sprintf("%s %s %s %s", r.URL.Path, r.Header.Get("X-Tenant"), r.Header.Get("X-Seq"), b))
	}))
	defer srv.Close()
	sc, err := scenario.Parse([]byte(`name: p
tenants: {count: 3}
`+externalBackend+`service: {url: "`+srv.URL+`"}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: a, isolation_class: interactive, rate: 1, http: {url: "/t/{tenant}", headers: {x-tenant: "{tenant}"}}}
  - {name: b, isolation_class: interactive, rate: 1, http: {method: POST, url: "/s/{seq}", headers: {X-Seq: "{seq}", X-Tenant: "{tenant}"}, body: "b{tenant}"}}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ht := newHTTPTarget(sc, []string{srv.URL}, func(op workload.Op, name string) string {
		if name == "seq" {
			return fmt.Sprint(op.Seq)
		}
		return fmt.Sprintf("k%d", op.Tenant)
	})
	defer ht.close()
	for _, c := range []int{0, 1} {
		for _, op := range []workload.Op{{Tenant: 1, Seq: 1}, {Tenant: 2, Seq: 2}, {Tenant: 1, Seq: 3}} {
			if err := ht.do(context.Background(), &sc.Classes[c], op); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := `["/t/k1 k1  " "/t/k2 k2  " "/t/k1 k1  " "/s/1 k1 1 bk1" "/s/2 k2 2 bk2" "/s/3 k1 3 bk1"]`
	if got := fmt.Sprintf("%q", seen); got != want {
		t.Errorf("requests %s, want %s", got, want)
	}
	if st := ht.stats(); st.Outcomes["2xx"] != 6 || st.Requests != 6 {
		t.Errorf("stats %+v, want 6 requests, 6 2xx", st)
	}
}

// TestHTTPPlanDeadline: requests of one parent whose deadlines fall in
// the same grain (1% of the timeout, at most 10 ms) share a timeout
// context ending at most a grain after each one's own deadline; a later
// grain or another parent gets its own.
func TestHTTPPlanDeadline(t *testing.T) {
	p := &httpPlan{}
	parent, other := context.Background(), context.WithValue(context.Background(), struct{}{}, 1)
	now := time.Date(2026, 1, 2, 3, 4, 5, 3_000_000, time.UTC)
	const d = 5 * time.Second
	a := p.deadline(parent, d, now)
	for _, tc := range []struct {
		name   string
		parent context.Context
		at     time.Duration
		same   bool
	}{
		{"same grain", parent, 6 * time.Millisecond, true},
		{"next grain", parent, 8 * time.Millisecond, false},
		{"other parent", other, 8 * time.Millisecond, false},
	} {
		at := now.Add(tc.at)
		ctx := p.deadline(tc.parent, d, at)
		if (ctx == a) != tc.same {
			t.Errorf("%s: shared %v, want %v", tc.name, ctx == a, tc.same)
		}
		if end, _ := ctx.Deadline(); end.Before(at.Add(d)) || end.After(at.Add(d+maxTimeoutGrain)) {
			t.Errorf("%s: deadline %s after the request, want %s to %s", tc.name, end.Sub(at), d, d+maxTimeoutGrain)
		}
	}
	if end, _ := a.Deadline(); !end.Equal(now.Add(d).Truncate(maxTimeoutGrain).Add(maxTimeoutGrain)) {
		t.Errorf("first deadline %s, want the end of its grain", end)
	}
	short := p.deadline(parent, 100*time.Millisecond, now) // grain 1 ms
	if end, _ := short.Deadline(); end.Sub(now) > 101*time.Millisecond || end.Sub(now) < 100*time.Millisecond {
		t.Errorf("100ms timeout ends %s after the request", end.Sub(now))
	}
}

// TestRetryAfterFieldCaseL14 reads field case L14's Retry-After headers at
// its clock: seconds and all three HTTP date forms, a past date, huge
// numbers without overflow, and the malformed ones ignored; capped at the
// case's 30 s maximum backoff as the client caps them, no wait is above it.
func TestRetryAfterFieldCaseL14(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)
	const maxBackoff = 30 * time.Second
	for _, tc := range []struct {
		in   string
		want time.Duration // after the cap
		form string
	}{
		{"20", 20 * time.Second, "seconds"},
		{"120", 30 * time.Second, "seconds"},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 30 * time.Second, "date"},     // 60 s, capped
		{"Wednesday, 21-Oct-15 07:28:00 GMT", 30 * time.Second, "date"}, // RFC 850
		{"Wed Oct 21 07:28:00 2015", 30 * time.Second, "date"},          // asctime
		{"Wed, 21 Oct 2015 07:26:00 GMT", 0, "date"},                    // past: at once, the attempt still counts
		{"1743441608", 30 * time.Second, "seconds"},
		{"10000000000", 30 * time.Second, "seconds"},
		{"-5", 0, "malformed"},
		{"abc", 0, "malformed"},
		{"", 0, "missing"},
	} {
		d, form := parseRetryAfter(tc.in, now)
		if d < 0 || form != tc.form {
			t.Errorf("%q: %s %s, want form %s and no negative wait", tc.in, d, form, tc.form)
			continue
		}
		if got := min(d, maxBackoff); got != tc.want {
			t.Errorf("%q: waits %s, want %s", tc.in, got, tc.want)
		}
	}
	if d, _ := parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now); d != time.Minute {
		t.Errorf("the date a minute ahead reads as %s before the cap, want 1m0s", d)
	}
}

// TestRetryFieldCaseL14: field case L14 end to end through the client's
// retry loop, at the case's clock (Wed, 21 Oct 2015 07:27:00 GMT),
// minimum backoff 1 s, maximum 30 s, 3 retries, no jitter: each header on
// a 429 and on a 503 gives the case's waits, an ignored header the
// backoff 1, 2, 4 s, never a wait above 30 s; then 1,000 requests against
// a server that always answers 503 are 4,000 attempts, an amplification
// of 4.0.
func TestRetryFieldCaseL14(t *testing.T) {
	clock := time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)
	var header atomic.Pointer[string]
	var status atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := *header.Load(); h != "" {
			w.Header().Set("Retry-After", h)
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	sc, err := scenario.Parse([]byte(`name: l14
tenants: {count: 2}
`+externalBackend+`service: {url: "`+srv.URL+`"}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: a, isolation_class: interactive, rate: 1, http: {url: /x, retry: {on: ["429", 5xx], max: 3, backoff: 1s, max_backoff: 30s, jitter: none, honour_retry_after: true}}}
`), "l14.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ht := newHTTPTarget(sc, []string{srv.URL}, func(workload.Op, string) string { return "" })
	defer ht.close()
	var waits []time.Duration
	ht.now = func() time.Time { return clock }
	ht.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	s := time.Second
	for _, tc := range []struct {
		in   string
		want []time.Duration
	}{
		{"20", []time.Duration{20 * s, 20 * s, 20 * s}},
		{"120", []time.Duration{30 * s, 30 * s, 30 * s}},
		{"Wed, 21 Oct 2015 07:28:00 GMT", []time.Duration{30 * s, 30 * s, 30 * s}}, // 60 s, capped at 30 s
		{"Wednesday, 21-Oct-15 07:28:00 GMT", []time.Duration{30 * s, 30 * s, 30 * s}},
		{"Wed Oct 21 07:28:00 2015", []time.Duration{30 * s, 30 * s, 30 * s}},
		{"Wed, 21 Oct 2015 07:26:00 GMT", []time.Duration{0, 0, 0}}, // past: at once, each attempt counts
		{"1743441608", []time.Duration{30 * s, 30 * s, 30 * s}},
		{"10000000000", []time.Duration{30 * s, 30 * s, 30 * s}},
		{"-5", []time.Duration{1 * s, 2 * s, 4 * s}},
		{"abc", []time.Duration{1 * s, 2 * s, 4 * s}},
		{"", []time.Duration{1 * s, 2 * s, 4 * s}},
	} {
		for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
			header.Store(&tc.in)
			status.Store(int64(code))
			waits = nil
			before := ht.requests.Load()
			if err := ht.do(context.Background(), &sc.Classes[0], workload.Op{Tenant: 1}); err == nil {
				t.Errorf("%d %q: success, want the last attempt's error", code, tc.in)
			}
			if n := ht.requests.Load() - before; n != 4 {
				t.Errorf("%d %q: %d attempts, want 4 (the first and 3 retries)", code, tc.in, n)
			}
			if !slices.Equal(waits, tc.want) {
				t.Errorf("%d %q: waits %v, want %v", code, tc.in, waits, tc.want)
			}
			for _, w := range waits {
				if w > 30*s || w < 0 {
					t.Errorf("%d %q: a wait of %s, want within [0, 30s]", code, tc.in, w)
				}
			}
		}
	}
	// The storm: 1,000 requests, each answered 503 four times.
	storm := newHTTPTarget(sc, []string{srv.URL}, func(workload.Op, string) string { return "" })
	defer storm.close()
	storm.sleep = func(context.Context, time.Duration) error { return nil }
	empty := ""
	header.Store(&empty)
	status.Store(http.StatusServiceUnavailable)
	for i := range 1000 {
		if err := storm.do(context.Background(), &sc.Classes[0], workload.Op{Seq: int64(i), Tenant: 1}); errorClass(err) != "http_5xx" {
			t.Fatalf("request %d: %v, want http_5xx after its retries", i, err)
		}
	}
	if st := storm.stats(); st.Arrivals != 1000 || st.Requests != 4000 || st.Amplification != 4.0 {
		t.Errorf("storm: %d arrivals, %d attempts, amplification %.2f; want 1000, 4000, 4.0", st.Arrivals, st.Requests, st.Amplification)
	}
}
