package scenario

import (
	"fmt"
	"math"

	"github.com/noisysim/noisysim/harness/backend"
)

// TopologyCitus is a Citus cluster, from one of three backend kinds: local
// (a coordinator and Backend.Workers workers as local processes; the citus
// extension must be installed for the local PostgreSQL), docker (the same
// in containers; Backend.Image or Backend.Images names an image with
// Citus) or external (an existing cluster: Backend.PrimaryDSN is its
// coordinator's DSN, the workers are those in its pg_dist_node). The run's
// data set is distributed on the tenant column (Data.Citus) and the
// configurations' stacks run against the coordinator.
const TopologyCitus backend.Topology = "citus"

// Worker counts of topology citus: MaxDockerWorkers is the container
// backend's node limit (container.MaxNodes).
const (
	MinWorkers       = 2
	MaxWorkers       = 64
	MaxDockerWorkers = 32
)

// Citus defaults.
const (
	// DefaultWorkers is backend.workers of topology citus (kinds local
	// and docker).
	DefaultWorkers = 4
	// DefaultCitusShards is data.citus.shards.
	DefaultCitusShards = 32
	// MaxCitusShards bounds data.citus.shards (Citus's own limit is
	// 64000; a run this size would not end on one machine).
	MaxCitusShards = 4096
	// DefaultTransferMode is the shard transfer mode of the Citus
	// actions' moves.
	DefaultTransferMode = "force_logical"
	// DefaultSplitMode is the shard transfer mode of isolate_tenant's
	// split: block_writes keeps the new shards on the tenant's worker and
	// pauses the shard's writes for the copy; force_logical puts them on
	// another worker without that pause (see isolation/citus
	// DefaultSplitMode).
	DefaultSplitMode = "block_writes"
	// DefaultMaxSkew is balance's max_skew and hot_shard_ladder's skew.
	DefaultMaxSkew = 1.5
)

// CitusData is how the data set is distributed on topology citus: the
// built-in data set's tenants and orders by tenant_id, or with data.setup
// the user's Tables by Column (create_distributed_table), co-located.
type CitusData struct {
	// Shards is the shard count of the co-location group, 1..4096.
	// Default 32.
	Shards int `yaml:"shards"`
	// Tables (data.setup only, and then required) are the user's tables
	// in the run's schema distributed on Column, co-located with the
	// first: the anchor whose shards the reports' per-worker load and the
	// Citus actions name. Distributed after the setup files ran.
	Tables []string `yaml:"tables"`
	// Column is the tenant column of every table of Tables, holding the
	// tenant's key (tenants.keys). Required with Tables.
	Column string `yaml:"column"`
	// Reference (data.setup only) are tables copied whole to every worker
	// (create_reference_table): small tables every tenant's queries join.
	Reference []string `yaml:"reference"`
}

// Anchor returns the distributed table whose shards the Citus steps and
// the per-worker load name: Tables[0], or the built-in data set's orders.
func (d CitusData) Anchor() string {
	if len(d.Tables) > 0 {
		return d.Tables[0]
	}
	return "orders"
}

// removedKeys are keys of earlier versions: the message names their
// replacement.
var removedKeys = map[string]string{
	"hot_shard": "removed: a hot-shard scenario is a timeline now: data.citus.shards distributes the data, a phase's " +
		"watch: {policy: hot_shard_ladder} detects and runs the ladder (isolate_tenant, dedicate_worker, balance), " +
		"classes send the queries, and assertions.quiet_p99, skew, detect_within and harm_before judge the windows " +
		"(scenarios/hot-shard.yaml, REFERENCE.md)",
}

// applyCitusDefaults fills the worker count and the shard count of
// topology citus (kinds local and docker: an external cluster has the
// workers it has).
func (s *Scenario) applyCitusDefaults() {
	if s.Backend.Topology != TopologyCitus {
		return
	}
	if s.Backend.Kind != BackendExternal && !s.ix.has("backend.workers") {
		s.Backend.Workers = DefaultWorkers
	}
	if !s.ix.has("data.citus.shards") {
		s.Data.Citus.Shards = DefaultCitusShards
	}
}

