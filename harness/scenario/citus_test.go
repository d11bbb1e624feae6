package scenario

import (
	"strings"
	"testing"
)

// citusYAML is a scenario on topology citus; CITUS is replaced by each
// case's keys (at the top level).
const citusYAML = `name: hs
backend: {kind: local, topology: citus}
tenants: {count: 10, dominant_share: 0.6}
data: {orders: 1000, days: 30, customers: 10}
classes: [{name: page, isolation_class: interactive, query: page, rate: 10}]
phases: {drain: 1s}
configurations: [{name: c, mode: shared, shared: {pool_size: 2, acquire_timeout: 1s}}]
timeline:
  - {name: solo, length: 1s, senders: quiet}
  - {name: before, length: 1s}
  - {name: ladder, length: 2s, actions: [{type: isolate_tenant, tenant: 1}, {type: dedicate_worker, tenant: 1, at: 1s}]}
  - {name: after, length: 1s}
assertions:
  quiet_p99: {window: after, baseline: solo}
CITUS
`

func TestCitusDefaults(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(citusYAML, "CITUS", "", 1)), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend.Workers != DefaultWorkers || s.Data.Citus.Shards != DefaultCitusShards || !s.Citus() {
		t.Errorf("workers %d, shards %d: want the defaults %d, %d", s.Backend.Workers, s.Data.Citus.Shards, DefaultWorkers, DefaultCitusShards)
	}
	if spec := s.Backend.Spec(); spec.Topology != TopologyCitus || spec.Nodes != DefaultWorkers {
		t.Errorf("spec = %+v, want topology citus with %d nodes", spec, DefaultWorkers)
	}
	s, err = Parse([]byte(strings.Replace(citusYAML, "CITUS", "  skew: {window: after}", 1)), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Assertions.Skew.Max != DefaultMaxSkew {
		t.Errorf("skew max = %v, want the default %v", s.Assertions.Skew.Max, DefaultMaxSkew)
	}
}

