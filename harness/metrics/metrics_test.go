package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRecorder(t testing.TB, cfg metrics.Config) *metrics.Recorder {
	t.Helper()
	r, err := metrics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// result builds a Result of an op intended at at (from t0) that started
// after wait and took service.
func result(tenant int, class string, at, wait, service time.Duration, err error) workload.Result {
	intended := t0.Add(at)
	return workload.Result{
		Op:       workload.Op{Tenant: tenant, Class: class, At: at},
		Intended: intended, Start: intended.Add(wait), End: intended.Add(wait + service), Err: err,
	}
}

// within reports whether got is within the histogram's 0.1% resolution of want.
func within(got, want time.Duration) bool {
	d := got - want
	return d >= -want/1000-time.Microsecond && d <= want/1000+time.Microsecond
}

// TestL8ThroughHistogram is field case L8 measured through the recorder:
// 20 requests at 1 per ms, one worker, request 0 takes 10 ms (fake clock).
// The histogram must hold exactly 20 response times (29 or 65 would be a
// double correction), 10 of them ≥ 1 ms (1 would be no correction), max
// 10 ms and mean 2.75 ms.
func TestL8ThroughHistogram(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := workload.Schedule{Duration: 20 * time.Millisecond}
		for i := range 20 {
			s.Ops = append(s.Ops, workload.Op{Seq: int64(i), Tenant: 1, Class: "c", At: time.Duration(i) * time.Millisecond})
		}
		exec := func(_ context.Context, op workload.Op) error {
			if op.Seq == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			return nil
		}
		rec := newRecorder(t, metrics.Config{})
		if _, err := workload.RunOpenLoop(t.Context(), s, exec, rec, workload.OpenLoopConfig{Workers: 1}); err != nil {
			t.Fatal(err)
		}
		sums := rec.Summary()
		if len(sums) != 1 {
			t.Fatalf("%d summaries, want 1", len(sums))
		}
		got := sums[0]
		if got.Count != 20 || got.Max != 10*time.Millisecond || got.Mean != 2750*time.Microsecond {
			t.Errorf("count %d, max %v, mean %v; want 20, 10ms, 2.75ms", got.Count, got.Max, got.Mean)
		}
		h := rec.LatencyHistogram(metrics.Key{Tenant: 1, Class: "c"})
		var atLeast1ms, total int64
		for v, n := range h.ForEachBucket {
			total += n
			if time.Duration(v) >= 999*time.Microsecond { // the 1 ms bucket's lowest value
				atLeast1ms += n
			}
		}
		if total != 20 || atLeast1ms != 10 {
			t.Errorf("histogram holds %d values, %d ≥ 1 ms; want 20 and 10", total, atLeast1ms)
		}
		if !within(time.Duration(h.Max()), 10*time.Millisecond) || !within(time.Duration(h.Mean()), 2750*time.Microsecond) {
			t.Errorf("histogram max %v, mean %v; want 10ms and 2.75ms within 0.1%%", time.Duration(h.Max()), time.Duration(h.Mean()))
		}
		if !within(got.P99, 10*time.Millisecond) || !within(got.P50, time.Microsecond) {
			t.Errorf("p50 %v, p99 %v; want 0 (clamped to 1µs) and 10ms", got.P50, got.P99)
		}
		if got.Clamped != 0 {
			t.Errorf("clamped %d, want 0: raising 0 to Lowest is not a clamp worth counting", got.Clamped)
		}
	})
}

