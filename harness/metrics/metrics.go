package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/workload"
)

// Defaults for Config's zero values.
const (
	// DefaultLowest is the lowest discernible value: 1 µs.
	DefaultLowest = time.Microsecond
	// DefaultHighest is the highest trackable value: 5 min.
	DefaultHighest = 5 * time.Minute
	// DefaultSigFigs is the number of significant decimal digits kept: 3,
	// i.e. values are resolved to within 0.1%.
	DefaultSigFigs = 3
	// TenantSigFigs is the Config.SeriesSigFigs of noisysim's runs and
	// bench: 2, values resolved to within 1%. A tenant × class series'
	// percentiles rest on its own few ops, whose confidence interval is
	// far wider than 1% (a p99 of 1,000 samples: ranks 984..995, see
	// QuantileCI). A series' populated buckets are then at most 128 per
	// doubling of latency (about 425 per decade), against 1,024 (about
	// 3,400) at 3 digits, where a tenant with few ops lands in a bucket of
	// its own with almost every op.
	TenantSigFigs = 2
	// DefaultInterval is the interval of the time series: 1 s.
	DefaultInterval = time.Second
	// DefaultErrorClass is the error class when Config.Classify is nil.
	DefaultErrorClass = "error"
)

// ErrInvalid marks an unusable Config.
var ErrInvalid = errors.New("invalid metrics configuration")

// Config configures a Recorder. The zero value is usable.
type Config struct {
	// Lowest and Highest bound the recorded times: histograms resolve
	// times down to Lowest and hold them up to Highest. Times outside are
	// clamped into [Lowest, Highest]; those above Highest, which the
	// percentiles then under-report, are counted in Summary.Clamped. 0
	// means DefaultLowest and DefaultHighest. Highest must be at least
	// 2 × Lowest.
	Lowest, Highest time.Duration
	// SigFigs is the number of significant decimal digits the histograms
	// keep, 1..5. 0 means DefaultSigFigs.
	SigFigs int
	// SeriesSigFigs is the number of significant decimal digits of each
	// tenant × class series' histograms (response time, service time and
	// intervals), 1..SigFigs; Aggregates keep SigFigs. 0 means SigFigs.
	// Merged, Summary and the interval snapshots of series are at this
	// precision; Summary.SigFigs says which a summary has.
	SeriesSigFigs int
	// Aggregates are sets of series recorded, besides each into its own
	// series, into histograms of their own at SigFigs: what a merge of
	// series at fewer SeriesSigFigs would give at their precision only.
	// Names must be distinct and not empty.
	Aggregates []Aggregate
	// Interval is the width of the time-series intervals. 0 means
	// DefaultInterval; negative means no time series.
	Interval time.Duration
	// Warmup discards the results of ops intended to start in the first
	// Warmup of the run (Op.At < Warmup); they are only counted in
	// Totals.Discarded. 0 keeps everything.
	Warmup time.Duration
	// Classify names the class of an op's error for Summary.ErrorsByClass,
	// e.g. "rejected", "timeout", "57014". It is not called for dropped or
	// incomplete ops. nil means every error is DefaultErrorClass.
	Classify func(error) string
}

// Key identifies one series: a tenant's ops of one class.
type Key struct {
	Tenant int
	Class  string
}

// Aggregate is a set of series recorded together (Config.Aggregates), such
// as all quiet tenants' ops of one class: Recorder.Aggregate returns its
// Summary, Recorder.AggregateIntervals its time series.
type Aggregate struct {
	// Name names the aggregate, e.g. "quiet (all)/interactive".
	Name string
	// In reports whether the series of tenant and class is in the
	// aggregate; it is called once per key, when its series is made. nil
	// means every series.
	In func(tenant int, class string) bool
}

