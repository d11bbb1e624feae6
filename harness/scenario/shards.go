package scenario

import (
	"strconv"

	"github.com/noisysim/noisysim/harness/backend"
)

// TopologyShards is directory sharding without Citus: Backend.Shards
// independent primaries (backend.TopologyPrimaries, nodes primary1…N), a
// tenant catalog on the first, tenants placed by hash over all but the
// last Backend.SpareNodes nodes. Each request runs on the node that holds
// its tenant; the move_tenant action moves a tenant under load.
const TopologyShards backend.Topology = "shards"

// DefaultShards is the node count of topology shards.
const DefaultShards = 4

// ShardNames returns the node names of topology shards: primary1…N.
func (b Backend) ShardNames() []string {
	out := make([]string, b.Shards)
	for i := range out {
		out[i] = "primary" + strconv.Itoa(i+1)
	}
	return out
}

// applyShardDefaults fills the shard count of topology shards.
func (s *Scenario) applyShardDefaults() {
	if s.Backend.Topology == TopologyShards && !s.ix.has("backend.shards") {
		s.Backend.Shards = DefaultShards
	}
}

// shards checks the keys of topology shards, and names the replacement of
// the promotion section.
func (c *checker) shards(s *Scenario) {
	b := &s.Backend
	shards := b.Topology == TopologyShards
	if shards && (b.Shards < 2 || b.Shards > 16) {
		c.add("backend.shards", "must be in 2..16, got %d", b.Shards)
	}
	if !shards && b.Shards != 0 {
		c.add("backend.shards", "only for topology shards")
	}
	switch {
	case !shards && c.present("backend.spare_nodes"):
		c.add("backend.spare_nodes", "only for topology shards")
	case shards && (b.SpareNodes < 0 || (b.Shards >= 2 && b.SpareNodes >= b.Shards)):
		c.add("backend.spare_nodes", "must be in 0..%d (at least one node takes the tenants), got %d", max(b.Shards-1, 0), b.SpareNodes)
	}
	if c.present("promotion") {
		c.add("promotion", "the promotion section is gone: a promotion is a timeline now — a phase with until: actions_done, "+
			"max and watch: {policy: promote, tenant, target, threshold, window} (which fires move_tenant), a top-level writer: "+
			"{tenant, rate, update_share} and the assertions zero_loss and write_pause: {max}; see scenarios/tenant-promotion.yaml")
	}
}

// shardNode checks that node (at field) names a node of topology shards;
// it returns the problems for an action's or policy's Validate.
func shardNode(s *Scenario, key, node string) []ActionProblem {
	if s.Backend.Topology != TopologyShards {
		return []ActionProblem{{Msg: "needs backend.topology shards (tenants placed on nodes by a catalog)"}}
	}
	if node == "" {
		return []ActionProblem{{Key: key, Msg: "required: the node the tenant moves to, one of primary1..primary" + strconv.Itoa(s.Backend.Shards)}}
	}
	for _, n := range s.Backend.ShardNames() {
		if n == node {
			return nil
		}
	}
	return []ActionProblem{{Key: key, Msg: "unknown node \"" + node + "\"; the shards are primary1..primary" + strconv.Itoa(s.Backend.Shards)}}
}
