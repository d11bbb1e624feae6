package harness

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// SegmentPart is one agent's output as MergeSegments takes it: its
// histograms and counts (ReadSegment) and its partial report.
type SegmentPart struct {
	Output *SegmentOutput
	Report *reports.Report
}

// MergeSegments merges the outputs of agents 1/N..N/N of sc (checked
// beforehand to be of sc, one seed, every segment once: CheckSegments)
// into one report, as one agent sending the whole schedule would have
// written it: each window's histograms merged bucket by bucket and its
// counts added, the tables, series and the assertions that read the
// histograms (quiet_p99, harm_before, no unexpected errors, quiet tenants
// not rejected, ...) evaluated anew on the merged figures. What only a
// live run can count — the limiters' counters, the pools and sessions
// left after it, the service's sessions — is not in the histograms: those
// assertions are kept from each agent's report, their detail prefixed with
// the agent's segment, and the clean-after counts are summed over agents.
func MergeSegments(sc *scenario.Scenario, parts []SegmentPart) (*reports.Report, error) {
	if len(parts) == 0 {
		return nil, mergeInputf("no agents' outputs")
	}
	first := parts[0]
	r := &runner{sc: sc, log: slog.New(slog.NewTextHandler(io.Discard, nil)), started: first.Report.StartedAt}
	var configs []*scenario.Configuration
	for _, rc := range first.Report.Configurations {
		c, ok := sc.Configuration(rc.Name)
		if !ok {
			return nil, mergeInputf("%s ran configuration %s, which %s does not have", first.Output.Dir, rc.Name, sc.File)
		}
		configs = append(configs, c)
	}
	if len(configs) < len(sc.Configurations) && len(configs) == 1 {
		r.opts.Only = configs[0].Name // the agents ran --only
	}
	if err := r.plan(); err != nil {
		return nil, err
	}
	rep := &reports.Report{
		Scenario: sc.Name, File: sc.File, FileAbs: absFile(sc.File), Seed: sc.Seed, ScheduleHash: r.hash,
		StartedAt: first.Report.StartedAt, Dominant: r.key(scenario.DominantTenant),
		Backend: first.Report.Backend, QuietPlan: r.quietPlan, Segments: len(parts),
	}
	r.note("merged from %d agents' outputs (noisysim run --segment i/%d): %s", len(parts), len(parts), partDirs(parts))
	for _, p := range parts {
		if p.Report.StartedAt.Before(rep.StartedAt) {
			rep.StartedAt = p.Report.StartedAt
		}
		rep.Duration = max(rep.Duration, p.Report.Duration)
		for _, n := range p.Report.Notes {
			r.note("segment %s: %s", p.Report.Segment, n)
		}
		if p.Report.Incomplete != "" {
			return nil, mergeInputf("%s is an incomplete run (%s): nothing to merge it with", p.Output.Dir, p.Report.Incomplete)
		}
		rep.Machine = mergeMachine(rep.Machine, p.Report.Machine, p.Report.Segment)
	}
	for _, c := range configs {
		tr := &timelineRun{ex: &executor{r: r, stack: &stack{}}}
		// origin is the earliest agent's start of c's timeline (wall
		// clock, from the interval logs): the merged timeline's.
		var origin time.Time
		for _, p := range parts {
			if ws := p.Output.Windows[c.Name]; len(ws) > 0 && (origin.IsZero() || ws[0].Origin.Before(origin)) {
				origin = ws[0].Origin
			}
		}
		tr.origin = origin
		var took float64
		for i := range r.steps {
			rec, err := metrics.New(metrics.Config{Classify: errorClass})
			if err != nil {
				return nil, err
			}
			w := &window{step: &r.steps[i], rec: rec}
			for j, p := range parts {
				ws := p.Output.Windows[c.Name]
				if i >= len(ws) || ws[i].Name != r.steps[i].Name {
					return nil, mergeInputf("%s has no phase %s of configuration %s where %s has it", p.Output.Dir, r.steps[i].Name, c.Name, sc.File)
				}
				// The agent's timeline started late by off: its
				// intervals are placed at the ticks they ran in.
				off := ws[i].Origin.Sub(origin)
				var shift int64
				if iv := p.Output.Meta.Interval; iv > 0 {
					shift = int64(math.Round(float64(off) / float64(iv)))
				}
				for _, s := range ws[i].Recorder.Export() {
					s.Intervals = slices.Clone(s.Intervals)
					for k := range s.Intervals {
						s.Intervals[k].Tick += shift
					}
					if err := rec.Add(s); err != nil {
						return nil, fmt.Errorf("merge %s: %w", p.Output.Dir, err)
					}
				}
				if j == 0 || ws[i].Start+off < w.start {
					w.start = ws[i].Start + off
				}
				w.end = max(w.end, ws[i].End+off)
				w.sent += ws[i].Sent
			}
			tr.windows = append(tr.windows, w)
		}
		var clean cleanState
		var kept []reports.Assertion
		for _, p := range parts {
			if pc, ok := configurationOf(p.Report, c.Name); ok {
				took = max(took, pc.Duration)
			}
			for _, a := range p.Report.Assertions {
				if a.Configuration != c.Name {
					continue
				}
				switch a.Name {
				case AssertCleanInFlight:
					clean.inFlight += int64(a.Observed)
				case AssertCleanBorrowed:
					clean.borrowed += int64(a.Observed)
				case AssertCleanTagged:
					clean.tagged += int64(a.Observed)
				default:
					a.Detail = strings.TrimSuffix("segment "+p.Report.Segment+": "+a.Detail, ": ")
					kept = append(kept, a)
				}
			}
		}
		cr := r.configurationReport(c, tr, time.Duration(took*float64(time.Second)))
		as := r.assertions(c, tr, clean)
		// An agent's assertion is kept when the merge does not evaluate
		// one of its name on the merged figures.
		evaluated := map[string]bool{}
		for _, a := range as {
			evaluated[a.Name] = true
		}
		for _, a := range kept {
			if !evaluated[a.Name] {
				as = append(as, a)
			}
		}
		pairs := 0
		if r.quietPlan != nil {
			pairs = r.quietPlan.Pairs
		}
		cr.QuietChecks = quietChecks(as, pairs)
		cr.Passed, _ = verdict(as)
		rep.Configurations = append(rep.Configurations, cr)
		rep.Assertions = append(rep.Assertions, as...)
	}
	r.settleMergedStalls(rep.Machine, rep.Assertions)
	r.judge(rep, sc, r.opts.Only)
	rep.Notes = r.notes
	return rep, nil
}

