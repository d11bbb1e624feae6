package sim_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/sim"
	"github.com/noisysim/noisysim/workload"
)

// stream returns a Poisson schedule of one class at rate over d, from
// tenants tenants, the first with share dom.
func stream(t testing.TB, tenants int, dom, rate float64, d time.Duration, seed int64) *workload.Stream {
	t.Helper()
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: tenants, DominantShare: dom}, seed)
	if err != nil {
		t.Fatal(err)
	}
	s, err := workload.NewStream(pop, []workload.ClassSpec{{Name: "q", Rate: rate}}, d, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// collect sums a run's latencies and counts its errors by kind.
type collect struct {
	n, errs int64
	sum     time.Duration
	byErr   map[error]int64
	order   bool
	last    time.Time
}

func (c *collect) Record(r workload.Result) {
	if r.End.Before(c.last) {
		c.order = false
	}
	c.last = r.End
	if r.Err != nil {
		c.errs++
		for _, e := range []error{sim.ErrQueueFull, sim.ErrWaitExceeded, sim.ErrAcquireTimeout, sim.ErrStatementTimeout, workload.ErrDropped, workload.ErrIncomplete} {
			if errors.Is(r.Err, e) {
				c.byErr[e]++
			}
		}
		return
	}
	c.n++
	c.sum += r.Latency()
}

func newCollect() *collect { return &collect{byErr: map[error]int64{}, order: true} }

// An M/M/1 queue (Poisson arrivals at λ, exponential work of mean 1/μ, one
// core) has mean response time 1/(μ − λ), with FCFS (pool of one
// connection, the rest wait for it) and with processor sharing (a large
// pool, every call on the one core at once) alike; utilisation λ/μ.
func TestMM1MeanResponse(t *testing.T) {
	const (
		lambda = 500.0 // per s
		mean   = time.Millisecond
	)
	want := time.Duration(float64(time.Second) / (1/mean.Seconds() - lambda)) // 2 ms
	for _, tc := range []struct {
		name string
		pool int
	}{
		{"FCFS pool of one", 1},
		{"processor sharing", 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newCollect()
			cfg := sim.Config{
				Nodes:   []sim.Node{{Name: "n", Cores: 1}},
				Pools:   []sim.Pool{{Name: "p", Size: tc.pool}},
				Classes: map[string]sim.Class{"q": {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Exponential(mean)}},
				Seed:    7,
			}
			d := 400 * time.Second
			st, err := sim.Run(context.Background(), stream(t, 2, 0.5, lambda, d, 1), cfg, rec, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rec.errs != 0 || !rec.order {
				t.Fatalf("errors %d (%v), results in order %v", rec.errs, rec.byErr, rec.order)
			}
			got := rec.sum / time.Duration(rec.n)
			if math.Abs(float64(got-want))/float64(want) > 0.08 {
				t.Errorf("mean response %v, want %v ± 8%% (%d calls)", got, want, rec.n)
			}
			util := st.Busy[0].Seconds() / d.Seconds()
			if math.Abs(util-0.5) > 0.03 {
				t.Errorf("utilisation %.3f, want 0.5 ± 0.03", util)
			}
			t.Logf("%d calls, mean response %v (want %v), utilisation %.3f, %d events", rec.n, got, want, util, st.Events)
		})
	}
}

// Two cores, calls of 10 ms each, 4 at once: each runs at half speed, so
// all four end at 20 ms (processor sharing over the cores).
func TestProcessorSharingOverCores(t *testing.T) {
	src := workload.Schedule{Duration: time.Second}
	for i := range 4 {
		src.Ops = append(src.Ops, workload.Op{Seq: int64(i), Tenant: i + 1, Class: "q"})
	}
	var ends []time.Duration
	cfg := sim.Config{
		Nodes:   []sim.Node{{Name: "n", Cores: 2}},
		Pools:   []sim.Pool{{Name: "p", Size: 10}},
		Classes: map[string]sim.Class{"q": {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(10 * time.Millisecond)}},
	}
	var db time.Duration
	_, err := sim.Run(context.Background(), src.Source(), cfg, workload.RecorderFunc(func(r workload.Result) {
		ends = append(ends, r.End.Sub(sim.Epoch))
	}), func(o sim.Outcome) { db += o.DBTime })
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ends {
		if e != 20*time.Millisecond {
			t.Errorf("ends %v, want every call at 20ms", ends)
			break
		}
	}
	if db != 80*time.Millisecond {
		t.Errorf("DB time %v, want 80ms", db)
	}
}

// Slice: on a node of 2 cores with a 4 ms slice, of 4 calls of 10 ms at
// once the first two run at once, the last two wait 0–4 ms for a core
// before sharing: they end last, the last of all later than processor
// sharing's 20 ms but not by more than the slice.
func TestSlice(t *testing.T) {
	src := workload.Schedule{Duration: time.Second}
	for i := range 4 {
		src.Ops = append(src.Ops, workload.Op{Seq: int64(i), Tenant: i + 1, Class: "q"})
	}
	ends := map[int64]time.Duration{}
	cfg := sim.Config{
		Nodes:   []sim.Node{{Name: "n", Cores: 2, Slice: 4 * time.Millisecond}},
		Pools:   []sim.Pool{{Name: "p", Size: 10}},
		Classes: map[string]sim.Class{"q": {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(10 * time.Millisecond)}},
	}
	_, err := sim.Run(context.Background(), src.Source(), cfg, workload.RecorderFunc(func(r workload.Result) {
		if r.Err != nil {
			t.Errorf("op %d: %v", r.Op.Seq, r.Err)
		}
		ends[r.Op.Seq] = r.End.Sub(sim.Epoch)
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != 4 || max(ends[0], ends[1]) >= min(ends[2], ends[3]) || max(ends[2], ends[3]) <= 20*time.Millisecond || max(ends[2], ends[3]) > 24*time.Millisecond {
		t.Errorf("ends %v, want ops 0 and 1 first, the last in (20ms, 24ms]", ends)
	}
}

// Interference: on a machine of 2 cores with Interference 0.5, a call beside
// one other busy core runs at 1/1.5 of its speed, wherever that core's call
// runs (another node of the same machine, or its own node); a node on a
// machine of its own is not slowed; the busy cores count at most the
// machine's.
func TestInterference(t *testing.T) {
	const ms = time.Millisecond
	type op struct {
		class string
		at    time.Duration
	}
	for _, tc := range []struct {
		name     string
		machines []sim.Machine
		nodes    []sim.Node // "q" runs on node 0, "long" on the last
		ops      []op
		want     map[string]time.Duration // each class's last end
	}{
		{"alone", []sim.Machine{{Cores: 2, Interference: 0.5}},
			[]sim.Node{{Cores: 1}}, []op{{"q", 0}}, map[string]time.Duration{"q": 10 * ms}},
		// q is slowed through its 10 ms of work (15 ms); long did 10 ms of
		// its 100 then, the other 90 at full speed after.
		{"beside another node's call", []sim.Machine{{Cores: 2, Interference: 0.5}},
			[]sim.Node{{Cores: 1}, {Cores: 1}}, []op{{"long", 0}, {"q", 0}}, map[string]time.Duration{"q": 15 * ms, "long": 105 * ms}},
		{"the other node on a machine of its own", []sim.Machine{{Cores: 2, Interference: 0.5}, {Cores: 2, Interference: 0.5}},
			[]sim.Node{{Cores: 1}, {Cores: 1, Machine: 1}}, []op{{"long", 0}, {"q", 0}}, map[string]time.Duration{"q": 10 * ms, "long": 100 * ms}},
		{"no machines", nil,
			[]sim.Node{{Cores: 1}, {Cores: 1}}, []op{{"long", 0}, {"q", 0}}, map[string]time.Duration{"q": 10 * ms, "long": 100 * ms}},
		// long starts at 5 ms: q ran 5 ms alone, its other 5 ms of work
		// at 1/1.5 (to 12.5 ms), while long did 5 ms of its 100.
		{"a call arriving midway", []sim.Machine{{Cores: 2, Interference: 0.5}},
			[]sim.Node{{Cores: 1}, {Cores: 1}}, []op{{"q", 0}, {"long", 5 * ms}}, map[string]time.Duration{"q": 12500 * time.Microsecond, "long": 12500*time.Microsecond + 95*ms}},
		// Four calls on a node of 4 cores keep 4 busy, counted as the
		// machine's 2: each at 1/1.5.
		{"busy cores up to the machine's", []sim.Machine{{Cores: 2, Interference: 0.5}},
			[]sim.Node{{Cores: 4}}, []op{{"q", 0}, {"q", 0}, {"q", 0}, {"q", 0}}, map[string]time.Duration{"q": 15 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := workload.Schedule{Duration: time.Second}
			for i, o := range tc.ops {
				src.Ops = append(src.Ops, workload.Op{Seq: int64(i), Tenant: i + 1, Class: o.class, At: o.at})
			}
			last := len(tc.nodes) - 1
			cfg := sim.Config{
				Machines: tc.machines, Nodes: tc.nodes,
				Pools: []sim.Pool{{Name: "p", Size: 10}},
				Classes: map[string]sim.Class{
					"q":    {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(10 * ms)},
					"long": {Limiter: -1, Pools: []int{0}, Nodes: []int{last}, Service: sim.Constant(100 * ms)},
				},
			}
			got := map[string]time.Duration{}
			_, err := sim.Run(context.Background(), src.Source(), cfg, workload.RecorderFunc(func(r workload.Result) {
				if r.Err != nil {
					t.Errorf("%s: %v", r.Op.Class, r.Err)
				}
				got[r.Op.Class] = max(got[r.Op.Class], r.End.Sub(sim.Epoch))
			}), nil)
			if err != nil {
				t.Fatal(err)
			}
			for class, want := range tc.want {
				if d := got[class] - want; d < -time.Microsecond || d > time.Microsecond {
					t.Errorf("%s ends at %v, want %v", class, got[class], want)
				}
			}
		})
	}
}

// Overhead: of a 10 ms service time, 8 ms is off the cores. Alone a call
// takes its 10 ms; 10 calls at once on one core share only their 2 ms of
// work (all done at 20 ms), then each holds its connection 8 ms more: 28 ms
// each, where all-work calls would end at 100 ms.
func TestOverheadOffTheCores(t *testing.T) {
	for _, tc := range []struct {
		name     string
		calls    int
		overhead float64
		want     time.Duration // each call's latency
		busy     time.Duration // the node's
	}{
		{"alone", 1, 0.8, 10 * time.Millisecond, 2 * time.Millisecond},
		{"ten at once", 10, 0.8, 28 * time.Millisecond, 20 * time.Millisecond},
		{"ten at once, all work", 10, 0, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := workload.Schedule{Duration: time.Second}
			for i := range tc.calls {
				src.Ops = append(src.Ops, workload.Op{Seq: int64(i), Tenant: i + 1, Class: "q"})
			}
			cfg := sim.Config{
				Nodes: []sim.Node{{Name: "n", Cores: 1}},
				Pools: []sim.Pool{{Name: "p", Size: 10}},
				Classes: map[string]sim.Class{"q": {Limiter: -1, Pools: []int{0}, Nodes: []int{0},
					Service: sim.Constant(10 * time.Millisecond), Overhead: tc.overhead}},
			}
			var ends []time.Duration
			var db time.Duration
			st, err := sim.Run(context.Background(), src.Source(), cfg, workload.RecorderFunc(func(r workload.Result) {
				ends = append(ends, r.End.Sub(sim.Epoch))
			}), func(o sim.Outcome) { db += o.DBTime })
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ends {
				if e != tc.want {
					t.Fatalf("ends %v, want every call at %v", ends, tc.want)
				}
			}
			if db != time.Duration(tc.calls)*tc.want {
				t.Errorf("DB time %v, want %v: the connection is held through the overhead", db, time.Duration(tc.calls)*tc.want)
			}
			if d := st.Busy[0] - tc.busy; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("node busy %v, want %v: only the work is on the cores", st.Busy[0], tc.busy)
			}
		})
	}
}

// The limiter: one tenant sends 10 calls at once, cap 2, queue 3, max wait
// 15 ms, 10 ms each on a node of its own: 2 run, 3 wait, 5 are rejected
// queue_full at once; the 2 calls running end at 10 ms and hand their slots
// to the first two waiters (ending at 20 ms); the third waiter would wait
// until 20 ms and is rejected wait_exceeded at 15 ms.
func TestLimiter(t *testing.T) {
	src := workload.Schedule{Duration: time.Second}
	for i := range 10 {
		src.Ops = append(src.Ops, workload.Op{Seq: int64(i), Tenant: 1, Class: "q"})
	}
	rec := newCollect()
	cfg := sim.Config{
		Nodes:    []sim.Node{{Name: "n", Cores: 8}},
		Pools:    []sim.Pool{{Name: "p", Size: 10}},
		Limiters: []sim.Limiter{{Name: "l", MaxPerTenant: 2, MaxQueue: 3, MaxWait: 15 * time.Millisecond}},
		Classes:  map[string]sim.Class{"q": {Limiter: 0, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(10 * time.Millisecond)}},
	}
	st, err := sim.Run(context.Background(), src.Source(), cfg, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.n != 4 || rec.byErr[sim.ErrQueueFull] != 5 || rec.byErr[sim.ErrWaitExceeded] != 1 {
		t.Errorf("ok %d, queue_full %d, wait_exceeded %d; want 4, 5, 1", rec.n, rec.byErr[sim.ErrQueueFull], rec.byErr[sim.ErrWaitExceeded])
	}
	if r := st.Limiters[0][1]; r.QueueFull != 5 || r.WaitExceeded != 1 {
		t.Errorf("limiter counted %+v, want 5 queue_full, 1 wait_exceeded", r)
	}
	// The first two end at 10 ms, the next two (handed the slots then) at 20 ms.
	if want := 10*2 + 20*2; rec.sum != time.Duration(want)*time.Millisecond {
		t.Errorf("sum of latencies %v, want %dms", rec.sum, want)
	}
}

// Pool acquire timeout and statement timeout, and calls cut off at the end.
func TestTimeouts(t *testing.T) {
	src := workload.Schedule{Duration: 100 * time.Millisecond}
	for i := range 3 {
		src.Ops = append(src.Ops, workload.Op{Seq: int64(i), Tenant: 1, Class: "slow"})
	}
	src.Ops = append(src.Ops, workload.Op{Seq: 3, Tenant: 1, Class: "endless", At: time.Millisecond})
	rec := newCollect()
	cfg := sim.Config{
		Nodes: []sim.Node{{Name: "n", Cores: 4}},
		Pools: []sim.Pool{{Name: "p", Size: 1, AcquireTimeout: 5 * time.Millisecond}, {Name: "e", Size: 1}},
		Classes: map[string]sim.Class{
			"slow":    {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(time.Second), Timeout: 50 * time.Millisecond},
			"endless": {Limiter: -1, Pools: []int{1}, Nodes: []int{0}, Service: sim.Constant(time.Hour)},
		},
		Drain: time.Second,
	}
	st, err := sim.Run(context.Background(), src.Source(), cfg, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.byErr[sim.ErrAcquireTimeout] != 2 || rec.byErr[sim.ErrStatementTimeout] != 1 || rec.byErr[workload.ErrIncomplete] != 1 {
		t.Errorf("errors %v: want 2 acquire timeouts, 1 statement timeout, 1 incomplete", rec.byErr)
	}
	if st.Incomplete != 1 || st.Issued != 4 {
		t.Errorf("stats %+v", st.RunStats)
	}
}

func TestInvalidConfig(t *testing.T) {
	src := workload.Schedule{Duration: time.Second, Ops: []workload.Op{{Class: "other", Tenant: 1}}}
	for name, cfg := range map[string]sim.Config{
		"no cores":              {Nodes: []sim.Node{{Name: "n"}}},
		"pool of 0":             {Pools: []sim.Pool{{Name: "p"}}},
		"unknown class":         {Nodes: []sim.Node{{Name: "n", Cores: 1}}, Pools: []sim.Pool{{Name: "p", Size: 1}}},
		"bad index":             {Classes: map[string]sim.Class{"q": {Limiter: 3, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(1)}}},
		"machine out of range":  {Nodes: []sim.Node{{Name: "n", Cores: 1, Machine: 1}}, Machines: []sim.Machine{{Cores: 2}}},
		"negative interference": {Nodes: []sim.Node{{Name: "n", Cores: 1}}, Machines: []sim.Machine{{Cores: 2, Interference: -1}}},
		"overhead of 1": {Nodes: []sim.Node{{Name: "n", Cores: 1}}, Pools: []sim.Pool{{Name: "p", Size: 1}},
			Classes: map[string]sim.Class{"other": {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(1), Overhead: 1}}},
	} {
		if _, err := sim.Run(context.Background(), src.Source(), cfg, newCollect(), nil); !errors.Is(err, sim.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

// A class's Scale multiplies each draw of a tenant's call: calls one at a
// time, each alone on its node, take their tenant's multiple of the draw.
func TestClassScale(t *testing.T) {
	src := workload.Schedule{Duration: time.Second}
	for i := range 3 {
		src.Ops = append(src.Ops, workload.Op{Seq: int64(i), Tenant: i + 1, Class: "q", At: time.Duration(i) * 100 * time.Millisecond})
	}
	got := map[int]time.Duration{}
	cfg := sim.Config{
		Nodes: []sim.Node{{Name: "n", Cores: 1}},
		Pools: []sim.Pool{{Name: "p", Size: 10}},
		Classes: map[string]sim.Class{"q": {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(10 * time.Millisecond),
			Scale: func(tenant int) float64 { return []float64{0, 4, 1, -1}[tenant] }}},
	}
	_, err := sim.Run(context.Background(), src.Source(), cfg, workload.RecorderFunc(func(r workload.Result) {
		got[r.Op.Tenant] = r.Latency()
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]time.Duration{1: 40 * time.Millisecond, 2: 10 * time.Millisecond, 3: 10 * time.Millisecond}
	for tenant, w := range want {
		if got[tenant] != w {
			t.Errorf("tenant %d: %v, want %v (Scale 4, 1, and -1 counted as 1): %v", tenant, got[tenant], w, got)
		}
	}
}
