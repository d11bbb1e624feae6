package promotion

import (
	"math"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/workload"
)

// window is a measured window without a database: tenant 1 sends 10
// reports, tenants 2 and 3 send 20 and 10 lookups, 44 ops were scheduled
// over 2 s and 40 issued in 2 s; the ledger saw 600 ms of DB time for
// tenant 1 (heavy), 300 ms for tenant 2 and 100 ms for tenant 3
// (interactive).
func window(t *testing.T) *measured {
	t.Helper()
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	send := func(tenant int, class string, n int, took time.Duration) {
		for i := range n {
			at := start.Add(time.Duration(i) * 50 * time.Millisecond)
			rec.Record(workload.Result{Op: workload.Op{Tenant: tenant, Class: class, At: at.Sub(start)},
				Intended: at, Start: at, End: at.Add(took)})
		}
	}
	send(1, "report", 10, 60*time.Millisecond)
	send(2, "lookup", 20, 15*time.Millisecond)
	send(3, "lookup", 10, 10*time.Millisecond)
	return &measured{
		rec:   rec,
		stats: workload.RunStats{Start: start, End: start.Add(2 * time.Second), Scheduled: 44, Issued: 40, Completed: 40},
		sched: workload.Schedule{Duration: 2 * time.Second, Ops: make([]workload.Op, 44)},
		usage0: []pools.Usage{
			{Tenant: "2", Class: pools.Interactive, DBTime: 100 * time.Millisecond},
			{Tenant: "4", Class: pools.Interactive, DBTime: 50 * time.Millisecond},
		},
		usage1: []pools.Usage{
			{Tenant: "1", Class: pools.Heavy, DBTime: 600 * time.Millisecond},
			{Tenant: "2", Class: pools.Interactive, DBTime: 400 * time.Millisecond},
			{Tenant: "3", Class: pools.Interactive, DBTime: 100 * time.Millisecond},
			{Tenant: "4", Class: pools.Interactive, DBTime: 50 * time.Millisecond},
		},
		seconds: 2.5,
	}
}

// TestPromotionReportStats: the before and after configurations carry the
// generator's counters and rates and the ledger's DB time over the window
// (the report showed issued 0, 0 ops/s and DB time 0.0%).
func TestPromotionReportStats(t *testing.T) {
	sc := &scenario.Scenario{Name: "tenant-promotion", Classes: []scenario.Class{
		{Name: "lookup", IsolationClass: scenario.IsolationClass(pools.Interactive)},
		{Name: "report", IsolationClass: scenario.IsolationClass(pools.Heavy), Senders: scenario.SendersDominant},
	}}
	r := &runner{sc: sc, p: &scenario.Promotion{Tenant: 1, Skew: 1.5, QuietP99Factor: 1}, tenant: "1",
		classes: map[string]*scenario.Class{"lookup": &sc.Classes[0], "report": &sc.Classes[1]},
		out:     Outcome{Tenant: "1", Source: "primary1", Target: "primary4", Loads: []Load{{Window: WindowBefore}, {Window: WindowAfter}}}}
	rep := r.report(window(t), window(t), true)
	if err := rep.Validate(); err != nil {
		t.Fatalf("invalid report: %v", err)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	for _, c := range rep.Configurations {
		st := c.Stats
		if st.Issued != 40 || st.Completed != 40 || !near(st.TargetRate, 22) || !near(st.AchievedRate, 20) {
			t.Errorf("%s: stats %+v; want 40 issued and completed, 22/s intended, 20/s achieved", c.Name, st)
		}
		if c.Duration != 2.5 {
			t.Errorf("%s: duration %g s, want 2.5", c.Name, c.Duration)
		}
		want := map[string]struct{ share, ms float64 }{"1": {0.6, 600}, "2": {0.3, 300}, "3": {0.1, 100}}
		for _, row := range c.Tenants {
			w := want[row.Tenant]
			if !near(row.DBTimeShare, w.share) || !near(row.DBTime, w.ms) {
				t.Errorf("%s: tenant %s %s: DB time %g ms, share %g; want %g ms, %g", c.Name, row.Tenant, row.Class, row.DBTime, row.DBTimeShare, w.ms, w.share)
			}
		}
		if len(c.TopDBTime) != 3 || c.TopDBTime[0].Tenant != "1" || !near(c.TopDBTime[0].Share, 0.6) || c.TopDBTime[2].Tenant != "3" {
			t.Errorf("%s: top DB time %+v; want 1 (0.6), 2, 3 (tenant 4 was idle in the window)", c.Name, c.TopDBTime)
		}
		if len(c.QuietAll) != 1 || c.QuietAll[0].Class != "lookup" || c.QuietAll[0].Count != 30 || !near(c.QuietAll[0].DBTimeShare, 0.4) {
			t.Errorf("%s: quiet rows %+v; want one lookup row of 30 requests and share 0.4", c.Name, c.QuietAll)
		}
	}
	// Nothing moved here: the assertions, all made against after, fail.
	if rep.Passed || rep.Configurations[1].Passed || !rep.Configurations[0].Passed {
		t.Errorf("report passed %v, before %v, after %v; want false, true, false",
			rep.Passed, rep.Configurations[0].Passed, rep.Configurations[1].Passed)
	}
	if len(rep.Configurations) != 2 || rep.Configurations[0].Name != WindowBefore || rep.Configurations[1].Name != WindowAfter {
		t.Errorf("configurations %v, want before and after", rep.Configurations)
	}
}
