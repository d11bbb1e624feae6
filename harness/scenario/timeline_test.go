package scenario

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTimelineParses(t *testing.T) {
	src := "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\n  - {name: heavy, query: report, rate: 2, senders: dominant}\n" +
		"configurations: [{name: a, mode: shared}]\n" +
		"phases: {drain: 1s}\n" +
		"timeline:\n" +
		"  - {name: warm, length: 1s, senders: quiet, measure: false}\n" +
		"  - {name: before, length: 2s, senders: quiet}\n" +
		"  - {name: burst, length: 3s, rates: {heavy: 3, interactive: 0.5}}\n" +
		"  - {name: some, length: 4s, senders: [1, 3]}\n" +
		"assertions:\n  quiet_p99: {window: burst, baseline: before}\n" +
		"faults: []\n"
	s, err := Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.TimelineDerived() {
		t.Error("TimelineDerived() = true for a file with a timeline")
	}
	want := []Phase{
		{Name: "warm", Length: Duration(time.Second), Senders: PhaseSenders{Set: SendersQuiet}},
		{Name: "before", Length: Duration(2 * time.Second), Senders: PhaseSenders{Set: SendersQuiet}, Measure: true},
		{Name: "burst", Length: Duration(3 * time.Second), Senders: PhaseSenders{Set: SendersAll},
			Rates: map[string]float64{"heavy": 3, "interactive": 0.5}, Measure: true},
		{Name: "some", Length: Duration(4 * time.Second), Senders: PhaseSenders{Tenants: []int{1, 3}}, Measure: true},
	}
	if !reflect.DeepEqual(s.Steps(), want) {
		t.Errorf("Steps() = %+v\nwant %+v", s.Steps(), want)
	}
	if got := s.PhaseStart(3); got != Duration(6*time.Second) {
		t.Errorf("PhaseStart(3) = %s, want 6s", got)
	}
	if got := s.NoiseStart(); got != "burst" {
		t.Errorf("NoiseStart() = %q, want burst (the first phase the dominant tenant sends in)", got)
	}
	if p := s.Steps()[2]; p.Rate("heavy") != 3 || p.Rate("other") != 1 {
		t.Errorf("Rate: heavy %v other %v, want 3 and 1", p.Rate("heavy"), p.Rate("other"))
	}
	if ps := s.Steps()[3].Senders; !ps.Sends(1) || ps.Sends(2) || !ps.Sends(3) || ps.String() != "1,3" {
		t.Errorf("senders [1, 3]: Sends(1,2,3) = %v %v %v, String %q", ps.Sends(1), ps.Sends(2), ps.Sends(3), ps.String())
	}
}

func TestDefaultTimeline(t *testing.T) {
	s, err := Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.Steps() {
		got = append(got, fmt.Sprintf("%s %s %s %v", p.Name, p.Length, p.Senders, p.Measure))
	}
	want := []string{"solo_warmup 2s quiet false", "solo 10s quiet true", "warmup 2s all false", "run 20s all true"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default timeline = %q, want %q", got, want)
	}
	if !s.TimelineDerived() || s.NoiseStart() != PhaseRunWarmup {
		t.Errorf("derived %v, noise starts at %q; want true, %q", s.TimelineDerived(), s.NoiseStart(), PhaseRunWarmup)
	}
	// Without a warm-up, no warm-up phases.
	if tl := DefaultTimeline(Phases{Solo: Duration(time.Second), Run: Duration(time.Second)}); len(tl) != 2 {
		t.Errorf("DefaultTimeline without warm-up has %d phases, want 2", len(tl))
	}
}

