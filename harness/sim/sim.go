package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/noisysim/noisysim/workload"
)

// ErrInvalid marks an unusable Config.
var ErrInvalid = errors.New("invalid simulation")

// ModelName names the model in reports.
const ModelName = "open-loop arrivals → per-tenant limiter (cap, FIFO queue, max wait) → FIFO pool (size, acquire timeout) → node processor sharing over its cores, slowed by the machine's other busy cores (calibrated interference), work drawn from calibrated service times (their overhead share off the cores), scaled per tenant where it grows with the tenant's rows"

// Sampler draws one call's work: its service time on a node alone.
type Sampler func(r *rand.Rand) time.Duration

// Constant returns a Sampler that always draws d.
func Constant(d time.Duration) Sampler { return func(*rand.Rand) time.Duration { return d } }

// Exponential returns a Sampler of exponentially distributed times of
// mean m.
func Exponential(m time.Duration) Sampler {
	return func(r *rand.Rand) time.Duration { return time.Duration(r.ExpFloat64() * float64(m)) }
}

// Node is one database server.
type Node struct {
	Name string
	// Cores is how many calls the node runs at full speed at once; more
	// share them (processor sharing). > 0.
	Cores float64
	// Machine is the index in Config.Machines of the machine the node
	// runs on; ignored when Config.Machines is empty (the node then has a
	// machine of its own without interference).
	Machine int
	// Slice is the scheduler's time slice: a call that starts while the
	// node runs as many calls as it has cores waits for one of them to
	// be preempted, a wait drawn uniformly from [0, Slice), before it
	// shares the cores; the calls running go on at their speed
	// meanwhile. 0 means no wait (pure processor sharing).
	Slice time.Duration
}

// Machine is the hardware one or more nodes run on. Beyond processor
// sharing within a node, calls running on the machine's cores slow each
// other down (shared caches, memory bandwidth, SMT siblings, the
// scheduler): with B cores busy over its nodes (a node with n calls keeps
// min(n, Node.Cores) of them busy), every call on the machine runs at
// 1 / (1 + Interference × (min(B, Cores) − 1)) of its processor-sharing
// speed when B > 1. A call alone on the machine is not slowed.
type Machine struct {
	Name string
	// Cores bounds the busy cores counted; > 0.
	Cores float64
	// Interference is the slowdown per busy core beyond the first: 0.5
	// makes a call beside one other busy core take 1.5× its work. >= 0;
	// 0 means none (pure processor sharing).
	Interference float64
}

// Pool is one connection pool.
type Pool struct {
	Name string
	// Size is the pool's connections; > 0.
	Size int
	// AcquireTimeout bounds a call's wait for a connection; 0 means no
	// bound.
	AcquireTimeout time.Duration
}

// Limiter is a per-tenant concurrency limiter (isolation/limiter's Config).
type Limiter struct {
	Name string
	// MaxPerTenant is the calls of one tenant admitted at once; > 0.
	MaxPerTenant int
	// MaxQueue is the waiters per tenant beyond MaxPerTenant; >= 0.
	MaxQueue int
	// MaxWait is the longest wait for admission; 0 means no bound.
	MaxWait time.Duration
}

// Class is how one workload class's calls run.
type Class struct {
	// Limiter is the index of the class's limiter in Config.Limiters;
	// -1 for none.
	Limiter int
	// Pools and Nodes are the class's pool and the node its work runs on,
	// as indexes in Config.Pools and Config.Nodes; Place chooses the
	// entry for a tenant. Both have the same length, ≥ 1.
	Pools, Nodes []int
	// Place returns the index into Pools and Nodes of the tenant's calls;
	// nil means 0.
	Place func(tenant int) int
	// Service draws a call's service time alone: its work on the node and,
	// with Overhead, a delay beside it.
	Service Sampler
	// Scale, when not nil, multiplies each draw of a tenant's call: a
	// query whose work grows with the tenant's rows (a report over its
	// own orders) takes longer for a larger tenant. A result ≤ 0 counts
	// as 1.
	Scale func(tenant int) float64
	// Overhead is the share of each drawn service time the call spends
	// off the node's cores, holding its connection: the round trip, the
	// driver and the client's own CPU of a real call, which take as long
	// however busy the node is. The rest is work on the node. In [0, 1);
	// 0 means all of it is work.
	Overhead float64
	// Timeout is the statement_timeout: a call running longer on its node
	// ends with ErrStatementTimeout. 0 means none.
	Timeout time.Duration
}

