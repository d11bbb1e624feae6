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
		{"skew NaN", "hot_shard: {skew: .nan}", "hot_shard.skew", "must be > 1"},
		{"skew infinite", "hot_shard: {skew: .inf}", "hot_shard.skew", "finite"},
		{"p99 factor NaN", "hot_shard: {p99_factor: .nan}", "hot_shard.p99_factor", "must be > 0"},
		{"p99 factor infinite", "hot_shard: {p99_factor: .inf}", "hot_shard.p99_factor", "finite"},
		{"detect every nanosecond", "hot_shard: {detect_every: 1ns}", "hot_shard.detect_every", ">= 100ms"},
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

// TestHotShardBackendKinds: topology citus runs on local processes, in
// containers or on an existing cluster by the coordinator's DSN; each
// rejected combination names its field.
func TestHotShardBackendKinds(t *testing.T) {
	t.Setenv("NOISYSIM_TEST_COORDINATOR", "postgres://u@127.0.0.1:5432/db")
	for _, tc := range []struct {
		name, backend string
		workers       int    // accepted: Backend.Workers after defaults
		field, msg    string // rejected: the field and part of its message
	}{
		{name: "local default workers", backend: "{kind: local, topology: citus}", workers: DefaultWorkers},
		{name: "local 64 workers", backend: "{kind: local, topology: citus, workers: 64}", workers: 64},
		{name: "docker default workers", backend: "{kind: docker, topology: citus}", workers: DefaultWorkers},
		{name: "docker with a citus image", backend: "{kind: docker, topology: citus, workers: 2, image: noisysim-local/citus:dev}", workers: 2},
		{name: "docker with per-role images", backend: "{kind: docker, topology: citus, images: {coordinator: c:1, worker: w:1}}", workers: DefaultWorkers},
		{name: "external coordinator DSN", backend: `{kind: external, topology: citus, primary_dsn: "${NOISYSIM_TEST_COORDINATOR}"}`, workers: 0},

		{name: "local 1 worker", backend: "{kind: local, topology: citus, workers: 1}", field: "backend.workers", msg: "must be in 2..64, got 1"},
		{name: "local 65 workers", backend: "{kind: local, topology: citus, workers: 65}", field: "backend.workers", msg: "must be in 2..64, got 65"},
		{name: "docker 33 workers", backend: "{kind: docker, topology: citus, workers: 33}", field: "backend.workers", msg: "must be in 2..32 with kind docker, got 33"},
		{name: "docker 1 worker", backend: "{kind: docker, topology: citus, workers: 1}", field: "backend.workers", msg: "must be in 2..32 with kind docker"},
		{name: "external with workers", backend: `{kind: external, topology: citus, primary_dsn: "${NOISYSIM_TEST_COORDINATOR}", workers: 4}`,
			field: "backend.workers", msg: "not for kind external"},
		{name: "external with a replica", backend: `{kind: external, topology: citus, primary_dsn: "${NOISYSIM_TEST_COORDINATOR}", replica_dsn: "${NOISYSIM_TEST_COORDINATOR}"}`,
			field: "backend.replica_dsn", msg: "not for topology citus"},
		{name: "external without DSN", backend: "{kind: external, topology: citus}", field: "backend.primary_dsn", msg: "required for kind external"},
		{name: "local with an image", backend: "{kind: local, topology: citus, image: noisysim-local/citus:dev}", field: "backend.image", msg: "only for kind docker"},
		{name: "external with an image", backend: `{kind: external, topology: citus, primary_dsn: "${NOISYSIM_TEST_COORDINATOR}", image: x}`,
			field: "backend.image", msg: "only for kind docker"},
		{name: "workers without citus", backend: "{kind: docker, topology: single, workers: 4}", field: "backend.workers", msg: "only for topology citus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := strings.Replace(strings.Replace(hotShardYAML, "{kind: local, topology: citus}", tc.backend, 1), "HOT", "hot_shard: {}", 1)
			s, err := Parse([]byte(yaml), "x.yaml")
			if tc.field == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if s.Backend.Workers != tc.workers || s.Backend.Spec().Topology != TopologyCitus || s.Backend.Spec().Nodes != tc.workers {
					t.Errorf("workers %d, spec %+v; want %d workers on topology citus", s.Backend.Workers, s.Backend.Spec(), tc.workers)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s: …%s…", err, tc.field, tc.msg)
			}
		})
	}
}
