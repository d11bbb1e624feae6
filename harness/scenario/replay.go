package scenario

import (
	"fmt"
	"os"
)

// DefaultReplaySpeed is replay.speed when the file leaves it out.
const DefaultReplaySpeed = 1.0

// Replay makes the timeline's open loop replay a recorded trace instead of
// drawing the generated schedule: the trace's operations are issued at their
// recorded intended starts divided by Speed, each in the window of the phase
// it falls in, through every configuration in turn. The scenario's tenants
// and classes must name the trace's (see TRACE.md in harness).
type Replay struct {
	// Trace is a trace file written by `noisysim run --trace` (JSON Lines,
	// gzip-compressed when the name ends in .gz), relative to the scenario
	// file. Required.
	Trace string `yaml:"trace"`
	// Speed divides the recorded starts: 2 replays twice as fast. > 0,
	// at most 1000. Default 1.
	Speed float64 `yaml:"speed"`
	// Configuration picks the recorded configuration whose operations are
	// replayed, when the trace holds several. Default: the first one in
	// the trace.
	Configuration string `yaml:"configuration"`
}

// Replaying reports whether the scenario replays a trace.
func (s *Scenario) Replaying() bool { return s.Replay != nil }

// applyReplayDefaults fills a present replay section.
func (s *Scenario) applyReplayDefaults() {
	if s.Replay != nil && !s.ix.has("replay.speed") {
		s.Replay.Speed = DefaultReplaySpeed
	}
}

// replay checks the replay section and what it excludes.
func (c *checker) replay(s *Scenario) {
	if s.Replay == nil {
		if c.present("replay") {
			c.add("replay", "must be a mapping, e.g. {trace: incident.jsonl.gz, speed: 1}")
		}
		return
	}
	r := s.Replay
	if r.Trace == "" {
		c.add("replay.trace", "required: a trace file written by noisysim run --trace")
	} else if fi, err := os.Stat(s.Path(r.Trace)); err != nil {
		c.add("replay.trace", "cannot read the trace: %v", err)
	} else if fi.IsDir() {
		c.add("replay.trace", "%s is a directory, not a trace file", s.Path(r.Trace))
	}
	if !(r.Speed > 0 && r.Speed <= 1000) {
		c.add("replay.speed", "must be in (0, 1000], got %s", fmtFloat(r.Speed))
	}
	if s.Load.Model == ModelClosed {
		c.add("replay", "replays open loop: load.model closed has no intended starts to replay")
	}
	if s.HotSharding() {
		c.add("replay", "is not for hot_shard scenarios")
	}
	for i, p := range s.Timeline {
		if p.Until != "" {
			c.add(fmt.Sprintf("timeline[%d].until", i), "a replayed trace keeps its recorded times: phases with until cannot move them")
		}
	}
	for i, cl := range s.Classes {
		if cl.LoadFactor != 0 {
			c.add(fmt.Sprintf("classes[%d].load_factor", i), "a replayed trace keeps its recorded rate: no calibration")
		}
	}
}