// Config is the model of one configuration.
type Config struct {
	Nodes []Node
	// Machines are the machines the nodes run on (Node.Machine); empty
	// means no interference between any calls.
	Machines []Machine
	Pools    []Pool
	Limiters []Limiter
	Classes  map[string]Class
	// Seed seeds the service-time draws (each class its own stream).
	Seed int64
	// Drain is how long after the source's Duration calls may still end;
	// those running then are incomplete. 0 means workload.DefaultDrain.
	Drain time.Duration
	// MaxInFlight bounds the ops in flight; more are dropped. 0 means
	// workload.DefaultMaxInFlight.
	MaxInFlight int
}

// Outcome is what one call did, for Observers: the node it ran on, when
// its work started there (zero Time unless it did) and its DB time.
type Outcome struct {
	Result workload.Result
	// Node is the index of the node the call ran on, -1 if it never got
	// a connection.
	Node int
	// DBTime is the call's time on its node (connection held, working).
	DBTime time.Duration
}

// Observer receives every Outcome, in order of Result.End, after the
// Recorder has it.
type Observer func(Outcome)

// Stats are a simulation's counters.
type Stats struct {
	workload.RunStats
	// Events is the number of events the simulation processed.
	Events int64
	// Limiters holds, per limiter (Config.Limiters' order), each tenant's
	// rejections by reason.
	Limiters []map[int]Rejections
	// Busy is each node's busy time: the time it had at least one call.
	Busy []time.Duration
}

// Rejections counts one tenant's limiter rejections by reason.
type Rejections struct {
	QueueFull, WaitExceeded int64
}

// Errors a simulated call ends with. The harness classifies them as a
// real run's (queue_full, wait_exceeded, acquire_timeout,
// statement_timeout) by errors.Is.
var (
	ErrQueueFull        = errors.New("simulated limiter: tenant queue full")
	ErrWaitExceeded     = errors.New("simulated limiter: max wait exceeded")
	ErrAcquireTimeout   = errors.New("simulated pool: acquire timeout")
	ErrStatementTimeout = errors.New("simulated database: statement timeout")
)

