package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/noisysim/noisysim/harness/scenario"
)

// Shape is what a sweep's trials depend on of its scenario besides the
// varied keys: the phases run (Steps), the configurations and the classes,
// each in file order, and a fingerprint of the three. A sweep records its
// scenario's shape (Doc.Shape) so that what is compared with it later
// (noisysim simulate --against) can tell a scenario edited since.
type Shape struct {
	// Phases are "NAME LENGTH" ("run 20s"), "NAME until UNTIL max MAX" for
	// a phase ending on an event, followed by " rates CLASS=FACTOR,…" when
	// the phase scales classes' rates.
	Phases []string `json:"phases"`
	// Configurations are the configurations' names.
	Configurations []string `json:"configurations"`
	// Classes are "NAME ISOLATION_CLASS" ("lookup interactive").
	Classes []string `json:"classes"`
	// Fingerprint is the first 16 hex digits of the SHA-256 of the lines
	// above (ShapeOf's).
	Fingerprint string `json:"fingerprint"`
}

// ShapeOf returns sc's shape.
func ShapeOf(sc *scenario.Scenario) *Shape {
	s := &Shape{}
	for _, p := range sc.Steps() {
		line := p.Name + " " + p.Length.String()
		if p.Until != "" {
			line = fmt.Sprintf("%s until %s max %s", p.Name, p.Until, p.Max)
		}
		if len(p.Rates) > 0 {
			var rates []string
			for _, c := range slices.Sorted(maps.Keys(p.Rates)) {
				rates = append(rates, c+"="+strconv.FormatFloat(p.Rates[c], 'g', -1, 64))
			}
			line += " rates " + strings.Join(rates, ",")
		}
		s.Phases = append(s.Phases, line)
	}
	for _, c := range sc.Configurations {
		s.Configurations = append(s.Configurations, c.Name)
	}
	for _, c := range sc.Classes {
		s.Classes = append(s.Classes, c.Name+" "+string(c.IsolationClass))
	}
	s.Fingerprint = s.fingerprint()
	return s
}

// ClassNames returns the names of Classes.
func (s *Shape) ClassNames() []string {
	var out []string
	for _, c := range s.Classes {
		name, _, _ := strings.Cut(c, " ")
		out = append(out, name)
	}
	return out
}

func (s *Shape) fingerprint() string {
	h := sha256.New()
	for _, part := range [][]string{s.Phases, s.Configurations, s.Classes} {
		fmt.Fprintf(h, "%q\n", part)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Diff returns what differs between s, the shape a sweep recorded, and
// is, a scenario's, one entry per field or element, e.g.
// `shape.phases[3]: the sweep's "run 10s", the scenario's "run 12s"`, or
// both lists when their lengths differ; nil when they agree. A
// fingerprint that does not match the recorded lines (an edited
// sweep.json) is a difference too.
func (s *Shape) Diff(is *Shape) []string {
	var out []string
	for _, f := range []struct {
		name     string
		was, now []string
	}{{"phases", s.Phases, is.Phases}, {"configurations", s.Configurations, is.Configurations}, {"classes", s.Classes, is.Classes}} {
		if len(f.was) != len(f.now) {
			out = append(out, fmt.Sprintf("shape.%s: the sweep's %d (%s), the scenario's %d (%s)", f.name, len(f.was), list(f.was), len(f.now), list(f.now)))
			continue
		}
		for i := range f.was {
			if f.was[i] != f.now[i] {
				out = append(out, fmt.Sprintf("shape.%s[%d]: the sweep's %q, the scenario's %q", f.name, i, f.was[i], f.now[i]))
			}
		}
	}
	if len(out) == 0 && s.Fingerprint != s.fingerprint() {
		out = append(out, fmt.Sprintf("shape.fingerprint %s: not that of the shape recorded beside it (%s): sweep.json was edited", s.Fingerprint, s.fingerprint()))
	}
	return out
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
