package scenario

import (
	"testing"
	"time"
)

// testPolicy is a policy for the tests of watch: its key checks is
// required, >= 1.
type testPolicy struct {
	Checks int `yaml:"checks"`
	Tenant int `yaml:"tenant"`
}

func (p *testPolicy) Validate(s *Scenario) []ActionProblem {
	if p.Checks < 1 {
		return []ActionProblem{{Key: "checks", Msg: "must be >= 1"}}
	}
	return nil
}

func init() {
	RegisterPolicy("test_checks", func() PolicyConfig { return &testPolicy{Tenant: 1} })
}

const watchHead = "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\nconfigurations: [{name: a, mode: shared}]\n" +
	"assertions: {quiet_p99: {window: after, baseline: before}}\n" +
	"timeline:\n  - {name: before, length: 2s}\n"

func TestWatchUntilParse(t *testing.T) {
	src := watchHead +
		"  - name: move\n    until: actions_done\n    max: 30s\n    watch: {policy: test_checks, every: 200ms, checks: 3}\n" +
		"  - {name: after, length: 2s}\n"
	s, err := Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Steps()[1]
	if p.Until != UntilActionsDone || p.Max != Duration(30*time.Second) || p.Span() != p.Max || p.Length != 0 {
		t.Errorf("phase = %+v, want until actions_done, max 30s", p)
	}
	w := p.Watch
	if w == nil || w.Policy != "test_checks" || w.Every != Duration(200*time.Millisecond) {
		t.Fatalf("watch = %+v", w)
	}
	if cfg, ok := w.Config.(*testPolicy); !ok || cfg.Checks != 3 || cfg.Tenant != 1 {
		t.Errorf("config = %#v, want checks 3 and the default tenant 1", w.Config)
	}
	if got := s.PhaseStart(2); got != Duration(32*time.Second) {
		t.Errorf("PhaseStart(2) = %s, want 32s (before + the move's max)", got)
	}
	s, err = Parse([]byte(watchHead+"  - {name: after, length: 2s, watch: {policy: test_checks, checks: 1}}\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Steps()[1].Watch; w.Every != DefaultWatchEvery {
		t.Errorf("every = %s, want the default %s", w.Every, DefaultWatchEvery)
	}
}

func TestWatchUntilInvalid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"no length nor until", watchHead + "  - {name: after}\n", []string{
			"8:5 timeline[1].length: required: how long the phase runs, e.g. 10s, or until: actions_done with a max",
		}},
		{"until without max", watchHead + "  - {name: after, until: actions_done, watch: {policy: test_checks, checks: 1}}\n", []string{
			"8:5 timeline[1].max: required with until: the latest the phase ends, e.g. 60s",
		}},
		{"until and length", watchHead + "  - {name: after, length: 2s, until: actions_done, max: 5s, watch: {policy: test_checks, checks: 1}}\n", []string{
			"8:19 timeline[1].length: a phase with until ends on its event, at the latest after max: give max instead of length",
		}},
		{"max without until", watchHead + "  - {name: after, length: 2s, max: 5s}\n", []string{
			"8:31 timeline[1].max: only for a phase with until (e.g. until: actions_done): a phase with a length ends after it",
		}},
		{"unknown until", watchHead + "  - {name: after, until: done, max: 5s}\n", []string{
			"8:19 timeline[1].until: unknown phase end \"done\"; want actions_done",
		}},
		{"nothing to wait for", watchHead + "  - {name: after, until: actions_done, max: 5s}\n", []string{
			"8:19 timeline[1].until: until: actions_done needs actions or a watch in the phase: it has nothing to wait for",
		}},
		{"closed loop", "load: {model: closed}\n" + watchHead + "  - {name: after, until: actions_done, max: 5s, watch: {policy: test_checks, checks: 1}}\n", []string{
			"9:19 timeline[1].until: until is for the open loop (load.model open): a closed loop runs its phases for fixed lengths",
		}},
		{"watch", watchHead + "  - {name: after, length: 2s, watch: {policy: test_check, checks: 1}}\n" +
			"  - {name: c, length: 1s, watch: {policy: test_checks, every: 2s}}\n" +
			"  - {name: d, length: 1s, watch: {checks: 1}}\n" +
			"  - {name: e, length: 1s, watch: {policy: test_checks, checks: 1, treshold: 2}}\n", []string{
			"8:39 timeline[1].watch.policy: unknown policy \"test_check\"; known policies: hot_shard_ladder, promote, test_checks",
			"9:27 timeline[2].watch.checks: must be >= 1",
			"9:56 timeline[2].watch.every: must be within the phase (length 1s), got 2s",
			"10:27 timeline[3].watch: required: policy, one of hot_shard_ladder, promote, test_checks",
			"11:67 timeline[4].watch.treshold: unknown key \"treshold\" of policy test_checks; its keys are policy, every, checks, tenant",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProblems(t, tc.yaml, tc.want)
		})
	}
}