// settleMergedStalls marks disturbed again each agent's window whose stall
// its agent found moot (see settleStalls) when a verdict evaluated anew on
// the merged figures rests on it: an agent's control that missed its bound
// by seconds may, merged with the others', miss it by less than the stall.
func (r *runner) settleMergedStalls(m *reports.Machine, as []reports.Assertion) {
	if m == nil {
		return
	}
	for i := range m.Windows {
		w := &m.Windows[i]
		if !w.StallMoot {
			continue
		}
		segment, _, _ := strings.Cut(w.Window, ": ")
		name := func(phase, config string) string { return segment + ": " + r.guardWindow(phase, config) }
		if stallDecides(*w, as, name) {
			w.Disturbed, w.StallMoot = true, false
		}
	}
}

// mergeMachine adds an agent's machine figures to the merged report's: its
// measured windows (named by segment), so that a disturbed agent marks the
// merged verdict as it marked its own, and its --allow-concurrent note. The
// node budgets are the first agent's (the agents share the database).
func mergeMachine(into, m *reports.Machine, segment string) *reports.Machine {
	if m == nil {
		return into
	}
	if into == nil {
		into = &reports.Machine{NodeCPU: m.NodeCPU, MaxForeignCPU: m.MaxForeignCPU, MaxStealShare: m.MaxStealShare, GeneratorCores: m.GeneratorCores}
	}
	into.MaxStallMs = max(into.MaxStallMs, m.MaxStallMs)
	if m.Concurrent != "" {
		into.Concurrent = strings.TrimPrefix(into.Concurrent+"; ", "; ") + "segment " + segment + ": " + m.Concurrent
	}
	for _, w := range m.Windows {
		w.Window = "segment " + segment + ": " + w.Window
		into.Windows = append(into.Windows, w)
	}
	return into
}

