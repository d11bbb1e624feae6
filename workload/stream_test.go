package workload_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/noisysim/noisysim/workload"
)

func mustStream(t testing.TB, pop workload.Population, classes []workload.ClassSpec, d time.Duration, seed int64, filter func(workload.Op) bool) *workload.Stream {
	t.Helper()
	s, err := workload.NewStream(pop, classes, d, seed, filter)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func drain(src workload.Source) []workload.Op {
	var ops []workload.Op
	for op, ok := src.Next(); ok; op, ok = src.Next() {
		ops = append(ops, op)
	}
	return ops
}

// TestStreamEqualsSchedule: a Stream gives exactly BuildSchedule's ops, Seq
// and hash, for every arrival process, sender set and filter.
func TestStreamEqualsSchedule(t *testing.T) {
	quiet := func(op workload.Op) bool { return op.Tenant != 1 }
	mixed := []workload.ClassSpec{
		{Name: "interactive", Rate: 900, Arrival: workload.Poisson, Senders: workload.QuietTenants},
		{Name: "heavy", Rate: 40, Arrival: workload.Constant, Senders: workload.DominantTenant},
		{Name: "bulk", Rate: 300, Arrival: workload.Constant},
	}
	for _, tc := range []struct {
		name    string
		pop     workload.PopulationConfig
		classes []workload.ClassSpec
		d       time.Duration
		seed    int64
		filter  func(workload.Op) bool
	}{
		{"two classes", workload.PopulationConfig{}, twoClasses, 10 * time.Second, 1, nil},
		{"two classes seed 7 quiet only", workload.PopulationConfig{}, twoClasses, 10 * time.Second, 7, quiet},
		{"sender sets, constant ties", workload.PopulationConfig{Tenants: 200}, mixed, 5 * time.Second, 3, nil},
		{"pareto", workload.PopulationConfig{Distribution: workload.Pareto, Tenants: 1000}, twoClasses, 3 * time.Second, 42, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pop := mustPopulation(t, tc.pop, 1)
			want := mustSchedule(t, pop, tc.classes, tc.d, tc.seed, tc.filter)
			s := mustStream(t, pop, tc.classes, tc.d, tc.seed, tc.filter)
			got := drain(s)
			if len(got) == 0 || !slices.Equal(got, want.Ops) {
				t.Fatalf("stream gave %d ops, schedule %d; equal: %v", len(got), len(want.Ops), slices.Equal(got, want.Ops))
			}
			if s.Hash() != want.Hash() {
				t.Errorf("stream hash %s, schedule hash %s", s.Hash(), want.Hash())
			}
			if s.Len() != int64(len(want.Ops)) {
				t.Errorf("Len = %d, want %d", s.Len(), len(want.Ops))
			}
			if _, ok := s.Next(); ok {
				t.Error("Next returned an op after the last")
			}
		})
	}
}

// TestStreamHashBeforeConsuming: Hash and Len draw on their own copy, so
// asking first does not consume the stream.
func TestStreamHashBeforeConsuming(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	s := mustStream(t, pop, twoClasses, 2*time.Second, 5, nil)
	h, n := s.Hash(), s.Len()
	ops := drain(s)
	if int64(len(ops)) != n || n == 0 {
		t.Errorf("Len %d before consuming, then %d ops", n, len(ops))
	}
	if want := (workload.Schedule{Ops: ops, Duration: 2 * time.Second}).Hash(); h != want {
		t.Errorf("Hash %s, hash of the ops consumed %s", h, want)
	}
}

// TestStreamNoCap: a schedule above MaxOps is refused by BuildSchedule but
// streams (only the first ops are drawn here).
func TestStreamNoCap(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	classes := []workload.ClassSpec{{Name: "c", Rate: 10_000}}
	d := 2 * time.Hour // 72,000,000 ops
	if _, err := workload.BuildSchedule(pop, classes, d, 1, nil); !errors.Is(err, workload.ErrInvalid) {
		t.Fatalf("BuildSchedule over MaxOps: err = %v", err)
	}
	s := mustStream(t, pop, classes, d, 1, nil)
	var last time.Duration
	for i := range 100_000 {
		op, ok := s.Next()
		if !ok || op.Seq != int64(i) || op.At < last {
			t.Fatalf("op %d: %+v, %v (previous at %v)", i, op, ok, last)
		}
		last = op.At
	}
}

