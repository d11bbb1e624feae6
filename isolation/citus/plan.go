package citus

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
)

// Default thresholds of the policy ladder; Thresholds fields left 0 take
// these.
const (
	// DefaultSkew is the per-worker (and per-shard) skew, max / median,
	// above which a skew alert fires.
	DefaultSkew = 1.5
	// DefaultIsolate is the tenant share of cluster load above which the
	// tenant gets a shard of its own (isolate_tenant_to_new_shard).
	DefaultIsolate = 0.05
	// DefaultDedicate is the tenant share above which its shard gets a
	// worker of its own.
	DefaultDedicate = 0.20
	// DefaultCluster is the tenant share above which a cluster of its own
	// is recommended (never applied).
	DefaultCluster = 0.50
)

// Thresholds are the detection thresholds and the rungs of the policy
// ladder. Shares are fractions of cluster load, 0..1. A zero field takes
// its Default constant.
type Thresholds struct {
	Skew     float64
	Isolate  float64
	Dedicate float64
	Cluster  float64
}

func (t Thresholds) withDefaults() Thresholds {
	def := func(v, d float64) float64 {
		if v <= 0 {
			return d
		}
		return v
	}
	return Thresholds{
		Skew:     def(t.Skew, DefaultSkew),
		Isolate:  def(t.Isolate, DefaultIsolate),
		Dedicate: def(t.Dedicate, DefaultDedicate),
		Cluster:  def(t.Cluster, DefaultCluster),
	}
}

// Skew returns max / median of values: 1 for an even spread, 0 for no
// values or no load at all, +Inf when the median is 0 but some value is
// not (more than half the places idle while one is busy).
func Skew(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	maxV := v[len(v)-1]
	if maxV <= 0 {
		return 0
	}
	mid := len(v) / 2
	median := v[mid]
	if len(v)%2 == 0 {
		median = (v[mid-1] + v[mid]) / 2
	}
	if median <= 0 {
		return math.Inf(1)
	}
	return maxV / median
}

// Worker is one Citus worker as the planner sees it.
type Worker struct {
	// Name is "host:port", as pg_dist_node has it.
	Name string
	Host string
	Port int
	// ShouldHaveShards is pg_dist_node.shouldhaveshards: false on a worker
	// dedicated to one tenant (new shards and rebalances keep off it).
	ShouldHaveShards bool
	// Load is the worker's measured load in any unit that is the same for
	// every worker (e.g. mean active backends).
	Load float64
}

// Tenant is one tenant's measured share and where its rows are.
type Tenant struct {
	ID string
	// Share is the tenant's fraction of cluster load, 0..1.
	Share float64
	// ShardID is the anchor table's shard holding the tenant.
	ShardID int64
	// Isolated is true when that shard holds this tenant only (its hash
	// range is a single value).
	Isolated bool
}

// State is the input of Decide: the anchor table's shard placements and
// the measured load.
type State struct {
	// Table is the anchor distributed table (the one steps name).
	Table string
	// Workers are the cluster's active workers.
	Workers []Worker
	// Placements maps each shard of Table to the worker name holding it;
	// co-located shards move with it.
	Placements map[int64]string
	// ShardLoad is the measured load per shard of Table (optional).
	ShardLoad map[int64]float64
	// Tenants are the tenants with a measured share, any order.
	Tenants []Tenant
}

// Action is what a Step does.
type Action string

// Actions, in ladder order.
const (
	// ActionIsolate gives a tenant a shard of its own:
	// isolate_tenant_to_new_shard(Table, Tenant, 'CASCADE', …).
	ActionIsolate Action = "isolate"
	// ActionDedicate keeps new shards off worker To:
	// citus_set_node_property(…, 'shouldhaveshards', false).
	ActionDedicate Action = "dedicate"
	// ActionMove moves shard ShardID (and its co-located shards) from worker
	// From to worker To: citus_move_shard_placement.
	ActionMove Action = "move"
	// ActionRecommend is advice only (a cluster of its own, a worker to
	// add); Apply never runs it.
	ActionRecommend Action = "recommend"
)

// Step is one rung of the ladder for one tenant.
type Step struct {
	Action Action
	Tenant string
	// Share is the tenant's share of cluster load that triggered the step.
	Share float64
	// ShardID is the shard to isolate or move (for a move planned before
	// its isolation, the shard that holds the tenant now).
	ShardID int64
	// From and To are worker names ("host:port") of a move; To alone names
	// the worker of a dedicate step.
	From, To string
	// Reason says why, in one line.
	Reason string
}

