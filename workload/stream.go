package workload

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Source hands an open-loop run its ops one at a time, in order of At.
// RunOpenLoopSource pulls the next op when the previous one is issued, so a
// Source that draws its ops as it goes (Stream) keeps memory flat however
// long the run. A Source is used by one goroutine.
type Source interface {
	// Next returns the next op, or false when there are no more. Ops must
	// come sorted by At, none before 0.
	Next() (Op, bool)
	// Duration is the span the ops were drawn over: every At is in
	// [0, Duration). The run drains from its end.
	Duration() time.Duration
}

// Sized is an optional interface of a Source that knows how many ops it
// holds in all; RunOpenLoopSource uses it to count unissued ops when a run is
// cancelled (RunStats.Unissued, Scheduled).
type Sized interface {
	Len() int64
}

var (
	_ Source = (*Stream)(nil)
	_ Sized  = (*Stream)(nil)
	_ Source = (*sliceSource)(nil)
	_ Sized  = (*sliceSource)(nil)
)

// Source returns a Source over s's ops. Each call starts from the first op.
func (s Schedule) Source() Source { return &sliceSource{s: s} }

type sliceSource struct {
	s Schedule
	i int
}

func (ss *sliceSource) Next() (Op, bool) {
	if ss.i >= len(ss.s.Ops) {
		return Op{}, false
	}
	ss.i++
	return ss.s.Ops[ss.i-1], true
}

func (ss *sliceSource) Duration() time.Duration { return ss.s.Duration }
func (ss *sliceSource) Len() int64              { return int64(len(ss.s.Ops)) }

// Stream draws a schedule's arrivals as they are consumed: the same ops, in
// the same order, with the same Seq and the same Hash as BuildSchedule with
// the same inputs, holding one pending arrival per (class, sender) instead of
// the whole schedule. Its memory is proportional to tenants × classes, not to
// the run's length, and it has no cap on the number of ops.
//
// A Stream is consumed once, by one goroutine; Hash and Len may be called
// from any goroutine at any time (they draw the schedule again on a copy).
type Stream struct {
	plan streamPlan
	gen  generator

	summaryOnce sync.Once
	hash        string
	n           int64
}

// streamPlan is what a Stream is drawn from.
type streamPlan struct {
	pop     Population
	classes []ClassSpec // validated, defaults filled, in the caller's order
	d       time.Duration
	seed    int64
	filter  func(Op) bool
	seg     Segment
}

// MaxRate bounds a class's rate in a Stream: 1e9 ops/s, one op per
// nanosecond, the resolution of Op.At.
const MaxRate = 1e9

// NewStream validates its inputs as BuildSchedule does (without the MaxOps
// bound; a class's rate is at most MaxRate instead) and returns a Stream over [0, d). filter, if not nil, keeps only the
// ops for which it returns true, after Seq is assigned, as in BuildSchedule;
// it is called from the consuming goroutine and from Hash and Len.
//
// Errors: a *FieldError per invalid input (d ≤ 0, no classes, an empty or
// duplicate class name, a rate that is not a finite number > 0, an unknown
// arrival process or sender set, an empty population, a rate above
// MaxRate), joined; all unwrap to ErrInvalid.
func NewStream(pop Population, classes []ClassSpec, d time.Duration, seed int64, filter func(Op) bool) (*Stream, error) {
	classes, err := validateClasses(pop, classes)
	for i, c := range classes {
		if c.Rate > MaxRate {
			err = errors.Join(err, fieldErr(fmt.Sprintf("Classes[%d].Rate", i), c.Rate, "must be at most %.0g ops/s (one op per ns)", MaxRate))
		}
	}
	if d <= 0 {
		err = errors.Join(err, fieldErr("Duration", d, "must be > 0"))
	}
	if err != nil {
		return nil, fmt.Errorf("new stream: %w", err)
	}
	p := streamPlan{pop: pop, classes: classes, d: d, seed: seed, filter: filter}
	return &Stream{plan: p, gen: p.generator()}, nil
}

// Slice returns a new Stream over the same inputs that gives only seg's
// ops (see Segment): the same ops, Seq and At as s gives, every sender's
// arrivals dealt out in turn to the segments. Hash and Len are the
// slice's. Errors: ErrSegment (wrapped) for an invalid seg.
func (s *Stream) Slice(seg Segment) (*Stream, error) {
	if err := seg.Validate(); err != nil {
		return nil, err
	}
	p := s.plan
	p.seg = seg
	return &Stream{plan: p, gen: p.generator()}, nil
}

// Segment returns the slice of the schedule s gives (zero: all of it).
func (s *Stream) Segment() Segment { return s.plan.seg }

// Next returns the next op of the schedule, or false after the last.
func (s *Stream) Next() (Op, bool) { return s.gen.next() }

// Duration returns the span the arrivals are drawn over.
func (s *Stream) Duration() time.Duration { return s.plan.d }

// Seed returns the seed the arrivals are drawn with.
func (s *Stream) Seed() int64 { return s.plan.seed }

// Classes returns the classes with defaults filled in.
func (s *Stream) Classes() []ClassSpec { return slices.Clone(s.plan.classes) }

// Hash returns the schedule's hash, equal to Schedule.Hash of the schedule
// BuildSchedule draws from the same inputs. The first call of Hash or Len
// draws the whole schedule once (time proportional to its ops, memory to its
// senders); later calls return the cached figure.
func (s *Stream) Hash() string {
	s.summarize()
	return s.hash
}

