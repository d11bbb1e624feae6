package metrics_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/workload"
)

// TestExportAddLossless: three recorders' exports added into one give the
// same summaries and interval snapshots as one recorder fed every result.
func TestExportAddLossless(t *testing.T) {
	whole := newRecorder(t, metrics.Config{})
	parts := []*metrics.Recorder{newRecorder(t, metrics.Config{}), newRecorder(t, metrics.Config{}), newRecorder(t, metrics.Config{})}
	rnd := rand.New(rand.NewPCG(1, 2))
	classes := []string{"interactive", "heavy"}
	var results []workload.Result
	for i := range 30000 {
		at := time.Duration(i) * 5 * time.Second / 30000
		wait := time.Duration(rnd.ExpFloat64() * float64(2*time.Millisecond))
		svc := time.Duration(rnd.ExpFloat64() * float64(5*time.Millisecond))
		var err error
		switch rnd.IntN(50) {
		case 0:
			err = errors.New("boom")
		case 1:
			err = workload.ErrDropped
		}
		results = append(results, result(1+rnd.IntN(7), classes[rnd.IntN(2)], at, wait, svc, err))
	}
	// Recorded as they end, as a run records them: a result ending in an
	// interval already closed would go into the open one.
	slices.SortStableFunc(results, func(a, b workload.Result) int { return a.End.Compare(b.End) })
	for i, res := range results {
		whole.Record(res)
		parts[i%3].Record(res)
	}
	merged := newRecorder(t, metrics.Config{})
	for _, p := range parts {
		for _, s := range p.Export() {
			if err := merged.Add(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := merged.Summary(), whole.Summary(); !reflect.DeepEqual(got, want) {
		t.Fatalf("merged summaries differ from one recorder's:\n got %+v\nwant %+v", got[0], want[0])
	}
	if got, want := merged.Totals(), whole.Totals(); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	// The figures of every snapshot (not the histograms' internal layout).
	figures := func(ivs []metrics.IntervalSnapshot) []metrics.IntervalSnapshot {
		out := make([]metrics.IntervalSnapshot, len(ivs))
		for i, iv := range ivs {
			out[i] = metrics.IntervalSnapshot{Tick: iv.Tick, Start: iv.Start, Tenant: iv.Tenant, Class: iv.Class, Count: iv.Count,
				Errors: iv.Errors, Dropped: iv.Dropped, Incomplete: iv.Incomplete, P50: iv.P50, P99: iv.P99, Max: iv.Max}
		}
		return out
	}
	if got, want := figures(merged.MergedIntervals(nil)), figures(whole.MergedIntervals(nil)); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("merged intervals differ:\n got %+v\nwant %+v", got, want)
	}
	if got, want := figures(merged.Intervals()), figures(whole.Intervals()); !reflect.DeepEqual(got, want) {
		t.Fatalf("intervals differ: got %d, want %d", len(got), len(want))
	}
}
