package harness

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// TestWindowMetricsSigFigs: a run's windows keep each tenant's series at
// 2 significant digits and quiet (all) of each quiet class at 3, so that
// the merged quiet rows, the quiet_p99 samples and the quiet (all)
// interval series are what 3-digit series gave; a segmented run's agents,
// a run writing its histograms out and topology citus keep 3 digits for
// every series.
func TestWindowMetricsSigFigs(t *testing.T) {
	sc, err := scenario.Load("../scenarios/noisy-neighbor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{sc: sc}
	cfg := r.windowMetrics()
	if cfg.SeriesSigFigs != metrics.TenantSigFigs || len(cfg.Aggregates) != len(r.quietClasses()) || len(cfg.Aggregates) == 0 {
		t.Fatalf("windowMetrics: SeriesSigFigs %d, %d aggregates, want %d and one per quiet class (%v)",
			cfg.SeriesSigFigs, len(cfg.Aggregates), metrics.TenantSigFigs, r.quietClasses())
	}
	coarse, err := metrics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fine, err := metrics.New(metrics.Config{Classify: errorClass}) // every series at 3 digits
	if err != nil {
		t.Fatal(err)
	}
	origin := time.Now()
	classes := []string{"lookup", "page", "report"}
	const n = 30_000
	for i := range n {
		// Latencies over 1..100 ms, each result recorded in the order
		// they end, as a run records them.
		d := time.Duration(float64(time.Millisecond) * math.Pow(100, float64(i*7919%n)/n))
		end := 100*time.Millisecond + time.Duration(i)*time.Millisecond
		tenant := 1 + i%150
		class := classes[i%2]
		if tenant == scenario.DominantTenant {
			class = classes[i%3]
		}
		res := workload.Result{Op: workload.Op{Tenant: tenant, Class: class, At: end - d},
			Intended: origin.Add(end - d), Start: origin.Add(end - d), End: origin.Add(end)}
		coarse.Record(res)
		fine.Record(res)
	}
	got, want := r.quietAllRows(coarse, nil), r.quietAllRows(fine, nil)
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("quiet (all) rows\n got %+v\nwant %+v (of 3-digit series)", got, want)
	}
	for _, row := range got {
		if row.SigFigs != 3 {
			t.Errorf("quiet (all) %s: sig_figs %d, want 3", row.Class, row.SigFigs)
		}
	}
	for _, row := range r.rows(coarse.Summary(), nil) {
		if row.SigFigs != metrics.TenantSigFigs {
			t.Fatalf("tenant %s %s: sig_figs %d, want %d", row.Tenant, row.Class, row.SigFigs, metrics.TenantSigFigs)
		}
	}
	quietAllOnly := func(ps []p99Sample) []p99Sample {
		var out []p99Sample
		for _, p := range ps {
			if p.Tenant == quietAll {
				out = append(out, p)
			}
		}
		return out
	}
	if got, want := quietAllOnly(r.p99Samples(coarse)), quietAllOnly(r.p99Samples(fine)); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("quiet (all) p99 samples\n got %+v\nwant %+v", got, want)
	}
	quietIntervals := func(rec *metrics.Recorder) []reports.Interval {
		var out []reports.Interval
		for _, iv := range intervals(rec, r.key, nil) {
			if iv.Tenant == quietAll {
				out = append(out, iv)
			}
		}
		return out
	}
	if got, want := quietIntervals(coarse), quietIntervals(fine); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("quiet (all) intervals: %d, want the %d of 3-digit series, the same", len(got), len(want))
	}

	for _, tc := range []struct {
		name string
		r    *runner
	}{
		{"segment agent", &runner{sc: sc, opts: Options{Segment: workload.Segment{Index: 1, Count: 2}}}},
		{"histograms written out", &runner{sc: sc, opts: Options{OnWindows: func(string, []WindowResult) {}}}},
		{"citus", &runner{sc: sc, citus: &citusRun{}}},
	} {
		if c := tc.r.windowMetrics(); c.SeriesSigFigs != 0 || len(c.Aggregates) != 0 {
			t.Errorf("%s: SeriesSigFigs %d, %d aggregates, want 0 (= SigFigs) and none", tc.name, c.SeriesSigFigs, len(c.Aggregates))
		}
	}
}
