package harness

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// MaxSizedPhase bounds the length check_top may give a phase: a longer
// one is refused as bad input rather than planned (its schedule is drawn to
// be counted).
const MaxSizedPhase = time.Hour

// maxTooFew bounds QuietPlan.TooFew; Pairs - Reaching counts them all.
const maxTooFew = 200

// PlanSamples returns how many quiet tenant × class pairs sc's quiet_p99
// check can judge at its rates and phase lengths (after check_top has
// lengthened them), as the run plans it: the seeded schedule's arrivals
// per pair in the check's window and baseline. It returns nil for a
// scenario without the check (hot shard), or whose window or baseline
// lasts until its actions end (until), or is the same phase (nothing is
// judged), or whose users set the
// pace (load.model closed). Errors wrap scenario.ErrInvalid: check_top
// cannot be met within MaxSizedPhase.
func PlanSamples(sc *scenario.Scenario) (*reports.QuietPlan, error) {
	if !plansSamples(sc) {
		return nil, nil
	}
	pop, err := population(sc)
	if err != nil {
		return nil, err
	}
	plan, _, err := planSamples(pop, classSpecs(sc, nil), sc)
	return plan, err
}

func plansSamples(sc *scenario.Scenario) bool {
	if sc.Load.Model == scenario.ModelClosed || sc.Replaying() {
		return false
	}
	// A phase with until lasts as long as its actions: its arrivals are
	// not known before the run.
	window, baseline := sc.Assertions.QuietP99.QuietWindows()
	if window == baseline {
		return false // judged against itself: every pair is skipped
	}
	for _, name := range []string{window, baseline} {
		if p, ok := sc.Phase(name); ok && p.Until != "" {
			return false
		}
	}
	return true
}

