package workload_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/noisysim/noisysim/workload"
)

// results collects Results safely.
type results struct {
	mu  sync.Mutex
	all []workload.Result
}

func (r *results) Record(res workload.Result) {
	r.mu.Lock()
	r.all = append(r.all, res)
	r.mu.Unlock()
}

// bySeq returns the results sorted by Seq.
func (r *results) bySeq() []workload.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.all)
	slices.SortFunc(out, func(a, b workload.Result) int { return int(a.Op.Seq - b.Op.Seq) })
	return out
}

// every returns a schedule of n ops of tenant 1, class "c", every gap.
func every(n int, gap time.Duration) workload.Schedule {
	s := workload.Schedule{Duration: time.Duration(n) * gap}
	for i := range n {
		s.Ops = append(s.Ops, workload.Op{Seq: int64(i), Tenant: 1, Class: "c", At: time.Duration(i) * gap})
	}
	return s
}

// sleeper is a fake database: op seq takes d[seq] (0 if absent) of fake time.
func sleeper(d map[int64]time.Duration) workload.Executor {
	return func(ctx context.Context, op workload.Op) error {
		time.Sleep(d[op.Seq])
		return nil
	}
}

// TestL8CoordinatedOmission is field case L8: open loop, 1 request per ms,
// 20 requests intended at 0..19 ms, one worker, fake clock, fake database;
// request 0 takes 10 ms, the others 0. The response times must be 10, 9, ...,
// 1 ms then ten 0s: count 20, max 10 ms, exactly 10 samples ≥ 1 ms, mean
// 2.75 ms. (Count 29 or 65 is a double correction; a single sample ≥ 1 ms is
// no correction.) harness/metrics checks the same run through HdrHistogram.
func TestL8CoordinatedOmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec results
		stats, err := workload.RunOpenLoop(t.Context(), every(20, time.Millisecond),
			sleeper(map[int64]time.Duration{0: 10 * time.Millisecond}), &rec, workload.OpenLoopConfig{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		got := rec.bySeq()
		if len(got) != 20 {
			t.Fatalf("recorded %d results, want 20", len(got))
		}
		var sum, maxLat time.Duration
		atLeast1ms := 0
		for i, r := range got {
			want := max(10-i, 0) * int(time.Millisecond)
			if r.Latency() != time.Duration(want) {
				t.Errorf("request %d: response time %v, want %v", i, r.Latency(), time.Duration(want))
			}
			wantService := time.Duration(0)
			if i == 0 {
				wantService = 10 * time.Millisecond
			}
			if r.Service() != wantService {
				t.Errorf("request %d: service time %v, want %v", i, r.Service(), wantService)
			}
			if r.Err != nil {
				t.Errorf("request %d: %v", i, r.Err)
			}
			sum += r.Latency()
			maxLat = max(maxLat, r.Latency())
			if r.Latency() >= time.Millisecond {
				atLeast1ms++
			}
		}
		if maxLat != 10*time.Millisecond || atLeast1ms != 10 || sum/20 != 2750*time.Microsecond {
			t.Errorf("max %v, %d samples ≥ 1 ms, mean %v; want 10ms, 10, 2.75ms", maxLat, atLeast1ms, sum/20)
		}
		want := workload.RunStats{Scheduled: 20, Issued: 20, Completed: 20}
		if got := counts(stats); got != want {
			t.Errorf("stats %+v, want %+v", got, want)
		}
	})
}

// counts returns stats without the times.
func counts(s workload.RunStats) workload.RunStats {
	s.Start, s.End, s.MaxLag = time.Time{}, time.Time{}, 0
	return s
}