func TestRecorderOutcomes(t *testing.T) {
	rejected := errors.New("rejected")
	classify := func(err error) string {
		if errors.Is(err, rejected) {
			return "rejected"
		}
		return "other"
	}
	rec := newRecorder(t, metrics.Config{Classify: classify})
	ms := time.Millisecond
	incomplete := fmt.Errorf("run op: %w: %w", workload.ErrIncomplete, context.Canceled)
	for _, r := range []workload.Result{
		result(2, "heavy", 0, 0, 4*ms, nil),
		result(1, "interactive", 0, 1*ms, 2*ms, nil),
		result(1, "interactive", 0, 0, 1*ms, rejected),
		result(1, "interactive", 0, 0, 1*ms, rejected),
		result(1, "interactive", 0, 0, 1*ms, errors.New("boom")),
		{Op: workload.Op{Tenant: 1, Class: "interactive"}, Intended: t0, End: t0, Err: workload.ErrDropped},
		{Op: workload.Op{Tenant: 1, Class: "interactive"}, Intended: t0, End: t0.Add(900 * ms), Err: incomplete}, // queued, never started
		result(1, "interactive", 0, 100*ms, 700*ms, incomplete),                                                  // running when given up on
	} {
		rec.Record(r)
	}
	got := rec.Summary()
	if len(got) != 2 || got[0].Tenant != 1 || got[1].Tenant != 2 {
		t.Fatalf("summaries %+v, want tenant 1 then tenant 2", got)
	}
	one := got[0]
	want := metrics.Summary{Tenant: 1, Class: "interactive", Count: 6, Errors: 3,
		ErrorsByClass: map[string]int64{"rejected": 2, "other": 1}, Dropped: 1, Incomplete: 2,
		Max: 900 * ms, Mean: (3*ms + 3*ms + 900*ms + 800*ms) / 6, ServiceMax: 700 * ms, SigFigs: 3}
	// Six samples: the p99's interval has no upper bound (Hi is the
	// largest sample), its lower bound is the 5th sample.
	if ci := one.P99CI; ci.HiBounded || !ci.LoBounded || ci.LoRank != 5 || ci.Hi != 900*ms || !within(ci.Lo, 800*ms) {
		t.Errorf("p99 interval of 6 samples = %+v, want X(5) ≈ 800ms and no upper bound", ci)
	}
	// The spectrum: a value per percentile, rising, capped at the max.
	if sp := one.Spectrum; len(sp) != len(metrics.SpectrumPercentiles) || !slices.IsSorted(sp) || sp[len(sp)-1] != 900*ms || !within(sp[0], 1*ms) {
		t.Errorf("spectrum %v, want %d values rising from about 1ms to 900ms", sp, len(metrics.SpectrumPercentiles))
	}
	one.Spectrum = nil
	one.P99CI = metrics.QuantileCI{}
	one.P50, one.P90, one.P99, one.P999, one.ServiceP50, one.ServiceP99 = 0, 0, 0, 0, 0, 0
	if !reflect.DeepEqual(one, want) {
		t.Errorf("tenant 1:\n got %+v\nwant %+v", one, want)
	}
	if !within(got[0].P99, 900*ms) || !within(got[0].ServiceP99, 700*ms) {
		t.Errorf("p99 %v, service p99 %v; want the incomplete ops' 900ms and 700ms", got[0].P99, got[0].ServiceP99)
	}
	if tot := rec.Totals(); tot != (metrics.Totals{Recorded: 8, Errors: 3, Dropped: 1, Incomplete: 2}) {
		t.Errorf("totals %+v", tot)
	}
	nilClassify := newRecorder(t, metrics.Config{})
	nilClassify.Record(result(1, "c", 0, 0, ms, rejected))
	if by := nilClassify.Summary()[0].ErrorsByClass; !reflect.DeepEqual(by, map[string]int64{metrics.DefaultErrorClass: 1}) {
		t.Errorf("without Classify, errors by class %v", by)
	}
}

func TestRecorderClamps(t *testing.T) {
	rec := newRecorder(t, metrics.Config{Lowest: time.Millisecond, Highest: time.Second})
	rec.Record(result(1, "c", 0, 0, 3*time.Second, nil))
	rec.Record(result(1, "c", 0, 0, 10*time.Microsecond, nil))
	rec.Record(result(1, "c", 0, 0, 500*time.Millisecond, nil))
	s := rec.Summary()[0]
	if s.Clamped != 2 { // latency and service of the 3 s op
		t.Errorf("clamped %d, want 2", s.Clamped)
	}
	if !within(s.P999, time.Second) || s.Max != 3*time.Second {
		t.Errorf("p99.9 %v (want clamped to 1s), max %v (want the exact 3s)", s.P999, s.Max)
	}
}

