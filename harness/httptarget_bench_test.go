package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

// BenchmarkHTTPClientOverhead drives a local no-op HTTP handler at 2,000
// requests/s, alternately with a bare net/http open loop and with
// noisysim's own HTTP class path (the engine's timeline source, open loop,
// executor, HTTP target and metrics recorder), in pairs of 1 s legs in the
// order bare, noisysim, noisysim, bare, … so that neither always runs first
// and a busy machine's stalls fall on both. A first pair warms the
// connections and is not counted. Latency runs from each request's intended
// start to the end of its answer's body. Reported: p50 and p99 of each over
// all counted legs (bare-p50-µs, bare-p99-µs, noisysim-p50-µs,
// noisysim-p99-µs), the ratio of these p99s (p99-ratio: noisysim ÷ bare),
// the median over the pairs of each pair's p99 ratio (p99-ratio-median:
// robust to a stall in one leg), and the connections each side opened
// (bare-conns, noisysim-conns).
//
// Run: go test -run '^$' -bench HTTPClientOverhead -benchtime 1x ./harness/
func BenchmarkHTTPClientOverhead(b *testing.B) {
	const (
		rate   = 2000
		length = time.Second
		rounds = 8 // counted pairs of legs, after the warm-up pair
	)
	var conns [2]atomic.Int64 // new connections: bare, noisysim
	var side atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns[side.Load()].Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	sc, err := scenario.Parse([]byte(fmt.Sprintf(`name: overhead
seed: 1
tenants: {count: 10}
backend: {kind: external, primary_dsn: "postgres://app@127.0.0.1:1/app"}  # only parsed: no database is used
service: {url: %q}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: noop, isolation_class: interactive, rate: %d, arrival: constant, http: {url: "/noop/{tenant}", headers: {X-Tenant: "{tenant}"}, timeout: 5s}}
phases: {drain: 1s}
timeline: [{name: run, length: %s}]
assertions: {quiet_p99: {window: run, baseline: run}}
`, srv.URL, rate, length)), "overhead.yaml")
	if err != nil {
		b.Fatal(err)
	}
	r := &runner{sc: sc, log: slog.New(slog.DiscardHandler)}
	if err := r.plan(); err != nil {
		b.Fatal(err)
	}

	bare := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer bare.CloseIdleConnections()
	ht := newHTTPTarget(sc, []string{srv.URL}, r.httpVar)
	defer ht.close()
	ex := &executor{r: r, stack: &stack{http: ht}}

	for b.Loop() {
		hBare, hSim := newLatencyHist(), newLatencyHist()
		var ratios []float64
		for round := range rounds + 1 {
			if round == 1 {
				conns[0].Store(0)
				conns[1].Store(0)
			}
			pBare, pSim := newLatencyHist(), newLatencyHist()
			for i := range 2 {
				if (i == 0) == (round%2 == 0) {
					side.Store(0)
					bareOpenLoop(b, bare, srv.URL+"/noop/7", rate, length, pBare)
				} else {
					side.Store(1)
					simOpenLoop(b, r, ex, pSim)
				}
			}
			if round > 0 {
				hBare.Merge(pBare)
				hSim.Merge(pSim)
				ratios = append(ratios, float64(pSim.ValueAtQuantile(99))/float64(max(pBare.ValueAtQuantile(99), 1)))
			}
		}
		slices.Sort(ratios)
		b.ReportMetric(float64(hBare.ValueAtQuantile(50)), "bare-p50-µs")
		b.ReportMetric(float64(hBare.ValueAtQuantile(99)), "bare-p99-µs")
		b.ReportMetric(float64(hSim.ValueAtQuantile(50)), "noisysim-p50-µs")
		b.ReportMetric(float64(hSim.ValueAtQuantile(99)), "noisysim-p99-µs")
		b.ReportMetric(float64(hSim.ValueAtQuantile(99))/float64(max(hBare.ValueAtQuantile(99), 1)), "p99-ratio")
		b.ReportMetric((ratios[(len(ratios)-1)/2]+ratios[len(ratios)/2])/2, "p99-ratio-median")
		b.ReportMetric(float64(conns[0].Load()), "bare-conns")
		b.ReportMetric(float64(conns[1].Load()), "noisysim-conns")
	}
	if st := ht.stats(); st.Outcomes["2xx"] != st.Requests {
		b.Fatalf("noisysim's requests: %+v, want every one 2xx", st)
	}
}

// newLatencyHist returns a histogram of latencies in µs, 1 µs to 10 s.
func newLatencyHist() *hdr.Histogram { return hdr.New(1, int64(10*time.Second/time.Microsecond), 3) }

// bareOpenLoop sends GET url at rate for length with a plain net/http
// client, a goroutine per request at its intended start, and records each
// latency from the intended start into h.
func bareOpenLoop(b *testing.B, client *http.Client, url string, rate int, length time.Duration, h *hdr.Histogram) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	n := int(float64(rate) * length.Seconds())
	start := time.Now()
	for i := range n {
		intended := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(intended); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("X-Tenant", "7")
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				errs.Add(1)
			}
			lat := time.Since(intended)
			mu.Lock()
			h.RecordValue(max(lat.Microseconds(), 1))
			mu.Unlock()
		})
	}
	wg.Wait()
	if errs.Load() > 0 {
		b.Fatalf("bare loop: %d of %d requests failed", errs.Load(), n)
	}
}

// simOpenLoop runs r's timeline through the open loop and ex as the
// engine does (runTimeline), and records each latency into h.
func simOpenLoop(b *testing.B, r *runner, ex *executor, h *hdr.Histogram) {
	rec, err := metrics.New(metrics.Config{Classify: errorClass})
	if err != nil {
		b.Fatal(err)
	}
	src, err := newTimelineSource(r.pop, r.steps, r.sc.Seed, workload.Segment{})
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var failed atomic.Int64
	record := workload.RecorderFunc(func(res workload.Result) {
		rec.Record(res)
		if res.Err != nil {
			failed.Add(1)
		}
		mu.Lock()
		h.RecordValue(max(res.Latency().Microseconds(), 1))
		mu.Unlock()
	})
	st, err := workload.RunOpenLoopSource(context.Background(), src, ex.do, record,
		workload.OpenLoopConfig{Drain: r.sc.Phases.Drain.Duration(), Logger: r.log})
	if err != nil || failed.Load() > 0 || st.Issued != src.Len() {
		b.Fatalf("noisysim loop: %v, %d failed, %d of %d issued", err, failed.Load(), st.Issued, src.Len())
	}
}