// Recorder keeps an HdrHistogram of response times (latency from the
// intended start) and one of service times per tenant × class, plus counts of
// errors by class, drops and incomplete ops, and a time series per interval.
// Use one Recorder per configuration and phase. It implements
// workload.Recorder and is safe for concurrent use: series are found under a
// read lock and each series has its own lock.
//
// Histograms are sparse (hdrhistogram PackedHistogram): memory grows with the
// number of distinct values, not with the range, and is bounded by the
// buckets of Config.SeriesSigFigs. Each op of a series in one of
// Config.Aggregates is also recorded into the aggregate's own histograms,
// at Config.SigFigs.
type Recorder struct {
	cfg Config
	// mu guards series and reserved; a series once made stays. reserved
	// holds the series Reserve made that nothing has been recorded into
	// yet: get moves one into series on its first result.
	mu       sync.RWMutex
	series   map[Key]*series
	reserved map[Key]*series
	recorded atomic.Int64
	// version counts the results recorded into series, each after it is
	// in its series: Summary's cache is of one version.
	version   atomic.Int64
	sumMu     sync.Mutex
	sumAt     int64 // version+1 of sums; 0: none
	sums      []Summary
	merged    map[string]memo // MergedAs's, by name
	aggSums   map[string]memo // Aggregate's, by name
	errs      atomic.Int64
	dropped   atomic.Int64
	incompl   atomic.Int64
	discarded atomic.Int64
	// aggs are the Config.Aggregates' series, by name; their Key is zero.
	aggs map[string]*series
}

var _ workload.Recorder = (*Recorder)(nil)

// series is the state of one Key.
type series struct {
	key              Key
	mu               sync.Mutex
	latency, service *hdr.PackedHistogram
	figs             int       // the histograms' significant digits
	aggs             []*series // the aggregates this series is in
	count, errors    int64
	errorsBy         map[string]int64
	dropped, incompl int64
	clamped          int64
	latSum           int64 // ns, exact
	latMax, svcMax   int64 // ns, exact, unclamped
	tick             int64 // current interval; -1 before the first result
	cur              *IntervalSnapshot
	closed           []IntervalSnapshot
}

