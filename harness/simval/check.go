package simval

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/noisysim/noisysim/harness/sweep"
)

// ErrBadSweep is what CheckSweep's error wraps: a sweep.json that cannot
// be compared with the scenario as it is (bad input).
var ErrBadSweep = errors.New("sweep.json does not fit the scenario")

// SweepError lists every problem CheckSweep found in File, each naming
// its field of sweep.json ("points[1].trials[0].configurations[0].quiet_class").
type SweepError struct {
	File     string
	Problems []string
}

// Error returns a line per problem: "FILE: FIELD …".
func (e *SweepError) Error() string {
	var lines []string
	for _, p := range e.Problems {
		lines = append(lines, e.File+": "+p)
	}
	return strings.Join(lines, "\n")
}

func (e *SweepError) Unwrap() error { return ErrBadSweep }

// CheckSweep checks what CompareSweep reads of d, a real grid sweep's
// sweep.json read from file, against is, the shape of the scenario (named name) it is to
// be compared with (sweep.ShapeOf):
//
//   - the shape d recorded is is (phases, configurations, classes); a d
//     that records none (written before noisysim recorded it) cannot be
//     told apart: CheckSweep returns a note saying so;
//   - each point has a value of each varied key and no other, and no two
//     points have the same values; no two trials of a point the same seed;
//   - each trial has configurations, each a configuration of is, once;
//     a trial of a point run without --only has all of is's;
//   - each configuration of a trial has a quiet_class, a class of is, with
//     quiet_p99_ms > 0, throughput_per_s > 0, and solo_p99_ms,
//     quiet_over_solo, target_rate_per_s, rejected and errors not below 0;
//     a point run with only holds that configuration alone.
//
// Errors: a *SweepError (wrapping ErrBadSweep) listing every problem.
func CheckSweep(d *sweep.Doc, file, name string, is *sweep.Shape) (notes []string, err error) {
	var ps []string
	bad := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	if d.Shape == nil {
		notes = append(notes, fmt.Sprintf("sweep.json records no shape of its scenario (a sweep of an older noisysim): whether %s's phases are those the sweep ran cannot tell; its configurations and quiet classes are checked", name))
	} else {
		for _, diff := range d.Shape.Diff(is) {
			bad("%s (the scenario changed since the sweep?)", diff)
		}
	}
	classes := is.ClassNames()
	var keys []string
	for _, v := range d.Vary {
		keys = append(keys, v.Key)
	}
	seen := map[string]int{}
	for i, p := range d.Points {
		for _, k := range keys {
			if _, ok := p.Values[k]; !ok {
				bad("points[%d].values: no value of the varied key %s", i, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(p.Values)) {
			if !slices.Contains(keys, k) {
				bad("points[%d].values: %s is not a varied key (vary: %s)", i, k, strings.Join(keys, ", "))
			}
		}
		key := valuesText(d, p.Values) + " only " + p.Only
		if k, ok := seen[key]; ok {
			bad("points[%d].values: the same point as points[%d] (%s)", i, k, valuesText(d, p.Values))
		} else {
			seen[key] = i
		}
		seeds := map[int64]int{}
		for j, t := range p.Trials {
			at := fmt.Sprintf("points[%d].trials[%d]", i, j)
			if k, ok := seeds[t.Seed]; ok {
				bad("%s.seed %d: the same as points[%d].trials[%d]'s", at, t.Seed, i, k)
			} else {
				seeds[t.Seed] = j
			}
			if len(t.Configurations) == 0 {
				bad("%s.configurations: empty", at)
				continue
			}
			var names []string
			for k, c := range t.Configurations {
				cat := fmt.Sprintf("%s.configurations[%d]", at, k)
				switch {
				case !slices.Contains(is.Configurations, c.Name):
					bad("%s.name %q: %s has no such configuration (it has %s)", cat, c.Name, name, list(is.Configurations))
				case slices.Contains(names, c.Name):
					bad("%s.name %q: twice in the trial", cat, c.Name)
				}
				names = append(names, c.Name)
				switch {
				case c.QuietClass == "":
					bad("%s.quiet_class: missing (the trial has no quiet class figure to compare)", cat)
				case !slices.Contains(classes, c.QuietClass):
					bad("%s.quiet_class %q: %s has no such class (it has %s)", cat, c.QuietClass, name, list(classes))
				}
				if c.QuietP99 <= 0 {
					bad("%s.quiet_p99_ms %v: want > 0", cat, c.QuietP99)
				}
				if c.Throughput <= 0 {
					bad("%s.throughput_per_s %v: want > 0", cat, c.Throughput)
				}
				if c.SoloP99 < 0 {
					bad("%s.solo_p99_ms %v: want >= 0", cat, c.SoloP99)
				}
				if c.QuietOverSolo < 0 {
					bad("%s.quiet_over_solo %v: want >= 0", cat, c.QuietOverSolo)
				}
				if c.TargetRate < 0 {
					bad("%s.target_rate_per_s %v: want >= 0", cat, c.TargetRate)
				}
				if c.Rejected < 0 {
					bad("%s.rejected %d: want >= 0", cat, c.Rejected)
				}
				if c.Errors < 0 {
					bad("%s.errors %d: want >= 0", cat, c.Errors)
				}
				if p.Only != "" && c.Name != p.Only {
					bad("%s.name %q: the point ran only %q (points[%d].only)", cat, c.Name, p.Only, i)
				}
			}
			if p.Only == "" {
				for _, c := range is.Configurations {
					if !slices.Contains(names, c) {
						bad("%s.configurations: no configuration %q, a configuration of %s (the scenario changed since the sweep?)", at, c, name)
					}
				}
			}
		}
	}
	if len(ps) > 0 {
		return notes, &SweepError{File: file, Problems: ps}
	}
	return notes, nil
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