// population draws sc's tenants.
func population(sc *scenario.Scenario) (workload.Population, error) {
	pop, err := workload.NewPopulation(workload.PopulationConfig{
		Tenants:       sc.Tenants.Count,
		DominantShare: sc.Tenants.DominantShare,
		Distribution:  workload.Distribution(sc.Tenants.Distribution),
		Exponent:      sc.Tenants.Exponent,
		Shares:        sc.Tenants.Shares,
	}, sc.Seed)
	if err != nil {
		return pop, fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	return pop, nil
}

// provisionalRate stands for a calibrated class's rate until calibration
// has measured it: such a class is the dominant tenant's alone, so the
// quiet tenants' arrivals do not depend on it.
const provisionalRate = 1.0

// classSpecs returns sc's classes as the schedule draws them; a calibrated
// class at its rate in rates, or provisionalRate.
func classSpecs(sc *scenario.Scenario, rates map[string]float64) []workload.ClassSpec {
	var specs []workload.ClassSpec
	for _, c := range sc.Classes {
		rate := c.Rate
		if c.Calibrated() {
			rate = cmp.Or(rates[c.Name], provisionalRate)
		}
		specs = append(specs, workload.ClassSpec{
			Name: c.Name, Rate: rate,
			Arrival: workload.Arrival(c.Arrival), Senders: workload.Senders(c.Senders),
		})
	}
	return specs
}

type pairKey struct {
	tenant int
	class  string
}

// phaseArrivals counts each tenant × class's arrivals in st, drawn as the
// run's timeline draws them.
func phaseArrivals(pop workload.Population, st step, seed int64) (map[pairKey]int64, error) {
	out := map[pairKey]int64{}
	if len(st.specs) == 0 {
		return out, nil
	}
	senders := st.Senders
	s, err := workload.NewStream(pop, st.specs, st.Span().Duration(), seed,
		func(op workload.Op) bool { return senders.Sends(op.Tenant) })
	if err != nil {
		return nil, fmt.Errorf("%w: phase %s: %w", scenario.ErrInvalid, st.Name, err)
	}
	for op, ok := s.Next(); ok; op, ok = s.Next() {
		out[pairKey{op.Tenant, op.Class}]++
	}
	return out, nil
}

// quietPairs returns the quiet tenant × class pairs that send in st: the
// quiet tenants among its senders × its classes the quiet tenants send,
// tenants busiest first (by share, then id), classes in file order.
func quietPairs(pop workload.Population, sc *scenario.Scenario, st step) []pairKey {
	var classes []string
	for _, spec := range st.specs {
		if c, ok := sc.Class(spec.Name); ok && c.Senders != scenario.SendersDominant {
			classes = append(classes, spec.Name)
		}
	}
	var out []pairKey
	for _, t := range busiestQuiet(pop) {
		if !st.Senders.Sends(t) {
			continue
		}
		for _, c := range classes {
			out = append(out, pairKey{t, c})
		}
	}
	return out
}

// busiestQuiet returns the quiet tenants' ids by share, highest first
// (ties by id).
func busiestQuiet(pop workload.Population) []int {
	var ts []workload.Tenant
	for _, t := range pop.Tenants {
		if t.ID != scenario.DominantTenant {
			ts = append(ts, t)
		}
	}
	slices.SortStableFunc(ts, func(a, b workload.Tenant) int { return cmp.Compare(b.Share, a.Share) })
	out := make([]int, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// planSamples sizes the quiet_p99 window and baseline for check_top (each
// lengthened on its own until every pair of the top tenants that sends in
// it has min_samples arrivals) and counts what every quiet pair will have.
// It returns the plan and the timeline's phases with their lengths.
func planSamples(pop workload.Population, specs []workload.ClassSpec, sc *scenario.Scenario) (*reports.QuietPlan, []scenario.Phase, error) {
	phases := slices.Clone(sc.Steps())
	q := sc.Assertions.QuietP99
	wname, bname := q.QuietWindows()
	wi := slices.IndexFunc(phases, func(p scenario.Phase) bool { return p.Name == wname })
	bi := slices.IndexFunc(phases, func(p scenario.Phase) bool { return p.Name == bname })
	if wi < 0 || bi < 0 {
		return nil, phases, fmt.Errorf("%w: quiet_p99 compares phases %s and %s; the timeline lacks one", scenario.ErrInvalid, wname, bname)
	}
	need := int64(q.MinSamples)
	plan := &reports.QuietPlan{Window: wname, Baseline: bname, MinSamples: need}
	if q.CheckTop != 0 {
		plan.CheckTop = q.CheckTop.String()
		top := busiestQuiet(pop)
		if q.CheckTop != scenario.CheckAll {
			top = top[:min(int(q.CheckTop), len(top))]
		}
		for _, i := range slices.Compact([]int{wi, bi}) {
			if phases[i].Until != "" {
				return nil, phases, fmt.Errorf("%w: %s: phase %s ends on an event (until %s), so check_top cannot size it: give it a length",
					scenario.ErrInvalid, sc.Where("assertions.quiet_p99.check_top"), phases[i].Name, phases[i].Until)
			}
			from := phases[i].Length
			if err := sizePhase(pop, specs, sc, phases, i, top, need); err != nil {
				return nil, phases, err
			}
			if to := phases[i].Length; to != from {
				plan.Lengthened = append(plan.Lengthened, reports.PhaseLength{Phase: phases[i].Name,
					From: from.Duration().Seconds(), To: to.Duration().Seconds()})
			}
		}
	}
	steps := buildTimeline(specs, phases)
	inW, err := phaseArrivals(pop, steps[wi], sc.Seed)
	if err != nil {
		return nil, phases, err
	}
	inB, err := phaseArrivals(pop, steps[bi], sc.Seed)
	if err != nil {
		return nil, phases, err
	}
	for _, k := range quietPairs(pop, sc, steps[wi]) {
		plan.Pairs++
		if inW[k] >= need && inB[k] >= need {
			plan.Reaching++
		} else if len(plan.TooFew) < maxTooFew {
			plan.TooFew = append(plan.TooFew, reports.PlannedPair{Tenant: sc.Tenants.Keys.Key(k.tenant), Class: k.class,
				Window: inW[k], Baseline: inB[k]})
		}
	}
	return plan, phases, nil
}

// sizePhase lengthens phases[i] until every pair of the tenants top that
// sends in it has at least need arrivals: from the fewest arrivals drawn,
// the length is scaled by need / fewest (with 10% to spare) and the
// schedule drawn again, as a new length draws new arrivals.
func sizePhase(pop workload.Population, specs []workload.ClassSpec, sc *scenario.Scenario, phases []scenario.Phase, i int, top []int, need int64) error {
	inTop := map[int]bool{}
	for _, t := range top {
		inTop[t] = true
	}
	for range 50 {
		st := buildTimeline(specs, phases)[i]
		counts, err := phaseArrivals(pop, st, sc.Seed)
		if err != nil {
			return err
		}
		fewest, short := int64(-1), pairKey{}
		for _, k := range quietPairs(pop, sc, st) {
			if inTop[k.tenant] && (fewest < 0 || counts[k] < fewest) {
				fewest, short = counts[k], k
			}
		}
		if fewest < 0 || fewest >= need {
			return nil
		}
		grow := 2.0
		if fewest > 0 {
			grow = max(1.1*float64(need)/float64(fewest), 1.05)
		}
		// Compared before the conversion: a min_samples near the int64 range
		// grows the length past what a time.Duration holds.
		grown := float64(phases[i].Length.Duration()) * grow
		if grown > float64(MaxSizedPhase) {
			return fmt.Errorf("%w: %s: %s: tenant %d's %s requests need phase %s longer than %s to reach min_samples %d (it has %d in %s)",
				scenario.ErrInvalid, sc.Where("assertions.quiet_p99.check_top"), sc.Assertions.QuietP99.CheckTop, short.tenant, short.class, phases[i].Name, MaxSizedPhase, need, fewest, phases[i].Length)
		}
		phases[i].Length = scenario.Duration(time.Duration(grown).Round(100 * time.Millisecond))
	}
	return fmt.Errorf("%w: %s: phase %s did not reach min_samples %d for the top tenants", scenario.ErrInvalid, sc.Where("assertions.quiet_p99.check_top"), phases[i].Name, need)
}