// Epoch is the wall-clock time a simulated run starts at: Results carry
// Epoch + the virtual offset.
var Epoch = time.Unix(0, 0).UTC()

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for i, n := range c.Nodes {
		if !(n.Cores > 0) || math.IsInf(n.Cores, 0) {
			bad("Nodes[%d] %s: Cores %v must be > 0", i, n.Name, n.Cores)
		}
	}
	for i, n := range c.Nodes {
		if len(c.Machines) > 0 && (n.Machine < 0 || n.Machine >= len(c.Machines)) {
			bad("Nodes[%d] %s: Machine %d out of range", i, n.Name, n.Machine)
		}
	}
	for i, m := range c.Machines {
		if !(m.Cores > 0) || math.IsInf(m.Cores, 0) || !(m.Interference >= 0) || math.IsInf(m.Interference, 0) {
			bad("Machines[%d] %s: Cores %v must be > 0 and Interference %v >= 0", i, m.Name, m.Cores, m.Interference)
		}
	}
	for i, p := range c.Pools {
		if p.Size <= 0 || p.AcquireTimeout < 0 {
			bad("Pools[%d] %s: Size %d must be > 0 and AcquireTimeout %v >= 0", i, p.Name, p.Size, p.AcquireTimeout)
		}
	}
	for i, l := range c.Limiters {
		if l.MaxPerTenant <= 0 || l.MaxQueue < 0 || l.MaxWait < 0 {
			bad("Limiters[%d] %s: MaxPerTenant %d must be > 0, MaxQueue %d and MaxWait %v >= 0", i, l.Name, l.MaxPerTenant, l.MaxQueue, l.MaxWait)
		}
	}
	for name, cl := range c.Classes {
		if cl.Limiter < -1 || cl.Limiter >= len(c.Limiters) {
			bad("class %s: Limiter %d out of range", name, cl.Limiter)
		}
		if len(cl.Pools) == 0 || len(cl.Pools) != len(cl.Nodes) {
			bad("class %s: Pools and Nodes must have the same length ≥ 1", name)
		}
		for i := range cl.Pools {
			if cl.Pools[i] < 0 || cl.Pools[i] >= len(c.Pools) || cl.Nodes[i] < 0 || cl.Nodes[i] >= len(c.Nodes) {
				bad("class %s: entry %d: pool %d or node %d out of range", name, i, cl.Pools[i], cl.Nodes[i])
			}
		}
		if cl.Service == nil {
			bad("class %s: no Service sampler", name)
		}
		if cl.Timeout < 0 {
			bad("class %s: Timeout %v must be >= 0", name, cl.Timeout)
		}
		if !(cl.Overhead >= 0 && cl.Overhead < 1) {
			bad("class %s: Overhead %v must be in [0, 1)", name, cl.Overhead)
		}
	}
	if c.Drain < 0 || c.MaxInFlight < 0 {
		bad("Drain %v and MaxInFlight %d must be >= 0", c.Drain, c.MaxInFlight)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Run simulates src's ops through cfg, hands each op's Result to rec (once,
// in order of End) and, when obs is not nil, its Outcome to obs. It
// returns when every op has ended or was cut off Drain after the source's
// end, or when ctx ends (checked every few thousand events: then with
// ctx.Err()).
//
// Errors: ErrInvalid (wrapped) for an unusable cfg or an op of a class cfg
// does not have, or out of order.
func Run(ctx context.Context, src workload.Source, cfg Config, rec workload.Recorder, obs Observer) (Stats, error) {
	if err := cfg.validate(); err != nil {
		return Stats{}, err
	}
	s := newState(src, cfg, rec, obs)
	if err := s.run(ctx); err != nil {
		return s.stats, err
	}
	return s.stats, nil
}

// event kinds.
const (
	evArrive = iota
	evLimiterDeadline
	evAcquireDeadline
	evNodeDone
	evStatementTimeout
	evEnd
	evDeadline // the head of deadline queue node is due
	evDelayDone
	evSliceDone // a call's wait for a core (Node.Slice) is over
)

type event struct {
	at   int64 // ns from the run's start
	seq  uint64
	kind uint8
	c    *call
	node int
	ver  uint64 // evNodeDone: the node's version it was scheduled at
}

// eventHeap is a binary min-heap of events by (at, seq), typed so that a
// push neither boxes nor allocates (container/heap's interface did both).
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	e := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{}
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return e
}

// deadlines is a FIFO of the deadline events of one fixed wait (a
// limiter's MaxWait, a pool's AcquireTimeout, a class's Timeout): as they
// are pushed at now + the same wait, they come due in the order pushed, so
// only the head needs a place in the event heap (as an evDeadline naming
// the queue, with the head's time and sequence, so the order of events is
// the same as with every deadline in the heap).
type deadlines struct {
	q      []event
	head   int
	inHeap bool
}

// call states.
const (
	stLimiterQueue = iota
	stPoolQueue
	stRunning
	stDelay     // its work done, the rest of its service time off the cores
	stSliceWait // its connection held, waiting for a core (Node.Slice)
	stDone
)

type call struct {
	op     workload.Op
	class  *classRT
	place  int
	state  uint8
	start  int64   // on the node
	finish float64 // the node's attained service at which the work is done
	work   float64 // ns of work, until it joins the node's running calls
	delay  int64   // ns off the cores after the work (Class.Overhead)
	idx    int     // index in the node's heap
	live   int     // index in state.live
}

type classRT struct {
	Class
	rng *rand.Rand
	// deadlines is the index of the class's Timeout queue.
	deadlines int
}

// node is a processor-sharing server.
type node struct {
	cores float64
	slice int64    // ns, Node.Slice
	m     *machine // nil: alone, no interference
	// v is the attained service of each running call since the start, in
	// ns of work, at time last.
	v       float64
	last    int64
	running callHeap
	ver     uint64
	busy    int64
}

func (n *node) rate() float64 {
	if len(n.running) == 0 {
		return 0
	}
	r := math.Min(1, n.cores/float64(len(n.running)))
	if n.m != nil {
		r /= n.m.slow
	}
	return r
}

// machine is the runtime state of a Machine with interference.
type machine struct {
	Machine
	nodes []int
	slow  float64 // 1 + Interference × (busy cores − 1), ≥ 1
}

// update recomputes the slowdown from the nodes' running calls.
func (m *machine) update(nodes []*node) {
	var busy float64
	for _, ni := range m.nodes {
		n := nodes[ni]
		busy += math.Min(float64(len(n.running)), n.cores)
	}
	m.slow = 1 + m.Interference*max(0, math.Min(busy, m.Cores)-1)
}

// advance brings v to time t.
func (n *node) advance(t int64) {
	if len(n.running) > 0 {
		n.v += float64(t-n.last) * n.rate()
		n.busy += t - n.last
	}
	n.last = t
}

// callHeap is a min-heap of the running calls by finish; each call knows
// its index.
type callHeap []*call

func (h callHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *callHeap) push(c *call) {
	c.idx = len(*h)
	*h = append(*h, c)
	h.up(c.idx)
}

func (h callHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !(h[i].finish < h[p].finish) {
			break
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts i down and reports whether it moved.
func (h callHeap) down(i int) bool {
	i0, n := i, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].finish < h[l].finish {
			m = r
		}
		if !(h[m].finish < h[i].finish) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > i0
}

// remove takes the call at index i out of the heap and returns it.
func (h *callHeap) remove(i int) *call {
	q := *h
	n := len(q) - 1
	c := q[i]
	if i != n {
		q.swap(i, n)
	}
	q[n] = nil
	q = q[:n]
	if i < n && !q.down(i) {
		q.up(i)
	}
	*h = q
	c.idx = -1
	return c
}

// fifo is a queue of calls; cancelled calls stay until they reach the head.
type fifo struct {
	q    []*call
	head int
	n    int // calls still waiting
}

func (f *fifo) push(c *call) { f.q = append(f.q, c); f.n++ }

// pop returns the first call still in state want, or nil.
func (f *fifo) pop(want uint8) *call {
	for f.head < len(f.q) {
		c := f.q[f.head]
		f.q[f.head] = nil
		f.head++
		if f.head > 64 && f.head*2 > len(f.q) {
			f.q = append(f.q[:0], f.q[f.head:]...)
			f.head = 0
		}
		if c.state == want {
			f.n--
			return c
		}
	}
	return nil
}

type poolRT struct {
	Pool
	free  int
	queue fifo
	// deadlines is the index of the pool's AcquireTimeout queue.
	deadlines int
}

type tenantLim struct {
	inFlight int
	queue    fifo
}

type limiterRT struct {
	Limiter
	// dense holds tenants 0..maxDense-1 by number, tenants the others.
	dense   []*tenantLim
	tenants map[int]*tenantLim
	rej     map[int]Rejections
	// deadlines is the index of the limiter's MaxWait queue.
	deadlines int
}

// maxDense bounds the tenant numbers a limiter keeps in a slice.
const maxDense = 1 << 20

func (l *limiterRT) tenant(t int) *tenantLim {
	if t >= 0 && t < maxDense {
		if t >= len(l.dense) {
			l.dense = append(l.dense, make([]*tenantLim, t+1-len(l.dense))...)
		}
		tl := l.dense[t]
		if tl == nil {
			tl = &tenantLim{}
			l.dense[t] = tl
		}
		return tl
	}
	tl := l.tenants[t]
	if tl == nil {
		tl = &tenantLim{}
		l.tenants[t] = tl
	}
	return tl
}

type state struct {
	src      workload.Source
	rec      workload.Recorder
	obs      Observer
	classes  map[string]*classRT
	nodes    []*node
	pools    []*poolRT
	lims     []*limiterRT
	events   eventHeap
	seq      uint64
	now      int64
	inFlight int
	maxIn    int
	end      int64
	ended    bool
	stats    Stats
	live     []*call // the calls in flight, in no order
	dls      []deadlines
	err      error
}

func newState(src workload.Source, cfg Config, rec workload.Recorder, obs Observer) *state {
	s := &state{src: src, rec: rec, obs: obs, classes: map[string]*classRT{}}
	for name, cl := range cfg.Classes {
		s.classes[name] = &classRT{Class: cl, deadlines: s.newDeadlines()}
	}
	// Each class draws from a stream of its own, seeded by its name, so
	// that the draws do not depend on map order.
	for name, cl := range s.classes {
		var h uint64 = 14695981039346656037
		for _, b := range []byte(name) {
			h = (h ^ uint64(b)) * 1099511628211
		}
		cl.rng = rand.New(rand.NewPCG(uint64(cfg.Seed), h))
	}
	var ms []*machine
	for _, m := range cfg.Machines {
		ms = append(ms, &machine{Machine: m, slow: 1})
	}
	for i, n := range cfg.Nodes {
		nd := &node{cores: n.Cores, slice: int64(n.Slice)}
		// A machine without interference changes no rate: its nodes are
		// left alone, so nothing is rescheduled on its account.
		if len(ms) > 0 && ms[n.Machine].Interference > 0 {
			nd.m = ms[n.Machine]
			nd.m.nodes = append(nd.m.nodes, i)
		}
		s.nodes = append(s.nodes, nd)
	}
	for _, p := range cfg.Pools {
		s.pools = append(s.pools, &poolRT{Pool: p, free: p.Size, deadlines: s.newDeadlines()})
	}
	for _, l := range cfg.Limiters {
		s.lims = append(s.lims, &limiterRT{Limiter: l, tenants: map[int]*tenantLim{}, rej: map[int]Rejections{}, deadlines: s.newDeadlines()})
	}
	s.maxIn = cfg.MaxInFlight
	if s.maxIn == 0 {
		s.maxIn = workload.DefaultMaxInFlight
	}
	drain := cfg.Drain
	if drain == 0 {
		drain = workload.DefaultDrain
	}
	s.end = int64(src.Duration() + drain)
	return s
}

func (s *state) push(e event) {
	e.seq = s.seq
	s.seq++
	s.events.push(e)
}

func (s *state) newDeadlines() int {
	s.dls = append(s.dls, deadlines{})
	return len(s.dls) - 1
}

// pushDeadline queues e, due a fixed wait from now, on deadline queue qi.
func (s *state) pushDeadline(qi int, e event) {
	e.seq = s.seq
	s.seq++
	d := &s.dls[qi]
	d.q = append(d.q, e)
	if !d.inHeap {
		d.inHeap = true
		s.events.push(event{at: e.at, seq: e.seq, kind: evDeadline, node: qi})
	}
}

// popDeadline takes the head of deadline queue qi, which is due, and puts
// the next head in the event heap.
func (s *state) popDeadline(qi int) event {
	d := &s.dls[qi]
	e := d.q[d.head]
	d.q[d.head] = event{}
	d.head++
	if d.head > 64 && d.head*2 > len(d.q) {
		d.q = append(d.q[:0], d.q[d.head:]...)
		d.head = 0
	}
	if d.head < len(d.q) {
		next := d.q[d.head]
		s.events.push(event{at: next.at, seq: next.seq, kind: evDeadline, node: qi})
	} else {
		d.inHeap = false
	}
	return e
}

func (s *state) nextArrival() {
	op, ok := s.src.Next()
	if !ok {
		return
	}
	if int64(op.At) < s.now {
		s.err = fmt.Errorf("%w: op %d at %v before the previous one", ErrInvalid, op.Seq, op.At)
		return
	}
	s.push(event{at: int64(op.At), kind: evArrive, c: &call{op: op}})
}

func (s *state) run(ctx context.Context) error {
	s.push(event{at: s.end, kind: evEnd})
	s.nextArrival()
	for len(s.events) > 0 && s.err == nil {
		if s.stats.Events%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		e := s.events.pop()
		if e.kind == evDeadline {
			e = s.popDeadline(e.node)
		}
		s.stats.Events++
		s.now = e.at
		switch e.kind {
		case evArrive:
			s.nextArrival()
			s.arrive(e.c)
		case evLimiterDeadline:
			if e.c.state == stLimiterQueue {
				lim := s.lims[e.c.class.Limiter]
				r := lim.rej[e.c.op.Tenant]
				r.WaitExceeded++
				lim.rej[e.c.op.Tenant] = r
				e.c.state = stDone
				lim.tenant(e.c.op.Tenant).queue.n--
				s.finish(e.c, ErrWaitExceeded, 0, -1)
			}
		case evAcquireDeadline:
			if e.c.state == stPoolQueue {
				e.c.state = stDone
				s.pools[e.c.class.Pools[e.c.place]].queue.n--
				s.releaseLimiter(e.c)
				s.finish(e.c, ErrAcquireTimeout, 0, -1)
			}
		case evNodeDone:
			n := s.nodes[e.node]
			if e.ver != n.ver || len(n.running) == 0 {
				continue
			}
			s.advance(e.node)
			c := n.running.remove(0)
			s.leaveNode(c, e.node, nil)
		case evStatementTimeout:
			if e.c.state == stSliceWait {
				s.release(e.c, e.c.class.Nodes[e.c.place], ErrStatementTimeout)
			}
			if e.c.state == stRunning {
				ni := e.c.class.Nodes[e.c.place]
				s.advance(ni)
				s.nodes[ni].running.remove(e.c.idx)
				s.leaveNode(e.c, ni, ErrStatementTimeout)
			}
		case evDelayDone:
			s.release(e.c, e.node, nil)
		case evSliceDone:
			if e.c.state == stSliceWait {
				s.join(e.c, e.node)
			}
		case evEnd:
			s.ended = true
			s.cutOff()
			for _, n := range s.nodes {
				n.advance(s.now)
			}
			s.finishStats()
			return s.err
		}
	}
	for _, n := range s.nodes {
		n.advance(s.now)
	}
	s.finishStats()
	return s.err
}

func (s *state) finishStats() {
	for _, n := range s.nodes {
		s.stats.Busy = append(s.stats.Busy, time.Duration(n.busy))
	}
	for _, l := range s.lims {
		s.stats.Limiters = append(s.stats.Limiters, l.rej)
	}
}

func (s *state) arrive(c *call) {
	cl, ok := s.classes[c.op.Class]
	if !ok {
		s.err = fmt.Errorf("%w: op %d: class %q has no model", ErrInvalid, c.op.Seq, c.op.Class)
		return
	}
	c.class = cl
	s.stats.Scheduled++
	if s.inFlight >= s.maxIn {
		s.stats.Dropped++
		c.state = stDone
		s.record(Outcome{Result: workload.Result{Op: c.op, Intended: s.at(int64(c.op.At)), End: s.at(s.now), Err: workload.ErrDropped}, Node: -1})
		return
	}
	s.stats.Issued++
	s.inFlight++
	c.live = len(s.live)
	s.live = append(s.live, c)
	if cl.Place != nil {
		c.place = cl.Place(c.op.Tenant)
		if c.place < 0 || c.place >= len(cl.Pools) {
			s.err = fmt.Errorf("%w: class %s: Place(%d) = %d out of range", ErrInvalid, c.op.Class, c.op.Tenant, c.place)
			return
		}
	}
	if cl.Limiter < 0 {
		s.acquire(c)
		return
	}
	lim := s.lims[cl.Limiter]
	tl := lim.tenant(c.op.Tenant)
	switch {
	case tl.inFlight < lim.MaxPerTenant:
		tl.inFlight++
		s.acquire(c)
	case tl.queue.n < lim.MaxQueue:
		c.state = stLimiterQueue
		tl.queue.push(c)
		if lim.MaxWait > 0 {
			s.pushDeadline(lim.deadlines, event{at: s.now + int64(lim.MaxWait), kind: evLimiterDeadline, c: c})
		}
	default:
		r := lim.rej[c.op.Tenant]
		r.QueueFull++
		lim.rej[c.op.Tenant] = r
		c.state = stDone
		s.finish(c, ErrQueueFull, 0, -1)
	}
}

// acquire asks the call's pool for a connection.
func (s *state) acquire(c *call) {
	p := s.pools[c.class.Pools[c.place]]
	if p.free > 0 {
		p.free--
		s.startWork(c)
		return
	}
	c.state = stPoolQueue
	p.queue.push(c)
	if p.AcquireTimeout > 0 {
		s.pushDeadline(p.deadlines, event{at: s.now + int64(p.AcquireTimeout), kind: evAcquireDeadline, c: c})
	}
}

func (s *state) startWork(c *call) {
	ni := c.class.Nodes[c.place]
	n := s.nodes[ni]
	s.advance(ni)
	c.state = stRunning
	c.start = s.now
	d := float64(c.class.Service(c.class.rng))
	if c.class.Scale != nil {
		if f := c.class.Scale(c.op.Tenant); f > 0 {
			d *= f
		}
	}
	c.work = max(d*(1-c.class.Overhead), 1)
	c.delay = int64(d * c.class.Overhead)
	if n.slice > 0 && float64(len(n.running)) >= n.cores {
		c.state = stSliceWait
		s.push(event{at: s.now + int64(c.class.rng.Float64()*float64(n.slice)), kind: evSliceDone, c: c, node: ni})
	} else {
		s.join(c, ni)
	}
	if c.class.Timeout > 0 {
		s.pushDeadline(c.class.deadlines, event{at: s.now + int64(c.class.Timeout), kind: evStatementTimeout, c: c})
	}
}

// join puts call c among node ni's running calls, sharing its cores.
func (s *state) join(c *call, ni int) {
	n := s.nodes[ni]
	s.advance(ni)
	c.state = stRunning
	c.finish = n.v + c.work
	n.running.push(c)
	s.reschedule(ni)
}

// advance brings node ni, and every node sharing its machine (whose rate
// its next change may change), to now.
func (s *state) advance(ni int) {
	n := s.nodes[ni]
	if n.m == nil {
		n.advance(s.now)
		return
	}
	for _, nj := range n.m.nodes {
		s.nodes[nj].advance(s.now)
	}
}

// reschedule plans node ni's next completion after its running set
// changed; when that changed its machine's slowdown, the other nodes of
// the machine (advanced to now by advance) are replanned too.
func (s *state) reschedule(ni int) {
	n := s.nodes[ni]
	if m := n.m; m != nil {
		before := m.slow
		m.update(s.nodes)
		if m.slow != before {
			for _, nj := range m.nodes {
				if nj != ni {
					s.plan(nj)
				}
			}
		}
	}
	s.plan(ni)
}

// plan schedules node ni's next completion at its current rate.
func (s *state) plan(ni int) {
	n := s.nodes[ni]
	n.ver++
	if len(n.running) == 0 {
		return
	}
	left := n.running[0].finish - n.v
	at := s.now + int64(math.Ceil(max(left, 0)/n.rate()))
	s.push(event{at: at, kind: evNodeDone, node: ni, ver: n.ver})
}

// leaveNode takes a call whose work on node ni is done (or ended with err)
// through its delay off the cores, if any, then releases it.
func (s *state) leaveNode(c *call, ni int, err error) {
	s.reschedule(ni)
	if err == nil && c.delay > 0 {
		c.state = stDelay
		s.push(event{at: s.now + c.delay, kind: evDelayDone, c: c, node: ni})
		return
	}
	s.release(c, ni, err)
}

// release ends a call that ran on node ni, hands its connection and
// limiter slot on.
func (s *state) release(c *call, ni int, err error) {
	c.state = stDone
	p := s.pools[c.class.Pools[c.place]]
	if next := p.queue.pop(stPoolQueue); next != nil {
		s.startWork(next)
	} else {
		p.free++
	}
	s.releaseLimiter(c)
	s.finish(c, err, time.Duration(s.now-c.start), ni)
}

// releaseLimiter frees the call's limiter slot, passing it to the tenant's
// next waiter.
func (s *state) releaseLimiter(c *call) {
	if c.class.Limiter < 0 {
		return
	}
	tl := s.lims[c.class.Limiter].tenant(c.op.Tenant)
	if next := tl.queue.pop(stLimiterQueue); next != nil {
		s.acquire(next)
		return
	}
	tl.inFlight--
}

func (s *state) at(ns int64) time.Time { return Epoch.Add(time.Duration(ns)) }

func (s *state) finish(c *call, err error, dbTime time.Duration, ni int) {
	s.inFlight--
	s.unlive(c)
	s.stats.Completed++
	if err != nil {
		s.stats.Errors++
	}
	intended := s.at(int64(c.op.At))
	s.record(Outcome{Result: workload.Result{Op: c.op, Intended: intended, Start: intended, End: s.at(s.now), Err: err}, Node: ni, DBTime: dbTime})
}

// unlive takes c out of the calls in flight.
func (s *state) unlive(c *call) {
	last := s.live[len(s.live)-1]
	last.live = c.live
	s.live[c.live] = last
	s.live[len(s.live)-1] = nil
	s.live = s.live[:len(s.live)-1]
}

func (s *state) record(o Outcome) {
	s.rec.Record(o.Result)
	if s.obs != nil {
		s.obs(o)
	}
}

// cutOff ends every call still in flight at the end as incomplete, in
// order of arrival.
func (s *state) cutOff() {
	calls := slices.Clone(s.live)
	slices.SortFunc(calls, func(a, b *call) int { return cmp.Compare(a.op.Seq, b.op.Seq) })
	for _, c := range calls {
		ni, db := -1, time.Duration(0)
		if c.state == stRunning || c.state == stDelay || c.state == stSliceWait {
			ni = c.class.Nodes[c.place]
			db = time.Duration(s.now - c.start)
		}
		c.state = stDone
		s.inFlight--
		s.unlive(c)
		s.stats.Incomplete++
		intended := s.at(int64(c.op.At))
		s.record(Outcome{Result: workload.Result{Op: c.op, Intended: intended, Start: intended, End: s.at(s.now),
			Err: fmt.Errorf("simulated run: %w: %w", workload.ErrIncomplete, context.Canceled)}, Node: ni, DBTime: db})
	}
	// Arrivals after the end (none: the source ends before it) are not drawn.
}
