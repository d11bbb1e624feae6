package scenario

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
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
	// file. Exactly one of Trace and Log.
	Trace string `yaml:"trace"`
	// Log is a PostgreSQL server log written as csvlog or jsonlog with
	// log_min_duration_statement = 0 (gzip-compressed when the name ends
	// in .gz), relative to the scenario file.
	Log string `yaml:"log"`
	// Format is the log's format, csvlog or jsonlog. Default: from the
	// name (.csv csvlog, .json jsonlog, before a .gz).
	Format string `yaml:"format"`
	// Reorder is how far back a statement's start may lie before the
	// latest end read: a log is written as statements end, so a long
	// statement is logged after shorter ones that started after it.
	// Default 10s; at most 10m.
	Reorder Duration `yaml:"reorder"`
	// Tenant says where a logged statement's tenant key is: the first
	// group of a regular expression over application_name (default
	// "^t:([^/]+)") or over the statement.
	Tenant ReplayTenant `yaml:"tenant"`
	// Rules classify logged statements: the first rule that matches names
	// the statement's class; a statement no rule matches takes
	// DefaultClass.
	Rules []ReplayRule `yaml:"rules"`
	// DefaultClass is the class of a statement no rule matches. Default:
	// the first class.
	DefaultClass string `yaml:"default_class"`
	// Speed divides the recorded starts: 2 replays twice as fast. > 0,
	// at most 1000. Default 1.
	Speed float64 `yaml:"speed"`
	// Configuration picks the recorded configuration whose operations are
	// replayed, when the trace holds several. Default: the first one in
	// the trace.
	Configuration string `yaml:"configuration"`
}

// DefaultReplayReorder is replay.reorder when the file leaves it out.
const DefaultReplayReorder = 10 * time.Second

// DefaultTenantApplicationName is the default replay.tenant: the key
// after "t:" in application_name up to a "/" (so that "t:acme/report" is
// tenant acme, its suffix free for replay.rules).
const DefaultTenantApplicationName = "^t:([^/]+)"

// Untagged is the tenant key of a logged statement whose tenant the
// replay.tenant expression does not find.
const Untagged = "untagged"

// ReplayTenant finds a logged statement's tenant key: the first group of
// one regular expression (RE2 syntax).
type ReplayTenant struct {
	ApplicationName string `yaml:"application_name"`
	Statement       string `yaml:"statement"`
}

// ReplayRule is one classification rule of a logged statement: every
// condition given must hold. At least one condition.
type ReplayRule struct {
	// Class is the scenario class the statement is replayed as.
	Class string `yaml:"class"`
	// User is the logged user name, exactly.
	User string `yaml:"user"`
	// ApplicationSuffix is a suffix of application_name ("/report").
	ApplicationSuffix string `yaml:"application_suffix"`
	// Statement is a regular expression the statement text matches.
	Statement string `yaml:"statement"`
	// MinDuration: the recorded duration is at least this.
	MinDuration Duration `yaml:"min_duration"`
}

// Name describes the rule for reports: "rules[i] (user=..., ...)".
func (r ReplayRule) Name(i int) string {
	var conds []string
	if r.User != "" {
		conds = append(conds, "user="+r.User)
	}
	if r.ApplicationSuffix != "" {
		conds = append(conds, "application_name suffix "+r.ApplicationSuffix)
	}
	if r.Statement != "" {
		conds = append(conds, "statement ~ "+r.Statement)
	}
	if r.MinDuration > 0 {
		conds = append(conds, "duration >= "+r.MinDuration.String())
	}
	return fmt.Sprintf("rules[%d] (%s)", i, strings.Join(conds, ", "))
}

// LogFormat returns the replayed log's format: Format, or from the name.
func (r *Replay) LogFormat() string {
	if r.Format != "" {
		return r.Format
	}
	name := strings.TrimSuffix(r.Log, ".gz")
	switch {
	case strings.HasSuffix(name, ".csv"):
		return "csvlog"
	case strings.HasSuffix(name, ".json"):
		return "jsonlog"
	}
	return ""
}

// Replaying reports whether the scenario replays a trace.
func (s *Scenario) Replaying() bool { return s.Replay != nil }

