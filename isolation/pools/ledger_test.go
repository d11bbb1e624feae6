package pools

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestLedgerRanking(t *testing.T) {
	l, err := NewLedger(LedgerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l.Record("a", Interactive, 600*time.Millisecond)
	l.Record("a", Heavy, 0)
	l.Record("b", Heavy, 300*time.Millisecond)
	l.Record("c", Interactive, 100*time.Millisecond)
	l.Record("d", Interactive, -time.Second) // counts as 0

	got := l.Ranking(2)
	if len(got) != 2 {
		t.Fatalf("Ranking(2) gave %d ranks", len(got))
	}
	want := []struct {
		tenant string
		db     time.Duration
		share  float64
		stmts  int64
	}{{"a", 600 * time.Millisecond, 0.6, 2}, {"b", 300 * time.Millisecond, 0.3, 1}}
	for i, w := range want {
		r := got[i]
		if r.Tenant != w.tenant || r.DBTime != w.db || math.Abs(r.Share-w.share) > 1e-9 || r.Statements != w.stmts {
			t.Errorf("rank %d = %+v, want tenant %s, %s, share %.2f, %d statements", i, r, w.tenant, w.db, w.share, w.stmts)
		}
	}
	if got[0].ByClass[Interactive] != 600*time.Millisecond || got[0].ByClass[Heavy] != 0 {
		t.Errorf("a by class = %v", got[0].ByClass)
	}
	if all := l.Ranking(0); len(all) != 4 || all[3].Tenant != "d" {
		t.Errorf("Ranking(0) = %+v, want 4 tenants, d last", all)
	}
	u := l.Usage()
	if len(u) != 5 || u[0] != (Usage{Tenant: "a", Class: Heavy, DBTime: 0, Statements: 1}) {
		t.Errorf("Usage() = %+v", u)
	}
}

func TestLedgerConfigErrors(t *testing.T) {
	for name, cfg := range map[string]LedgerConfig{
		"threshold above 1":         {ShareThreshold: 1.5},
		"negative threshold":        {ShareThreshold: -0.1},
		"negative window":           {Window: -time.Second},
		"bucket longer than window": {Window: time.Second, Bucket: 2 * time.Second},
		"negative max alerts":       {MaxAlerts: -1},
	} {
		if _, err := NewLedger(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// feed records one second of traffic: dominant gets share of 100 ms per
// 10 ms step, the others split the rest.
func feed(l *Ledger, dominant string, share float64, others []string, d time.Duration) {
	const step = 10 * time.Millisecond
	for elapsed := time.Duration(0); elapsed < d; elapsed += step {
		l.Record(dominant, Interactive, time.Duration(share*float64(step)))
		for _, o := range others {
			l.Record(o, Interactive, time.Duration((1-share)*float64(step)/float64(len(others))))
		}
		time.Sleep(step)
	}
}

func TestLedgerShareAlert(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			notified []Alert
		)
		l, err := NewLedger(LedgerConfig{
			ShareThreshold: 0.3, Window: 2 * time.Second, Bucket: 500 * time.Millisecond,
			OnAlert: func(a Alert) { mu.Lock(); notified = append(notified, a); mu.Unlock() },
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		others := []string{"q1", "q2", "q3"}

		// 1.9 s at 60%: not yet a whole window.
		feed(l, "noisy", 0.6, others, 1900*time.Millisecond)
		if a := l.Alerts(); len(a) != 0 {
			t.Fatalf("alert before a full window: %v", a)
		}
		// Past 2 s: the first four buckets are complete and all above 30%.
		feed(l, "noisy", 0.6, others, 700*time.Millisecond)
		alerts := l.Alerts()
		if len(alerts) != 1 {
			t.Fatalf("Alerts() = %v, want one alert", alerts)
		}
		a := alerts[0]
		if a.Tenant != "noisy" || math.Abs(a.Share-0.6) > 0.01 || a.Threshold != 0.3 || a.Window != 2*time.Second {
			t.Errorf("alert = %+v", a)
		}
		if fired := a.Fired.Sub(start); fired != 2*time.Second {
			t.Errorf("alert fired at %s, want at the end of the first full window, 2s", fired)
		}
		if got := l.Active(); len(got) != 1 || got[0] != "noisy" {
			t.Errorf("Active() = %v", got)
		}

		// Still dominant: no second alert.
		feed(l, "noisy", 0.6, others, time.Second)
		if n := len(l.Alerts()); n != 1 {
			t.Errorf("%d alerts while the same tenant stays dominant, want 1", n)
		}

		// Falls to 25%: cleared at the end of the first bucket below.
		feed(l, "noisy", 0.25, others, time.Second)
		alerts = l.Alerts()
		if len(alerts) != 1 || alerts[0].Cleared.IsZero() {
			t.Fatalf("after dropping below threshold, Alerts() = %v, want one cleared alert", alerts)
		}
		if len(l.Active()) != 0 {
			t.Errorf("Active() = %v after clearing", l.Active())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(notified) != 2 || !notified[0].Cleared.IsZero() || notified[1].Cleared.IsZero() {
			t.Errorf("OnAlert got %v, want fire then clear", notified)
		}
	})
}

func TestLedgerShareAlertNeedsEveryBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := NewLedger(LedgerConfig{ShareThreshold: 0.3, Window: 2 * time.Second, Bucket: 500 * time.Millisecond})
		// Alternate 60% and 10% per bucket: above on average, not throughout.
		for range 6 {
			feed(l, "spiky", 0.6, []string{"q"}, 500*time.Millisecond)
			feed(l, "spiky", 0.1, []string{"q"}, 500*time.Millisecond)
		}
		// q holds 40% or 90%: above throughout, the control.
		if a := l.Alerts(); len(a) != 1 || a[0].Tenant != "q" {
			t.Errorf("Alerts() = %v, want one for q and none for spiky (above the threshold only half the time)", a)
		}
	})
}

func TestLedgerAlertClearsWhenTrafficStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := NewLedger(LedgerConfig{Window: time.Second, Bucket: 250 * time.Millisecond})
		feed(l, "noisy", 0.9, []string{"q"}, 1500*time.Millisecond)
		if got := l.Active(); len(got) != 1 {
			t.Fatalf("Active() = %v, want [noisy]", got)
		}
		time.Sleep(time.Second) // nothing recorded
		if got := l.Active(); len(got) != 0 {
			t.Errorf("Active() = %v after traffic stopped, want none", got)
		}
	})
}

