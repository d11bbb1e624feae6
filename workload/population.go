package workload

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Distribution names how the non-dominant tenants' shares are drawn.
type Distribution string

// Distributions.
const (
	// Zipf gives the tenant of rank i (its ID, 2..N) a weight i^-s, with s =
	// PopulationConfig.Exponent (default DefaultZipfExponent). The shares are
	// deterministic: the seed does not change them.
	Zipf Distribution = "zipf"
	// Pareto draws one weight per tenant from a Pareto(Xm = 1, α =
	// PopulationConfig.Exponent, default DefaultParetoAlpha) distribution
	// (gonum distuv.Pareto) with the population seed and gives the largest
	// weight to the lowest ID. The shares depend on the seed.
	Pareto Distribution = "pareto"
)

// Population defaults.
const (
	// DefaultTenants is the tenant count when PopulationConfig.Tenants is 0.
	DefaultTenants = 50
	// DefaultDominantShare is tenant 1's share when
	// PopulationConfig.DominantShare is 0.
	DefaultDominantShare = 0.6
	// DefaultDistribution is used when PopulationConfig.Distribution is "".
	DefaultDistribution = Zipf
	// DefaultZipfExponent is s in rank^-s: the classical Zipf's law
	// (G. K. Zipf, Human Behavior and the Principle of Least Effort, 1949;
	// M. E. J. Newman, "Power laws, Pareto distributions and Zipf's law",
	// Contemporary Physics 46, 2005).
	DefaultZipfExponent = 1.0
	// DefaultParetoAlpha is α = log₄5 ≈ 1.161, the shape for which 20% of
	// the population holds 80% of the weight (the "80/20 rule"; Newman 2005,
	// section on the Pareto distribution).
	DefaultParetoAlpha = 1.160964047443681
)

// MaxTenants is the largest PopulationConfig.Tenants: 100,000 tenants. A
// population holds a few slices of N entries, and the harness keeps
// histograms and data rows per tenant; beyond this a typo such as an extra
// zero exhausts memory instead of failing.
const MaxTenants = 100_000

// shareTolerance absorbs floating point error when shares are summed.
const shareTolerance = 1e-9

// PopulationConfig describes a tenant population. The zero value is the
// default population: 50 tenants, tenant 1 at 60%, the other 49 following
// Zipf's law with s = 1.
type PopulationConfig struct {
	// Tenants is the number of tenants N, with IDs 1..N. 0 means
	// DefaultTenants; otherwise at least 2 and at most MaxTenants.
	Tenants int
	// DominantShare is tenant 1's share of all traffic, in (0, 1). 0 means
	// DefaultDominantShare.
	DominantShare float64
	// Distribution draws the shares of tenants 2..N. "" means
	// DefaultDistribution.
	Distribution Distribution
	// Exponent is s for Zipf (≥ 0; 0 means DefaultZipfExponent) or α for
	// Pareto (> 0; 0 means DefaultParetoAlpha).
	Exponent float64
	// Shares pins the share of some of tenants 2..N (ID → share in (0, 1)).
	// The remaining tenants share 1 − DominantShare − sum(Shares) by the
	// distribution. Optional.
	Shares map[int]float64
}

// Tenant is one member of a population.
type Tenant struct {
	// ID is 1..N; tenant 1 is the dominant tenant.
	ID int
	// Share is the tenant's fraction of all traffic, in (0, 1).
	Share float64
	// Dominant is true for tenant 1 only.
	Dominant bool
}

// Population is a set of tenants whose shares sum to 1.
type Population struct {
	// Tenants is ordered by ID: Tenants[i].ID == i+1.
	Tenants []Tenant
	// Config is the configuration with defaults filled in.
	Config PopulationConfig
	// Seed is the seed the population was drawn with.
	Seed int64
}

// NewPopulation draws a population. The same cfg and seed always give the
// same population. Tenant 1 gets DominantShare; the others get their explicit
// share from cfg.Shares, or else a share of what is left that follows the
// distribution and does not increase with the tenant's ID.
//
// Errors: every invalid field is reported, each as a *FieldError (unwrapping
// to ErrInvalid), joined: N < 2 or above MaxTenants, a dominant share outside (0, 1), an unknown
// distribution, a negative exponent, a share for an unknown tenant or outside
// (0, 1), shares summing above 1, explicit shares leaving nothing for the
// other tenants.
func NewPopulation(cfg PopulationConfig, seed int64) (Population, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Population{}, fmt.Errorf("build population: %w", err)
	}
	n := cfg.Tenants
	explicit := 0.0
	for _, s := range cfg.Shares {
		explicit += s
	}
	var free []int // tenants without an explicit share, by ID
	for id := 2; id <= n; id++ {
		if _, ok := cfg.Shares[id]; !ok {
			free = append(free, id)
		}
	}
	weights := make([]float64, len(free))
	switch cfg.Distribution {
	case Zipf:
		for i, id := range free {
			weights[i] = math.Pow(float64(id), -cfg.Exponent)
		}
	case Pareto:
		src := rand.NewPCG(uint64(seed), streamID("population"))
		d := distuv.Pareto{Xm: 1, Alpha: cfg.Exponent, Src: src}
		for i := range weights {
			weights[i] = d.Rand()
		}
		slices.SortFunc(weights, func(a, b float64) int { return -cmpFloat(a, b) })
	}
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	rest := 1 - cfg.DominantShare - explicit
	pop := Population{Tenants: make([]Tenant, n), Config: cfg, Seed: seed}
	pop.Tenants[0] = Tenant{ID: 1, Share: cfg.DominantShare, Dominant: true}
	for id, s := range cfg.Shares {
		pop.Tenants[id-1] = Tenant{ID: id, Share: s}
	}
	for i, id := range free {
		pop.Tenants[id-1] = Tenant{ID: id, Share: rest * weights[i] / sum}
	}
	return pop, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// withDefaults fills zero fields with defaults and validates the result.
