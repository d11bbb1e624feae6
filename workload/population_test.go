package workload_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/noisysim/noisysim/workload"
)

func sumShares(p workload.Population) float64 {
	s := 0.0
	for _, t := range p.Tenants {
		s += t.Share
	}
	return s
}

func TestNewPopulationShape(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      workload.PopulationConfig
		tenants  int
		dominant float64
	}{
		{"defaults are 50 tenants, zipf, 60%", workload.PopulationConfig{}, 50, 0.6},
		{"pareto", workload.PopulationConfig{Distribution: workload.Pareto}, 50, 0.6},
		{"zipf s=1.5", workload.PopulationConfig{Tenants: 10, DominantShare: 0.3, Exponent: 1.5}, 10, 0.3},
		{"pareto alpha=3", workload.PopulationConfig{Tenants: 200, Distribution: workload.Pareto, Exponent: 3}, 200, 0.6},
		{"two tenants", workload.PopulationConfig{Tenants: 2, DominantShare: 0.9}, 2, 0.9},
		{"flat zipf s=0", workload.PopulationConfig{Tenants: 5, Exponent: 0}, 5, 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := workload.NewPopulation(tc.cfg, 7)
			if err != nil {
				t.Fatal(err)
			}
			if p.Len() != tc.tenants {
				t.Fatalf("got %d tenants, want %d", p.Len(), tc.tenants)
			}
			if d := p.Dominant(); d.ID != 1 || !d.Dominant || d.Share != tc.dominant {
				t.Errorf("dominant tenant = %+v, want ID 1 with share %v", d, tc.dominant)
			}
			if s := sumShares(p); math.Abs(s-1) > 1e-9 {
				t.Errorf("shares sum to %v, want 1", s)
			}
			for i, tn := range p.Tenants {
				if tn.ID != i+1 {
					t.Fatalf("Tenants[%d].ID = %d", i, tn.ID)
				}
				if tn.Dominant != (i == 0) {
					t.Errorf("tenant %d: Dominant = %v", tn.ID, tn.Dominant)
				}
				if !(tn.Share > 0) {
					t.Errorf("tenant %d: share %v, want > 0", tn.ID, tn.Share)
				}
			}
			quiet := p.Quiet()
			for i := 1; i < len(quiet); i++ {
				if quiet[i].Share > quiet[i-1].Share {
					t.Errorf("share increases with rank: tenant %d %v > tenant %d %v",
						quiet[i].ID, quiet[i].Share, quiet[i-1].ID, quiet[i-1].Share)
				}
			}
		})
	}
}