func (s Step) String() string {
	switch s.Action {
	case ActionIsolate:
		return fmt.Sprintf("isolate tenant %s (share %.1f%%) from shard %d: %s", s.Tenant, s.Share*100, s.ShardID, s.Reason)
	case ActionDedicate:
		return fmt.Sprintf("dedicate worker %s to tenant %s: %s", s.To, s.Tenant, s.Reason)
	case ActionMove:
		return fmt.Sprintf("move shard %d from %s to %s: %s", s.ShardID, s.From, s.To, s.Reason)
	}
	return fmt.Sprintf("recommend for tenant %s (share %.1f%%): %s", s.Tenant, s.Share*100, s.Reason)
}

// Alert is one detection that fired.
type Alert struct {
	// Kind is "worker-skew", "shard-skew" or "tenant-share".
	Kind string
	// Subject is the hottest worker, shard or the tenant.
	Subject   string
	Value     float64
	Threshold float64
}

func (a Alert) String() string {
	if a.Kind == "tenant-share" {
		return fmt.Sprintf("%s: tenant %s at %.1f%% > %.1f%%", a.Kind, a.Subject, a.Value*100, a.Threshold*100)
	}
	return fmt.Sprintf("%s: %s at %.2fx median > %.2fx", a.Kind, a.Subject, a.Value, a.Threshold)
}

// Plan is Decide's result.
type Plan struct {
	// WorkerSkew is max / median load over the workers that take shards
	// (dedicated workers excluded, so a dedicated hot worker does not keep
	// the alert on); ShardSkew the same over shards with a measured load.
	WorkerSkew, ShardSkew float64
	Alerts                []Alert
	// Steps are what remains to do, in order; empty when every tenant is
	// where its share says. Steps after an isolate are computed from the
	// current placements: Apply re-plans after each step.
	Steps []Step
}

