package workload_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/noisysim/noisysim/workload"
)

func mustPopulation(t testing.TB, cfg workload.PopulationConfig, seed int64) workload.Population {
	t.Helper()
	p, err := workload.NewPopulation(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustSchedule(t testing.TB, pop workload.Population, classes []workload.ClassSpec, d time.Duration, seed int64, filter func(workload.Op) bool) workload.Schedule {
	t.Helper()
	s, err := workload.BuildSchedule(pop, classes, d, seed, filter)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var twoClasses = []workload.ClassSpec{
	{Name: "interactive", Rate: 900, Arrival: workload.Poisson},
	{Name: "heavy", Rate: 100, Arrival: workload.Constant},
}

// TestDominantShareObserved is the power-law generator test: with N = 50 and
// the dominant tenant at 60%, its observed share of a run's ops is 60% ± 2%,
// and the other tenants' observed counts follow their decreasing shares.
func TestDominantShareObserved(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  workload.PopulationConfig
		seed int64
	}{
		{"zipf seed 1", workload.PopulationConfig{}, 1},
		{"zipf seed 42", workload.PopulationConfig{}, 42},
		{"pareto seed 1", workload.PopulationConfig{Distribution: workload.Pareto}, 1},
		{"pareto seed 42", workload.PopulationConfig{Distribution: workload.Pareto}, 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pop := mustPopulation(t, tc.cfg, tc.seed)
			s := mustSchedule(t, pop, twoClasses, 60*time.Second, tc.seed, nil)
			counts := make([]float64, pop.Len()+1)
			for _, op := range s.Ops {
				counts[op.Tenant]++
			}
			n := float64(len(s.Ops))
			if got := counts[1] / n; math.Abs(got-0.6) > 0.02 {
				t.Errorf("dominant tenant's observed share %.4f, want 0.60 ± 0.02", got)
			}
			for _, tn := range pop.Quiet() {
				want := tn.Share * n
				if d := math.Abs(counts[tn.ID] - want); d > 5*math.Sqrt(want)+2 {
					t.Errorf("tenant %d: %v ops, want %.1f ± 5σ", tn.ID, counts[tn.ID], want)
				}
			}
			// Roughly decreasing: a tenant with at least twice another's share
			// sends more ops than it.
			for _, a := range pop.Quiet() {
				for _, b := range pop.Quiet() {
					if a.Share >= 2*b.Share && counts[a.ID] <= counts[b.ID] {
						t.Errorf("tenant %d (share %.4f) sent %v ops, not more than tenant %d (share %.4f) with %v",
							a.ID, a.Share, counts[a.ID], b.ID, b.Share, counts[b.ID])
					}
				}
			}
		})
	}
}

func TestScheduleHash(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	a := mustSchedule(t, pop, twoClasses, 10*time.Second, 5, nil)
	b := mustSchedule(t, pop, twoClasses, 10*time.Second, 5, nil)
	c := mustSchedule(t, pop, twoClasses, 10*time.Second, 6, nil)
	if !slices.Equal(a.Ops, b.Ops) {
		t.Error("same seed gave different ops")
	}
	if a.Hash() != b.Hash() {
		t.Errorf("same seed, different hashes %s and %s", a.Hash(), b.Hash())
	}
	if a.Hash() == c.Hash() {
		t.Errorf("seeds 5 and 6 gave the same hash %s", a.Hash())
	}
	if len(a.Hash()) != 64 {
		t.Errorf("hash %q is not 64 hex digits", a.Hash())
	}
	moved := a
	moved.Ops = slices.Clone(a.Ops)
	moved.Ops[len(moved.Ops)/2].At++
	if moved.Hash() == a.Hash() {
		t.Error("moving one op by 1 ns did not change the hash")
	}
}

func TestScheduleOrderAndRange(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	d := 5 * time.Second
	s := mustSchedule(t, pop, twoClasses, d, 1, nil)
	if s.Seed != 1 || s.Duration != d {
		t.Errorf("Seed, Duration = %d, %v", s.Seed, s.Duration)
	}
	for i, op := range s.Ops {
		if op.Seq != int64(i) {
			t.Fatalf("Ops[%d].Seq = %d", i, op.Seq)
		}
		if op.At < 0 || op.At >= d {
			t.Fatalf("Ops[%d].At = %v, outside [0, %v)", i, op.At, d)
		}
		if i > 0 && op.At < s.Ops[i-1].At {
			t.Fatalf("Ops[%d] at %v before Ops[%d] at %v", i, op.At, i-1, s.Ops[i-1].At)
		}
	}
}

// TestArrivalProcesses checks counts and gaps: constant senders send every
// 1/rate s (count within 1 of rate × d), Poisson senders' totals stay within
// 5σ of rate × d and their gaps have a coefficient of variation near 1.
func TestArrivalProcesses(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{Tenants: 5}, 1)
	d := 100 * time.Second
	const rate = 200.0
	for _, tc := range []struct {
		arrival workload.Arrival
		seed    int64
	}{
		{workload.Constant, 1}, {workload.Constant, 2},
		{workload.Poisson, 1}, {workload.Poisson, 2}, {workload.Poisson, 3},
	} {
		t.Run(string(tc.arrival), func(t *testing.T) {
			s := mustSchedule(t, pop, []workload.ClassSpec{{Name: "c", Rate: rate, Arrival: tc.arrival}}, d, tc.seed, nil)
			byTenant := map[int][]time.Duration{}
			for _, op := range s.Ops {
				byTenant[op.Tenant] = append(byTenant[op.Tenant], op.At)
			}
			want := rate * d.Seconds()
			got := float64(len(s.Ops))
			for _, tn := range pop.Tenants {
				ats := byTenant[tn.ID]
				mean, cv := gapStats(ats)
				expected := rate * tn.Share * d.Seconds()
				switch tc.arrival {
				case workload.Constant:
					if math.Abs(float64(len(ats))-expected) > 1 {
						t.Errorf("tenant %d: %d ops, want %.1f ± 1", tn.ID, len(ats), expected)
					}
					if cv > 1e-6 {
						t.Errorf("tenant %d: constant gaps vary (cv %v)", tn.ID, cv)
					}
					if period := 1 / (rate * tn.Share); math.Abs(mean-period) > 1e-6 {
						t.Errorf("tenant %d: mean gap %v s, want %v s", tn.ID, mean, period)
					}
				case workload.Poisson:
					if math.Abs(cv-1) > 0.15 {
						t.Errorf("tenant %d: Poisson gaps have cv %.3f, want ≈ 1", tn.ID, cv)
					}
				}
			}
			limit := 5 * math.Sqrt(want)
			if tc.arrival == workload.Constant {
				limit = float64(pop.Len())
			}
			if math.Abs(got-want) > limit {
				t.Errorf("%d ops, want %.0f ± %.0f", len(s.Ops), want, limit)
			}
		})
	}
}

