package scenario

import (
	"strings"
	"testing"
)

func TestHotShardDefaults(t *testing.T) {
	s, err := Load("../../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !s.HotSharding() || s.Backend.Workers != 4 || s.HotShard.Shards != 32 || s.HotShard.Mode != "force_logical" {
		t.Fatalf("hot-shard.yaml: hot_shard %v, workers %d, section %+v", s.HotSharding(), s.Backend.Workers, s.HotShard)
	}
	spec := s.Backend.Spec()
	if spec.Topology != TopologyCitus || spec.Nodes != 4 {
		t.Errorf("spec = %+v, want topology citus with 4 nodes", spec)
	}

	minimal := strings.Replace(hotShardYAML, "HOT", "hot_shard: {}", 1)
	s, err = Parse([]byte(minimal), "min.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := s.HotShard
	if h.Shards != DefaultHotShardShards || h.Skew != DefaultHotShardSkew || h.Isolate != DefaultHotShardIsolate ||
		h.Dedicate != DefaultHotShardDedicate || h.Cluster != DefaultHotShardCluster || h.MaxPause != DefaultHotShardMaxPause ||
		h.Query != DefaultHotShardQuery || h.Apply || s.Backend.Workers != DefaultWorkers {
		t.Errorf("defaults not applied: %+v, workers %d", h, s.Backend.Workers)
	}
}

const hotShardYAML = `name: hs
backend: {kind: local, topology: citus}
tenants: {count: 10, dominant_share: 0.6}
data: {orders: 1000, days: 30, customers: 10}
classes: [{name: lookup, isolation_class: interactive, query: lookup, rate: 10}]
phases: {warmup: 1s, solo: 1s, run: 1s, drain: 1s}
configurations: [{name: c, mode: shared, shared: {pool_size: 2, acquire_timeout: 1s}}]
HOT
`

func TestHotShardInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, section, field, msg string
	}{
		{"citus without section", "", "backend.topology", "citus needs a hot_shard section"},
		{"shares out of order", "hot_shard: {isolate: 0.3, dedicate: 0.2}", "hot_shard.dedicate", "isolate <= dedicate <= cluster"},
		{"share out of range", "hot_shard: {cluster: 1.5}", "hot_shard.cluster", "(0, 1)"},
		{"unknown mode", "hot_shard: {mode: auto}", "hot_shard.mode", `"auto"`},
		{"export query", "hot_shard: {query: export}", "hot_shard.query", `"export"`},
		{"skew", "hot_shard: {skew: 1}", "hot_shard.skew", "must be > 1"},
		{"detect longer than before", "hot_shard: {detect_every: 6s, before: 5s}", "hot_shard.detect_every", "<= hot_shard.before"},
		{"zero duration", "hot_shard: {after: 0s}", "hot_shard.after", "> 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(hotShardYAML, "HOT", tc.section, 1)), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s: …%s…", err, tc.field, tc.msg)
			}
		})
	}
	_, err := Parse([]byte(strings.Replace(strings.Replace(hotShardYAML, "topology: citus", "topology: single", 1), "HOT", "hot_shard: {}", 1)), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "needs backend.topology citus") {
		t.Errorf("hot_shard on single: err = %v", err)
	}
}
