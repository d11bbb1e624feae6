package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
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
// executor, HTTP target and metrics recorder), in pairs of short legs in the
// order bare, noisysim, noisysim, bare, … so that neither always runs first
// and a busy machine's stalls fall on both. Both sides are alike in all but
// noisysim's own code: the same intended starts (noisysim's schedule), the
// same pacing (a Go timer, then the engine's PreciseWait in nanosleep), an
// arrival never waiting for an earlier one (a goroutine per request in the
// bare loop; the open loop's, which reuses an idle one), a transport with the same settings (a clone of the target's: keep-alive,
// idle pool) but its own connections, and a garbage collection before each
// leg so that neither pays for the other's garbage. A first pair warms the
// connections and is not counted. Latency runs from each request's
// intended start to the end of its answer's body.
//
// Reported over all counted legs: each side's p50, p99 and mean in µs
// (bare-p50-µs, …, noisysim-mean-µs), the ratios noisysim ÷ bare of the
// p99s and of the means (p99-ratio, mean-ratio), the TCP connections each
// side opened after the warm-up, counted by the server's ConnState hook
// (bare-conns, noisysim-conns), and per request the process's CPU time
// (client and handler, user and system: bare-cpu-µs/req, …) and heap
// allocations (bare-allocs/req, …), which a busy machine's stalls blur
// less than latencies.
//
// Run: go test -run '^$' -bench HTTPClientOverhead -benchtime 1x -count 5 ./harness/
func BenchmarkHTTPClientOverhead(b *testing.B) {
	const (
		rate  = 2000
		leg   = 250 * time.Millisecond
		pairs = 40 // counted pairs of legs, after the warm-up pair: 20,000 requests a side
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
`, srv.URL, rate, leg)), "overhead.yaml")
	if err != nil {
		b.Fatal(err)
	}
	r := &runner{sc: sc, log: slog.New(slog.DiscardHandler)}
	if err := r.plan(); err != nil {
		b.Fatal(err)
	}

	ht := newHTTPTarget(sc, []string{srv.URL}, r.httpVar)
	defer ht.close()
	bare := &http.Client{Transport: ht.client.Transport.(*http.Transport).Clone()}
	defer bare.CloseIdleConnections()
	ex := &executor{r: r, stack: &stack{http: ht}}
	// The bare loop sends at the same intended starts as noisysim's
	// schedule (its tenants' streams merged: not evenly spaced).
	src, err := newTimelineSource(r.pop, r.steps, r.sc.Seed, workload.Segment{})
	if err != nil {
		b.Fatal(err)
	}
	var ops []workload.Op
	for op, ok := src.Next(); ok; op, ok = src.Next() {
		ops = append(ops, op)
	}

	for b.Loop() {
		var (
			h      [2]sideHist // bare, noisysim
			cpu    [2]time.Duration
			allocs [2]uint64
		)
		h[0].Histogram, h[1].Histogram = newLatencyHist(), newLatencyHist()
		var ms runtime.MemStats
		for pair := range pairs + 1 {
			for i := range 2 {
				s := int32(i)
				if pair%2 == 1 {
					s = 1 - s
				}
				runtime.GC()
				side.Store(s)
				runtime.ReadMemStats(&ms)
				mallocs, cpu0 := ms.Mallocs, processCPU()
				if s == 0 {
					bareOpenLoop(b, bare, srv.URL, ops, &h[0])
				} else {
					simOpenLoop(b, r, ex, &h[1])
				}
				runtime.ReadMemStats(&ms)
				cpu[s] += processCPU() - cpu0
				allocs[s] += ms.Mallocs - mallocs
			}
			if pair == 0 { // the warm-up pair
				conns[0].Store(0)
				conns[1].Store(0)
				h[0].Reset()
				h[1].Reset()
				cpu, allocs = [2]time.Duration{}, [2]uint64{}
			}
		}
		n := float64(pairs * len(ops))
		for i, name := range []string{"bare", "noisysim"} {
			b.ReportMetric(float64(h[i].ValueAtQuantile(50)), name+"-p50-µs")
			b.ReportMetric(float64(h[i].ValueAtQuantile(99)), name+"-p99-µs")
			b.ReportMetric(h[i].Mean(), name+"-mean-µs")
			b.ReportMetric(float64(conns[i].Load()), name+"-conns")
			b.ReportMetric(float64(cpu[i].Microseconds())/n, name+"-cpu-µs/req")
			b.ReportMetric(float64(allocs[i])/n, name+"-allocs/req")
		}
		b.ReportMetric(float64(h[1].ValueAtQuantile(99))/float64(max(h[0].ValueAtQuantile(99), 1)), "p99-ratio")
		b.ReportMetric(h[1].Mean()/h[0].Mean(), "mean-ratio")
	}
	if st := ht.stats(); st.Outcomes["2xx"] != st.Requests {
		b.Fatalf("noisysim's requests: %+v, want every one 2xx", st)
	}
}

// sideHist is one side's latencies, recorded from many goroutines.
type sideHist struct {
	mu sync.Mutex
	*hdr.Histogram
}

func (h *sideHist) record(d time.Duration) {
	h.mu.Lock()
	h.RecordValue(max(d.Microseconds(), 1))
	h.mu.Unlock()
}

// paceUntil returns at t, paced as the engine's open loop paces an
// arrival: a Go timer until preciseWait before t, then a kernel sleep.
func paceUntil(t time.Time) {
	if d := time.Until(t) - preciseWait; d > 0 {
		time.Sleep(d)
	}
	if d := time.Until(t); d > 0 {
		kernelSleep(d)
	}
}

// newLatencyHist returns a histogram of latencies in µs, 1 µs to 10 s.
func newLatencyHist() *hdr.Histogram { return hdr.New(1, int64(10*time.Second/time.Microsecond), 3) }

// bareOpenLoop sends the requests of ops (the schedule noisysim's side
// runs: op i due at At from the start, GET base/noop/<tenant> with an
// X-Tenant header) with a plain net/http client, a goroutine per request at
// its intended start (paceUntil), and records each latency from the
// intended start into h.
func bareOpenLoop(b *testing.B, client *http.Client, base string, ops []workload.Op, h *sideHist) {
	var (
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	start := time.Now()
	for _, op := range ops {
		intended := start.Add(op.At)
		paceUntil(intended)
		wg.Go(func() {
			tenant := strconv.Itoa(op.Tenant)
			req, _ := http.NewRequest(http.MethodGet, base+"/noop/"+tenant, nil)
			req.Header.Set("X-Tenant", tenant)
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				errs.Add(1)
			}
			h.record(time.Since(intended))
		})
	}
	wg.Wait()
	if errs.Load() > 0 {
		b.Fatalf("bare loop: %d of %d requests failed", errs.Load(), len(ops))
	}
}

// simOpenLoop runs r's timeline through the open loop and ex as the
// engine does (runTimeline, with its PreciseWait), and records each
// latency into h.
func simOpenLoop(b *testing.B, r *runner, ex *executor, h *sideHist) {
	rec, err := metrics.New(metrics.Config{Classify: errorClass})
	if err != nil {
		b.Fatal(err)
	}
	src, err := newTimelineSource(r.pop, r.steps, r.sc.Seed, workload.Segment{})
	if err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	record := workload.RecorderFunc(func(res workload.Result) {
		rec.Record(res)
		if res.Err != nil {
			failed.Add(1)
		}
		h.record(res.Latency())
	})
	st, err := workload.RunOpenLoopSource(context.Background(), src, ex.do, record,
		workload.OpenLoopConfig{Drain: r.sc.Phases.Drain.Duration(), Logger: r.log, PreciseWait: preciseWait})
	if err != nil || failed.Load() > 0 || st.Issued != src.Len() {
		b.Fatalf("noisysim loop: %v, %d failed, %d of %d issued", err, failed.Load(), st.Issued, src.Len())
	}
}