// Decide applies the policy ladder to s: for each tenant above
// th.Isolate, from the largest share down, an isolate step unless its shard
// is already its own; above th.Dedicate, a worker of its own — the worker
// that holds its shard now (its rows stay put) — marked to take no new
// shards, and every other shard moved off it, the most loaded first, to
// the shared worker whose shards carry the least measured load
// (State.ShardLoad; shards without a measured load by shard count); above
// th.Cluster, a recommendation. A step already done is not listed, so deciding again after applying is idempotent. Decide is
// pure and deterministic.
func Decide(s State, th Thresholds) Plan {
	th = th.withDefaults()
	var p Plan

	shared := map[string]bool{}
	byName := map[string]Worker{}
	for _, w := range s.Workers {
		byName[w.Name] = w
		if w.ShouldHaveShards {
			shared[w.Name] = true
		}
	}
	count := map[string]int{}
	for _, w := range s.Placements {
		count[w]++
	}
	var loads []float64
	hot := ""
	for _, w := range sortedWorkers(s.Workers) {
		if !w.ShouldHaveShards {
			continue
		}
		loads = append(loads, w.Load)
		if hot == "" || w.Load > byName[hot].Load {
			hot = w.Name
		}
	}
	p.WorkerSkew = Skew(loads)
	if p.WorkerSkew > th.Skew {
		p.Alerts = append(p.Alerts, Alert{Kind: "worker-skew", Subject: hot, Value: p.WorkerSkew, Threshold: th.Skew})
	}
	var shardLoads []float64
	var hotShard int64
	for _, id := range sortedKeys(s.ShardLoad) {
		shardLoads = append(shardLoads, s.ShardLoad[id])
		if hotShard == 0 || s.ShardLoad[id] > s.ShardLoad[hotShard] {
			hotShard = id
		}
	}
	p.ShardSkew = Skew(shardLoads)
	if p.ShardSkew > th.Skew {
		p.Alerts = append(p.Alerts, Alert{Kind: "shard-skew", Subject: fmt.Sprint(hotShard), Value: p.ShardSkew, Threshold: th.Skew})
	}

	tenants := slices.Clone(s.Tenants)
	slices.SortFunc(tenants, func(a, b Tenant) int {
		if c := cmp.Compare(b.Share, a.Share); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	for _, t := range tenants {
		if t.Share <= th.Isolate {
			continue
		}
		p.Alerts = append(p.Alerts, Alert{Kind: "tenant-share", Subject: t.ID, Value: t.Share, Threshold: th.Isolate})
		if !t.Isolated {
			p.Steps = append(p.Steps, Step{Action: ActionIsolate, Tenant: t.ID, Share: t.Share, ShardID: t.ShardID,
				Reason: fmt.Sprintf("share %.1f%% > %.1f%%", t.Share*100, th.Isolate*100)})
		}
		if t.Share > th.Dedicate {
			p.Steps = append(p.Steps, dedicate(t, s, th, shared, count)...)
		}
		if t.Share > th.Cluster {
			p.Steps = append(p.Steps, Step{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
				Reason: fmt.Sprintf("share %.1f%% > %.1f%%: give the tenant a cluster of its own", t.Share*100, th.Cluster*100)})
		}
	}
	return p
}

// dedicate returns the steps that leave t's shard alone on its worker,
// updating shared and count as if they had run.
func dedicate(t Tenant, s State, th Thresholds, shared map[string]bool, count map[string]int) []Step {
	home, ok := s.Placements[t.ShardID]
	if !ok {
		return []Step{{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
			Reason: fmt.Sprintf("shard %d of tenant %s has no known placement; inspect the cluster again", t.ShardID, t.ID)}}
	}
	load := map[string]float64{}
	for _, w := range s.Workers {
		load[w.Name] = w.Load
	}
	for _, o := range s.Tenants {
		if o.ID != t.ID && s.Placements[o.ShardID] == home && !shared[home] &&
			(o.Share > t.Share || (o.Share == t.Share && o.ID < t.ID)) {
			return []Step{{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
				Reason: fmt.Sprintf("its shard %d is on worker %s, dedicated to tenant %s: move it to a shared worker first", t.ShardID, home, o.ID)}}
		}
	}
	var steps []Step
	if shared[home] {
		others := 0
		for w := range shared {
			if w != home {
				others++
			}
		}
		if others == 0 {
			return []Step{{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
				Reason: fmt.Sprintf("share %.1f%% > %.1f%% but no other worker would be left to take shards: add a worker", t.Share*100, th.Dedicate*100)}}
		}
		steps = append(steps, Step{Action: ActionDedicate, Tenant: t.ID, Share: t.Share, To: home,
			Reason: fmt.Sprintf("share %.1f%% > %.1f%%", t.Share*100, th.Dedicate*100)})
		delete(shared, home)
	}
	// Shards to move off home, the most loaded first, each to the shared
	// worker whose shards carry the least measured load so far (see
	// leastLoaded): the other workers end up balanced by load, not only
	// by count.
	var moving []int64
	projected := map[string]float64{}
	for _, id := range sortedKeys(s.Placements) {
		w := s.Placements[id]
		if w != home {
			projected[w] += s.ShardLoad[id]
			continue
		}
		if id != t.ShardID {
			// After an isolation the tenant's range shard is new, and
			// its neighbours (the split remainders) are still on home:
			// they move too, as every other shard does.
			moving = append(moving, id)
		}
	}
	slices.SortStableFunc(moving, func(a, b int64) int { return cmp.Compare(s.ShardLoad[b], s.ShardLoad[a]) })
	for _, id := range moving {
		to := leastLoaded(shared, s.ShardLoad[id] > 0, projected, count, load)
		steps = append(steps, Step{Action: ActionMove, Tenant: t.ID, Share: t.Share, ShardID: id, From: home, To: to,
			Reason: fmt.Sprintf("keep worker %s for tenant %s alone", home, t.ID)})
		count[home]--
		count[to]++
		projected[to] += s.ShardLoad[id]
	}
	return steps
}

// leastLoaded returns the shared worker to move a shard to: for a shard
// with measured load, the worker with the least projected shard load, then
// the fewest shards; for a shard without, the fewest shards first (zero
// loads would otherwise all land on one worker); then the lowest measured
// worker load, then the first by name.
func leastLoaded(shared map[string]bool, byLoad bool, projected map[string]float64, count map[string]int, load map[string]float64) string {
	better := func(w, best string) bool {
		keys := []int{cmp.Compare(projected[w], projected[best]), cmp.Compare(count[w], count[best])}
		if !byLoad {
			keys[0], keys[1] = keys[1], keys[0]
		}
		keys = append(keys, cmp.Compare(load[w], load[best]))
		for _, k := range keys {
			if k != 0 {
				return k < 0
			}
		}
		return false
	}
	best := ""
	for _, w := range slices.Sorted(maps.Keys(shared)) {
		if best == "" || better(w, best) {
			best = w
		}
	}
	return best
}

func sortedWorkers(ws []Worker) []Worker {
	out := slices.Clone(ws)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sortedKeys[V any](m map[int64]V) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
