package metrics

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Series is one key's recorded state as Export hands it out and Add takes
// it back: enough to rebuild the key's Summary and interval snapshots
// exactly, in another process (noisysim merge).
type Series struct {
	Key
	// Latency and Service are the response- and service-time histograms
	// (ns), of the Recorder's Config bounds.
	Latency, Service *hdr.PackedHistogram
	// Counts as in Summary.
	Count, Errors, Dropped, Incomplete, Clamped int64
	ErrorsByClass                               map[string]int64
	// LatencySum is the exact sum of the response times; LatencyMax and
	// ServiceMax the exact maxima (unclamped).
	LatencySum, LatencyMax, ServiceMax time.Duration
	// Intervals are the key's interval snapshots, by tick.
	Intervals []SeriesInterval
}

// SeriesInterval is one interval of a Series.
type SeriesInterval struct {
	Tick                               int64
	Count, Errors, Dropped, Incomplete int64
	// Max is the exact maximum response time in the interval.
	Max time.Duration
	// Hist holds the interval's response times (ns).
	Hist *hdr.PackedHistogram
}

// Export returns a copy of every key's state, sorted by key.
func (r *Recorder) Export() []Series {
	var out []Series
	for _, s := range r.all() {
		s.mu.Lock()
		e := Series{Key: s.key, Latency: s.latency.Clone(), Service: s.service.Clone(),
			Count: s.count, Errors: s.errors, Dropped: s.dropped, Incomplete: s.incompl, Clamped: s.clamped,
			ErrorsByClass: maps.Clone(s.errorsBy), LatencySum: time.Duration(s.latSum),
			LatencyMax: time.Duration(s.latMax), ServiceMax: time.Duration(s.svcMax)}
		ivs := slices.Clone(s.closed)
		if s.cur != nil {
			ivs = append(ivs, *s.cur)
		}
		for _, iv := range ivs {
			e.Intervals = append(e.Intervals, SeriesInterval{Tick: iv.Tick, Count: iv.Count, Errors: iv.Errors,
				Dropped: iv.Dropped, Incomplete: iv.Incomplete, Max: time.Duration(iv.max), Hist: iv.hist.Clone()})
		}
		s.mu.Unlock()
		out = append(out, e)
	}
	return out
}

// Add merges e into the key's state and its aggregates', as if the results
// e was made of had been recorded here: histograms are merged bucket by
// bucket (lossless for histograms of the same bounds and significant
// digits), counts added, maxima kept. Intervals of the same tick are merged
// into one.
//
// Errors: a histogram whose values do not fit the Recorder's bounds
// (Config.Lowest..Highest), naming the key.
func (r *Recorder) Add(e Series) error {
	s := r.get(e.Key)
	for _, t := range append([]*series{s}, s.aggs...) {
		if err := r.addSeries(t, e); err != nil {
			return err
		}
	}
	r.recorded.Add(e.Count + e.Dropped)
	r.errs.Add(e.Errors)
	r.dropped.Add(e.Dropped)
	r.incompl.Add(e.Incomplete)
	r.version.Add(1)
	return nil
}

// addSeries merges e into s, under its lock.
func (r *Recorder) addSeries(s *series, e Series) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	merge := func(dst, src *hdr.PackedHistogram, what string) error {
		if src == nil {
			return nil
		}
		if dropped := dst.Merge(src); dropped > 0 {
			return fmt.Errorf("add series tenant %d class %s: %d %s values outside the recorder's bounds", e.Tenant, e.Class, dropped, what)
		}
		return nil
	}
	if err := merge(s.latency, e.Latency, "response time"); err != nil {
		return err
	}
	if err := merge(s.service, e.Service, "service time"); err != nil {
		return err
	}
	s.count += e.Count
	s.errors += e.Errors
	s.dropped += e.Dropped
	s.incompl += e.Incomplete
	s.clamped += e.Clamped
	s.latSum += int64(e.LatencySum)
	s.latMax = max(s.latMax, int64(e.LatencyMax))
	s.svcMax = max(s.svcMax, int64(e.ServiceMax))
	for c, n := range e.ErrorsByClass {
		if s.errorsBy == nil {
			s.errorsBy = map[string]int64{}
		}
		s.errorsBy[c] += n
	}

	// Every interval of an added series is closed: reopen, merge, close.
	byTick := map[int64]*IntervalSnapshot{}
	all := s.closed
	if s.cur != nil {
		all = append(all, *s.cur)
		s.cur = nil
	}
	for _, iv := range all {
		c := iv
		c.hist = iv.hist.Clone()
		byTick[iv.Tick] = &c
	}
	for _, iv := range e.Intervals {
		m := byTick[iv.Tick]
		if m == nil {
			m = &IntervalSnapshot{Tick: iv.Tick, Tenant: s.key.Tenant, Class: s.key.Class, hist: r.newHist(s.figs)}
			if r.cfg.Interval > 0 {
				m.Start = time.Duration(iv.Tick) * r.cfg.Interval
			}
			byTick[iv.Tick] = m
		}
		if err := merge(m.hist, iv.Hist, "interval"); err != nil {
			return err
		}
		m.Count += iv.Count
		m.Errors += iv.Errors
		m.Dropped += iv.Dropped
		m.Incomplete += iv.Incomplete
		m.max = max(m.max, int64(iv.Max))
	}
	s.closed = s.closed[:0]
	for _, tick := range slices.Sorted(maps.Keys(byTick)) {
		s.closed = append(s.closed, r.finish(*byTick[tick], true))
		s.tick = max(s.tick, tick)
	}
	slices.SortFunc(s.closed, func(a, b IntervalSnapshot) int { return cmp.Compare(a.Tick, b.Tick) })
	return nil
}