func TestLedgerMaxAlerts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := NewLedger(LedgerConfig{Window: 100 * time.Millisecond, Bucket: 100 * time.Millisecond, MaxAlerts: 2})
		for i := range 4 {
			feed(l, fmt.Sprint("t", i), 0.9, []string{"q"}, 200*time.Millisecond)
			feed(l, "q", 0.9, []string{"x"}, 200*time.Millisecond) // clears t<i>
		}
		alerts := l.Alerts()
		if len(alerts) != 2 {
			t.Fatalf("%d alerts kept, want MaxAlerts=2", len(alerts))
		}
		if alerts[1].Tenant != "q" && alerts[1].Tenant != "t3" {
			t.Errorf("kept %v, want the newest", alerts)
		}
	})
}

func TestLedgerConcurrent(t *testing.T) {
	l, _ := NewLedger(LedgerConfig{Window: 20 * time.Millisecond, Bucket: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				l.Record(fmt.Sprint("t", (g+i)%5), Class(fmt.Sprint("c", i%2)), time.Microsecond)
				if i%500 == 0 {
					l.Ranking(3)
					l.Alerts()
				}
			}
		})
	}
	wg.Wait()
	var total time.Duration
	var stmts int64
	for _, r := range l.Ranking(0) {
		total += r.DBTime
		stmts += r.Statements
	}
	if total != 16000*time.Microsecond || stmts != 16000 {
		t.Errorf("total %s over %d statements, want 16ms over 16000", total, stmts)
	}
}

func BenchmarkLedgerRecord(b *testing.B) {
	l, _ := NewLedger(LedgerConfig{})
	tenants := make([]string, 64)
	for i := range tenants {
		tenants[i] = fmt.Sprint("tenant-", i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.Record(tenants[i%len(tenants)], Interactive, time.Millisecond)
			i++
		}
	})
}

func TestUsageWindow(t *testing.T) {
	ms := time.Millisecond
	before := []Usage{{Tenant: "1", Class: Interactive, DBTime: 100 * ms}, {Tenant: "2", Class: Heavy, DBTime: 50 * ms}}
	after := []Usage{
		{Tenant: "1", Class: Interactive, DBTime: 400 * ms}, // +300
		{Tenant: "1", Class: Heavy, DBTime: 300 * ms},       // +300, new
		{Tenant: "2", Class: Heavy, DBTime: 50 * ms},        // idle in the window
		{Tenant: "3", Class: Interactive, DBTime: 400 * ms}, // +400, new
	}
	w := UsageWindow(before, after)
	if _, ok := w["2"]; ok {
		t.Errorf("tenant 2 spent nothing in the window but is listed: %+v", w["2"])
	}
	if got := w["1"]; got == nil || got.Total != 600*ms || got.ByClass[Heavy] != 300*ms || got.Share != 0.6 {
		t.Errorf("tenant 1: %+v, want 600 ms in all, 300 ms heavy, share 0.6", got)
	}
	if got := w["3"]; got == nil || got.Share != 0.4 {
		t.Errorf("tenant 3: %+v, want share 0.4", got)
	}
	if len(UsageWindow(after, after)) != 0 {
		t.Error("an empty window lists tenants")
	}
}
