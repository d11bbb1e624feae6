package scenario

import (
	"math"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

// TopologyCitus is a Citus cluster, from one of three backend kinds: local
// (a coordinator and Backend.Workers workers as local processes; the citus
// extension must be installed for the local PostgreSQL), docker (the same
// in containers; Backend.Image or Backend.Images names an image with
// Citus) or external (an existing cluster: Backend.PrimaryDSN is its
// coordinator's DSN, the workers are those in its pg_dist_node). It needs
// a hot_shard section.
const TopologyCitus backend.Topology = "citus"

// Worker counts of topology citus: MaxDockerWorkers is the container
// backend's node limit (container.MaxNodes).
const (
	MinWorkers       = 2
	MaxWorkers       = 64
	MaxDockerWorkers = 32
)

// Hot-shard defaults, applied to keys a hot_shard section leaves out.
const (
	DefaultWorkers                     = 4
	DefaultHotShardShards              = 32
	DefaultHotShardRate                = 200.0
	DefaultHotShardQuery               = QueryPage
	DefaultHotShardQueryTime  Duration = Duration(20 * time.Millisecond)
	DefaultHotShardSolo       Duration = Duration(3 * time.Second)
	DefaultHotShardBefore     Duration = Duration(5 * time.Second)
	DefaultHotShardAfter      Duration = Duration(5 * time.Second)
	DefaultHotShardDetect     Duration = Duration(500 * time.Millisecond)
	DefaultHotShardWithin     Duration = Duration(3 * time.Second)
	DefaultHotShardSkew                = 1.5
	DefaultHotShardIsolate             = 0.05
	DefaultHotShardDedicate            = 0.20
	DefaultHotShardCluster             = 0.50
	DefaultHotShardMode                = "force_logical"
	DefaultHotShardWriterRate          = 100.0
	DefaultHotShardMaxPause   Duration = Duration(time.Second)
	DefaultHotShardP99Factor           = 1.5
	DefaultHotShardP99Slack   Duration = Duration(5 * time.Millisecond)
	// MinHotShardDetect bounds hot_shard.detect_every from below: each
	// interval samples pg_stat_activity and reads the layout (queries on
	// the coordinator), and adds a point to the report's timeline.
	MinHotShardDetect Duration = Duration(100 * time.Millisecond)
)

// HotShard is a hot-shard scenario on topology citus: tenant 1 (with
// tenants.dominant_share of rows and queries) makes its hash shard and
// worker hot; detection is timed from its start; with Apply (or `noisysim
// run --apply`) the policy ladder isolates it, dedicates its worker and
// moves the other shards off it while a writer checks that no acknowledged
// write is lost; quiet tenants are measured alone, before and after. Its
// queries are its own (Query on the tenant's rows, through the isolation
// stack): classes, phases and configurations are not used.
type HotShard struct {
	// Shards is the shard count of the distributed tables. Default 32.
	Shards int `yaml:"shards"`
	// Rate is the open-loop query rate, queries/s. Default 200.
	Rate float64 `yaml:"rate"`
	// Query is each query: page, lookup or report (the data set's query on
	// the tenant's orders), or sleep (a pg_sleep of QueryTime on the
	// tenant's shard, a query of exact cost). Default page.
	Query Query `yaml:"query"`
	// QueryTime is a sleep query's cost on its worker. Default 20ms.
	QueryTime Duration `yaml:"query_time"`
	// Solo, Before and After are the measured windows: quiet tenants
	// alone, with tenant 1 before the ladder, after it. Defaults 3s, 5s,
	// 5s.
	Solo   Duration `yaml:"solo"`
	Before Duration `yaml:"before"`
	After  Duration `yaml:"after"`
	// DetectEvery is the detection sampling window; DetectWithin the bound
	// on time from tenant 1's start to the first alert (asserted).
	// Defaults 500ms and 3s.
	DetectEvery  Duration `yaml:"detect_every"`
	DetectWithin Duration `yaml:"detect_within"`
	// Skew is the skew alert threshold (max / median) and the bound on
	// skew over the other workers after the ladder. Default 1.5.
	Skew float64 `yaml:"skew"`
	// Isolate, Dedicate and Cluster are the ladder's tenant shares, in
	// (0, 1): own shard, own worker, own cluster (recommended only).
	// Defaults 0.05, 0.20, 0.50.
	Isolate  float64 `yaml:"isolate"`
	Dedicate float64 `yaml:"dedicate"`
	Cluster  float64 `yaml:"cluster"`
	// Mode is the shard transfer mode: force_logical (default) or
	// block_writes.
	Mode string `yaml:"mode"`
	// Apply runs the ladder; false plans only (`noisysim run --apply`
	// overrides it).
	Apply bool `yaml:"apply"`
	// WriterRate is tenant 1's checked inserts per second during the
	// ladder. Default 100.
	WriterRate float64 `yaml:"writer_rate"`
	// MaxPause bounds the longest gap between acknowledged writes.
	// Default 1s.
	MaxPause Duration `yaml:"max_pause"`
	// P99Factor and P99Slack: quiet p99 after <= factor × solo p99 +
	// slack. Defaults 1.5 and 5ms.
	P99Factor float64  `yaml:"p99_factor"`
	P99Slack  Duration `yaml:"p99_slack"`
}

// HotSharding reports whether s has a hot_shard section.
func (s *Scenario) HotSharding() bool { return s.ix.has("hot_shard") }

// applyHotShardDefaults fills a present hot_shard section, and the worker
// count of topology citus (kinds local and docker: an external cluster has
// the workers it has).
func (s *Scenario) applyHotShardDefaults() {
	if s.Backend.Topology == TopologyCitus && s.Backend.Kind != BackendExternal && !s.ix.has("backend.workers") {
		s.Backend.Workers = DefaultWorkers
	}
	if !s.ix.has("hot_shard") {
		return
	}
	h := &s.HotShard
	set := func(key string, apply func()) {
		if !s.ix.has("hot_shard." + key) {
			apply()
		}
	}
	set("shards", func() { h.Shards = DefaultHotShardShards })
	set("rate", func() { h.Rate = DefaultHotShardRate })
	set("query", func() { h.Query = DefaultHotShardQuery })
	set("query_time", func() { h.QueryTime = DefaultHotShardQueryTime })
	set("solo", func() { h.Solo = DefaultHotShardSolo })
	set("before", func() { h.Before = DefaultHotShardBefore })
	set("after", func() { h.After = DefaultHotShardAfter })
	set("detect_every", func() { h.DetectEvery = DefaultHotShardDetect })
	set("detect_within", func() { h.DetectWithin = DefaultHotShardWithin })
	set("skew", func() { h.Skew = DefaultHotShardSkew })
	set("isolate", func() { h.Isolate = DefaultHotShardIsolate })
	set("dedicate", func() { h.Dedicate = DefaultHotShardDedicate })
	set("cluster", func() { h.Cluster = DefaultHotShardCluster })
	set("mode", func() { h.Mode = DefaultHotShardMode })
	set("writer_rate", func() { h.WriterRate = DefaultHotShardWriterRate })
	set("max_pause", func() { h.MaxPause = DefaultHotShardMaxPause })
	set("p99_factor", func() { h.P99Factor = DefaultHotShardP99Factor })
	set("p99_slack", func() { h.P99Slack = DefaultHotShardP99Slack })
}

// hotShard checks the hot_shard section and its link to topology citus.
func (c *checker) hotShard(s *Scenario) {
	b := &s.Backend
	citus := b.Topology == TopologyCitus
	switch {
	case !citus:
		if b.Workers != 0 {
			c.add("backend.workers", "only for topology citus")
		}
	case b.Kind == BackendExternal:
		if s.ix.has("backend.workers") {
			c.add("backend.workers", "not for kind external: the workers are those in the coordinator's pg_dist_node")
		}
		if b.ReplicaDSN != "" {
			c.add("backend.replica_dsn", "not for topology citus: backend.primary_dsn is the Citus coordinator's DSN")
		}
	case b.Kind == BackendDocker:
		if b.Workers < MinWorkers || b.Workers > MaxDockerWorkers {
			c.add("backend.workers", "must be in %d..%d with kind docker, got %d", MinWorkers, MaxDockerWorkers, b.Workers)
		}
	default:
		if b.Workers < MinWorkers || b.Workers > MaxWorkers {
			c.add("backend.workers", "must be in %d..%d, got %d", MinWorkers, MaxWorkers, b.Workers)
		}
	}
	if !s.HotSharding() {
		if citus {
			c.add("backend.topology", "citus needs a hot_shard section")
		}
		return
	}
	if !citus {
		c.add("hot_shard", "needs backend.topology citus")
	}
	h := &s.HotShard
	c.atLeast("hot_shard.shards", h.Shards, 1)
	if !(h.Rate > 0 && h.Rate <= 10000) {
		c.add("hot_shard.rate", "must be in (0, 10000] queries/s, got %s", fmtFloat(h.Rate))
	}
	for f, d := range map[string]Duration{"query_time": h.QueryTime, "solo": h.Solo, "before": h.Before, "after": h.After,
		"detect_every": h.DetectEvery, "detect_within": h.DetectWithin, "max_pause": h.MaxPause} {
		c.positive("hot_shard."+f, d)
	}
	c.nonNegative("hot_shard.p99_slack", h.P99Slack)
	if h.DetectEvery > h.Before && h.Before > 0 {
		c.add("hot_shard.detect_every", "must be <= hot_shard.before (%s)", h.Before)
	}
	if h.DetectEvery > 0 && h.DetectEvery < MinHotShardDetect {
		c.add("hot_shard.detect_every", "must be >= %s, got %s", MinHotShardDetect, h.DetectEvery)
	}
	if !(h.Skew > 1) || math.IsInf(h.Skew, 1) {
		c.add("hot_shard.skew", "must be > 1 and finite, got %s", fmtFloat(h.Skew))
	}
	for f, v := range map[string]float64{"isolate": h.Isolate, "dedicate": h.Dedicate, "cluster": h.Cluster} {
		if !(v > 0 && v < 1) {
			c.add("hot_shard."+f, "must be a share in (0, 1), got %s", fmtFloat(v))
		}
	}
	if h.Isolate > h.Dedicate || h.Dedicate > h.Cluster {
		c.add("hot_shard.dedicate", "the ladder needs isolate <= dedicate <= cluster, got %s, %s, %s",
			fmtFloat(h.Isolate), fmtFloat(h.Dedicate), fmtFloat(h.Cluster))
	}
	oneOf(c, "hot_shard.mode", "shard transfer mode", h.Mode, "force_logical", "block_writes")
	oneOf(c, "hot_shard.query", "hot-shard query", h.Query, QuerySleep, QueryLookup, QueryPage, QueryReport)
	if !(h.WriterRate > 0 && h.WriterRate <= 5000) {
		c.add("hot_shard.writer_rate", "must be in (0, 5000] writes/s, got %s", fmtFloat(h.WriterRate))
	}
	if !(h.P99Factor > 0) || math.IsInf(h.P99Factor, 1) {
		c.add("hot_shard.p99_factor", "must be > 0 and finite, got %s", fmtFloat(h.P99Factor))
	}
}
