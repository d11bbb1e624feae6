package scenario

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Names of the phases of the default timeline, derived from phases: when a
// scenario gives no timeline.
const (
	PhaseSoloWarmup = "solo_warmup"
	PhaseSolo       = "solo"
	PhaseRunWarmup  = "warmup"
	PhaseRun        = "run"
)

// Phase is one step of a scenario's timeline: for Length, the tenants named
// by Senders send their classes (each class at its rate × Rates[class]);
// a measured phase is a window that assertions can name, an unmeasured one
// (a warm-up) is run and reported but asserted on by nothing.
type Phase struct {
	// Name identifies the phase as a window for assertions and in reports;
	// required, unique. Letters, digits, '.', '_' and '-'.
	Name string `yaml:"name"`
	// Length is how long the phase's arrivals run, > 0. Required unless
	// Until is given.
	Length Duration `yaml:"length"`
	// Until ends the phase on an event instead of after Length:
	// UntilActionsDone ends it once its actions (those its watcher fires
	// included) have ended and its watcher reported done, at the latest
	// after Max. Later phases start when it ends. Optional; open loop only.
	Until Until `yaml:"until"`
	// Max bounds a phase with Until, > 0; required there, and only there.
	Max Duration `yaml:"max"`
	// Senders narrows who sends in this phase: quiet, all (default) or
	// dominant, or a list of tenant ids. A class is sent by the tenants in
	// both its own senders and the phase's.
	Senders PhaseSenders `yaml:"senders"`
	// Rates multiplies the rate of the classes it names in this phase,
	// each factor >= 0 (0 silences the class; 3 is a burst). Classes left
	// out keep factor 1. Optional.
	Rates map[string]float64 `yaml:"rates"`
	// Measure makes the phase a window assertions may name. Default true;
	// false for a warm-up.
	Measure bool `yaml:"measure"`
	// Actions start with the phase, each At after its start. Optional.
	Actions []Action `yaml:"actions"`
	// Watch runs a policy every Watch.Every during the phase, which may
	// fire actions. Optional.
	Watch *Watch `yaml:"watch"`
}

// spanText says how long the phase lasts, for messages: "length 3s" or
// "max 60s".
func (p *Phase) spanText() string {
	if p.Until != "" {
		return "max " + p.Max.String()
	}
	return "length " + p.Length.String()
}

// Until is the event that ends a phase without a fixed length.
type Until string

// Until events.
const (
	// UntilActionsDone ends the phase when its actions, those its watcher
	// fires included, have ended and its watcher reported done.
	UntilActionsDone Until = "actions_done"
)

// Span returns the phase's planned length: Length, or Max for a phase
// with Until (the latest it can end).
func (p *Phase) Span() Duration {
	if p.Until != "" {
		return p.Max
	}
	return p.Length
}

// PhaseSenders is who sends in a phase: a sender set (Set) or a list of
// tenant ids (Tenants). Written as quiet, all, dominant or a YAML list of
// ids.
type PhaseSenders struct {
	// Set is SendersAll, SendersQuiet or SendersDominant; empty when
	// Tenants is given.
	Set Senders
	// Tenants are tenant ids (1 is the dominant tenant), unique.
	Tenants []int
}

// UnmarshalYAML reads a sender set name or a list of tenant ids.
func (s *PhaseSenders) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		s.Set = Senders(n.Value)
		return nil
	case yaml.SequenceNode:
		var ids []int
		for _, item := range n.Content {
			id, err := strconv.Atoi(item.Value)
			if item.Kind != yaml.ScalarNode || err != nil {
				return typeError(item, fmt.Sprintf("must be a tenant id (an integer), got %s", describe(item)))
			}
			ids = append(ids, id)
		}
		s.Tenants = ids
		return nil
	}
	return typeError(n, "must be quiet, all, dominant or a list of tenant ids, got "+describe(n))
}

// MarshalText writes the set name, or the ids joined by commas.
func (s PhaseSenders) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// String returns the set name, or the tenant ids as "1,2,3".
func (s PhaseSenders) String() string {
	if len(s.Tenants) == 0 {
		return string(s.Set)
	}
	ids := make([]string, len(s.Tenants))
	for i, id := range s.Tenants {
		ids[i] = strconv.Itoa(id)
	}
	return strings.Join(ids, ",")
}

// Sends reports whether tenant id sends in the phase.
func (s PhaseSenders) Sends(id int) bool {
	if len(s.Tenants) > 0 {
		return slices.Contains(s.Tenants, id)
	}
	switch s.Set {
	case SendersDominant:
		return id == DominantTenant
	case SendersQuiet:
		return id != DominantTenant
	}
	return true
}

// Rate returns the factor of class name in phase p: Rates[name], or 1.
func (p *Phase) Rate(name string) float64 {
	if f, ok := p.Rates[name]; ok {
		return f
	}
	return 1
}

