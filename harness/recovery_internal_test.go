package harness

import (
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestMeasureRecovery judges synthetic per-second series: the dominant
// tenant stops at 20 s, the quiet tenants are watched in "after" until
// 30 s, bound 50 ms for page and 30 ms for lookup, held 3 s.
func TestMeasureRecovery(t *testing.T) {
	bounds := map[string]float64{"page": 50, "lookup": 30}
	// series gives one point per second from 20 s for page (and lookup
	// when given), in window "after" unless a point says otherwise.
	series := func(page []float64, lookup []float64) []reports.Interval {
		var out []reports.Interval
		for i, p99 := range page {
			at := 20 + float64(i)
			out = append(out, reports.Interval{Window: "after", Start: at, End: at + 1, Tenant: quietAll, Class: "page", Count: 10, P99: p99})
		}
		for i, p99 := range lookup {
			at := 20 + float64(i)
			out = append(out, reports.Interval{Window: "after", Start: at, End: at + 1, Tenant: quietAll, Class: "lookup", Count: 10, P99: p99})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		ivs       []reports.Interval
		recovered bool
		time      float64
		worst     float64
		class     string
	}{
		{"never out of bounds", series([]float64{10, 12, 11, 9, 10, 10, 10, 10, 10, 10}, nil), true, 0, 12, "page"},
		{"backlog of 4 s", series([]float64{900, 400, 120, 51, 40, 45, 30, 20, 20, 20}, nil), true, 4, 900, "page"},
		{"a relapse inside the hold restarts it", series([]float64{900, 40, 40, 70, 40, 40, 40, 40, 40, 40}, nil), true, 4, 900, "page"},
		{"one class late is late", series([]float64{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, []float64{80, 80, 80, 80, 80, 80, 20, 20, 20, 20}),
			true, 6, 80, "lookup"},
		{"held to the last second", series([]float64{900, 900, 900, 900, 900, 900, 900, 40, 40, 40}, nil), true, 7, 900, "page"},
		{"not recovered: too late to hold", series([]float64{900, 900, 900, 900, 900, 900, 900, 900, 40, 40}, nil), false, 10, 900, "page"},
		{"others ignored", append(series([]float64{10, 10, 10, 10}, nil),
			reports.Interval{Window: "after", Start: 20, Tenant: "1", Class: "page", Count: 5, P99: 5000},
			reports.Interval{Window: "run", Start: 19, Tenant: quietAll, Class: "page", Count: 5, P99: 5000},
			reports.Interval{Window: "after", Start: 21, Tenant: quietAll, Class: "report", Count: 5, P99: 5000},
			reports.Interval{Window: "after", Start: 22, Tenant: quietAll, Class: "lookup", Count: 0, P99: 5000}),
			true, 0, 10, "page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := measureRecovery(20, 30, []string{"after"}, tc.ivs, bounds, 3)
			if rec == nil {
				t.Fatal("nil recovery")
			}
			if rec.Recovered != tc.recovered || rec.Time != tc.time || rec.Worst != tc.worst || rec.WorstClass != tc.class {
				t.Errorf("recovered %v in %.1f s, worst %.0f ms (%s); want %v in %.1f s, worst %.0f ms (%s)",
					rec.Recovered, rec.Time, rec.Worst, rec.WorstClass, tc.recovered, tc.time, tc.worst, tc.class)
			}
			if rec.Stopped != 20 || rec.Hold != 3 {
				t.Errorf("stopped %.1f, hold %.1f", rec.Stopped, rec.Hold)
			}
		})
	}
	// Every quiet request after the stop still running: no second ended.
	if rec := measureRecovery(20, 30, []string{"after"}, series(nil, nil), bounds, 3); rec == nil || rec.Recovered || rec.Time != 10 || rec.Seconds != 0 {
		t.Errorf("no point after the stop: %+v, want not recovered in 10 s", rec)
	}
}