func TestNewStreamErrors(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	for _, tc := range []struct {
		name    string
		classes []workload.ClassSpec
		d       time.Duration
		fields  []string
	}{
		{"zero duration", []workload.ClassSpec{{Name: "c", Rate: 1}}, 0, []string{"Duration"}},
		{"NaN rate", []workload.ClassSpec{{Name: "c", Rate: math.NaN()}}, time.Second, []string{"Classes[0].Rate"}},
		{"rate above one op per ns", []workload.ClassSpec{{Name: "c", Rate: 1e300}}, time.Second, []string{"Classes[0].Rate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workload.NewStream(pop, tc.classes, tc.d, 1, nil)
			if !errors.Is(err, workload.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if got := fieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Errorf("error names fields %q, want %q (error: %v)", got, tc.fields, err)
			}
		})
	}
}

// TestOpenLoopSourceStream: a run pulling from a Stream issues the same ops
// at the same intended starts as a run of the built schedule (fake clock).
func TestOpenLoopSourceStream(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	run := func(t *testing.T, stream bool) []workload.Result {
		var rec results
		synctest.Test(t, func(t *testing.T) {
			exec := func(ctx context.Context, op workload.Op) error {
				time.Sleep(time.Duration(op.Seq%5) * time.Millisecond)
				return nil
			}
			var stats workload.RunStats
			var err error
			if stream {
				src := mustStream(t, pop, twoClasses, 2*time.Second, 9, nil)
				stats, err = workload.RunOpenLoopSource(t.Context(), src, exec, &rec, workload.OpenLoopConfig{})
			} else {
				s := mustSchedule(t, pop, twoClasses, 2*time.Second, 9, nil)
				stats, err = workload.RunOpenLoop(t.Context(), s, exec, &rec, workload.OpenLoopConfig{})
			}
			if err != nil {
				t.Fatal(err)
			}
			if stats.Scheduled != stats.Completed || stats.Scheduled < 1500 {
				t.Errorf("stats %+v", stats)
			}
		})
		out := rec.bySeq()
		for i := range out {
			// Wall times differ between the two bubbles; offsets do not.
			out[i].Start, out[i].End = time.Time{}.Add(out[i].Start.Sub(out[i].Intended)), time.Time{}.Add(out[i].End.Sub(out[i].Intended))
			out[i].Intended = time.Time{}.Add(out[i].Op.At)
		}
		return out
	}
	a, b := run(t, false), run(t, true)
	if !slices.EqualFunc(a, b, func(x, y workload.Result) bool {
		return x.Op == y.Op && x.Intended.Equal(y.Intended) && x.Latency() == y.Latency()
	}) {
		t.Errorf("schedule run recorded %d results, stream run %d, not the same", len(a), len(b))
	}
}

// unordered is a Source whose third op goes back in time.
type unordered struct{ i int }

func (u *unordered) Next() (workload.Op, bool) {
	at := []time.Duration{0, 2 * time.Millisecond, time.Millisecond, 3 * time.Millisecond}
	if u.i >= len(at) {
		return workload.Op{}, false
	}
	u.i++
	return workload.Op{Seq: int64(u.i - 1), Class: "c", Tenant: 1, At: at[u.i-1]}, true
}

func (u *unordered) Duration() time.Duration { return 4 * time.Millisecond }

func TestOpenLoopSourceInvalid(t *testing.T) {
	noop := func(context.Context, workload.Op) error { return nil }
	if _, err := workload.RunOpenLoopSource(t.Context(), nil, noop, nil, workload.OpenLoopConfig{}); !errors.Is(err, workload.ErrInvalid) || !slices.Equal(fieldsOf(err), []string{"Source"}) {
		t.Errorf("nil source: err = %v", err)
	}
	synctest.Test(t, func(t *testing.T) {
		var rec results
		stats, err := workload.RunOpenLoopSource(t.Context(), &unordered{}, noop, &rec, workload.OpenLoopConfig{})
		if !errors.Is(err, workload.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		if stats.Scheduled != 2 || stats.Completed != 2 || len(rec.bySeq()) != 2 {
			t.Errorf("the two ops before the bad one: stats %+v, %d recorded", stats, len(rec.bySeq()))
		}
	})
}

// TestOpenLoopSourceCancel: a cancelled run over a Stream counts the ops it
// never reached (Stream is Sized).
func TestOpenLoopSourceCancel(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	synctest.Test(t, func(t *testing.T) {
		src := mustStream(t, pop, twoClasses, 2*time.Second, 9, nil)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		stats, err := workload.RunOpenLoopSource(ctx, src, func(context.Context, workload.Op) error { return nil }, nil, workload.OpenLoopConfig{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if stats.Scheduled != src.Len() || stats.Issued+stats.Unissued != stats.Scheduled || stats.Unissued < 500 || stats.Issued < 500 {
			t.Errorf("stats %+v, stream of %d ops", stats, src.Len())
		}
	})
}