func configurationOf(rep *reports.Report, name string) (reports.Configuration, bool) {
	i := slices.IndexFunc(rep.Configurations, func(c reports.Configuration) bool { return c.Name == name })
	if i < 0 {
		return reports.Configuration{}, false
	}
	return rep.Configurations[i], true
}

func partDirs(parts []SegmentPart) string {
	var ds []string
	for _, p := range parts {
		ds = append(ds, p.Output.Dir)
	}
	return strings.Join(ds, ", ")
}

// CheckSegments reports, as one error naming the directories, outputs that
// cannot be merged: of another run than the first (another scenario — its
// file's hash —, seed, schedule or --start-at), of another number of segments, a segment given
// twice, or a segment missing. The parts come back sorted by segment.
func CheckSegments(scenarioHash string, parts []SegmentPart) ([]SegmentPart, error) {
	if len(parts) == 0 {
		return nil, mergeInputf("no agents' outputs")
	}
	var problems []string
	f := parts[0].Output.Meta
	if scenarioHash != "" && f.ScenarioHash != scenarioHash {
		problems = append(problems, fmt.Sprintf("%s ran another scenario file than the one given (scenario hash %.12s, the file's %.12s)", parts[0].Output.Dir, f.ScenarioHash, scenarioHash))
	}
	bySeg := map[int][]string{}
	for _, p := range parts {
		m, d := p.Output.Meta, p.Output.Dir
		switch {
		case m.ScenarioHash != f.ScenarioHash || m.Scenario != f.Scenario:
			problems = append(problems, fmt.Sprintf("%s and %s ran different scenarios (%s %.12s, %s %.12s)", parts[0].Output.Dir, d, f.Scenario, f.ScenarioHash, m.Scenario, m.ScenarioHash))
		case m.Seed != f.Seed:
			problems = append(problems, fmt.Sprintf("%s and %s ran different seeds (%d, %d)", parts[0].Output.Dir, d, f.Seed, m.Seed))
		case m.StartAt != f.StartAt:
			problems = append(problems, fmt.Sprintf("%s and %s are agents of different runs (--start-at %s, %s): the agents of one run are given one --start-at", parts[0].Output.Dir, d, orNone(f.StartAt), orNone(m.StartAt)))
		case m.ScheduleHash != f.ScheduleHash:
			problems = append(problems, fmt.Sprintf("%s and %s ran different schedules (%s, %s)", parts[0].Output.Dir, d, f.ScheduleHash, m.ScheduleHash))
		case m.Count != f.Count:
			problems = append(problems, fmt.Sprintf("%s and %s split the schedule in different numbers of segments (%d, %d)", parts[0].Output.Dir, d, f.Count, m.Count))
		}
		if m.Index < 1 || m.Index > m.Count {
			problems = append(problems, fmt.Sprintf("%s names segment %d/%d, not one of 1..%d", d, m.Index, m.Count, m.Count))
		}
		bySeg[m.Index] = append(bySeg[m.Index], d)
	}
	for i := 1; i <= f.Count; i++ {
		switch ds := bySeg[i]; {
		case len(ds) == 0:
			problems = append(problems, fmt.Sprintf("segment %d/%d is missing", i, f.Count))
		case len(ds) > 1:
			problems = append(problems, fmt.Sprintf("segment %d/%d is given twice: %s", i, f.Count, strings.Join(ds, ", ")))
		}
	}
	if len(problems) > 0 {
		return nil, mergeInputf("%s", strings.Join(problems, "; "))
	}
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b SegmentPart) int { return a.Output.Meta.Index - b.Output.Meta.Index })
	return sorted, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// mergeInputError is agents' outputs that do not make one run, or do not
// match the scenario: bad input to merge (exit 2). It reads "merge: ...",
// not "invalid scenario: ...", as the scenario may well be valid, and
// unwraps to scenario.ErrInvalid, which the CLI maps to exit 2.
type mergeInputError struct{ msg string }

func (e *mergeInputError) Error() string { return "merge: " + e.msg }
func (e *mergeInputError) Unwrap() error { return scenario.ErrInvalid }

func mergeInputf(format string, args ...any) error {
	return &mergeInputError{fmt.Sprintf(format, args...)}
}