// New returns an empty Recorder.
//
// Errors: ErrInvalid (wrapped) for negative bounds, Highest < 2 × Lowest, or
// SigFigs outside 1..5.
func New(cfg Config) (*Recorder, error) {
	if cfg.Lowest == 0 {
		cfg.Lowest = DefaultLowest
	}
	if cfg.Highest == 0 {
		cfg.Highest = DefaultHighest
	}
	if cfg.SigFigs == 0 {
		cfg.SigFigs = DefaultSigFigs
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.SeriesSigFigs == 0 {
		cfg.SeriesSigFigs = cfg.SigFigs
	}
	var errs []error
	if cfg.Lowest < 0 || cfg.Highest < 0 {
		errs = append(errs, fmt.Errorf("Lowest %v and Highest %v must be > 0", cfg.Lowest, cfg.Highest))
	} else if cfg.Highest < 2*cfg.Lowest {
		errs = append(errs, fmt.Errorf("Highest %v must be at least 2 × Lowest %v", cfg.Highest, cfg.Lowest))
	}
	if cfg.SigFigs < 1 || cfg.SigFigs > 5 {
		errs = append(errs, fmt.Errorf("SigFigs %d must be in 1..5", cfg.SigFigs))
	} else if cfg.SeriesSigFigs < 1 || cfg.SeriesSigFigs > cfg.SigFigs {
		errs = append(errs, fmt.Errorf("SeriesSigFigs %d must be in 1..SigFigs (%d)", cfg.SeriesSigFigs, cfg.SigFigs))
	}
	names := map[string]bool{}
	for i, a := range cfg.Aggregates {
		switch {
		case a.Name == "":
			errs = append(errs, fmt.Errorf("Aggregates[%d]: Name is empty", i))
		case names[a.Name]:
			errs = append(errs, fmt.Errorf("Aggregates[%d]: Name %q is another aggregate's", i, a.Name))
		}
		names[a.Name] = true
	}
	if cfg.Warmup < 0 {
		errs = append(errs, fmt.Errorf("Warmup %v must be ≥ 0", cfg.Warmup))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new recorder: %w: %w", ErrInvalid, err)
	}
	r := &Recorder{cfg: cfg, series: map[Key]*series{}}
	if len(cfg.Aggregates) > 0 {
		r.cfg.Aggregates = slices.Clone(cfg.Aggregates)
		r.aggs = make(map[string]*series, len(cfg.Aggregates))
		for _, a := range cfg.Aggregates {
			r.aggs[a.Name] = &series{latency: r.newHist(cfg.SigFigs), service: r.newHist(cfg.SigFigs), figs: cfg.SigFigs, tick: -1}
		}
	}
	return r, nil
}

// Config returns the configuration with defaults filled in.
func (r *Recorder) Config() Config { return r.cfg }

func (r *Recorder) newHist(figs int) *hdr.PackedHistogram {
	return hdr.NewPacked(int64(r.cfg.Lowest), int64(r.cfg.Highest), figs)
}

// get returns the series of k, creating it.
func (r *Recorder) get(k Key) *series {
	r.mu.RLock()
	s := r.series[k]
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.series[k]; s != nil {
		return s
	}
	if s = r.reserved[k]; s != nil {
		delete(r.reserved, k)
	} else {
		s = r.newSeries(k)
	}
	r.series[k] = s
	return s
}

func (r *Recorder) newSeries(k Key) *series {
	figs := r.cfg.SeriesSigFigs
	s := &series{key: k, latency: r.newHist(figs), service: r.newHist(figs), figs: figs, tick: -1}
	for _, a := range r.cfg.Aggregates {
		if a.In == nil || a.In(k.Tenant, k.Class) {
			s.aggs = append(s.aggs, r.aggs[a.Name])
		}
	}
	return s
}

// Reserve makes the series of keys now (about 0.8 KB each, their two
// histograms empty) instead of when each first records, so that a run
// which knows its tenants and classes up front holds their memory from its
// start: a power-law population's rare tenants otherwise keep adding series
// for as long as the run lasts. A reserved series that nothing was
// recorded into is in no summary, export, interval or Len, as if never
// made; reserving a key that has one already changes nothing.
func (r *Recorder) Reserve(keys ...Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reserved == nil {
		r.reserved = make(map[Key]*series, len(keys))
	}
	// Size the map of recorded series for every key too, so that it does
	// not grow (and copy itself) as they first record.
	series := make(map[Key]*series, len(r.series)+len(r.reserved)+len(keys))
	maps.Copy(series, r.series)
	r.series = series
	for _, k := range keys {
		if r.series[k] == nil && r.reserved[k] == nil {
			r.reserved[k] = r.newSeries(k)
		}
	}
}

// clamp returns d in ns clamped into [Lowest, Highest] and whether it was
// above Highest. A time below Lowest is below the histogram's resolution:
// raising it to Lowest loses nothing worth counting.
func (r *Recorder) clamp(d time.Duration) (int64, bool) {
	switch {
	case d < r.cfg.Lowest:
		return int64(r.cfg.Lowest), false
	case d > r.cfg.Highest:
		return int64(r.cfg.Highest), true
	}
	return int64(d), false
}

// Record adds one result: a dropped op (workload.ErrDropped) is only
// counted; any other op adds its Latency to the response-time histogram
// (incomplete ops too, with their elapsed time when the run gave up on them)
// and, if it started, its Service to the service-time histogram.
func (r *Recorder) Record(res workload.Result) {
	if res.Op.At < r.cfg.Warmup {
		r.discarded.Add(1)
		return
	}
	dropped := errors.Is(res.Err, workload.ErrDropped)
	incomplete := !dropped && errors.Is(res.Err, workload.ErrIncomplete)
	class := ""
	if res.Err != nil && !dropped && !incomplete {
		class = DefaultErrorClass
		if r.cfg.Classify != nil {
			class = r.cfg.Classify(res.Err)
		}
	}
	switch {
	case dropped:
		r.dropped.Add(1)
	case incomplete:
		r.incompl.Add(1)
	case res.Err != nil:
		r.errs.Add(1)
	}
	r.recorded.Add(1)

	s := r.get(Key{Tenant: res.Op.Tenant, Class: res.Op.Class})
	defer r.version.Add(1) // after add below: the result is in s and its aggregates
	r.add(s, res, dropped, incomplete, class)
	for _, a := range s.aggs {
		r.add(a, res, dropped, incomplete, class)
	}
}

// add records res into s, under its lock.
func (r *Recorder) add(s *series, res workload.Result, dropped, incomplete bool, class string) {
	lat := res.Latency()
	s.mu.Lock()
	defer s.mu.Unlock()
	iv := r.interval(s, res.Op.At+lat)
	if dropped {
		s.dropped++
		if iv != nil {
			iv.Dropped++
		}
		return
	}
	v, clamped := r.clamp(lat)
	s.latency.RecordValue(v) // cannot fail: v is within the histogram's range
	s.count++
	s.latSum += int64(lat)
	s.latMax = max(s.latMax, int64(lat))
	if clamped {
		s.clamped++
	}
	if !res.Start.IsZero() {
		svc := res.Service()
		v, clamped := r.clamp(svc)
		s.service.RecordValue(v)
		s.svcMax = max(s.svcMax, int64(svc))
		if clamped {
			s.clamped++
		}
	}
	switch {
	case incomplete:
		s.incompl++
	case class != "":
		s.errors++
		if s.errorsBy == nil {
			s.errorsBy = map[string]int64{}
		}
		s.errorsBy[class]++
	}
	if iv != nil {
		iv.hist.RecordValue(v)
		iv.Count++
		iv.max = max(iv.max, int64(lat))
		switch {
		case incomplete:
			iv.Incomplete++
		case class != "":
			iv.Errors++
		}
	}
}

// interval returns the open interval of s that a result ending at end (an
// offset from the run start) falls into, closing the previous one if end is
// past it; nil without a time series. A result ending in an interval already
// closed (results race at the edges) goes into the open one.
func (r *Recorder) interval(s *series, end time.Duration) *IntervalSnapshot {
	if r.cfg.Interval < 0 {
		return nil
	}
	tick := max(int64(end/r.cfg.Interval), 0)
	if tick > s.tick {
		if s.cur != nil {
			s.closed = append(s.closed, r.finish(*s.cur, true))
		}
		s.tick = tick
		s.cur = &IntervalSnapshot{Tick: tick, Start: time.Duration(tick) * r.cfg.Interval,
			Tenant: s.key.Tenant, Class: s.key.Class, hist: r.newHist(s.figs)}
	}
	return s.cur
}

// finish fills the percentiles of iv, compacting its histogram if it is final.
func (r *Recorder) finish(iv IntervalSnapshot, final bool) IntervalSnapshot {
	if final {
		iv.hist.Compact()
	} else {
		iv.hist = iv.hist.Clone()
	}
	p := iv.hist.ValueAtPercentilesSlice([]float64{50, 99})
	// A percentile is its bucket's highest equivalent value, which may lie
	// just above the exact maximum: cap it there.
	iv.Max = time.Duration(iv.max)
	iv.P50, iv.P99 = min(time.Duration(p[0]), iv.Max), min(time.Duration(p[1]), iv.Max)
	return iv
}

// Totals are live counts over every key, cheap enough for a progress display.
type Totals struct {
	// Recorded counts results kept (dropped and incomplete included).
	Recorded int64
	// Errors, Dropped and Incomplete count those results by outcome.
	Errors, Dropped, Incomplete int64
	// Discarded counts results discarded as warm-up.
	Discarded int64
}

// Len returns the number of series (tenant × class keys) recorded so far
// (reserved series that nothing was recorded into are not counted).
func (r *Recorder) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.series)
}