func TestRecorderWarmup(t *testing.T) {
	rec := newRecorder(t, metrics.Config{Warmup: 10 * time.Second})
	for i := range 20 {
		rec.Record(result(1, "c", time.Duration(i)*time.Second, 0, time.Millisecond, nil))
	}
	if c := rec.Summary()[0].Count; c != 10 {
		t.Errorf("kept %d results, want the 10 intended at or after 10 s", c)
	}
	if d := rec.Totals().Discarded; d != 10 {
		t.Errorf("discarded %d, want 10", d)
	}
}

// TestMergedMergesHistograms: percentiles of a merge come from the merged
// histogram, not from averaging the keys' percentiles.
func TestMergedMergesHistograms(t *testing.T) {
	rec := newRecorder(t, metrics.Config{})
	for range 100 {
		rec.Record(result(2, "interactive", 0, 0, time.Millisecond, nil))
		rec.Record(result(3, "interactive", 0, 0, 50*time.Millisecond, nil))
		rec.Record(result(1, "interactive", 0, 0, time.Second, nil))
	}
	quiet := rec.Merged(func(tenant int, _ string) bool { return tenant != 1 })
	if quiet.Count != 200 || !within(quiet.P50, time.Millisecond) || !within(quiet.P99, 50*time.Millisecond) || quiet.Max != 50*time.Millisecond {
		t.Errorf("quiet merge: count %d p50 %v p99 %v max %v; want 200, 1ms, 50ms, 50ms", quiet.Count, quiet.P50, quiet.P99, quiet.Max)
	}
	if quiet.Tenant != 0 || quiet.Class != "" {
		t.Errorf("merged key %d/%q, want 0/\"\"", quiet.Tenant, quiet.Class)
	}
	if all := rec.Merged(nil); all.Count != 300 {
		t.Errorf("merge of all: count %d, want 300", all.Count)
	}
	// Merging must not change the keys' own histograms.
	if s := rec.Summary(); s[1].Count != 100 || !within(s[1].P99, time.Millisecond) {
		t.Errorf("tenant 2 after merge: %+v", s[1])
	}
	if none := rec.Merged(func(int, string) bool { return false }); none.Count != 0 {
		t.Errorf("empty merge: %+v", none)
	}
}

func TestIntervals(t *testing.T) {
	rec := newRecorder(t, metrics.Config{Interval: time.Second})
	ms := time.Millisecond
	// (tenant, at, latency): ends at 0.5 s, 1.5 s, 1.7 s, 3.2 s for tenant 2;
	// 1.1 s, 1.2 s for tenant 3.
	for _, r := range []struct {
		tenant  int
		at, lat time.Duration
	}{
		{2, 400 * ms, 100 * ms}, {2, 1400 * ms, 100 * ms}, {2, 1000 * ms, 700 * ms}, {2, 3000 * ms, 200 * ms},
		{3, 1000 * ms, 100 * ms}, {3, 1100 * ms, 100 * ms},
	} {
		rec.Record(result(r.tenant, "c", r.at, 0, r.lat, nil))
	}
	rec.Record(workload.Result{Op: workload.Op{Tenant: 2, Class: "c", At: 3100 * ms}, Intended: t0.Add(3100 * ms), End: t0.Add(3100 * ms), Err: workload.ErrDropped})
	type row struct {
		tick         int64
		tenant       int
		count, drops int64
		max          time.Duration
	}
	var got []row
	for _, iv := range rec.Intervals() {
		got = append(got, row{iv.Tick, iv.Tenant, iv.Count, iv.Dropped, iv.Max})
		if iv.Start != time.Duration(iv.Tick)*time.Second {
			t.Errorf("tick %d starts at %v", iv.Tick, iv.Start)
		}
	}
	want := []row{{0, 2, 1, 0, 100 * ms}, {1, 2, 2, 0, 700 * ms}, {1, 3, 2, 0, 100 * ms}, {3, 2, 1, 1, 200 * ms}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("intervals\n got %v\nwant %v", got, want)
	}
	merged := rec.MergedIntervals(nil)
	if len(merged) != 3 || merged[1].Tick != 1 || merged[1].Count != 4 || merged[1].Max != 700*ms || !within(merged[1].P99, 700*ms) || !within(merged[1].P50, 100*ms) {
		t.Errorf("merged intervals %+v", merged)
	}
	// Calling Intervals again gives the same (the open interval is copied, not closed).
	if again := rec.Intervals(); len(again) != len(want) {
		t.Errorf("second call: %d snapshots", len(again))
	}
	none := newRecorder(t, metrics.Config{Interval: -1})
	none.Record(result(1, "c", 0, 0, ms, nil))
	if iv := none.Intervals(); len(iv) != 0 {
		t.Errorf("Interval < 0 still kept %d snapshots", len(iv))
	}
}