// TestCitusOwnWorkload: on topology citus a workload of one's own (setup
// SQL, text keys, scripts) names the tables to distribute and their tenant
// column; the first is the anchor.
func TestCitusOwnWorkload(t *testing.T) {
	y := strings.Replace(strings.Replace(strings.Replace(citusYAML,
		"data: {orders: 1000, days: 30, customers: 10}", "data: {setup: [/dev/null], citus: {tables: [invoices, lines], reference: [products], column: tenant_key}}", 1),
		"query: page", "sql: SELECT 1", 1),
		"tenants: {count: 10, dominant_share: 0.6}", `tenants: {count: 10, dominant_share: 0.6, keys: {type: text, template: "org-{n}"}}`, 1)
	s, err := Parse([]byte(strings.Replace(y, "CITUS", "", 1)), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Data.Citus.Anchor(); a != "invoices" || s.Data.Citus.Column != "tenant_key" || s.Data.Citus.Shards != DefaultCitusShards {
		t.Errorf("anchor %q, column %q, shards %d; want invoices, tenant_key, %d", a, s.Data.Citus.Column, s.Data.Citus.Shards, DefaultCitusShards)
	}
	if a := (CitusData{}).Anchor(); a != "orders" {
		t.Errorf("built-in anchor %q, want orders", a)
	}
}

// TestCitusInvalid: each bad key of the Citus data step, actions and
// verdicts is named with its place in the file.
func TestCitusInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"old hot_shard section", strings.Replace(citusYAML, "CITUS", "hot_shard: {shards: 8}", 1),
			"x.yaml:15:1: hot_shard: removed: a hot-shard scenario is a timeline now: data.citus.shards"},
		{"shards 0", strings.Replace(citusYAML, "days: 30,", "days: 30, citus: {shards: 0},", 1), "x.yaml:4:40: data.citus.shards: must be in 1..4096, got 0"},
		{"data.citus off citus", strings.Replace(strings.Replace(citusYAML, "topology: citus", "topology: single", 1), "days: 30,", "days: 30, citus: {shards: 8},", 1),
			"data.citus: needs backend.topology citus (the topology is single)"},
		{"action without citus", strings.Replace(strings.Replace(citusYAML, "topology: citus", "topology: single", 1), "CITUS", "", 1),
			"x.yaml:11:43: timeline[2].actions[0].type: isolate_tenant needs backend.topology citus (the topology is single)"},
		{"action tenant", strings.Replace(citusYAML, "type: isolate_tenant, tenant: 1", "type: isolate_tenant, tenant: 11", 1),
			"timeline[2].actions[0].tenant: no such tenant 11"},
		{"action mode", strings.Replace(citusYAML, "tenant: 1, at: 1s", "tenant: 1, at: 1s, mode: auto", 1),
			`timeline[2].actions[1].mode: unknown shard transfer mode "auto"`},
		{"action unknown key", strings.Replace(citusYAML, "tenant: 1, at: 1s", "tenant: 1, at: 1s, shards: 2", 1),
			`unknown key "shards" of action dedicate_worker`},
		{"balance skew", strings.Replace(citusYAML, "{type: isolate_tenant, tenant: 1}", "{type: balance, max_skew: 1}", 1),
			"timeline[2].actions[0].max_skew: must be > 1"},
		{"skew window", strings.Replace(citusYAML, "CITUS", "  skew: {window: nosuch, max: 1.5}", 1),
			`assertions.skew.window: unknown window "nosuch"`},
		{"skew max", strings.Replace(citusYAML, "CITUS", "  skew: {window: after, max: 0.5}", 1), "assertions.skew.max: must be > 1"},
		{"skew without window", strings.Replace(citusYAML, "CITUS", "  skew: {max: 2}", 1), "assertions.skew.window: required"},
		{"harm_before on the baseline", strings.Replace(citusYAML, "CITUS", "  harm_before: {window: solo}", 1),
			`assertions.harm_before.window: must differ from quiet_p99's baseline "solo"`},
		{"harm_before on the judged window", strings.Replace(citusYAML, "CITUS", "  harm_before: {window: after, factor: 5}", 1),
			`x.yaml:15:17: assertions.harm_before.window: must differ from quiet_p99's window "after": the same p99 cannot both fail and pass its bound`},
		{"harm_before unknown window", strings.Replace(citusYAML, "CITUS", "  harm_before: {window: nosuch}", 1),
			`assertions.harm_before.window: unknown window "nosuch"`},
		{"harm_before tenants", strings.Replace(citusYAML, "CITUS", "  harm_before: {window: before, tenants: hot}", 1),
			`assertions.harm_before.tenants: unknown "hot", want all or hot_worker`},
		{"harm_before tenants empty", strings.Replace(citusYAML, "CITUS", `  harm_before: {window: before, tenants: ""}`, 1),
			`assertions.harm_before.tenants: unknown "", want all or hot_worker`},
		{"harm_before hot_worker off citus", strings.Replace(strings.Replace(strings.Replace(citusYAML, "topology: citus", "topology: single", 1), "CITUS", "  harm_before: {window: before, tenants: hot_worker}", 1), "{type: isolate_tenant, tenant: 1}, ", "", 1),
			"x.yaml:15:33: assertions.harm_before.tenants: hot_worker needs backend.topology citus"},
		{"harm_before factor", strings.Replace(citusYAML, "CITUS", "  harm_before: {window: before, factor: 1}", 1),
			"assertions.harm_before.factor: must be > 1 and finite"},
		{"detect_within", strings.Replace(citusYAML, "CITUS", "  detect_within: 0s", 1), "assertions.detect_within: must be a duration > 0"},
		{"tables without setup", strings.Replace(citusYAML, "days: 30,", "days: 30, citus: {tables: [invoices]},", 1),
			"x.yaml:4:40: data.citus.tables: only with data.setup: the built-in data set distributes tenants and orders on tenant_id"},
		{"setup without tables", strings.Replace(strings.Replace(strings.Replace(citusYAML, "data: {orders: 1000, days: 30, customers: 10}", "data: {setup: [/dev/null], citus: {OWN}}", 1), "query: page", "sql: SELECT 1", 1), "OWN", "shards: 8", 1), "data.citus.tables: required with data.setup on topology citus"},
		{"setup without column", strings.Replace(strings.Replace(strings.Replace(citusYAML, "data: {orders: 1000, days: 30, customers: 10}", "data: {setup: [/dev/null], citus: {OWN}}", 1), "query: page", "sql: SELECT 1", 1), "OWN", "tables: [a]", 1), "data.citus.column: required with data.setup on topology citus"},
		{"bad column", strings.Replace(strings.Replace(strings.Replace(citusYAML, "data: {orders: 1000, days: 30, customers: 10}", "data: {setup: [/dev/null], citus: {OWN}}", 1), "query: page", "sql: SELECT 1", 1), "OWN", "tables: [a], column: 'tenant key'", 1), `data.citus.column: must be a column name`},
		{"tenants table", strings.Replace(strings.Replace(strings.Replace(citusYAML, "data: {orders: 1000, days: 30, customers: 10}", "data: {setup: [/dev/null], citus: {OWN}}", 1), "query: page", "sql: SELECT 1", 1), "OWN", "tables: [a, noisysim_tenants], column: k", 1),
			"data.citus.tables[1]: noisysim_tenants is noisysim's table of tenants"},
		{"listed twice", strings.Replace(strings.Replace(strings.Replace(citusYAML, "data: {orders: 1000, days: 30, customers: 10}", "data: {setup: [/dev/null], citus: {OWN}}", 1), "query: page", "sql: SELECT 1", 1), "OWN", "tables: [a], reference: [a], column: k", 1),
			"data.citus.reference[0]: table a is already listed at data.citus.tables[0]"},
		{"qualified", strings.Replace(strings.Replace(strings.Replace(citusYAML, "data: {orders: 1000, days: 30, customers: 10}", "data: {setup: [/dev/null], citus: {OWN}}", 1), "query: page", "sql: SELECT 1", 1), "OWN", "tables: [app.a], column: k", 1), `data.citus.tables[0]: must be a table name in the run's schema (unqualified)`},
		{"existing on citus", strings.Replace(citusYAML, "data: {orders: 1000, days: 30, customers: 10}", "data: {existing: {schemas: [app]}}", 1),
			"data.existing: not on topology citus: give data.setup and data.citus.tables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(tc.yaml, "CITUS", "", 1)), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant …%s…", err, tc.want)
			}
		})
	}
}