// Totals returns the counts so far.
func (r *Recorder) Totals() Totals {
	return Totals{Recorded: r.recorded.Load(), Errors: r.errs.Load(), Dropped: r.dropped.Load(),
		Incomplete: r.incompl.Load(), Discarded: r.discarded.Load()}
}

// Summary describes one tenant × class, or a merge of several.
type Summary struct {
	// Tenant and Class are the key; 0 and "" in a merged summary.
	Tenant int
	Class  string
	// Count is the number of response times recorded: completed ops, with
	// or without an error, and incomplete ops. Dropped ops are not in it.
	Count int64
	// Errors counts completed ops that returned an error, and
	// ErrorsByClass splits them by Config.Classify.
	Errors        int64
	ErrorsByClass map[string]int64
	// Dropped counts arrivals that were never issued; Incomplete ops the
	// run gave up on (their elapsed time is in the response times).
	Dropped, Incomplete int64
	// Clamped counts response and service times above Highest, recorded
	// as Highest (Max and Mean still use the exact values).
	Clamped int64
	// Response time (from the intended start). Percentiles come from the
	// histogram (within SigFigs), capped at Max; Max and Mean are exact.
	P50, P90, P99, P999, Max, Mean time.Duration
	// Service time (from the actual start) of ops that started.
	ServiceP50, ServiceP99, ServiceMax time.Duration
	// P99CI is the distribution-free 95% confidence interval of P99 (see
	// QuantileCI): a limit inside it makes a verdict on P99 marginal.
	P99CI QuantileCI
	// Spectrum is the response time at each of SpectrumPercentiles, from
	// the same histogram, capped at Max: the distribution's percentile
	// plot.
	Spectrum []time.Duration
	// SigFigs is the significant decimal digits of the histograms the
	// percentiles come from: Config.SeriesSigFigs for a series or a merge
	// of series, Config.SigFigs for an aggregate; 0 when nothing was
	// recorded.
	SigFigs int
}