func TestRecorderConcurrent(t *testing.T) {
	rec := newRecorder(t, metrics.Config{Interval: 10 * time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 0))
			for i := range 5000 {
				at := time.Duration(i) * 100 * time.Microsecond
				rec.Record(result(1+rnd.IntN(10), []string{"a", "b"}[rnd.IntN(2)], at, 0, time.Duration(1+rnd.IntN(1000))*time.Microsecond, nil))
				if i%1000 == 0 {
					rec.Summary()
					rec.Intervals()
				}
			}
		})
	}
	wg.Wait()
	var total, inIntervals int64
	for _, s := range rec.Summary() {
		total += s.Count
	}
	for _, iv := range rec.Intervals() {
		inIntervals += iv.Count
	}
	if total != 40000 || inIntervals != 40000 || rec.Merged(nil).Count != 40000 {
		t.Errorf("summaries hold %d, intervals %d, want 40000 each", total, inIntervals)
	}
}

func TestNewErrors(t *testing.T) {
	for _, cfg := range []metrics.Config{
		{Lowest: -1},
		{Lowest: time.Second, Highest: time.Second},
		{SigFigs: 6},
		{SigFigs: -1},
		{Warmup: -time.Second},
	} {
		if _, err := metrics.New(cfg); !errors.Is(err, metrics.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
	rec := newRecorder(t, metrics.Config{})
	if c := rec.Config(); c.Lowest != metrics.DefaultLowest || c.Highest != metrics.DefaultHighest || c.SigFigs != 3 || c.Interval != time.Second {
		t.Errorf("defaults %+v", c)
	}
}

// TestPercentilesNeverAboveMax: a histogram percentile is its bucket's
// highest equivalent value, which may lie above the exact maximum (a report
// showing p99 7.7537 ms beside max 7.7509 ms). Percentiles are capped at the
// exact maximum, in summaries, merges and intervals.
func TestPercentilesNeverAboveMax(t *testing.T) {
	rec := newRecorder(t, metrics.Config{})
	d := 7750928 * time.Nanosecond
	rec.Record(result(2, "c", 0, d-time.Millisecond, time.Millisecond, nil))
	for _, s := range []metrics.Summary{rec.Summary()[0], rec.Merged(nil)} {
		if s.Max != d || s.P50 > s.Max || s.P99 > s.Max || s.P999 > s.Max || s.ServiceP99 > s.ServiceMax {
			t.Errorf("p50 %v p99 %v p99.9 %v max %v, service p99 %v max %v: percentiles above the exact max",
				s.P50, s.P99, s.P999, s.Max, s.ServiceP99, s.ServiceMax)
		}
	}
	for _, iv := range rec.Intervals() {
		if iv.P99 > iv.Max || iv.P50 > iv.Max {
			t.Errorf("interval p50 %v p99 %v above max %v", iv.P50, iv.P99, iv.Max)
		}
	}
}

// TestSummariesKeptUntilTheNextResult: Summary and MergedAs are reused
// while nothing is recorded, and a result recorded after them is in the
// next ones.
func TestSummariesKeptUntilTheNextResult(t *testing.T) {
	r := newRecorder(t, metrics.Config{})
	quiet := func(tenant int, _ string) bool { return tenant != 1 }
	r.Record(result(2, "q", 0, 0, time.Millisecond, nil))
	if s := r.Summary(); len(s) != 1 || s[0].Count != 1 {
		t.Fatalf("Summary %+v, want tenant 2 once", s)
	}
	if m := r.MergedAs("quiet", quiet); m.Count != 1 || m.Max != time.Millisecond {
		t.Fatalf("MergedAs %+v, want one call of 1 ms", m)
	}
	r.Record(result(3, "q", time.Second, 0, 5*time.Millisecond, nil))
	if s := r.Summary(); len(s) != 2 || s[1].Tenant != 3 || s[1].Count != 1 {
		t.Errorf("Summary after a new tenant %+v, want tenants 2 and 3", s)
	}
	if m := r.MergedAs("quiet", quiet); m.Count != 2 || m.Max != 5*time.Millisecond {
		t.Errorf("MergedAs after a new result %+v, want two calls, max 5 ms", m)
	}
	if m, n := r.MergedAs("quiet", quiet), r.Merged(quiet); m.Count != n.Count || m.P99 != n.P99 {
		t.Errorf("MergedAs %+v, Merged %+v: want the same", m, n)
	}
}

// TestReserve: reserved series that record nothing are in no summary,
// export, interval or Len; those that do record report exactly what an
// unreserved recorder reports for the same results.
func TestReserve(t *testing.T) {
	ms := time.Millisecond
	results := []workload.Result{
		result(1, "a", 0, 0, 2*ms, nil), result(1, "a", 10*ms, ms, 3*ms, nil),
		result(2, "b", 1200*ms, 0, 5*ms, errors.New("boom")), result(7, "a", 0, 0, ms, nil), // 7 is not reserved
	}
	results = append(results, workload.Result{Op: workload.Op{Tenant: 3, Class: "a", At: 5 * ms},
		Intended: t0.Add(5 * ms), End: t0.Add(5 * ms), Err: workload.ErrDropped})
	plain := newRecorder(t, metrics.Config{Interval: time.Second})
	reserved := newRecorder(t, metrics.Config{Interval: time.Second})
	var keys []metrics.Key
	for tenant := 1; tenant <= 5; tenant++ {
		for _, c := range []string{"a", "b"} {
			keys = append(keys, metrics.Key{Tenant: tenant, Class: c})
		}
	}
	reserved.Reserve(keys...)
	if n := reserved.Len(); n != 0 {
		t.Fatalf("Len after Reserve = %d, want 0", n)
	}
	if s := reserved.Summary(); len(s) != 0 {
		t.Fatalf("Summary after Reserve = %+v, want none", s)
	}
	if h := reserved.LatencyHistogram(keys[0]); h != nil {
		t.Errorf("LatencyHistogram of a reserved, empty series = %v, want nil", h)
	}
	for _, r := range results {
		plain.Record(r)
		reserved.Record(r)
	}
	reserved.Reserve(keys...) // again: changes nothing
	if got, want := reserved.Len(), plain.Len(); got != want || want != 4 {
		t.Errorf("Len = %d, want %d (4)", got, want)
	}
	if got, want := reserved.Summary(), plain.Summary(); !reflect.DeepEqual(got, want) {
		t.Errorf("Summary\n got %+v\nwant %+v", got, want)
	}
	if got, want := reserved.Intervals(), plain.Intervals(); !reflect.DeepEqual(got, want) {
		t.Errorf("Intervals\n got %+v\nwant %+v", got, want)
	}
	if got, want := len(reserved.Export()), len(plain.Export()); got != want {
		t.Errorf("Export: %d series, want %d", got, want)
	}
	if got, want := reserved.Merged(nil), plain.Merged(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("Merged\n got %+v\nwant %+v", got, want)
	}
}

// BenchmarkReserve: the heap a reserved series costs (bytes/series), the
// figure Reserve's doc quotes.
func BenchmarkReserve(b *testing.B) {
	const n = 30000
	keys := make([]metrics.Key, n)
	for i := range keys {
		keys[i] = metrics.Key{Tenant: i / 3, Class: []string{"a", "b", "c"}[i%3]}
	}
	var before, after runtime.MemStats
	for b.Loop() {
		rec := newRecorder(b, metrics.Config{Interval: -1})
		runtime.GC()
		runtime.ReadMemStats(&before)
		rec.Reserve(keys...)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/series")
		runtime.KeepAlive(rec)
	}
}

// spread returns n latencies spread over 1 ms .. 100 ms, log-uniform in
// a fixed order that is not sorted.
func spread(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		j := (i * 7919) % n // a permutation: 7919 is prime and no n here is its multiple
		out[i] = time.Duration(float64(time.Millisecond) * math.Pow(100, float64(j)/float64(n)))
	}
	return out
}

// TestAggregateKeepsSigFigs: with the series at 2 significant digits, an
// aggregate of them holds what a merge of 3-digit series held (the same
// percentiles, spectrum, confidence interval and interval series), while
// each series and a merge of them are at 2 digits; Add feeds aggregates
// as Record does.
func TestAggregateKeepsSigFigs(t *testing.T) {
	quiet := func(tenant int, class string) bool { return tenant != 1 && class == "page" }
	coarse := newRecorder(t, metrics.Config{SeriesSigFigs: metrics.TenantSigFigs,
		Aggregates: []metrics.Aggregate{{Name: "quiet", In: quiet}, {Name: "all"}}})
	fine := newRecorder(t, metrics.Config{})
	coarse.Reserve(metrics.Key{Tenant: 7, Class: "page"}) // reserved before any result: in the aggregate all the same
	lats := spread(20_000)
	for i, d := range lats {
		// Recorded in the order they end, as a run records them: each
		// goes in the same interval of its series and of the aggregate.
		end := 100*time.Millisecond + time.Duration(i)*time.Millisecond
		res := result(1+i%200, []string{"page", "report"}[i%3/2], end-d, d/10, d-d/10, nil)
		coarse.Record(res)
		fine.Record(res)
	}
	want := fine.Merged(quiet)
	got, ok := coarse.Aggregate("quiet")
	if !ok {
		t.Fatal(`Aggregate("quiet") not found`)
	}
	if want.SigFigs != 3 || got.SigFigs != 3 {
		t.Errorf("SigFigs: aggregate %d, 3-digit merge %d, want 3", got.SigFigs, want.SigFigs)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("aggregate\n got %+v\nwant %+v (the merge of 3-digit series)", got, want)
	}
	merged := coarse.Merged(quiet)
	if merged.SigFigs != 2 || merged.Count != want.Count {
		t.Errorf("Merged of 2-digit series: SigFigs %d count %d, want 2 and %d", merged.SigFigs, merged.Count, want.Count)
	}
	// The exact p99 of the quiet ops: the aggregate is within 0.1% of it.
	var quietLats []time.Duration
	for i, d := range lats {
		if quiet(1+i%200, []string{"page", "report"}[i%3/2]) {
			quietLats = append(quietLats, d)
		}
	}
	slices.Sort(quietLats)
	exact := quietLats[int(math.Ceil(0.99*float64(len(quietLats))))-1]
	if !within(got.P99, exact) {
		t.Errorf("aggregate p99 %v, exact %v: not within 0.1%%", got.P99, exact)
	}
	for _, s := range coarse.Summary() {
		if s.SigFigs != 2 {
			t.Fatalf("series %d/%s SigFigs %d, want 2", s.Tenant, s.Class, s.SigFigs)
		}
	}
	if all, _ := coarse.Aggregate("all"); all.Count != int64(len(lats)) {
		t.Errorf(`Aggregate("all") count %d, want %d`, all.Count, len(lats))
	}
	if _, ok := coarse.Aggregate("nope"); ok {
		t.Error(`Aggregate("nope") found`)
	}
	ivs, _ := coarse.AggregateIntervals("quiet")
	if wantIvs := fine.MergedIntervals(quiet); len(ivs) == 0 || !reflect.DeepEqual(ivFigures(ivs), ivFigures(wantIvs)) {
		t.Errorf("aggregate intervals %d, want the %d of the 3-digit merge, the same figures", len(ivs), len(wantIvs))
	}

	// Add: the fine recorder's series into a coarse one with an aggregate.
	added := newRecorder(t, metrics.Config{SeriesSigFigs: 2, Aggregates: []metrics.Aggregate{{Name: "quiet", In: quiet}}})
	for _, e := range fine.Export() {
		if err := added.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := added.Aggregate("quiet"); !reflect.DeepEqual(got, want) {
		t.Errorf("aggregate after Add\n got %+v\nwant %+v", got, want)
	}
}

// TestSeriesBucketsBounded: a series of 10,000 distinct latencies over
// 1..100 ms populates at most 128 buckets per doubling at 2 significant
// digits, where at 3 nearly every latency has a bucket of its own.
func TestSeriesBucketsBounded(t *testing.T) {
	k := metrics.Key{Tenant: 3, Class: "c"}
	populated := func(figs int) int32 {
		rec := newRecorder(t, metrics.Config{SeriesSigFigs: figs, Interval: -1})
		for i, d := range spread(10_000) {
			rec.Record(result(k.Tenant, k.Class, time.Duration(i), 0, d, nil))
		}
		return rec.LatencyHistogram(k).Populated()
	}
	bound := int32(128 * math.Ceil(math.Log2(100)+1))
	if n := populated(metrics.TenantSigFigs); n > bound {
		t.Errorf("2 digits: %d buckets populated, want ≤ %d", n, bound)
	}
	if n := populated(3); n < 5000 {
		t.Errorf("3 digits: %d buckets populated, want ≥ 5000 (distinct latencies)", n)
	}
}

// TestAggregateConfigErrors: bad SeriesSigFigs and aggregate names are
// ErrInvalid naming the field.
func TestAggregateConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  metrics.Config
		want string
	}{
		{"series finer than aggregates", metrics.Config{SeriesSigFigs: 4}, "SeriesSigFigs 4"},
		{"negative series digits", metrics.Config{SigFigs: 2, SeriesSigFigs: -1}, "SeriesSigFigs -1"},
		{"unnamed aggregate", metrics.Config{Aggregates: []metrics.Aggregate{{}}}, "Aggregates[0]: Name is empty"},
		{"duplicate aggregate", metrics.Config{Aggregates: []metrics.Aggregate{{Name: "a"}, {Name: "a"}}}, `Aggregates[1]: Name "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := metrics.New(tc.cfg)
			if !errors.Is(err, metrics.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want ErrInvalid naming %q", err, tc.want)
			}
		})
	}
	if c := newRecorder(t, metrics.Config{SigFigs: 4}).Config(); c.SeriesSigFigs != 4 {
		t.Errorf("SeriesSigFigs 0 with SigFigs 4 gives %d, want 4", c.SeriesSigFigs)
	}
}

// ivFigures returns the figures of every snapshot (not the histograms'
// internal layout).
func ivFigures(ivs []metrics.IntervalSnapshot) []metrics.IntervalSnapshot {
	out := make([]metrics.IntervalSnapshot, len(ivs))
	for i, iv := range ivs {
		out[i] = metrics.IntervalSnapshot{Tick: iv.Tick, Start: iv.Start, Count: iv.Count,
			Errors: iv.Errors, Dropped: iv.Dropped, Incomplete: iv.Incomplete, P50: iv.P50, P99: iv.P99, Max: iv.Max}
	}
	return out
}