// TestOpenLoopLateGeneratorDoesNotRebase: when the generator is held up it
// issues the overdue op at once, its latency shows the delay, and the next op
// still starts at its own intended time (no skipping, no shifting).
func TestOpenLoopLateGeneratorDoesNotRebase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		s := workload.Schedule{Duration: 30 * ms, Ops: []workload.Op{
			{Seq: 0, Tenant: 1, Class: "c", At: 0},
			{Seq: 1, Tenant: 1, Class: "c", At: 1 * ms},  // dropped: op 0 still runs
			{Seq: 2, Tenant: 1, Class: "c", At: 3 * ms},  // due while the generator is held up
			{Seq: 3, Tenant: 1, Class: "c", At: 10 * ms}, // due after it caught up
			{Seq: 4, Tenant: 1, Class: "c", At: 20 * ms},
		}}
		var rec results
		slowDrops := workload.RecorderFunc(func(r workload.Result) {
			if errors.Is(r.Err, workload.ErrDropped) {
				time.Sleep(5 * ms) // holds the generator up until 6 ms
			}
			rec.Record(r)
		})
		stats, err := workload.RunOpenLoop(t.Context(), s, sleeper(map[int64]time.Duration{0: 2 * ms}), slowDrops,
			workload.OpenLoopConfig{MaxInFlight: 1})
		if err != nil {
			t.Fatal(err)
		}
		start := stats.Start
		got := rec.bySeq()
		if len(got) != 5 {
			t.Fatalf("recorded %d results, want 5", len(got))
		}
		if !errors.Is(got[1].Err, workload.ErrDropped) || !got[1].Start.IsZero() {
			t.Errorf("op 1: %+v, want dropped and never started", got[1])
		}
		for _, c := range []struct {
			seq            int
			start, latency time.Duration
		}{
			{0, 0, 2 * ms},
			{2, 6 * ms, 3 * ms}, // issued late, at once; latency counts the 3 ms it was overdue
			{3, 10 * ms, 0},     // on its own time: not rebased to 13 ms
			{4, 20 * ms, 0},
		} {
			r := got[c.seq]
			if r.Start.Sub(start) != c.start || r.Latency() != c.latency || r.Err != nil {
				t.Errorf("op %d: started at %v with latency %v (err %v), want %v and %v",
					c.seq, r.Start.Sub(start), r.Latency(), r.Err, c.start, c.latency)
			}
		}
		if stats.MaxLag != 3*ms {
			t.Errorf("MaxLag %v, want 3ms", stats.MaxLag)
		}
		want := workload.RunStats{Scheduled: 5, Issued: 4, Completed: 4, Dropped: 1}
		if got := counts(stats); got != want {
			t.Errorf("stats %+v, want %+v", got, want)
		}
	})
}

// TestOpenLoopDrops: arrivals beyond MaxInFlight are dropped, recorded per
// tenant × class, and never queued.
func TestOpenLoopDrops(t *testing.T) {
	for _, workers := range []int{0, 1, 4} {
		t.Run(map[int]string{0: "goroutine per op", 1: "one worker", 4: "four workers"}[workers], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var s workload.Schedule
				s.Duration = 10 * time.Millisecond
				for i := range 10 {
					s.Ops = append(s.Ops, workload.Op{Seq: int64(i), Tenant: 1 + i%2, Class: []string{"a", "b"}[i/5], At: time.Duration(i) * time.Millisecond})
				}
				var started atomic.Int64
				slow := func(ctx context.Context, op workload.Op) error {
					started.Add(1)
					time.Sleep(time.Second)
					return nil
				}
				var rec results
				stats, err := workload.RunOpenLoop(t.Context(), s, slow, &rec, workload.OpenLoopConfig{Workers: workers, MaxInFlight: 3})
				if err != nil {
					t.Fatal(err)
				}
				type key struct {
					tenant int
					class  string
				}
				dropped := map[key]int{}
				for _, r := range rec.bySeq() {
					if errors.Is(r.Err, workload.ErrDropped) {
						dropped[key{r.Op.Tenant, r.Op.Class}]++
						if r.Op.Seq < 3 {
							t.Errorf("op %d dropped with nothing in flight before it", r.Op.Seq)
						}
					}
				}
				// ops 0..2 take the three slots; 3..9 are dropped:
				// 3 (t2,a) 4 (t1,a) 5 (t2,b) 6 (t1,b) 7 (t2,b) 8 (t1,b) 9 (t2,b)
				want := map[key]int{{2, "a"}: 1, {1, "a"}: 1, {1, "b"}: 2, {2, "b"}: 3}
				if !mapsEqual(dropped, want) {
					t.Errorf("dropped %v, want %v", dropped, want)
				}
				if workers == 1 && started.Load() != 3 {
					// Three were in flight (one running, two queued): all ran in the drain.
					t.Errorf("executor started %d times, want 3", started.Load())
				}
				wantStats := workload.RunStats{Scheduled: 10, Issued: 3, Completed: 3, Dropped: 7}
				if got := counts(stats); got != wantStats {
					t.Errorf("stats %+v, want %+v", got, wantStats)
				}
			})
		})
	}
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestOpenLoopIncomplete: ops still in flight when the drain expires are
// cancelled and recorded as incomplete with their elapsed time, at the
// deadline, even if the executor is slow to give up.
func TestOpenLoopIncomplete(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		workers int
		// per seq: whether it is recorded incomplete, started, and its latency
		incomplete, started []bool
		latency             []time.Duration
	}{
		{"goroutine per op", 0, []bool{false, true, false}, []bool{true, true, true}, []time.Duration{0, 59 * ms, 0}},
		// op 1 holds the only worker; op 2 is still queued at the deadline.
		{"one worker", 1, []bool{false, true, true}, []bool{true, true, false}, []time.Duration{0, 59 * ms, 58 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := every(3, ms)
				s.Duration = 10 * ms
				var returned atomic.Int64
				stall := func(ctx context.Context, op workload.Op) error {
					if op.Seq != 1 {
						return nil
					}
					<-ctx.Done()
					time.Sleep(time.Second) // slow to give up: must not delay the report
					returned.Add(1)
					return ctx.Err()
				}
				var rec results
				stats, err := workload.RunOpenLoop(t.Context(), s, stall, &rec, workload.OpenLoopConfig{Workers: tc.workers, Drain: 50 * ms})
				if err != nil {
					t.Fatal(err)
				}
				got := rec.bySeq()
				if len(got) != 3 {
					t.Fatalf("recorded %d results, want 3 (each op once)", len(got))
				}
				nIncomplete := int64(0)
				for i, r := range got {
					inc := errors.Is(r.Err, workload.ErrIncomplete)
					if inc {
						nIncomplete++
						if !errors.Is(r.Err, context.Canceled) {
							t.Errorf("op %d: %v does not wrap context.Canceled", i, r.Err)
						}
						if r.End.Sub(stats.Start) != 60*ms {
							t.Errorf("op %d: given up at %v, want at the deadline 10 ms + 50 ms", i, r.End.Sub(stats.Start))
						}
					}
					if inc != tc.incomplete[i] || !r.Start.IsZero() != tc.started[i] || r.Latency() != tc.latency[i] {
						t.Errorf("op %d: incomplete %v, started %v, latency %v; want %v, %v, %v",
							i, inc, !r.Start.IsZero(), r.Latency(), tc.incomplete[i], tc.started[i], tc.latency[i])
					}
				}
				if returned.Load() != 1 {
					t.Error("RunOpenLoop returned before the stalled executor did")
				}
				if stats.Incomplete != nIncomplete || stats.Completed+stats.Incomplete != stats.Issued {
					t.Errorf("stats %+v: Incomplete should be %d and Completed + Incomplete == Issued", stats, nIncomplete)
				}
			})
		})
	}
}