func TestNewPopulationZipfShares(t *testing.T) {
	p, err := workload.NewPopulation(workload.PopulationConfig{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := 0.0 // harmonic sum over ranks 2..50
	for i := 2; i <= 50; i++ {
		h += 1 / float64(i)
	}
	for _, id := range []int{2, 10, 50} {
		want := 0.4 * (1 / float64(id)) / h
		if got := p.Share(id); math.Abs(got-want) > 1e-12 {
			t.Errorf("tenant %d share %v, want 0.4 × (1/%d) / H = %v", id, got, id, want)
		}
	}
	if p.Share(0) != 0 || p.Share(51) != 0 {
		t.Error("Share of an unknown tenant is not 0")
	}
}

func TestNewPopulationSeed(t *testing.T) {
	shares := func(cfg workload.PopulationConfig, seed int64) []float64 {
		p, err := workload.NewPopulation(cfg, seed)
		if err != nil {
			t.Fatal(err)
		}
		var s []float64
		for _, tn := range p.Tenants {
			s = append(s, tn.Share)
		}
		return s
	}
	pareto := workload.PopulationConfig{Distribution: workload.Pareto}
	if !slices.Equal(shares(pareto, 3), shares(pareto, 3)) {
		t.Error("pareto: same seed gave different shares")
	}
	if slices.Equal(shares(pareto, 3), shares(pareto, 4)) {
		t.Error("pareto: different seeds gave the same shares")
	}
	zipf := workload.PopulationConfig{}
	if !slices.Equal(shares(zipf, 3), shares(zipf, 4)) {
		t.Error("zipf shares depend on the seed; they should be deterministic")
	}
}

func TestNewPopulationExplicitShares(t *testing.T) {
	cfg := workload.PopulationConfig{Tenants: 10, DominantShare: 0.5, Shares: map[int]float64{2: 0.2, 7: 0.05}}
	p, err := workload.NewPopulation(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Share(2) != 0.2 || p.Share(7) != 0.05 {
		t.Errorf("explicit shares not kept: 2 → %v, 7 → %v", p.Share(2), p.Share(7))
	}
	free := 0.0
	prev := math.Inf(1)
	for _, tn := range p.Quiet() {
		if _, ok := cfg.Shares[tn.ID]; ok {
			continue
		}
		free += tn.Share
		if tn.Share > prev {
			t.Errorf("tenant %d share %v increases over the previous free tenant's %v", tn.ID, tn.Share, prev)
		}
		prev = tn.Share
	}
	if math.Abs(free-0.25) > 1e-9 {
		t.Errorf("tenants without an explicit share hold %v, want 1 − 0.5 − 0.25 = 0.25", free)
	}
	cfg.Shares[2] = 0.1
	if p.Share(2) != 0.2 {
		t.Error("the population aliases the caller's Shares map")
	}
}

func TestNewPopulationErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    workload.PopulationConfig
		fields []string // every field the error must name
	}{
		{"one tenant", workload.PopulationConfig{Tenants: 1}, []string{"Tenants"}},
		{"negative tenants", workload.PopulationConfig{Tenants: -3}, []string{"Tenants"}},
		{"too many tenants", workload.PopulationConfig{Tenants: workload.MaxTenants + 1}, []string{"Tenants"}},
		{"dominant share 1", workload.PopulationConfig{DominantShare: 1}, []string{"DominantShare"}},
		{"dominant share above 1", workload.PopulationConfig{DominantShare: 1.5}, []string{"DominantShare"}},
		{"dominant share negative", workload.PopulationConfig{DominantShare: -0.1}, []string{"DominantShare"}},
		{"dominant share NaN", workload.PopulationConfig{DominantShare: math.NaN()}, []string{"DominantShare"}},
		{"unknown distribution", workload.PopulationConfig{Distribution: "zipff"}, []string{"Distribution"}},
		{"negative exponent", workload.PopulationConfig{Exponent: -1}, []string{"Exponent"}},
		{"infinite exponent", workload.PopulationConfig{Exponent: math.Inf(1)}, []string{"Exponent"}},
		{"share for tenant 1", workload.PopulationConfig{Shares: map[int]float64{1: 0.6}}, []string{"Shares[1]"}},
		{"share for unknown tenant", workload.PopulationConfig{Shares: map[int]float64{51: 0.01}}, []string{"Shares[51]"}},
		{"share for tenant 0", workload.PopulationConfig{Shares: map[int]float64{0: 0.01}}, []string{"Shares[0]"}},
		{"zero share", workload.PopulationConfig{Shares: map[int]float64{2: 0}}, []string{"Shares[2]"}},
		{"share above 1", workload.PopulationConfig{Shares: map[int]float64{2: 1.2}}, []string{"Shares[2]"}},
		{"shares summing above 1", workload.PopulationConfig{Shares: map[int]float64{2: 0.3, 3: 0.2}}, []string{"Shares"}},
		{"shares leaving nothing", workload.PopulationConfig{Shares: map[int]float64{2: 0.3, 3: 0.1}}, []string{"Shares"}},
		{"all shares given, not summing to 1", workload.PopulationConfig{Tenants: 3, Shares: map[int]float64{2: 0.1, 3: 0.1}}, []string{"Shares"}},
		{"several at once", workload.PopulationConfig{Tenants: 1, DominantShare: 2, Distribution: "x"}, []string{"Tenants", "DominantShare", "Distribution"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workload.NewPopulation(tc.cfg, 1)
			if !errors.Is(err, workload.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			got := fieldsOf(err)
			if !slices.Equal(got, tc.fields) {
				t.Errorf("error names fields %q, want %q (error: %v)", got, tc.fields, err)
			}
		})
	}
	ok := workload.PopulationConfig{Tenants: 3, Shares: map[int]float64{2: 0.3, 3: 0.1}}
	if _, err := workload.NewPopulation(ok, 1); err != nil {
		t.Errorf("every tenant given, summing to 1: %v", err)
	}
}

// fieldsOf returns the Field of every *FieldError in err's tree, in order.
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*workload.FieldError); ok {
			out = append(out, fe.Field)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}
