package workload

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"
)

// Arrival names the arrival process of a class's senders.
type Arrival string

// Arrival processes.
const (
	// Poisson arrivals: each sender's gaps are exponentially distributed
	// (gonum distuv.Exponential) with rate = the sender's rate in ops/s.
	Poisson Arrival = "poisson"
	// Constant arrivals: each sender sends every 1/rate s, starting at a
	// seeded random phase in [0, 1/rate) so that senders do not all fire
	// at 0.
	Constant Arrival = "constant"
)

// Senders names which tenants send a class of traffic.
type Senders string

// Sender sets.
const (
	// AllTenants: every tenant sends the class.
	AllTenants Senders = "all"
	// DominantTenant: only tenant 1 sends the class.
	DominantTenant Senders = "dominant"
	// QuietTenants: every tenant but tenant 1 sends the class.
	QuietTenants Senders = "quiet"
)

// ClassSpec describes one class of traffic, e.g. "interactive" or "heavy".
type ClassSpec struct {
	// Name identifies the class; unique and not empty.
	Name string
	// Rate is the class's arrival rate in ops/s summed over its senders
	// (> 0). Each sender gets Rate × its share renormalised over the
	// senders. In a closed loop, Rate is only a weight: a user picks among
	// the classes its tenant sends with probability ∝ Rate.
	Rate float64
	// Arrival is the arrival process; "" means Poisson.
	Arrival Arrival
	// Senders is who sends the class; "" means AllTenants.
	Senders Senders
}

// Op is one operation of a schedule.
type Op struct {
	// Seq is the op's position in the unfiltered schedule (0, 1, ...), so
	// an op keeps its Seq in a filtered schedule.
	Seq int64
	// Tenant is the sending tenant's ID.
	Tenant int
	// Class is the ClassSpec.Name of the op's class.
	Class string
	// At is the intended start, as an offset from the run start.
	At time.Duration
	// Payload is what a Source that replays recorded operations hands the
	// executor beside the op (e.g. the statement recorded); nil for a
	// generated schedule. workload never reads it.
	Payload any
}

// MaxOps bounds the expected size of one schedule: 10,000,000 ops (about
// 400 MB). BuildSchedule rejects classes whose rates over the duration
// would draw more, e.g. 1,000 ops/s for 10,000 s, instead of exhausting
// memory.
const MaxOps = 10_000_000

// Schedule is a fixed, seeded list of ops for an open-loop run.
type Schedule struct {
	// Ops are sorted by At (then Class name, then Tenant).
	Ops []Op
	// Seed is the seed the arrivals were drawn with.
	Seed int64
	// Duration is the span the arrivals were drawn over: every At is in
	// [0, Duration).
	Duration time.Duration
	// Classes are the classes with defaults filled in.
	Classes []ClassSpec
}