// TestHotShardLadderPolicy: the shipped scenario detects in before and
// plans in the ladder (apply from --apply); bad policy keys are named.
func TestHotShardLadderPolicy(t *testing.T) {
	s, err := Load("../../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	before, ladder := s.Timeline[2].Watch.Config.(*HotShardLadder), s.Timeline[3].Watch.Config.(*HotShardLadder)
	if !before.DetectOnly || ladder.Apply || !ladder.PlanOnly() || before.PlanOnly() {
		t.Fatalf("before %+v, ladder %+v: want detection, then a plan", before, ladder)
	}
	if !s.SetApply() || !ladder.Apply || before.Apply {
		t.Errorf("SetApply: before %+v, ladder %+v: want the ladder alone to apply", before, ladder)
	}
	watch := strings.Replace(citusYAML, "{name: before, length: 1s}", "{name: before, length: 1s, watch: {policy: hot_shard_ladder, WATCH}}", 1)
	for _, tc := range []struct {
		name, keys, want string
	}{
		{"shares out of order", "isolate: 0.3, dedicate: 0.2", "timeline[1].watch.dedicate: the ladder needs isolate <= dedicate <= cluster"},
		{"share out of range", "cluster: 1.5", "timeline[1].watch.cluster: must be a share in (0, 1), got 1.5"},
		{"skew", "skew: 1", "timeline[1].watch.skew: must be > 1"},
		{"mode", "mode: auto", `timeline[1].watch.mode: unknown shard transfer mode "auto"`},
		{"apply and detect_only", "apply: true, detect_only: true", "timeline[1].watch.apply: not with detect_only"},
		{"unknown key", "shards: 8", `unknown key "shards" of policy hot_shard_ladder`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(strings.Replace(watch, "WATCH", tc.keys, 1), "CITUS", "", 1)), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant …%s…", err, tc.want)
			}
		})
	}
	single := strings.Replace(strings.Replace(watch, "WATCH", "every: 500ms", 1), "topology: citus", "topology: single", 1)
	_, err = Parse([]byte(strings.Replace(single, "CITUS", "", 1)), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "timeline[1].watch.policy: hot_shard_ladder needs backend.topology citus (the topology is single)") {
		t.Errorf("policy on single: err = %v", err)
	}
	_, err = Parse([]byte(strings.Replace(citusYAML, "CITUS", "  detect_within: 3s", 1)), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "assertions.detect_within: no phase watches with a detecting policy (hot_shard_ladder)") {
		t.Errorf("detect_within without a watch: err = %v", err)
	}
}