func TestTimelineInvalid(t *testing.T) {
	const head = "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\nconfigurations: [{name: a, mode: shared}]\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"empty", head + "timeline: []\n", []string{
			"5:1 timeline: must have at least one phase",
		}},
		{"phase fields", head + "assertions: {quiet_p99: {window: b, baseline: b}}\ntimeline:\n" +
			"  - {name: a, senders: some}\n" +
			"  - {name: a, length: -1s, senders: [0, 2, 2, 99], rates: {intreactive: 2, interactive: -1}}\n" +
			"  - {length: 1s, senders: x7}\n" +
			"  - {name: b, length: 1s, senders: [a]}\n", []string{
			"7:5 timeline[0].length: required",
			"7:15 timeline[0].senders: unknown senders \"some\"",
			"8:6 timeline[1].name: duplicate phase name \"a\" (first at line 7)",
			"8:15 timeline[1].length: must be a duration > 0, got -1s",
			"8:38 timeline[1].senders[0]: no such tenant 0: ids run from 1 to tenants.count (50)",
			"8:44 timeline[1].senders[2]: duplicate tenant 2",
			"8:47 timeline[1].senders[3]: no such tenant 99",
			"8:60 timeline[1].rates.intreactive: unknown class \"intreactive\"; the scenario's classes are \"interactive\"",
			"8:76 timeline[1].rates.interactive: must be a rate factor >= 0, got -1",
			"9:5 timeline[2].name: required",
			"9:18 timeline[2].senders: unknown senders \"x7\"",
			"10:37 timeline[3].senders[0]: must be a tenant id (an integer), got \"a\"",
		}},
		{"windows", head + "timeline:\n  - {name: w, length: 1s, measure: false}\n  - {name: m, length: 1s}\n" +
			"assertions: {quiet_p99: {window: after, baseline: w}}\nfaults: [{node: primary, action: stop, for: 1s, phase: nope}]\n", []string{
			"8:26 assertions.quiet_p99.window: unknown window \"after\"; the timeline's measured phases are \"m\"",
			"8:41 assertions.quiet_p99.baseline: phase \"w\" is not measured (measure: false)",
			"9:1 faults: need backend kind docker",
			"9:49 faults[0].phase: unknown phase \"nope\"; the timeline's phases are \"w\", \"m\"",
		}},
		{"nothing measured, phases given", head + "phases: {solo: 1s, drain: 1s}\ntimeline:\n  - {name: w, length: 1s, measure: false}\n", []string{
			"5:10 phases.solo: the timeline gives the phases: with a timeline only phases.drain applies",
			"6:1 timeline: no measured phase: set measure: true",
			"6:1 timeline: no measured phase \"run\", which assertions.quiet_p99.window names by default",
			"6:1 timeline: no measured phase \"solo\", which assertions.quiet_p99.baseline names by default",
		}},
		{"the removed promotion section", head + "backend: {topology: shards}\npromotion: {tenant: 1, threshold: 0.3}\ntimeline:\n  - {name: run, length: 2s}\n  - {name: solo, length: 2s}\n", []string{
			"6:1 promotion: the promotion section is gone: a promotion is a timeline now — a phase with until: actions_done, max and watch: {policy: promote",
		}},
		{"fault past the timeline", head + "backend: {kind: docker}\ntimeline:\n  - {name: m, length: 2s}\n  - {name: run, length: 1s}\n" +
			"assertions: {quiet_p99: {baseline: m}}\nfaults: [{node: primary, action: stop, at: 2500ms, for: 1s}]\n", []string{
			"10:52 faults[0].for: at + for (3.5s) must be <= the rest of the timeline from phase m (3s)",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProblems(t, tc.yaml, tc.want)
		})
	}
}

func TestActionsParse(t *testing.T) {
	src := "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\nconfigurations: [{name: a, mode: shared}]\n" +
		"timeline:\n  - {name: solo, length: 2s, senders: quiet}\n" +
		"  - name: run\n    length: 3s\n    actions:\n      - {type: terminate_sessions, at: 1s, tenant: 1}\n"
	s, err := Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	as := s.Steps()[1].Actions
	if len(as) != 1 || as[0].Type != ActionTerminateSessions || as[0].At != Duration(time.Second) {
		t.Fatalf("actions = %+v", as)
	}
	if cfg, ok := as[0].Config.(*TerminateSessions); !ok || cfg.Tenant != 1 {
		t.Errorf("config = %#v, want *TerminateSessions{Tenant: 1}", as[0].Config)
	}
}