// SpectrumPercentiles are the percentiles of Summary.Spectrum: the
// points of an HdrHistogram percentile plot, up to 99.99.
var SpectrumPercentiles = []float64{0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.99}

// Summary returns one Summary per key, sorted by tenant then class.
// Summaries are kept until the next result is recorded: a finished
// window's are computed once however often they are read.
func (r *Recorder) Summary() []Summary {
	r.sumMu.Lock()
	defer r.sumMu.Unlock()
	v := r.version.Load()
	if r.sumAt == v+1 {
		return slices.Clone(r.sums)
	}
	var out []Summary
	for _, s := range r.all() {
		s.mu.Lock()
		out = append(out, summarize(s.key, []*series{s}))
		s.mu.Unlock()
	}
	r.sums, r.sumAt = out, v+1
	return slices.Clone(out)
}

// Merged returns one Summary over every key for which filter returns true
// (nil means all), e.g. all quiet tenants of a class. Histograms are merged,
// not their percentiles, at Config.SeriesSigFigs: an Aggregate of the same
// keys has Config.SigFigs. Tenant and Class are 0 and "".
func (r *Recorder) Merged(filter func(tenant int, class string) bool) Summary {
	var picked []*series
	for _, s := range r.all() {
		if filter == nil || filter(s.key.Tenant, s.key.Class) {
			picked = append(picked, s)
		}
	}
	for _, s := range picked {
		s.mu.Lock()
	}
	defer func() {
		for _, s := range picked {
			s.mu.Unlock()
		}
	}()
	return summarize(Key{}, picked)
}