// gapStats returns the mean gap in seconds between sorted times and the
// gaps' coefficient of variation.
func gapStats(ats []time.Duration) (mean, cv float64) {
	var gaps []float64
	for i := 1; i < len(ats); i++ {
		gaps = append(gaps, (ats[i] - ats[i-1]).Seconds())
	}
	for _, g := range gaps {
		mean += g
	}
	mean /= float64(len(gaps))
	v := 0.0
	for _, g := range gaps {
		v += (g - mean) * (g - mean)
	}
	v /= float64(len(gaps))
	return mean, math.Sqrt(v) / mean
}

func TestSenders(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	d := 60 * time.Second
	for _, tc := range []struct {
		senders workload.Senders
		ok      func(tenant int) bool
	}{
		{workload.DominantTenant, func(id int) bool { return id == 1 }},
		{workload.QuietTenants, func(id int) bool { return id != 1 }},
		{workload.AllTenants, func(int) bool { return true }},
	} {
		t.Run(string(tc.senders), func(t *testing.T) {
			s := mustSchedule(t, pop, []workload.ClassSpec{{Name: "c", Rate: 100, Arrival: workload.Constant, Senders: tc.senders}}, d, 1, nil)
			for _, op := range s.Ops {
				if !tc.ok(op.Tenant) {
					t.Fatalf("tenant %d sent a %s class", op.Tenant, tc.senders)
				}
			}
			// The class rate is shared among its senders only.
			if n := len(s.Ops); math.Abs(float64(n)-6000) > float64(pop.Len()) {
				t.Errorf("%d ops, want 100/s × 60 s = 6000 ± %d", n, pop.Len())
			}
		})
	}
}