// BuildSchedule draws the arrivals of every class's senders over [0, d) and
// returns them as one schedule sorted by intended start, held in memory (at
// most MaxOps); NewStream draws the same ops as they are consumed. The same population,
// classes, d and seed always give the same schedule; each (class name,
// tenant) pair has its own random stream, so adding a class or tenant does
// not move the others' arrivals.
//
// filter, if not nil, keeps only the ops for which it returns true; it runs
// after Seq is assigned, so a filtered schedule (e.g. without the dominant
// tenant, for a solo baseline) has exactly the same ops as the full one for
// the tenants it keeps.
//
// Errors: a *FieldError per invalid input (d ≤ 0, no classes, an empty or
// duplicate class name, a rate that is not a finite number > 0, an unknown
// arrival process or sender set, an empty population, or rates that draw
// more than MaxOps ops over d on average), joined; all unwrap to ErrInvalid.
func BuildSchedule(pop Population, classes []ClassSpec, d time.Duration, seed int64, filter func(Op) bool) (Schedule, error) {
	classes, err := validateClasses(pop, classes)
	if d <= 0 {
		err = errors.Join(err, fieldErr("Duration", d, "must be > 0"))
	} else if err == nil {
		expected := 0.0
		for _, c := range classes {
			expected += c.Rate * d.Seconds()
		}
		if expected > MaxOps {
			err = fieldErr("Duration", d, "the classes' rates draw about %.3g ops over it; at most %d", expected, MaxOps)
		}
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("build schedule: %w", err)
	}
	p := streamPlan{pop: pop, classes: classes, d: d, seed: seed, filter: filter}
	g := p.generator()
	expected := 0.0
	for _, c := range classes {
		expected += c.Rate * d.Seconds()
	}
	ops := make([]Op, 0, int(expected*1.01)+16)
	for op, ok := g.next(); ok; op, ok = g.next() {
		ops = append(ops, op)
	}
	return Schedule{Ops: ops, Seed: seed, Duration: d, Classes: classes}, nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// validateClasses fills defaults and reports every invalid field.
func validateClasses(pop Population, classes []ClassSpec) ([]ClassSpec, error) {
	var errs []error
	if len(pop.Tenants) < 2 {
		errs = append(errs, fieldErr("Population", len(pop.Tenants), "need a population of at least 2 tenants (see NewPopulation)"))
	}
	if len(classes) == 0 {
		errs = append(errs, fieldErr("Classes", 0, "need at least one class"))
	}
	out := make([]ClassSpec, len(classes))
	seen := make(map[string]bool, len(classes))
	for i, c := range classes {
		field := func(name string) string { return fmt.Sprintf("Classes[%d].%s", i, name) }
		switch {
		case c.Name == "":
			errs = append(errs, fieldErr(field("Name"), `""`, "must not be empty"))
		case seen[c.Name]:
			errs = append(errs, fieldErr(field("Name"), c.Name, "duplicate class name"))
		}
		seen[c.Name] = true
		if !(c.Rate > 0) || math.IsInf(c.Rate, 0) {
			errs = append(errs, fieldErr(field("Rate"), c.Rate, "must be a finite number of ops/s > 0"))
		}
		switch c.Arrival {
		case "":
			c.Arrival = Poisson
		case Poisson, Constant:
		default:
			errs = append(errs, fieldErr(field("Arrival"), c.Arrival, "unknown arrival process (want %q or %q)", Poisson, Constant))
		}
		switch c.Senders {
		case "":
			c.Senders = AllTenants
		case AllTenants, DominantTenant, QuietTenants:
		default:
			errs = append(errs, fieldErr(field("Senders"), c.Senders, "unknown sender set (want %q, %q or %q)", AllTenants, DominantTenant, QuietTenants))
		}
		out[i] = c
	}
	return out, errors.Join(errs...)
}

// senders returns the tenants of set s.
func (p Population) senders(s Senders) []Tenant {
	switch s {
	case DominantTenant:
		return p.Tenants[:1]
	case QuietTenants:
		return p.Tenants[1:]
	}
	return p.Tenants
}

// sends reports whether tenant id belongs to set s.
func (s Senders) sends(id int) bool {
	switch s {
	case DominantTenant:
		return id == 1
	case QuietTenants:
		return id != 1
	}
	return true
}

// streamID derives the second word of a PCG seed from names, so that each
// named stream is independent of the others.
func streamID(names ...string) uint64 {
	h := fnv.New64a()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// Hash returns a stable hex SHA-256 of the schedule: its Duration and each
// op's Seq, Tenant, Class and At, in order. The same seed and inputs give the
// same hash; any changed arrival changes it. Reports print it beside the seed.
func (s Schedule) Hash() string {
	h := newScheduleHash(s.Duration)
	for _, op := range s.Ops {
		h.add(op)
	}
	return h.sum()
}

// validate checks what RunOpenLoop relies on: ops sorted by At, none before 0.
func (s Schedule) validate() error {
	var prev time.Duration
	for i, op := range s.Ops {
		if op.At < 0 {
			return fieldErr(fmt.Sprintf("Ops[%d].At", i), op.At, "must be ≥ 0")
		}
		if op.At < prev {
			return fieldErr(fmt.Sprintf("Ops[%d].At", i), op.At, "ops must be sorted by At (previous op is at %v)", prev)
		}
		prev = op.At
	}
	return nil
}