// DefaultTimeline returns the timeline a scenario without a timeline key
// runs: the quiet tenants' warm-up and solo phase, then everyone's warm-up
// and run phase, with phases' lengths. A warm-up of 0 is left out.
func DefaultTimeline(p Phases) []Phase {
	var out []Phase
	add := func(name string, d Duration, senders Senders, measure bool) {
		if d > 0 || measure {
			out = append(out, Phase{Name: name, Length: d, Senders: PhaseSenders{Set: senders}, Measure: measure})
		}
	}
	add(PhaseSoloWarmup, p.Warmup, SendersQuiet, false)
	add(PhaseSolo, p.Solo, SendersQuiet, true)
	add(PhaseRunWarmup, p.Warmup, SendersAll, false)
	add(PhaseRun, p.Run, SendersAll, true)
	return out
}

// Steps returns the phases the scenario runs: Timeline, or, when it is
// empty (a file without a timeline key, or a Scenario built in Go without
// one), DefaultTimeline(Phases).
func (s *Scenario) Steps() []Phase {
	steps := s.Timeline
	if len(steps) == 0 {
		steps = DefaultTimeline(s.Phases)
	}
	if s.Assertions.QuietP99AB.Blocks > 0 {
		steps = append(slices.Clip(steps), s.Assertions.QuietP99AB.abPhases()...)
	}
	return steps
}

// TimelineDerived reports whether the phases run are derived from phases:
// (no timeline given).
func (s *Scenario) TimelineDerived() bool { return s.derived || len(s.Timeline) == 0 }

// Phase returns the phase named name among Steps and true, or a zero Phase
// and false.
func (s *Scenario) Phase(name string) (Phase, bool) {
	for _, p := range s.Steps() {
		if p.Name == name {
			return p, true
		}
	}
	return Phase{}, false
}

// PhaseStart returns the offset of Steps()[i] from the timeline's start.
func (s *Scenario) PhaseStart(i int) Duration {
	var d Duration
	for _, p := range s.Steps()[:i] {
		d += p.Span()
	}
	return d
}

