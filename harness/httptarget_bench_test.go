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
// executor, HTTP target and metrics recorder), in rounds of two short legs,
// one a side, in the order bare, noisysim, noisysim, bare, … so that
// neither always runs first and a busy machine's stalls fall on both. Both
// sides are alike in all but noisysim's own code: the same intended starts
// (noisysim's schedule), the same pacing (a Go timer, then the engine's
// PreciseWait in nanosleep), an arrival never waiting for an earlier one
// and run on an idle goroutine when there is one, else a new one (the open
// loop's way, which the bare loop copies), a transport with the same
// settings (a clone of the target's: keep-alive, idle pool) but its own
// connections, and a garbage collection before each leg so that neither
// pays for the other's garbage. A first round warms the connections and is
// not counted. Latency runs from each request's intended start to the end
// of its answer's body.
//
// The figures to judge are p99-ratio and mean-ratio: the medians over the
// counted rounds of noisysim ÷ bare of the round's two legs' p99s and means
// (a stall hits one round, not the median). Beside them, over all counted
// legs pooled: each side's p50, p99 and mean in µs (bare-p50-µs, …), the
// pooled ratios (pooled-p99-ratio, pooled-mean-ratio), the TCP connections
// each side opened after the warm-up, counted by the server's ConnState hook
// (bare-conns, noisysim-conns), and per request the process's CPU time
// (client and handler, user and system: bare-cpu-µs/req, …) and heap
// allocations (bare-allocs/req, …), which a busy machine's stalls blur
// less than latencies.
//
// Run: go test -run '^$' -bench HTTPClientOverhead -benchtime 1x -count 5 ./harness/
func BenchmarkHTTPClientOverhead(b *testing.B) {
	const (
		rate   = 2000
		leg    = 250 * time.Millisecond
		rounds = 40 // counted rounds, after the warm-up one: 20,000 requests a side
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

	r, ht, ex, ops := overheadSetup(b, srv.URL, rate, leg)
	defer ht.close()
	bare := &http.Client{Transport: ht.client.Transport.(*http.Transport).Clone()}
	defer bare.CloseIdleConnections()

	for b.Loop() {
		var (
			pooled, legs [2]sideHist // bare, noisysim: all counted legs, this leg
			cpu          [2]time.Duration
			allocs       [2]uint64
			p99s, means  []float64 // noisysim ÷ bare per counted round
		)
		for i := range 2 {
			pooled[i].Histogram, legs[i].Histogram = newLatencyHist(), newLatencyHist()
		}
		var ms runtime.MemStats
		for round := range rounds + 1 {
			for i := range 2 {
				s := int32(i)
				if round%2 == 1 {
					s = 1 - s
				}
				runtime.GC()
				side.Store(s)
				legs[s].Reset()
				runtime.ReadMemStats(&ms)
				mallocs, cpu0 := ms.Mallocs, processCPU()
				if s == 0 {
					bareOpenLoop(b, bare, srv.URL, ops, &legs[0])
				} else {
					simOpenLoop(b, r, ex, &legs[1])
				}
				runtime.ReadMemStats(&ms)
				cpu[s] += processCPU() - cpu0
				allocs[s] += ms.Mallocs - mallocs
			}
			if round == 0 { // the warm-up round
				conns[0].Store(0)
				conns[1].Store(0)
				cpu, allocs = [2]time.Duration{}, [2]uint64{}
				continue
			}
			p99s = append(p99s, p99Ratio(legs[1].Histogram, legs[0].Histogram))
			means = append(means, legs[1].Mean()/legs[0].Mean())
			pooled[0].Merge(legs[0].Histogram)
			pooled[1].Merge(legs[1].Histogram)
		}
		n := float64(rounds * len(ops))
		for i, name := range []string{"bare", "noisysim"} {
			b.ReportMetric(float64(pooled[i].ValueAtQuantile(50)), name+"-p50-µs")
			b.ReportMetric(float64(pooled[i].ValueAtQuantile(99)), name+"-p99-µs")
			b.ReportMetric(pooled[i].Mean(), name+"-mean-µs")
			b.ReportMetric(float64(conns[i].Load()), name+"-conns")
			b.ReportMetric(float64(cpu[i].Microseconds())/n, name+"-cpu-µs/req")
			b.ReportMetric(float64(allocs[i])/n, name+"-allocs/req")
		}
		b.ReportMetric(median(p99s), "p99-ratio")
		b.ReportMetric(median(means), "mean-ratio")
		b.ReportMetric(p99Ratio(pooled[1].Histogram, pooled[0].Histogram), "pooled-p99-ratio")
		b.ReportMetric(pooled[1].Mean()/pooled[0].Mean(), "pooled-mean-ratio")
	}
	if st := ht.stats(); st.Outcomes["2xx"] != st.Requests {
		b.Fatalf("noisysim's requests: %+v, want every one 2xx", st)
	}
}

// p99Ratio returns sim's p99 ÷ bare's.
func p99Ratio(sim, bare *hdr.Histogram) float64 {
	return float64(sim.ValueAtQuantile(99)) / float64(max(bare.ValueAtQuantile(99), 1))
}

// overheadSetup returns a runner planned for an HTTP class of rate
// requests/s to GET base/noop/{tenant} with an X-Tenant header over one
// timeline step of length leg (10 tenants), its HTTP target and executor,
// and the ops of its schedule. The class's timeout is 60 s: the bare loop
// sets none, and a stall of a busy machine must not fail the run.
func overheadSetup(b *testing.B, base string, rate int, leg time.Duration) (*runner, *httpTarget, *executor, []workload.Op) {
	b.Helper()
	sc, err := scenario.Parse([]byte(fmt.Sprintf(`name: overhead
seed: 1
tenants: {count: 10}
backend: {kind: external, primary_dsn: "postgres://app@127.0.0.1:1/app"}  # only parsed: no database is used
service: {url: %q}
configurations: [{name: c, mode: isolated}]
classes:
  - {name: noop, isolation_class: interactive, rate: %d, arrival: constant, http: {url: "/noop/{tenant}", headers: {X-Tenant: "{tenant}"}, timeout: 60s}}
phases: {drain: 1s}
timeline: [{name: run, length: %s}]
assertions: {quiet_p99: {window: run, baseline: run}}
`, base, rate, leg)), "overhead.yaml")
	if err != nil {
		b.Fatal(err)
	}
	r := &runner{sc: sc, log: slog.New(slog.DiscardHandler)}
	if err := r.plan(); err != nil {
		b.Fatal(err)
	}

	ht := newHTTPTarget(sc, []string{base}, r.httpVar)
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

	return r, ht, ex, ops
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
// X-Tenant header) with a plain net/http client at their intended starts
// (paceUntil), each on an idle goroutine if one waits, else on a new one (as
// the open loop does), and records each latency from the intended start
// into h.
func bareOpenLoop(b *testing.B, client *http.Client, base string, ops []workload.Op, h *sideHist) {
	type arrival struct {
		tenant   int
		intended time.Time
	}
	var (
		wg   sync.WaitGroup
		errs atomic.Int64
		idle = make(chan arrival)
	)
	send := func(a arrival) {
		tenant := strconv.Itoa(a.tenant)
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
		h.record(time.Since(a.intended))
		wg.Done()
	}
	start := time.Now()
	for _, op := range ops {
		a := arrival{op.Tenant, start.Add(op.At)}
		paceUntil(a.intended)
		wg.Add(1)
		select {
		case idle <- a:
		default:
			go func() {
				for ok := true; ok; a, ok = <-idle {
					send(a)
				}
			}()
		}
	}
	wg.Wait()
	close(idle)
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
		b.Fatalf("noisysim loop: %v, %d failed (%v), %d of %d issued", err, failed.Load(), ex.stack.http.stats().Outcomes, st.Issued, src.Len())
	}
}

// BenchmarkHTTPRequestPath measures the CPU and allocations of one
// request's path without a network: bare builds a request as a bare
// net/http loop does and sends it through a client, noisysim runs an
// arrival of an HTTP class through the executor and HTTP target and
// records its result as the engine does. Both clients have the same
// RoundTripper, which answers 200 with an empty body at once, so ns/op and
// allocs/op are the per-request work on each side, and their difference
// noisysim's overhead.
//
// Run: go test -run '^$' -bench HTTPRequestPath -benchmem ./harness/
func BenchmarkHTTPRequestPath(b *testing.B) {
	const base = "http://127.0.0.1:1"
	rt := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})
	b.Run("bare", func(b *testing.B) {
		client := &http.Client{Transport: rt}
		n := 0
		for b.Loop() {
			n = n%10 + 1
			tenant := strconv.Itoa(n)
			req, _ := http.NewRequest(http.MethodGet, base+"/noop/"+tenant, nil)
			req.Header.Set("X-Tenant", tenant)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("noisysim", func(b *testing.B) {
		_, ht, ex, ops := overheadSetup(b, base, 2000, 250*time.Millisecond)
		ht.client.Transport = rt
		rec, err := metrics.New(metrics.Config{Classify: errorClass})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background()) // as the open loop's ops' context
		defer cancel()
		start, i := time.Now(), 0
		for b.Loop() {
			op := ops[i%len(ops)]
			i++
			s := time.Now()
			err := ex.do(ctx, op)
			rec.Record(workload.Result{Op: op, Intended: start.Add(op.At), Start: s, End: time.Now(), Err: err})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// roundTripFunc is a RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