// Aggregate returns the Summary of the aggregate named name
// (Config.Aggregates), recorded at Config.SigFigs; false when the Recorder
// has no aggregate of that name. Tenant and Class are 0 and "". Like
// Summary's, it is kept until the next result is recorded.
func (r *Recorder) Aggregate(name string) (Summary, bool) {
	a := r.aggs[name]
	if a == nil {
		return Summary{}, false
	}
	r.sumMu.Lock()
	v := r.version.Load()
	if m, ok := r.aggSums[name]; ok && m.at == v+1 {
		r.sumMu.Unlock()
		return m.sum, true
	}
	r.sumMu.Unlock()
	a.mu.Lock()
	sum := summarize(Key{}, []*series{a})
	a.mu.Unlock()
	r.sumMu.Lock()
	if r.aggSums == nil {
		r.aggSums = map[string]memo{}
	}
	r.aggSums[name] = memo{at: v + 1, sum: sum}
	r.sumMu.Unlock()
	return sum, true
}

// AggregateIntervals returns the interval snapshots of the aggregate named
// name, sorted by tick, at Config.SigFigs (as MergedIntervals of its series
// would, at theirs); false when the Recorder has no aggregate of that name.
// The last one may still be growing. A result recorded after one that
// ended in a later interval goes into the aggregate's open interval, as in
// a series: results recorded out of order at an interval's edge may fall in
// the next interval of the aggregate where their series kept them.
func (r *Recorder) AggregateIntervals(name string) ([]IntervalSnapshot, bool) {
	a := r.aggs[name]
	if a == nil {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Clone(a.closed)
	if a.cur != nil {
		out = append(out, r.finish(*a.cur, false))
	}
	return out, true
}

// memo is a Summary of one version.
type memo struct {
	at  int64 // version+1
	sum Summary
}

// MergedAs is Merged(filter) kept under name until the next result is
// recorded: a caller that merges the same set more than once (a finished
// window's quiet tenants for its rows and again for its assertions) names
// it, and the histograms are merged once. Every call with one name must
// pass the same filter.
func (r *Recorder) MergedAs(name string, filter func(tenant int, class string) bool) Summary {
	r.sumMu.Lock()
	v := r.version.Load()
	if m, ok := r.merged[name]; ok && m.at == v+1 {
		r.sumMu.Unlock()
		return m.sum
	}
	r.sumMu.Unlock()
	sum := r.Merged(filter)
	r.sumMu.Lock()
	if r.merged == nil {
		r.merged = map[string]memo{}
	}
	r.merged[name] = memo{at: v + 1, sum: sum}
	r.sumMu.Unlock()
	return sum
}

// all returns every series, sorted by key. Locks are taken in this order.
func (r *Recorder) all() []*series {
	r.mu.RLock()
	out := make([]*series, 0, len(r.series))
	for _, s := range r.series {
		out = append(out, s)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *series) int { return compareKeys(a.key, b.key) })
	return out
}

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Class, b.Class))
}

// summarize merges ss (locked by the caller) into one Summary.
func summarize(k Key, ss []*series) Summary {
	sum := Summary{Tenant: k.Tenant, Class: k.Class}
	var lat, svc *hdr.PackedHistogram
	var latSum int64
	for _, s := range ss {
		if lat == nil {
			lat, svc = s.latency, s.service
			if len(ss) > 1 {
				lat, svc = lat.Clone(), svc.Clone()
			}
		} else {
			lat.Merge(s.latency)
			svc.Merge(s.service)
		}
		sum.Count += s.count
		sum.Errors += s.errors
		sum.Dropped += s.dropped
		sum.Incomplete += s.incompl
		sum.Clamped += s.clamped
		latSum += s.latSum
		sum.Max = max(sum.Max, time.Duration(s.latMax))
		sum.ServiceMax = max(sum.ServiceMax, time.Duration(s.svcMax))
		for c, n := range s.errorsBy {
			if sum.ErrorsByClass == nil {
				sum.ErrorsByClass = map[string]int64{}
			}
			sum.ErrorsByClass[c] += n
		}
	}
	if lat == nil || sum.Count == 0 {
		return sum
	}
	sum.SigFigs = int(lat.SignificantFigures())
	p := lat.ValueAtPercentilesSlice([]float64{50, 90, 99, 99.9})
	// A percentile is its bucket's highest equivalent value, which may lie
	// just above the exact maximum: cap it there.
	capAt := func(v int64, m time.Duration) time.Duration { return min(time.Duration(v), m) }
	sum.P50, sum.P90, sum.P99, sum.P999 = capAt(p[0], sum.Max), capAt(p[1], sum.Max), capAt(p[2], sum.Max), capAt(p[3], sum.Max)
	sum.Mean = time.Duration(latSum / sum.Count)
	for _, v := range lat.ValueAtPercentilesSlice(SpectrumPercentiles) {
		sum.Spectrum = append(sum.Spectrum, capAt(v, sum.Max))
	}
	sum.P99CI = QuantileCIOf(lat, 0.99, DefaultConfidence, sum.Max)
	if svc.TotalCount() > 0 {
		p = svc.ValueAtPercentilesSlice([]float64{50, 99})
		sum.ServiceP50, sum.ServiceP99 = capAt(p[0], sum.ServiceMax), capAt(p[1], sum.ServiceMax)
	}
	return sum
}