// PhaseIndex returns the index of the phase named name in Steps, or -1.
func (s *Scenario) PhaseIndex(name string) int {
	for i, p := range s.Steps() {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// NoiseStart returns the name of the first phase in which the dominant
// tenant sends (the first phase when none does): a fault that names no
// phase counts its at from there.
func (s *Scenario) NoiseStart() string {
	steps := s.Steps()
	for _, p := range steps {
		if p.Senders.Sends(DominantTenant) {
			return p.Name
		}
	}
	if len(steps) == 0 {
		return ""
	}
	return steps[0].Name
}

// FaultPhase returns the phase fault f counts from: f.Phase, or NoiseStart.
func (s *Scenario) FaultPhase(f Fault) string {
	if f.Phase != "" {
		return f.Phase
	}
	return s.NoiseStart()
}

// QuietWindows returns the windows quiet_p99 compares: Window and Baseline,
// PhaseRun and PhaseSolo when left empty.
func (q QuietP99) QuietWindows() (window, baseline string) {
	return cmp.Or(q.Window, PhaseRun), cmp.Or(q.Baseline, PhaseSolo)
}

// applyTimelineDefaults marks a timeline derived from phases: and fills
// the defaults of each phase the file gives.
func (s *Scenario) applyTimelineDefaults() {
	s.derived = !s.ix.has("timeline")
	for i := range s.Timeline {
		p := &s.Timeline[i]
		path := fmt.Sprintf("timeline[%d]", i)
		if !s.ix.has(path + ".senders") {
			p.Senders = PhaseSenders{Set: SendersAll}
		}
		if !s.ix.has(path + ".measure") {
			p.Measure = true
		}
	}
}

// timeline checks the timeline and what names its phases.
func (c *checker) timeline(s *Scenario) {
	derived := s.TimelineDerived()
	if derived {
		if c.present("timeline") {
			c.add("timeline", "must have at least one phase (leave the key out for the default: phases.warmup, solo, warmup, run)")
		}
	} else {
		for _, k := range []string{"warmup", "solo", "run"} {
			if c.present("phases." + k) {
				c.add("phases."+k, "the timeline gives the phases: with a timeline only phases.drain applies")
			}
		}
	}
	first := map[string]string{}
	measured := 0
	for i := range s.Timeline {
		p := &s.Timeline[i]
		f := fmt.Sprintf("timeline[%d]", i)
		if c.name(f+".name", p.Name) {
			if prev, dup := first[p.Name]; dup {
				c.add(f+".name", "duplicate phase name %q (first at %s)", p.Name, c.where(prev))
			} else {
				first[p.Name] = f
			}
		}
		c.phaseEnd(s, f, p)
		c.phaseSenders(f+".senders", p.Senders, s.Tenants.Count)
		for _, name := range sortedKeys(p.Rates) {
			rf := f + ".rates." + name
			if _, ok := s.Class(name); !ok {
				c.add(rf, "unknown class %q; %s", name, classList(s.Classes))
			}
			if v := p.Rates[name]; !(v >= 0) || math.IsInf(v, 1) {
				c.add(rf, "must be a rate factor >= 0, got %s", fmtFloat(v))
			}
		}
		if p.Measure {
			measured++
		}
		c.actions(s, i, p)
		c.watch(s, i, p)
	}
	c.faultActionOverlap(s)
	if measured == 0 && !derived {
		c.add("timeline", "no measured phase: set measure: true on at least one phase, or assertions have no window")
	}
	window, baseline := s.Assertions.QuietP99.QuietWindows()
	c.window("assertions.quiet_p99.window", window, s)
	c.window("assertions.quiet_p99.baseline", baseline, s)
	for i, f := range s.Faults {
		if f.Phase != "" {
			if _, ok := s.Phase(f.Phase); !ok {
				c.add(fmt.Sprintf("faults[%d].phase", i), "unknown phase %q; the timeline's phases are %s", f.Phase, phaseList(s.Steps()))
			}
		}
	}
}

// phaseEnd checks how phase p (at field f) ends: after length, or until
// an event with a max.
func (c *checker) phaseEnd(s *Scenario, f string, p *Phase) {
	span := func(field string, d Duration) {
		switch {
		case d <= 0:
			c.add(field, "must be a duration > 0, got %s", d)
		case d > MaxPhase:
			c.add(field, "must be at most %s, got %s", MaxPhase, d)
		}
	}
	if p.Until == "" {
		switch {
		case c.present(f + ".max"):
			c.add(f+".max", "only for a phase with until (e.g. until: actions_done): a phase with a length ends after it")
		case p.Length == 0 && !c.present(f+".length"):
			c.add(f+".length", "required: how long the phase runs, e.g. 10s, or until: actions_done with a max")
		default:
			span(f+".length", p.Length)
		}
		return
	}
	if c.present(f + ".length") {
		c.add(f+".length", "a phase with until ends on its event, at the latest after max: give max instead of length")
	}
	if !oneOf(c, f+".until", "phase end", p.Until, UntilActionsDone) {
		return
	}
	if p.Max == 0 && !c.present(f+".max") {
		c.add(f+".max", "required with until: the latest the phase ends, e.g. 60s")
	} else {
		span(f+".max", p.Max)
	}
	if len(p.Actions) == 0 && p.Watch == nil {
		c.add(f+".until", "until: actions_done needs actions or a watch in the phase: it has nothing to wait for")
	}
	if s.Load.Model == ModelClosed {
		c.add(f+".until", "until is for the open loop (load.model open): a closed loop runs its phases for fixed lengths")
	}
}

// window checks that name is a measured phase of the timeline.
func (c *checker) window(field, name string, s *Scenario) {
	p, ok := s.Phase(name)
	if !c.present(field) && !(s.TimelineDerived() && !ok) && !(ok && p.Measure) {
		// A default window the timeline lacks: the problem is the timeline's.
		c.add("timeline", "no measured phase %q, which %s names by default: add it or set %s to one of %s",
			name, field, field, measuredList(s.Steps()))
		return
	}
	switch {
	case !ok && s.TimelineDerived() && (name == PhaseRun || name == PhaseSolo):
		// phases: reports its own problems.
	case !ok:
		c.add(field, "unknown window %q; the timeline's measured phases are %s", name, measuredList(s.Steps()))
	case !p.Measure:
		c.add(field, "phase %q is not measured (measure: false); the timeline's measured phases are %s", name, measuredList(s.Steps()))
	}
}

func (c *checker) phaseSenders(field string, ps PhaseSenders, tenants int) {
	if len(ps.Tenants) == 0 {
		if c.present(field) && ps.Set == "" && c.s.ix.byPath[field].value.Kind != yaml.SequenceNode {
			c.add(field, "must not be empty: quiet, all, dominant or a list of tenant ids")
			return
		}
		if ps.Set != "" {
			oneOf(c, field, "senders", ps.Set, SendersAll, SendersDominant, SendersQuiet)
		}
		return
	}
	seen := map[int]bool{}
	for j, id := range ps.Tenants {
		f := fmt.Sprintf("%s[%d]", field, j)
		switch {
		case id < 1 || (tenants >= 2 && id > tenants):
			c.add(f, "no such tenant %d: ids run from 1 to tenants.count (%d)", id, tenants)
		case seen[id]:
			c.add(f, "duplicate tenant %d", id)
		}
		seen[id] = true
	}
}

func classList(cs []Class) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = strconv.Quote(c.Name)
	}
	if len(names) == 0 {
		return "the scenario has no classes"
	}
	return "the scenario's classes are " + strings.Join(names, ", ")
}

func phaseList(tl []Phase) string {
	names := make([]string, len(tl))
	for i, p := range tl {
		names[i] = strconv.Quote(p.Name)
	}
	return strings.Join(names, ", ")
}

func measuredList(tl []Phase) string {
	var names []string
	for _, p := range tl {
		if p.Measure {
			names = append(names, strconv.Quote(p.Name))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