// Citus reports whether s runs on topology citus.
func (s *Scenario) Citus() bool { return s.Backend.Topology == TopologyCitus }

// citus checks topology citus's keys: the worker count by kind, and
// data.citus.
func (c *checker) citus(s *Scenario) {
	b := &s.Backend
	citus := s.Citus()
	switch {
	case !citus:
		if b.Workers != 0 {
			c.add("backend.workers", "only for topology citus")
		}
		if c.present("data.citus") {
			c.add("data.citus", "needs backend.topology citus (the topology is %s)", cmpTopology(b.Topology))
		}
		return
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
	if n := s.Data.Citus.Shards; n < 1 || n > MaxCitusShards {
		c.add("data.citus.shards", "must be in 1..%d, got %d", MaxCitusShards, n)
	}
	c.citusTables(s)
}

// citusTables checks data.citus.tables, column and reference: the user's
// tables to distribute, required with data.setup and only with it.
func (c *checker) citusTables(s *Scenario) {
	d := &s.Data
	if len(d.Setup) == 0 {
		for _, k := range []string{"tables", "column", "reference"} {
			if c.present("data.citus." + k) {
				c.add("data.citus."+k, "only with data.setup: the built-in data set distributes tenants and orders on tenant_id")
			}
		}
		return
	}
	if len(d.Citus.Tables) == 0 {
		c.add("data.citus.tables", "required with data.setup on topology citus: the tables your setup creates that Citus distributes on the tenant column, co-located with the first (e.g. [accounts, invoices])")
	}
	if d.Citus.Column == "" {
		c.add("data.citus.column", "required with data.setup on topology citus: the tenant column of data.citus.tables, holding the tenant's key")
	} else if !identifier.MatchString(d.Citus.Column) {
		c.add("data.citus.column", "must be a column name: letters, digits, '_' and '$', not starting with a digit, at most 63 bytes; got %q", d.Citus.Column)
	}
	seen := map[string]string{}
	for _, list := range []struct {
		key    string
		tables []string
	}{{"tables", d.Citus.Tables}, {"reference", d.Citus.Reference}} {
		for i, t := range list.tables {
			f := fmt.Sprintf("data.citus.%s[%d]", list.key, i)
			switch {
			case !identifier.MatchString(t):
				c.add(f, "must be a table name in the run's schema (unqualified): letters, digits, '_' and '$', not starting with a digit, at most 63 bytes; got %q", t)
			case t == SetupTenantsTable:
				c.add(f, "%s is noisysim's table of tenants; name your own tables", t)
			case seen[t] != "":
				c.add(f, "table %s is already listed at %s", t, seen[t])
			}
			seen[t] = f
		}
	}
}

func cmpTopology(t backend.Topology) string {
	if t == "" {
		return string(backend.TopologySingle)
	}
	return string(t)
}

// needCitus returns the problem of a Citus action or policy named what on
// a scenario whose topology is not citus, at key (relative to the action
// or watch), or nil.
func needCitus(s *Scenario, key, what string) []ActionProblem {
	if s.Citus() {
		return nil
	}
	return []ActionProblem{{Key: key, Msg: fmt.Sprintf("%s needs backend.topology citus (the topology is %s)", what, cmpTopology(s.Backend.Topology))}}
}

// transferMode checks a shard transfer mode key ("" takes the default).
func transferMode(key, mode string) []ActionProblem {
	switch mode {
	case "", "force_logical", "block_writes":
		return nil
	}
	return []ActionProblem{{Key: key, Msg: fmt.Sprintf("unknown shard transfer mode %q; want force_logical or block_writes", mode)}}
}

// tenantID checks a required tenant key.
func tenantID(s *Scenario, key string, t int) []ActionProblem {
	switch {
	case t == 0:
		return []ActionProblem{{Key: key, Msg: fmt.Sprintf("required: the tenant, 1..%d", s.Tenants.Count)}}
	case t < 1 || (s.Tenants.Count >= 2 && t > s.Tenants.Count):
		return []ActionProblem{{Key: key, Msg: fmt.Sprintf("no such tenant %d: ids run from 1 to tenants.count (%d)", t, s.Tenants.Count)}}
	}
	return nil
}

// Citus action types.
const (
	ActionIsolateTenant  = "isolate_tenant"
	ActionDedicateWorker = "dedicate_worker"
	ActionBalance        = "balance"
)

// IsolateTenant gives a tenant a shard of its own on topology citus
// (tenants moves with it), unless its shard holds it alone already:
// isolate_tenant_to_new_shard('orders', tenant, 'CASCADE') on the same
// worker with block_writes, a split onto another worker with
// force_logical (isolation/citus Ladder.Execute).
type IsolateTenant struct {
	// Tenant is the tenant isolated, 1..tenants.count. Required.
	Tenant int `yaml:"tenant"`
	// Mode is the split's shard transfer mode: block_writes (default,
	// DefaultSplitMode: same worker, writes paused for the copy) or
	// force_logical (onto another worker, writes go on).
	Mode string `yaml:"mode"`
}

// Validate checks the topology, the tenant and the mode.
func (a *IsolateTenant) Validate(s *Scenario) []ActionProblem {
	return join(needCitus(s, "type", ActionIsolateTenant), tenantID(s, "tenant", a.Tenant), transferMode("mode", a.Mode))
}

// DedicateWorker gives the worker holding a tenant's shard to that tenant
// on topology citus: the worker whose dedication moves the fewest bytes
// (the shard's own, or another one with the shard moved onto it) takes no
// new shards (shouldhaveshards = false) and every other shard is moved off
// it, to the least loaded shared worker. Isolate the tenant first, or
// its shard's other tenants stay with it.
type DedicateWorker struct {
	// Tenant is the tenant, 1..tenants.count. Required.
	Tenant int `yaml:"tenant"`
	// Mode is the shard transfer mode: force_logical (default) or
	// block_writes.
	Mode string `yaml:"mode"`
}

// Validate checks the topology, the tenant and the mode.
func (a *DedicateWorker) Validate(s *Scenario) []ActionProblem {
	return join(needCitus(s, "type", ActionDedicateWorker), tenantID(s, "tenant", a.Tenant), transferMode("mode", a.Mode))
}

// Balance moves shards between the workers that take shards, one at a
// time, while their measured load's skew (max / median) is above MaxSkew,
// on topology citus. Load is each tenant's DB time from the ledger,
// counted on the worker holding its shard.
type Balance struct {
	// MaxSkew is the skew to get under, > 1. Default 1.5.
	MaxSkew float64 `yaml:"max_skew"`
	// Mode is the shard transfer mode: force_logical (default) or
	// block_writes.
	Mode string `yaml:"mode"`
}

// Validate checks the topology, the skew and the mode.
func (a *Balance) Validate(s *Scenario) []ActionProblem {
	var ps []ActionProblem
	if a.MaxSkew != 0 && (!(a.MaxSkew > 1) || math.IsInf(a.MaxSkew, 1)) {
		ps = append(ps, ActionProblem{Key: "max_skew", Msg: "must be > 1 and finite, got " + fmtFloat(a.MaxSkew)})
	}
	return join(needCitus(s, "type", ActionBalance), ps, transferMode("mode", a.Mode))
}

func join(pss ...[]ActionProblem) []ActionProblem {
	var out []ActionProblem
	for _, ps := range pss {
		out = append(out, ps...)
	}
	return out
}

func init() {
	RegisterAction(ActionIsolateTenant, func() ActionConfig { return &IsolateTenant{} })
	RegisterAction(ActionDedicateWorker, func() ActionConfig { return &DedicateWorker{} })
	RegisterAction(ActionBalance, func() ActionConfig { return &Balance{} })
}