// TestFilterKeepsOps: the solo baseline (no dominant tenant) has exactly the
// quiet tenants' ops of the full schedule.
func TestFilterKeepsOps(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	full := mustSchedule(t, pop, twoClasses, 10*time.Second, 3, nil)
	solo := mustSchedule(t, pop, twoClasses, 10*time.Second, 3, func(op workload.Op) bool { return op.Tenant != 1 })
	want := slices.DeleteFunc(slices.Clone(full.Ops), func(op workload.Op) bool { return op.Tenant == 1 })
	if !slices.Equal(solo.Ops, want) {
		t.Errorf("filtered schedule has %d ops, not the full schedule's %d quiet ops", len(solo.Ops), len(want))
	}
	if len(want) == 0 || len(want) == len(full.Ops) {
		t.Errorf("filter kept %d of %d ops", len(want), len(full.Ops))
	}
}

// TestStreamsIndependent: adding a class does not move another class's arrivals.
func TestStreamsIndependent(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	only := func(s workload.Schedule, class string) []workload.Op {
		var out []workload.Op
		for _, op := range s.Ops {
			if op.Class == class {
				op.Seq = 0
				out = append(out, op)
			}
		}
		return out
	}
	one := mustSchedule(t, pop, twoClasses[:1], 10*time.Second, 3, nil)
	two := mustSchedule(t, pop, twoClasses, 10*time.Second, 3, nil)
	if !slices.Equal(only(one, "interactive"), only(two, "interactive")) {
		t.Error("adding the heavy class moved interactive arrivals")
	}
}

func TestBuildScheduleErrors(t *testing.T) {
	pop := mustPopulation(t, workload.PopulationConfig{}, 1)
	good := workload.ClassSpec{Name: "c", Rate: 1}
	for _, tc := range []struct {
		name    string
		pop     workload.Population
		classes []workload.ClassSpec
		d       time.Duration
		fields  []string
	}{
		{"zero duration", pop, []workload.ClassSpec{good}, 0, []string{"Duration"}},
		{"negative duration", pop, []workload.ClassSpec{good}, -time.Second, []string{"Duration"}},
		{"no classes", pop, nil, time.Second, []string{"Classes"}},
		{"empty population", workload.Population{}, []workload.ClassSpec{good}, time.Second, []string{"Population"}},
		{"empty name", pop, []workload.ClassSpec{{Rate: 1}}, time.Second, []string{"Classes[0].Name"}},
		{"duplicate name", pop, []workload.ClassSpec{good, good}, time.Second, []string{"Classes[1].Name"}},
		{"zero rate", pop, []workload.ClassSpec{{Name: "c"}}, time.Second, []string{"Classes[0].Rate"}},
		{"negative rate", pop, []workload.ClassSpec{{Name: "c", Rate: -1}}, time.Second, []string{"Classes[0].Rate"}},
		{"NaN rate", pop, []workload.ClassSpec{{Name: "c", Rate: math.NaN()}}, time.Second, []string{"Classes[0].Rate"}},
		{"unknown arrival", pop, []workload.ClassSpec{{Name: "c", Rate: 1, Arrival: "bursty"}}, time.Second, []string{"Classes[0].Arrival"}},
		{"unknown senders", pop, []workload.ClassSpec{{Name: "c", Rate: 1, Senders: "some"}}, time.Second, []string{"Classes[0].Senders"}},
		{"several", pop, []workload.ClassSpec{{Name: "c"}, {Name: "c", Rate: 1}}, 0, []string{"Classes[0].Rate", "Classes[1].Name", "Duration"}},
		// More arrivals than fit in memory: an error, never a panic or an
		// allocation of the whole machine.
		{"huge rate", pop, []workload.ClassSpec{{Name: "c", Rate: 1e300}}, time.Second, []string{"Duration"}},
		{"too many ops", pop, []workload.ClassSpec{{Name: "a", Rate: workload.MaxOps / 2}, {Name: "b", Rate: workload.MaxOps / 2}}, 2 * time.Second, []string{"Duration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workload.BuildSchedule(tc.pop, tc.classes, tc.d, 1, nil)
			if !errors.Is(err, workload.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if got := fieldsOf(err); !slices.Equal(got, tc.fields) {
				t.Errorf("error names fields %q, want %q (error: %v)", got, tc.fields, err)
			}
		})
	}
}