func TestActionsInvalid(t *testing.T) {
	const head = "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\nconfigurations: [{name: a, mode: shared}]\n" +
		"timeline:\n  - {name: solo, length: 2s, senders: quiet}\n  - name: run\n    length: 3s\n    actions:\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"fields", head +
			"      - {type: terminate_session, tenant: 1}\n" +
			"      - {type: terminate_sessions, at: 3s}\n" +
			"      - {type: terminate_sessions, tenant: 77, at: -1s}\n" +
			"      - {at: 1s}\n", []string{
			"10:10 timeline[1].actions[0].type: unknown action \"terminate_session\"; known actions: balance, dedicate_worker, fault, isolate_tenant, move_tenant, terminate_sessions",
			"11:9 timeline[1].actions[1].tenant: required: the tenant whose sessions end, 1..50",
			"11:36 timeline[1].actions[1].at: must be within the phase (length 3s), got 3s",
			"12:36 timeline[1].actions[2].tenant: no such tenant 77",
			"12:48 timeline[1].actions[2].at: must be a duration >= 0, got -1s",
			"13:9 timeline[1].actions[3]: required: type",
		}},
		{"unknown key", head + "      - {type: terminate_sessions, tenant: 1, node: primary}\n", []string{
			"10:47 timeline[1].actions[0].node: unknown key \"node\" of action terminate_sessions; its keys are type, at, tenant",
		}},
		{"not a mapping", head + "      - terminate\n", []string{
			"10:9 timeline[1].actions[0]: must be a mapping with a type",
		}},
		{"fault", head +
			"      - {type: fault, fault: crash, duration: 1s}\n" +
			"      - {type: fault, fault: pause, duration: 0s}\n" +
			"      - {type: fault, fault: stop}\n" +
			"      - {type: fault, fault: disconnect, duration: 1s}\n" +
			"      - {type: fault, node: replica1, fault: restart, duration: 1s}\n" +
			"      - {type: fault, duration: 1s}\n", []string{
			"10:23 timeline[1].actions[0].fault: unknown fault \"crash\"; want one of stop, pause, restart",
			"11:37 timeline[1].actions[1].duration: must be a duration > 0",
			"12:9 timeline[1].actions[2].duration: must be a duration > 0",
			"13:23 timeline[1].actions[3].fault: disconnect needs backend kind docker",
			"14:23 timeline[1].actions[4].node: unknown node \"replica1\"; topology single has primary",
			"14:55 timeline[1].actions[4].duration: not for restart",
			"15:9 timeline[1].actions[5].fault: required: one of stop, pause, restart",
		}},
		{"faults overlap", head +
			"      - {type: fault, at: 1s, fault: pause, duration: 1s}\n" +
			"      - {type: fault, at: 1500ms, node: primary, fault: restart}\n" +
			"      - {type: fault, at: 2500ms, fault: stop, duration: 400ms}\n", []string{
			"11:23 timeline[1].actions[1].at: the restart of primary overlaps timeline[1].actions[0] (pause primary from 3s to 4s of the timeline)",
		}},
		{"fault past the timeline", head +
			"      - {type: fault, at: 0s, fault: pause, duration: 1s}\n" +
			"      - {type: fault, at: 2500ms, node: primary, fault: stop, duration: 5s}\n", []string{
			"11:63 timeline[1].actions[1].duration: the stop of primary holds from 4.5s to 9.5s of the timeline, past its end at 5s: a fault must be restored within the timeline",
		}},
		{"fault on external", strings.Replace(head, "name: x\n", "name: x\nbackend: {kind: external, primary_dsn: \"host=h\"}\n", 1) +
			"      - {type: fault, fault: stop, duration: 1s}\n", []string{
			"11:9 timeline[1].actions[0]: needs backend kind local or docker",
		}},
		{"fault on docker", strings.Replace(head, "name: x\n", "name: x\nbackend: {kind: docker, topology: replica}\n", 1) +
			"      - {type: fault, node: replica1, fault: disconnect, duration: 1s}\n" +
			"      - {type: fault, node: replica2, fault: stop, duration: 1s}\n", []string{
			"12:23 timeline[1].actions[1].node: unknown node \"replica2\"; topology replica has primary, replica1",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProblems(t, tc.yaml, tc.want)
		})
	}
}