// LatencyHistogram returns a copy of k's response-time histogram (ns), or nil
// if nothing was recorded for k: for distributions, CDFs or export
// (PackedHistogram.Encode writes the HdrHistogram V2 format).
func (r *Recorder) LatencyHistogram(k Key) *hdr.PackedHistogram {
	r.mu.RLock()
	s := r.series[k]
	r.mu.RUnlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latency.Clone()
}

// IntervalSnapshot is one key's results that ended in one interval.
type IntervalSnapshot struct {
	// Tick numbers the interval: it covers results that ended in
	// [Start, Start + Config.Interval) after the run start, Start =
	// Tick × Interval.
	Tick  int64
	Start time.Duration
	// Tenant and Class are the key; 0 and "" in a merged snapshot.
	Tenant int
	Class  string
	// Counts as in Summary, for this interval.
	Count, Errors, Dropped, Incomplete int64
	// P50 and P99 come from the interval's histogram; Max is exact.
	P50, P99, Max time.Duration

	max  int64
	hist *hdr.PackedHistogram
}

// Intervals returns every key's interval snapshots, sorted by tick, tenant
// and class. A key has no snapshot for an interval in which none of its
// results ended. The last interval of each key may still be growing.
func (r *Recorder) Intervals() []IntervalSnapshot {
	var out []IntervalSnapshot
	for _, s := range r.all() {
		s.mu.Lock()
		out = append(out, s.closed...)
		if s.cur != nil {
			out = append(out, r.finish(*s.cur, false))
		}
		s.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b IntervalSnapshot) int { return cmp.Compare(a.Tick, b.Tick) })
	return out
}

// MergedIntervals merges, tick by tick, the snapshots of the keys for which
// filter returns true (nil means all): their histograms are merged (at
// Config.SeriesSigFigs) and their counts added. Tenant and Class are 0 and
// "".
func (r *Recorder) MergedIntervals(filter func(tenant int, class string) bool) []IntervalSnapshot {
	byTick := map[int64]*IntervalSnapshot{}
	for _, iv := range r.Intervals() {
		if filter != nil && !filter(iv.Tenant, iv.Class) {
			continue
		}
		m := byTick[iv.Tick]
		if m == nil {
			m = &IntervalSnapshot{Tick: iv.Tick, Start: iv.Start, hist: r.newHist(r.cfg.SeriesSigFigs)}
			byTick[iv.Tick] = m
		}
		m.hist.Merge(iv.hist)
		m.Count += iv.Count
		m.Errors += iv.Errors
		m.Dropped += iv.Dropped
		m.Incomplete += iv.Incomplete
		m.max = max(m.max, iv.max)
	}
	var out []IntervalSnapshot
	for _, tick := range slices.Sorted(maps.Keys(byTick)) {
		out = append(out, r.finish(*byTick[tick], true))
	}
	return out
}
