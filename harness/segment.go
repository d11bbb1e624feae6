package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/noisysim/noisysim/harness/metrics"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

// SegmentProblems returns why sc cannot be run as one segment of many
// agents (Options.Segment), joined; nil when it can. An agent runs a slice
// of the generated open-loop schedule and nothing that changes the
// database or the system under test for everyone (those would run once per
// agent, at different moments): no timeline actions or watchers, no phase
// ending on until, no faults, no checked writer, no started service, no
// rate calibration (each agent would measure its own), no replay and no
// closed loop (their ops are not a seeded schedule), no Citus topology
// (its placements and skew are read by the run that moves them), and
// nothing each agent would start for itself: the database (backend.kind
// local or docker) or the global limiter's Redis.
func SegmentProblems(sc *scenario.Scenario) error {
	var problems []string
	// bad adds a problem at field's file:line:col (the file alone for
	// field "" or a scenario built in Go).
	bad := func(field, format string, args ...any) {
		where := sc.File
		if p := sc.Problem(field, ""); field != "" && p.Line > 0 {
			where = fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
		}
		problems = append(problems, where+": "+fmt.Sprintf(format, args...))
	}
	if sc.Replaying() {
		bad("", "a replayed trace or log is not a seeded schedule to slice (replay)")
	}
	if sc.Load.Model == scenario.ModelClosed {
		bad("load.model", "a closed loop's users set their own pace: only load.model open can be sliced")
	}
	for _, p := range sc.Steps() {
		switch {
		case len(p.Actions) > 0:
			bad("", "phase %s has actions: each agent would run them; run the actions' scenario on one agent", p.Name)
		case p.Watch != nil:
			bad("", "phase %s has a watch: each agent would act on it", p.Name)
		case p.Until != "":
			bad("", "phase %s ends on until: the agents' phases would end at different times", p.Name)
		}
	}
	if len(sc.Faults) > 0 {
		bad("faults", "faults would be injected once per agent")
	}
	if sc.Writer != nil {
		bad("writer", "the checked writer would write once per agent")
	}
	if sc.Service.Started() {
		bad("service", "each agent would start its own service; give the service's URL (service.url) instead")
	}
	for i := range sc.Classes {
		if sc.Classes[i].Calibrated() {
			bad(fmt.Sprintf("classes[%d].load_factor", i), "class %s has load_factor: each agent would calibrate its own rate; give the rate", sc.Classes[i].Name)
		}
	}
	if k := sc.Backend.Kind; k != scenario.BackendExternal {
		what := "local PostgreSQL processes"
		if k == scenario.BackendDocker {
			what = "containers"
		}
		bad("backend.kind", "backend.kind %s: each agent would start a database of its own (%s), but the agents of one run share one: use an existing database by DSN (backend: {kind: external, primary_dsn: ...})", k, what)
	}
	for i, c := range sc.Configurations {
		if c.App != nil && c.App.Limiter == scenario.AppGlobal && c.App.RedisURL == "" {
			bad(fmt.Sprintf("configurations[%d].app.limiter", i), "configuration %s: app.limiter global without app.redis_url: each agent would start a redis-server of its own and hold the cap per agent; give the Redis all agents share (app.redis_url)", c.Name)
		}
	}
	if sc.Citus() {
		bad("backend.topology", "topology citus: placements and skew are read by the run that moves them")
	}
	switch len(problems) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: --segment: %s", scenario.ErrInvalid, problems[0])
	}
	return fmt.Errorf("%w: --segment: %d problems:\n  - %s", scenario.ErrInvalid, len(problems), strings.Join(problems, "\n  - "))
}

// segmentSchema returns the schema an agent of seg keeps its copy of the
// data set in: the scenario's, with the segment appended ("noisysim_s2of3"),
// so that agents on one database do not claim each other's.
func segmentSchema(schema string, seg workload.Segment) string {
	return schema + "_" + segmentTag(seg)
}

// segmentTag is "s2of3" for 2/3, "" for the whole schedule.
func segmentTag(seg workload.Segment) string {
	if seg.Whole() {
		return ""
	}
	return fmt.Sprintf("s%dof%d", seg.Index, seg.Count)
}

// roleName is the database role of one configuration's pool; an agent's
// roles carry its segment (noisysim_s2of3_<config>_<pool>).
func roleName(tag, config, pool string) string {
	if tag != "" {
		return "noisysim_" + tag + "_" + config + "_" + pool
	}
	return "noisysim_" + config + "_" + pool
}

// WindowResult is what one phase of one configuration's timeline
// measured, as Options.OnWindows hands it out and MergeSegments takes it
// back: the phase's name, its span from the timeline's start (Origin, the
// wall-clock time the timeline started), the arrivals it sent and its
// recorder.
type WindowResult struct {
	Name       string
	Origin     time.Time
	Start, End time.Duration
	Sent       int64
	Recorder   *metrics.Recorder
}

func windowResults(tr *timelineRun) []WindowResult {
	out := make([]WindowResult, len(tr.windows))
	for i, w := range tr.windows {
		out[i] = WindowResult{Name: w.step.Name, Origin: tr.origin, Start: w.start, End: w.end, Sent: w.sent, Recorder: w.rec}
	}
	return out
}

// waitStart waits until Options.StartAt, if set.
func (r *runner) waitStart(ctx context.Context) error {
	at := r.opts.StartAt
	if at.IsZero() {
		return nil
	}
	wait := time.Until(at)
	if wait < 0 {
		return fmt.Errorf("%w: --start-at %s passed %s before the data set was loaded: give a later time", ErrRun,
			at.UTC().Format(time.RFC3339), (-wait).Round(time.Millisecond))
	}
	r.log.Info("waiting for the start time", "start_at", at.UTC().Format(time.RFC3339Nano), "in", wait.Round(time.Millisecond))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
