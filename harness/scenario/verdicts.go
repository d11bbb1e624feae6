package scenario

import (
	"math"
)

// verdicts checks the assertions over windows that judge a remedy: skew,
// detect_within and harm_before.
func (c *checker) verdicts(s *Scenario) {
	a := &s.Assertions
	if c.present("assertions.skew") {
		if !s.Citus() {
			c.add("assertions.skew", "needs backend.topology citus: per-worker load is counted through shard placements (the topology is %s)", cmpTopology(s.Backend.Topology))
		}
		if a.Skew.Window == "" {
			c.add("assertions.skew.window", "required: the measured phase whose per-worker load skew is bounded, one of %s", measuredList(s.Steps()))
		} else {
			c.window("assertions.skew.window", a.Skew.Window, s)
		}
		if !(a.Skew.Max > 1) || math.IsInf(a.Skew.Max, 1) {
			c.add("assertions.skew.max", "must be > 1 and finite (max / median), got %s", fmtFloat(a.Skew.Max))
		}
	}
	if c.present("assertions.detect_within") {
		if a.DetectWithin <= 0 {
			c.add("assertions.detect_within", "must be a duration > 0, got %s", a.DetectWithin)
		} else if !detects(s) {
			c.add("assertions.detect_within", "no phase watches with a detecting policy (%s): nothing detects", PolicyHotShardLadder)
		}
	}
	if c.present("assertions.harm_before") {
		judged, baseline := a.QuietP99.QuietWindows()
		switch w := a.HarmBefore.Window; {
		case w == "":
			c.add("assertions.harm_before.window", "required: the measured phase before the remedy, one of %s", measuredList(s.Steps()))
		case w == baseline:
			c.add("assertions.harm_before.window", "must differ from quiet_p99's baseline %q: the harm is measured against it", baseline)
		case w == judged:
			c.add("assertions.harm_before.window", "must differ from quiet_p99's window %q: the same p99 cannot both fail and pass its bound", judged)
		default:
			c.window("assertions.harm_before.window", w, s)
		}
		switch t := a.HarmBefore.Tenants; {
		case t == "" && !c.present("assertions.harm_before.tenants"), t == HarmAll: // tenants: "" is an error, not all
		case t == HarmHotWorker:
			if !s.Citus() {
				c.add("assertions.harm_before.tenants", "%s needs backend.topology citus: the quiet tenants on the dominant tenant's worker (the topology is %s)", t, cmpTopology(s.Backend.Topology))
			}
		default:
			c.add("assertions.harm_before.tenants", "unknown %q, want %s or %s", t, HarmAll, HarmHotWorker)
		}
		if f := a.HarmBefore.Factor; c.present("assertions.harm_before.factor") && (!(f > 1) || math.IsInf(f, 1)) {
			c.add("assertions.harm_before.factor", "must be > 1 and finite (the harm as a multiple of the baseline p99), got %s", fmtFloat(f))
		}
	}
}

// detects reports whether a phase watches with a detecting policy.
func detects(s *Scenario) bool {
	for _, p := range s.Steps() {
		if p.Watch != nil {
			if _, ok := p.Watch.Config.(*HotShardLadder); ok {
				return true
			}
		}
	}
	return false
}
