package harness

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// TestRespread checks that a long call's DB time is spread over the
// seconds it ran in the series' per-worker and per-pool loads and DB-time
// shares, not
// booked in the second it ended: a 3-second call from 0.5 s to 3.5 s is
// half a busy backend in seconds 1 and 4 and one in seconds 2 and 3 (the
// old booking drew 0, 0, 0, 3). Its worker is the one holding its
// tenant's shard in the layout of each point: the shard moves after
// second 2; the first point, sampled before any layout was read, takes
// the first one read.
func TestRespread(t *testing.T) {
	origin := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	s := newDBSpread(time.Second)
	s.add(0, pools.Work{Tenant: "1", Pool: "shared", Began: origin, DBTime: time.Second}) // before start: dropped
	s.start(origin)
	at := func(sec float64) time.Time { return origin.Add(time.Duration(sec * float64(time.Second))) }
	s.add(0, pools.Work{Tenant: "1", Pool: "shared", Began: at(0.5), DBTime: 3 * time.Second})
	s.add(0, pools.Work{Tenant: "2", Pool: "shared", Began: at(1.25), DBTime: 250 * time.Millisecond})
	s.add(0, pools.Work{Tenant: "9", Pool: "heavy", Began: at(-0.5), DBTime: time.Second}) // half before the origin; no shard

	workers := []citus.Worker{{Name: "w:1", ShouldHaveShards: true}, {Name: "w:2", ShouldHaveShards: true}}
	shardOf := map[string]int64{"1": 101, "2": 102} // tenant 9 has none
	before := &citusLayout{Layout: citus.Layout{Workers: workers, Placements: map[int64]string{101: "w:1", 102: "w:2"}}, shardOf: shardOf}
	after := &citusLayout{Layout: citus.Layout{Workers: workers, Placements: map[int64]string{101: "w:2", 102: "w:2"}}, shardOf: shardOf}
	keys := []poolKey{{0, "shared", ""}, {0, "heavy", ""}}
	series := make([]reports.Point, 4)
	for i := range series {
		series[i] = reports.Point{At: float64(i + 1), Pools: []reports.PoolPoint{{Name: "shared"}, {Name: "heavy"}},
			// what the series drew live, ended-in-the-second booking
			Workers: []reports.WorkerPoint{{Worker: "worker1"}, {Worker: "worker2"}}}
	}
	series[3].Workers[0].Load = 3
	// The first point was sampled before a layout was read: the first
	// layout read stands for it.
	respread(series, []*citusLayout{nil, before, after, after}, keys, s)

	want := []struct{ shared, heavy, w1, w2 float64 }{
		{0.5, 0.5, 0.5, 0},
		{1.25, 0, 1, 0.25},
		{1, 0, 0, 1},
		{0.5, 0, 0, 0.5},
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// Tenant 1's 3 s call holds the whole DB time of seconds 3 and 4,
	// and 0.5 / (0.5 + 0.5) of second 1 beside tenant 9's second half.
	tops := [][]reports.Share{
		{{Tenant: "1", DBTime: 500, Share: 0.5}, {Tenant: "9", DBTime: 500, Share: 0.5}},
		{{Tenant: "1", DBTime: 1000, Share: 0.8}, {Tenant: "2", DBTime: 250, Share: 0.2}},
		{{Tenant: "1", DBTime: 1000, Share: 1}},
		{{Tenant: "1", DBTime: 500, Share: 1}},
	}
	for i, w := range want {
		pt := series[i]
		if !slices.Equal(pt.TopDBTime, tops[i]) {
			t.Errorf("second %d: top DB time %+v, want %+v", i+1, pt.TopDBTime, tops[i])
		}
		if len(pt.Workers) != 2 || pt.Workers[0].Worker != "worker1" || pt.Workers[1].Worker != "worker2" {
			t.Fatalf("second %d: workers %+v, want worker1 and worker2", i+1, pt.Workers)
		}
		got := []float64{pt.Pools[0].Busy, pt.Pools[1].Busy, pt.Workers[0].Load, pt.Workers[1].Load}
		for j, v := range []float64{w.shared, w.heavy, w.w1, w.w2} {
			if !near(got[j], v) {
				t.Errorf("second %d: shared, heavy, worker1, worker2 = %v, want %v", i+1, got, []float64{w.shared, w.heavy, w.w1, w.w2})
				break
			}
		}
	}
}