func (cfg PopulationConfig) withDefaults() (PopulationConfig, error) {
	var errs []error
	switch {
	case cfg.Tenants == 0:
		cfg.Tenants = DefaultTenants
	case cfg.Tenants < 2:
		errs = append(errs, fieldErr("Tenants", cfg.Tenants, "need at least 2 tenants (the dominant one and a quiet one)"))
	case cfg.Tenants > MaxTenants:
		errs = append(errs, fieldErr("Tenants", cfg.Tenants, "at most %d tenants", MaxTenants))
	}
	switch {
	case cfg.DominantShare == 0:
		cfg.DominantShare = DefaultDominantShare
	case !(cfg.DominantShare > 0 && cfg.DominantShare < 1):
		errs = append(errs, fieldErr("DominantShare", cfg.DominantShare, "must be in (0, 1)"))
	}
	if cfg.Distribution == "" {
		cfg.Distribution = DefaultDistribution
	}
	switch cfg.Distribution {
	case Zipf:
		if cfg.Exponent == 0 {
			cfg.Exponent = DefaultZipfExponent
		}
	case Pareto:
		if cfg.Exponent == 0 {
			cfg.Exponent = DefaultParetoAlpha
		}
	default:
		errs = append(errs, fieldErr("Distribution", cfg.Distribution, "unknown distribution (want %q or %q)", Zipf, Pareto))
	}
	if !(cfg.Exponent >= 0) || math.IsInf(cfg.Exponent, 0) {
		errs = append(errs, fieldErr("Exponent", cfg.Exponent, "must be a finite number ≥ 0"))
	}
	explicit := 0.0
	for _, id := range slices.Sorted(maps.Keys(cfg.Shares)) { // stable error order
		s := cfg.Shares[id]
		field := fmt.Sprintf("Shares[%d]", id)
		switch {
		case id == 1:
			errs = append(errs, fieldErr(field, s, "tenant 1 is the dominant tenant: set DominantShare instead"))
		case id < 1 || (cfg.Tenants >= 2 && id > cfg.Tenants):
			errs = append(errs, fieldErr(field, s, "no such tenant (IDs are 1..%d)", cfg.Tenants))
		case !(s > 0 && s < 1):
			errs = append(errs, fieldErr(field, s, "must be in (0, 1)"))
		default:
			explicit += s
		}
	}
	if len(errs) > 0 {
		return cfg, errors.Join(errs...)
	}
	total := cfg.DominantShare + explicit
	free := cfg.Tenants - 1 - len(cfg.Shares)
	switch {
	case total > 1+shareTolerance:
		errs = append(errs, fieldErr("Shares", fmtShares(cfg.Shares),
			"shares sum to %.6g with DominantShare %.6g: above 1", total, cfg.DominantShare))
	case free > 0 && total > 1-shareTolerance:
		errs = append(errs, fieldErr("Shares", fmtShares(cfg.Shares),
			"shares sum to 1 with DominantShare %.6g, leaving nothing for the %d tenants without one", cfg.DominantShare, free))
	case free == 0 && total < 1-shareTolerance:
		errs = append(errs, fieldErr("Shares", fmtShares(cfg.Shares),
			"every tenant has a share but they sum to %.6g with DominantShare %.6g, not 1", total, cfg.DominantShare))
	}
	if len(errs) > 0 {
		return cfg, errors.Join(errs...)
	}
	if cfg.Shares != nil {
		cfg.Shares = maps.Clone(cfg.Shares) // do not alias the caller's map
	}
	return cfg, nil
}

func fmtShares(m map[int]float64) string {
	ids := slices.Sorted(maps.Keys(m))
	s := "{"
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d: %g", id, m[id])
	}
	return s + "}"
}

// Share returns the share of tenant id, or 0 if there is no such tenant.
func (p Population) Share(id int) float64 {
	if id < 1 || id > len(p.Tenants) {
		return 0
	}
	return p.Tenants[id-1].Share
}

// Dominant returns tenant 1.
func (p Population) Dominant() Tenant { return p.Tenants[0] }

// Quiet returns every tenant but the dominant one, by ID.
func (p Population) Quiet() []Tenant { return p.Tenants[1:] }

// Len returns the number of tenants.
func (p Population) Len() int { return len(p.Tenants) }
