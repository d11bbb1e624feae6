package harness

import (
	"cmp"
	"math"
	"sync"
	"time"

	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// dbSpread books each call's DB time into the seconds of a
// configuration's series it ran in, from its start to its end, where the
// ledger (and each pool's DB-time counter) books all of it when the call
// ends: a 3-second call is 1 busy backend for 3 seconds, not 3 in the
// second it ended. It keeps, per step of the series from its origin, the
// DB time of each tenant and of each pool (per instance and node): a step
// holds no more tenants than calls ran in it. It is safe for concurrent
// use.
type dbSpread struct {
	step time.Duration

	mu sync.Mutex
	// origin is the series' start; zero before start (work dropped).
	origin time.Time
	steps  []spreadStep
}

// spreadStep is one step's DB time.
type spreadStep struct {
	tenants map[string]time.Duration
	pools   map[poolKey]time.Duration
}

// poolKey names one pool of one instance of a stack.
type poolKey struct {
	inst       int
	name, node string
}

func newDBSpread(step time.Duration) *dbSpread { return &dbSpread{step: step} }

func newSpreadStep() spreadStep {
	return spreadStep{tenants: map[string]time.Duration{}, pools: map[poolKey]time.Duration{}}
}

// topTenants are the n tenants with the most DB time in st, with their
// shares of st's DB time (Point.TopDBTime).
func (st spreadStep) topTenants(n int) []reports.Share {
	var all time.Duration
	for _, d := range st.tenants {
		all += d
	}
	w := make(map[string]*pools.Window, len(st.tenants))
	for t, d := range st.tenants {
		w[t] = &pools.Window{Total: d, Share: float64(d) / float64(all)}
	}
	return topShares(w, n)
}

// start sets the origin: work before it is dropped, and the steps are
// counted from it.
func (s *dbSpread) start(origin time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.origin, s.steps = origin, nil
}

// hook returns the pools.Config.OnWork of instance inst.
func (s *dbSpread) hook(inst int) func(pools.Work) {
	return func(w pools.Work) { s.add(inst, w) }
}

// add books w's DB time, from w.Began to w.Began + w.DBTime, into the
// steps it overlaps, each the part that fell in it.
func (s *dbSpread) add(inst int, w pools.Work) {
	if w.DBTime <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.origin.IsZero() {
		return
	}
	from, to := w.Began.Sub(s.origin), w.Began.Add(w.DBTime).Sub(s.origin)
	from = max(from, 0)
	if to <= from {
		return
	}
	key := poolKey{inst, w.Pool, w.Node}
	for k := int(from / s.step); time.Duration(k)*s.step < to; k++ {
		lo, hi := max(from, time.Duration(k)*s.step), min(to, time.Duration(k+1)*s.step)
		for len(s.steps) <= k {
			s.steps = append(s.steps, newSpreadStep())
		}
		s.steps[k].tenants[w.Tenant] += hi - lo
		s.steps[k].pools[key] += hi - lo
	}
}

// over sums the steps from from to to (seconds from the origin, each
// rounded to the nearest step boundary: the series' ticks fall on them).
func (s *dbSpread) over(from, to float64) spreadStep {
	out := newSpreadStep()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := int(math.Round(from / s.step.Seconds()))
	b := int(math.Round(to / s.step.Seconds()))
	for k := max(a, 0); k < min(b, len(s.steps)); k++ {
		for t, d := range s.steps[k].tenants {
			out.tenants[t] += d
		}
		for p, d := range s.steps[k].pools {
			out.pools[p] += d
		}
	}
	return out
}

// seriesTopTenants is how many tenants a point ranks by DB time.
const seriesTopTenants = 5

// respread sets each point's load from spread: its top tenants by DB
// time (TopDBTime), its pools' Busy (keys are the pools in the points'
// order) and, on topology citus (layouts not empty), its workers
// (Point.Workers): each tenant's DB time on the worker that held its
// shard in layouts[i], the layout the point was sampled with, or, for a
// point sampled before the first layout was read, the first one read
// (no action moves a shard before it). A point covers the time from the
// point before it (the origin for the first) to its At. Points keep
// their other fields.
func respread(series []reports.Point, layouts []*citusLayout, keys []poolKey, spread *dbSpread) {
	var next *citusLayout
	filled := make([]*citusLayout, len(layouts))
	for i := len(layouts) - 1; i >= 0; i-- {
		next = cmp.Or(layouts[i], next)
		filled[i] = next
	}
	prev := 0.0
	for i := range series {
		pt := &series[i]
		over := pt.At - prev
		if over <= 0 {
			continue
		}
		sum := spread.over(prev, pt.At)
		prev = pt.At
		pt.TopDBTime = sum.topTenants(seriesTopTenants)
		for j := range pt.Pools {
			if j < len(keys) {
				pt.Pools[j].Busy = sum.pools[keys[j]].Seconds() / over
			}
		}
		if i < len(filled) && filled[i] != nil {
			pt.Workers = filled[i].workerPoints(sum.tenants, over)
		}
	}
}