// TestOpenLoopCancel: cancelling ctx stops issuing, gives up on the ops in
// flight at once, and the counts still add up.
func TestOpenLoopCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(5500*time.Microsecond, cancel)
		exec := func(ctx context.Context, op workload.Op) error {
			select {
			case <-time.After(3 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var rec results
		stats, err := workload.RunOpenLoop(ctx, every(20, time.Millisecond), exec, &rec, workload.OpenLoopConfig{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		// Ops 0..5 issued; 0..2 finished by 5 ms; 3..5 in flight; 6..19 never issued.
		want := workload.RunStats{Scheduled: 20, Issued: 6, Completed: 3, Incomplete: 3, Unissued: 14}
		if got := counts(stats); got != want {
			t.Errorf("stats %+v, want %+v", got, want)
		}
		if n := len(rec.bySeq()); n != 6 {
			t.Errorf("recorded %d results, want 6", n)
		}
		if d := stats.End.Sub(stats.Start); d != 5500*time.Microsecond {
			t.Errorf("returned after %v, want at the cancel, 5.5 ms", d)
		}
	})
}

// TestOpenLoopEveryOpOnce runs a busy schedule in real time (under -race in
// CI): every op is recorded exactly once and the counts add up.
func TestOpenLoopEveryOpOnce(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	s := mustSchedule(t, pop, []workload.ClassSpec{{Name: "c", Rate: 20000}}, 100*time.Millisecond, 1, nil)
	for _, cfg := range []workload.OpenLoopConfig{
		{},
		{Workers: 4},
		{Workers: 2, MaxInFlight: 8},
		{MaxInFlight: 8, Drain: -1},
		{PreciseWait: workload.DefaultPreciseWait},
		{PreciseWait: workload.DefaultPreciseWait, Workers: 4},
	} {
		var rec results
		var n atomic.Int64
		exec := func(ctx context.Context, op workload.Op) error {
			if n.Add(1)%7 == 0 {
				return errors.New("boom")
			}
			time.Sleep(time.Duration(op.Seq%3) * 100 * time.Microsecond)
			return nil
		}
		stats, err := workload.RunOpenLoop(t.Context(), s, exec, &rec, cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.bySeq()
		if len(got) != len(s.Ops) {
			t.Fatalf("%+v: recorded %d results for %d ops", cfg, len(got), len(s.Ops))
		}
		var errs int64
		for i, r := range got {
			if r.Op != s.Ops[i] {
				t.Fatalf("%+v: result %d is for op %+v, want %+v", cfg, i, r.Op, s.Ops[i])
			}
			if r.Err != nil && !errors.Is(r.Err, workload.ErrDropped) && !errors.Is(r.Err, workload.ErrIncomplete) {
				errs++
			}
			if r.Latency() < r.Service() || r.Service() < 0 {
				t.Errorf("%+v: op %d latency %v < service %v", cfg, i, r.Latency(), r.Service())
			}
			if !r.Start.IsZero() && r.Start.Before(r.Intended) {
				t.Errorf("%+v: op %d started %v before its intended start", cfg, i, r.Intended.Sub(r.Start))
			}
		}
		if stats.Issued+stats.Dropped+stats.Unissued != stats.Scheduled || stats.Completed+stats.Incomplete != stats.Issued || stats.Errors != errs {
			t.Errorf("%+v: stats do not add up: %+v (errors seen %d)", cfg, stats, errs)
		}
	}
}

func TestOpenLoopInvalid(t *testing.T) {
	noop := func(context.Context, workload.Op) error { return nil }
	unsorted := every(3, time.Millisecond)
	unsorted.Ops[2].At = 0
	for _, tc := range []struct {
		name   string
		s      workload.Schedule
		exec   workload.Executor
		cfg    workload.OpenLoopConfig
		fields []string
	}{
		{"nil executor", every(1, 0), nil, workload.OpenLoopConfig{}, []string{"Executor"}},
		{"negative workers", every(1, 0), noop, workload.OpenLoopConfig{Workers: -1}, []string{"Workers"}},
		{"negative max in flight", every(1, 0), noop, workload.OpenLoopConfig{MaxInFlight: -1}, []string{"MaxInFlight"}},
		{"negative precise wait", every(1, 0), noop, workload.OpenLoopConfig{PreciseWait: -1}, []string{"PreciseWait"}},
		{"unsorted", unsorted, noop, workload.OpenLoopConfig{}, []string{"Ops[2].At"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			_, err := workload.RunOpenLoop(t.Context(), tc.s, tc.exec, workload.RecorderFunc(func(workload.Result) { called = true }), tc.cfg)
			if !errors.Is(err, workload.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if got := fieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Errorf("error names %q, want %q", got, tc.fields)
			}
			if called {
				t.Error("an invalid run recorded results")
			}
		})
	}
}

// goid returns the calling goroutine's id, from its stack trace's header.
func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := strings.Fields(string(buf[:n]))
	return f[1] // "goroutine 17 [running]:"
}

// With a goroutine per op, a goroutine that finished its op takes the next
// arrival: 200 ops 1 ms apart, each taking 2.5 ms, run on about three
// goroutines, not 200; and an arrival never waits for one: 50 ops due at
// once all run at the same time.
func TestOpenLoopReusesGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ids := map[string]bool{}
		exec := func(ctx context.Context, op workload.Op) error {
			mu.Lock()
			ids[goid()] = true
			mu.Unlock()
			time.Sleep(2500 * time.Microsecond)
			return nil
		}
		stats, err := workload.RunOpenLoop(t.Context(), every(200, time.Millisecond), exec, nil, workload.OpenLoopConfig{})
		if err != nil || stats.Completed != 200 {
			t.Fatalf("stats %+v, err %v", stats, err)
		}
		if len(ids) > 4 {
			t.Errorf("200 ops ran on %d goroutines, want at most 4 (3 in flight at a time)", len(ids))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		const n = 50
		var started sync.WaitGroup
		started.Add(n)
		exec := func(ctx context.Context, op workload.Op) error {
			started.Done()
			started.Wait() // returns only when all n run at once
			return nil
		}
		stats, err := workload.RunOpenLoop(t.Context(), every(n, 0), exec, nil, workload.OpenLoopConfig{})
		if err != nil || stats.Completed != n {
			t.Fatalf("stats %+v, err %v", stats, err)
		}
	})
}