// applyReplayDefaults fills a present replay section.
func (s *Scenario) applyReplayDefaults() {
	if s.Replay == nil {
		return
	}
	r := s.Replay
	if !s.ix.has("replay.speed") {
		r.Speed = DefaultReplaySpeed
	}
	if r.Log != "" {
		if !s.ix.has("replay.reorder") {
			r.Reorder = Duration(DefaultReplayReorder)
		}
		if r.Tenant.ApplicationName == "" && r.Tenant.Statement == "" {
			r.Tenant.ApplicationName = DefaultTenantApplicationName
		}
		if r.DefaultClass == "" && len(s.Classes) > 0 {
			r.DefaultClass = s.Classes[0].Name
		}
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
	file, field := r.Trace, "replay.trace"
	switch {
	case r.Trace == "" && r.Log == "":
		c.add("replay.trace", "required: a trace file written by noisysim run --trace (or replay.log: a PostgreSQL log)")
	case r.Trace != "" && r.Log != "":
		c.add("replay.log", "excludes replay.trace: replay one or the other")
	case r.Log != "":
		file, field = r.Log, "replay.log"
	}
	if file != "" {
		if fi, err := os.Stat(s.Path(file)); err != nil {
			c.add(field, "cannot read the file: %v", err)
		} else if fi.IsDir() {
			c.add(field, "%s is a directory, not a file", s.Path(file))
		}
	}
	if r.Log == "" {
		for _, k := range []string{"format", "reorder", "tenant", "rules", "default_class"} {
			if c.present("replay." + k) {
				c.add("replay."+k, "only with replay.log (a PostgreSQL log)")
			}
		}
	} else {
		c.replayLog(s)
	}
	if !(r.Speed > 0 && r.Speed <= 1000) {
		c.add("replay.speed", "must be in (0, 1000], got %s", fmtFloat(r.Speed))
	}
	if s.Load.Model == ModelClosed {
		c.add("replay", "replays open loop: load.model closed has no intended starts to replay")
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

// replayLog checks the keys of a replayed PostgreSQL log.
func (c *checker) replayLog(s *Scenario) {
	r := s.Replay
	if f := r.LogFormat(); f != "csvlog" && f != "jsonlog" {
		if r.Format != "" {
			c.add("replay.format", "unknown format %q; want csvlog or jsonlog", r.Format)
		} else {
			c.add("replay.log", "cannot tell the format from the name: give replay.format, csvlog or jsonlog")
		}
	}
	if r.Reorder < 0 || r.Reorder.Duration() > 10*time.Minute {
		c.add("replay.reorder", "must be a duration in [0, 10m], got %s", r.Reorder)
	}
	t := r.Tenant
	if t.ApplicationName != "" && t.Statement != "" {
		c.add("replay.tenant.statement", "excludes replay.tenant.application_name: one expression finds the tenant")
	}
	for _, f := range []struct{ field, re string }{{"replay.tenant.application_name", t.ApplicationName}, {"replay.tenant.statement", t.Statement}} {
		if f.re == "" {
			continue
		}
		if re, err := regexp.Compile(f.re); err != nil {
			c.add(f.field, "not a regular expression: %v", err)
		} else if re.NumSubexp() < 1 {
			c.add(f.field, "needs a group, (...), around the tenant key")
		}
	}
	has := func(name string) bool {
		for _, cl := range s.Classes {
			if cl.Name == name {
				return true
			}
		}
		return false
	}
	for i, rule := range r.Rules {
		p := fmt.Sprintf("replay.rules[%d]", i)
		if rule.Class == "" {
			c.add(p+".class", "required: the class the rule's statements are replayed as")
		} else if !has(rule.Class) {
			c.add(p+".class", "no class %q in classes", rule.Class)
		}
		if rule.User == "" && rule.ApplicationSuffix == "" && rule.Statement == "" && rule.MinDuration == 0 {
			c.add(p, "needs a condition: user, application_suffix, statement or min_duration")
		}
		if rule.Statement != "" {
			if _, err := regexp.Compile(rule.Statement); err != nil {
				c.add(p+".statement", "not a regular expression: %v", err)
			}
		}
		if rule.MinDuration < 0 {
			c.add(p+".min_duration", "must be a duration >= 0, got %s", rule.MinDuration)
		}
	}
	if r.DefaultClass != "" && !has(r.DefaultClass) {
		c.add("replay.default_class", "no class %q in classes", r.DefaultClass)
	}
}