// Len returns the number of ops in the schedule (after the filter); see Hash
// for its cost.
func (s *Stream) Len() int64 {
	s.summarize()
	return s.n
}

func (s *Stream) summarize() {
	s.summaryOnce.Do(func() {
		g := s.plan.generator()
		h := newScheduleHash(s.plan.d)
		for op, ok := g.next(); ok; op, ok = g.next() {
			h.add(op)
			s.n++
		}
		s.hash = h.sum()
	})
}

// scheduleHash is Schedule.Hash computed op by op.
type scheduleHash struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64*4 + 64]byte
}

func newScheduleHash(d time.Duration) *scheduleHash {
	sh := &scheduleHash{h: sha256.New()}
	b := append(sh.buf[:0], "noisysim schedule v1\x00"...)
	b = binary.AppendVarint(b, int64(d))
	sh.h.Write(b)
	return sh
}

func (sh *scheduleHash) add(op Op) {
	b := binary.AppendVarint(sh.buf[:0], op.Seq)
	b = binary.AppendVarint(b, int64(op.Tenant))
	b = binary.AppendUvarint(b, uint64(len(op.Class)))
	b = append(b, op.Class...)
	b = binary.AppendVarint(b, int64(op.At))
	sh.h.Write(b)
}

func (sh *scheduleHash) sum() string { return hex.EncodeToString(sh.h.Sum(nil)) }

// sender draws one (class, tenant) pair's arrivals, one at a time, with the
// same random stream and arithmetic as appendArrivals.
type sender struct {
	at      time.Duration // the pending arrival
	k       int64         // the pending arrival's index among the sender's arrivals (0, 1, ...)
	class   string
	tenant  int
	poisson bool
	rnd     *rand.Rand
	rate    float64 // Poisson: ops/s
	t       float64 // Poisson: the pending arrival in s
	phase   float64 // Constant: first arrival in s
	period  float64 // Constant: gap in s
	n       int     // Constant: index of the pending arrival
	limit   float64 // d in s
}

// advance draws the sender's next arrival and reports whether it falls
// before the end.
func (s *sender) advance() bool {
	if s.poisson {
		// Exponential gaps: as gonum's distuv.Exponential.Rand, with the
		// *rand.Rand kept instead of made per draw (same values).
		s.t += s.rnd.ExpFloat64() / s.rate
		if s.t >= s.limit {
			return false
		}
		s.at = seconds(s.t)
		return true
	}
	s.n++
	t := s.phase + float64(s.n)*s.period // from the start, never from the previous arrival
	if t >= s.limit {
		return false
	}
	s.at = seconds(t)
	return true
}

// generator merges the senders' arrivals by (At, sender index): a binary
// heap of senders, O(log k) per op for k senders.
type generator struct {
	senders []sender
	heap    []int32 // indexes into senders
	seq     int64
	filter  func(Op) bool
	seg     Segment
}

// generator lays out one sender per (class, tenant), classes by name then
// tenants in population order (the order that breaks ties between equal At),
// each with the seeded stream BuildSchedule uses.
func (p streamPlan) generator() generator {
	byName := slices.Clone(p.classes)
	slices.SortFunc(byName, func(a, b ClassSpec) int { return cmp.Compare(a.Name, b.Name) })
	g := generator{filter: p.filter, seg: p.seg}
	limit := p.d.Seconds()
	for _, c := range byName {
		senders := p.pop.senders(c.Senders)
		sum := 0.0
		for _, t := range senders {
			sum += t.Share
		}
		for _, t := range senders {
			rate := c.Rate * t.Share / sum
			src := rand.NewPCG(uint64(p.seed), streamID("arrivals", c.Name, strconv.Itoa(t.ID)))
			s := sender{class: c.Name, tenant: t.ID, rnd: rand.New(src), rate: rate, limit: limit}
			var ok bool
			if c.Arrival == Constant {
				s.period = 1 / rate
				s.phase = s.rnd.Float64() * s.period // as distuv.Uniform{0, period}.Rand
				s.n = -1
				ok = s.advance()
			} else {
				s.poisson = true
				ok = s.advance()
			}
			g.senders = append(g.senders, s)
			if ok {
				g.heap = append(g.heap, int32(len(g.senders)-1))
			}
		}
	}
	for i := len(g.heap)/2 - 1; i >= 0; i-- {
		g.down(i)
	}
	return g
}

func (g *generator) less(a, b int32) bool {
	sa, sb := &g.senders[a], &g.senders[b]
	return sa.at < sb.at || (sa.at == sb.at && a < b)
}

func (g *generator) down(i int) {
	h := g.heap
	for {
		l, m := 2*i+1, i
		if l < len(h) && g.less(h[l], h[m]) {
			m = l
		}
		if r := l + 1; r < len(h) && g.less(h[r], h[m]) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// next returns the earliest pending arrival that passes the filter.
func (g *generator) next() (Op, bool) {
	for len(g.heap) > 0 {
		i := g.heap[0]
		s := &g.senders[i]
		op := Op{Seq: g.seq, Tenant: s.tenant, Class: s.class, At: s.at}
		keep := g.seg.keeps(int(i), s.k)
		g.seq++
		s.k++
		if !s.advance() {
			last := len(g.heap) - 1
			g.heap[0] = g.heap[last]
			g.heap = g.heap[:last]
		}
		g.down(0)
		if keep && (g.filter == nil || g.filter(op)) {
			return op, true
		}
	}
	return Op{}, false
}
