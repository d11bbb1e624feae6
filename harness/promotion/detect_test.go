package promotion

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/isolation/directory"
	"github.com/noisysim/noisysim/isolation/pools"
)

func TestPromotionSkew(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one node", []float64{4}, 1},
		{"even", []float64{2, 2, 2}, 1},
		{"one hot of three", []float64{1, 6, 2}, 3},
		{"even count: median of the middle two", []float64{1, 3, 8, 5}, 2},
		{"idle", []float64{0, 0, 0}, 1},
		{"zero median stays finite", []float64{0, 0, 2}, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			got := skew(tc.in)
			if math.Abs(got-tc.want) > 1e-9 || math.IsInf(got, 0) || math.IsNaN(got) {
				t.Errorf("skew(%v) = %g, want %g", tc.in, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.in[i] {
					t.Fatalf("skew reordered its input: %v", tc.in)
				}
			}
		})
	}
}

// TestPromotionLoadHotNode: the hot node is the ring node with the most active
// sessions; the target, outside the ring, never counts; DB time goes to the
// node the snapshot places each tenant on.
func TestPromotionLoadHotNode(t *testing.T) {
	r := &runner{nodes: []backend.Node{{Name: "p1"}, {Name: "p2"}, {Name: "p3"}, {Name: "p4"}}}
	snap := directory.Snapshot{Nodes: []string{"p1", "p2", "p3", "p4"}, Ring: []string{"p1", "p2", "p3"},
		Entries: map[string]directory.Entry{"1": {Tenant: "1", Node: "p2"}}}
	s := &sampler{counts: map[string]int{WindowBefore: 10},
		sums: map[string]map[string]float64{WindowBefore: {"p1": 10, "p2": 60, "p3": 20, "p4": 90}}}
	var tenant2 string
	for i := 2; tenant2 == ""; i++ {
		if snap.Resolve(strconv.Itoa(i)) == "p3" {
			tenant2 = strconv.Itoa(i)
		}
	}
	before := map[string]float64{"1": 1, tenant2: 0.5}
	after := map[string]float64{"1": 7, tenant2: 2.5}
	l := r.load(WindowBefore, s, before, after, snap)
	if l.Hot != "p2" {
		t.Errorf("hot node %s, want p2 (p4 is outside the ring)", l.Hot)
	}
	if l.Samples != 10 || l.Nodes[1].Active != 6 {
		t.Errorf("samples %d, p2 active %g; want 10 and 6", l.Samples, l.Nodes[1].Active)
	}
	if l.Skew != 3 {
		t.Errorf("skew %g, want 6/2 = 3", l.Skew)
	}
	if l.Nodes[1].DBTime != 6 || l.Nodes[2].DBTime != 2 {
		t.Errorf("DB time p2 %g s, p3 %g s; want 6 and 2", l.Nodes[1].DBTime, l.Nodes[2].DBTime)
	}
	if l.DBTimeSkew != 3 {
		t.Errorf("DB-time skew %g, want 6/2 = 3", l.DBTimeSkew)
	}
}

func TestPromotionShareAlert(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name   string
		alerts []pools.Alert
		want   bool
	}{
		{"none", nil, false},
		{"active", []pools.Alert{{Tenant: "1", Share: 0.6, Fired: at(2)}}, true},
		{"another tenant", []pools.Alert{{Tenant: "2", Share: 0.6, Fired: at(2)}}, false},
		{"fired and cleared between two polls", []pools.Alert{{Tenant: "1", Share: 0.6, Fired: at(2), Cleared: at(2.5)}}, true},
		{"cleared before the window", []pools.Alert{{Tenant: "1", Share: 0.6, Fired: at(-3), Cleared: at(-1)}}, false},
		{"active since before the window", []pools.Alert{{Tenant: "1", Share: 0.6, Fired: at(-3)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := shareAlert(tc.alerts, "1", t0); got != tc.want {
				t.Errorf("fires %v, want %v", got, tc.want)
			}
		})
	}
}

// traffic records DB time every 10 ms until ctx ends: tenant "1" takes
// share(elapsed) of it, tenants 2..5 the rest.
func traffic(ctx context.Context, l *pools.Ledger, share func(time.Duration) float64) {
	start := time.Now()
	for ctx.Err() == nil {
		s := share(time.Since(start))
		l.Record("1", pools.Heavy, time.Duration(s*float64(10*time.Millisecond)))
		for i := 2; i <= 5; i++ {
			l.Record(strconv.Itoa(i), pools.Interactive, time.Duration((1-s)/4*float64(10*time.Millisecond)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPromotionTriggerWindow: the ledger trigger fires once the tenant's share
// stays above the threshold for the whole window, never for a shorter
// burst or a share below it; a request fires at its time.
func TestPromotionTriggerWindow(t *testing.T) {
	const window, bucket = 2 * time.Second, 500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		share func(time.Duration) float64
		poll  time.Duration
		// fires is false, or the earliest and latest fire, from t0.
		fires    bool
		from, to time.Duration
	}{
		{name: "sustained share", share: func(time.Duration) float64 { return 0.6 }, poll: 100 * time.Millisecond,
			fires: true, from: window, to: window + 2*bucket},
		{name: "below the threshold", share: func(time.Duration) float64 { return 0.2 }, poll: 100 * time.Millisecond},
		{name: "burst shorter than the window", poll: 100 * time.Millisecond, share: func(d time.Duration) float64 {
			if d%(3*time.Second) < 1500*time.Millisecond {
				return 0.6
			}
			return 0.1
		}},
		{name: "polled slower than the alert lasts", poll: 3 * time.Second, fires: true, from: window, to: 3 * time.Second,
			share: func(d time.Duration) float64 {
				if d < 2600*time.Millisecond {
					return 0.6
				}
				return 0
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, err := pools.NewLedger(pools.LedgerConfig{ShareThreshold: 0.25, Window: window, Bucket: bucket})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
				var wg sync.WaitGroup
				defer wg.Wait()
				defer cancel()
				wg.Go(func() { traffic(ctx, l, tc.share) })
				t0 := time.Now()
				fire := make(chan string, 1)
				wg.Go(func() { trigger{tenant: "1", poll: tc.poll, ledger: l}.watch(ctx, t0, fire) })
				select {
				case why := <-fire:
					d := time.Since(t0)
					if !tc.fires || d < tc.from || d > tc.to {
						t.Errorf("fired at %s (%s); want fires %v within [%s, %s]", d, why, tc.fires, tc.from, tc.to)
					}
				case <-ctx.Done():
					if tc.fires {
						t.Errorf("did not fire within 8 s")
					}
				}
			})
		})
	}
	t.Run("request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fire := make(chan string, 1)
			t0 := time.Now()
			go trigger{tenant: "1", request: true, at: 1500 * time.Millisecond}.watch(t.Context(), t0, fire)
			<-fire
			if d := time.Since(t0); d != 1500*time.Millisecond {
				t.Errorf("request fired at %s, want 1.5s", d)
			}
		})
	})
}
