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
	// ShardBytes is the size in bytes of each shard of Table with its
	// co-located shards, which move with it (Layout.GroupBytes, from
	// citus_shards.shard_size). Decide compares the bytes each candidate worker
	// would move to dedicate a worker to a tenant; nil, or missing a shard
	// of Placements, means sizes unknown: the tenant's shard stays on its
	// worker.
	ShardBytes map[int64]int64
	// Tenants are the tenants with a measured share, any order.
	Tenants []Tenant
	// Unplaced are measured tags that are not a value of the distribution
	// column (a query across tenants tagged t:multi, an application's own
	// tag, an empty t:), with their share (ShardID 0): load no shard can be
	// charged with. Decide plans nothing for them and reports them in
	// Plan.Unplaced.
	Unplaced []Tenant
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
	// the worker of a dedicate step, or the worker a non-blocking
	// isolation puts the new shards on (Ladder.Execute).
	From, To string
	// Reason says why, in one line.
	Reason string
}

func (s Step) String() string {
	switch s.Action {
	case ActionIsolate:
		if s.To != "" {
			return fmt.Sprintf("isolate tenant %s (share %.1f%%) from shard %d onto %s: %s", s.Tenant, s.Share*100, s.ShardID, s.To, s.Reason)
		}
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
	// Unplaced is State.Unplaced, the largest share first: load on no
	// shard, which no step can move.
	Unplaced []Tenant
}

// Decide applies the policy ladder to s: for each tenant above
// th.Isolate, from the largest share down, an isolate step unless its shard
// is already its own; above th.Dedicate, a worker of its own, marked to
// take no new shards (shouldhaveshards = false), every other shard moved off
// it, the most loaded first, to the shared worker whose shards carry the
// least measured load (State.ShardLoad; shards without a measured load by
// shard count), and the tenant's shard moved onto it if it is not there;
// above th.Cluster, a recommendation. Once no tenant has a step left, a
// move between shared workers while their load skew is above th.Skew (see
// balance). A step already done is not listed, so deciding again after
// applying is idempotent. Decide is pure and deterministic.
//
// The worker dedicated to a tenant is the cheapest to empty, in bytes moved
// (State.ShardBytes): its shard's current worker (home) costs the other
// shards on it; another shared worker W costs the shards on W plus the
// tenant's shard. Another worker holding the shard of a tenant above
// th.Dedicate is not a candidate, nor home when no other worker would be
// left to take shards. A tie, or unknown sizes, keeps home (the hot
// tenant's rows and writes stay put). For a tenant not yet isolated the
// sizes are those of its current shard; Run re-plans after the isolation,
// before any dedication.
//
// Once W is dedicated its choice must hold while it is emptied, whatever
// the sizes then say; Decide knows it from s alone: a worker that takes no
// shards and holds no shard of a tenant above th.Dedicate is a drain
// target. Drain targets go, the fewest bytes (then shards, then name)
// first, to the tenants above th.Dedicate whose shard is on a shared
// worker, the largest share first; such a tenant is moved to its drain
// target without comparing costs again. A worker marked by other means
// (an operator, citus_drain_node) that holds no such shard is taken as a
// drain target too: mark it back (shouldhaveshards = true) or remove it
// before deciding.
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
	p.Unplaced = slices.Clone(s.Unplaced)
	slices.SortFunc(p.Unplaced, func(a, b Tenant) int {
		return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(a.ID, b.ID))
	})
	pl := newPlanner(s, th, tenants, shared, count)
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
			p.Steps = append(p.Steps, pl.dedicate(t)...)
		}
		if t.Share > th.Cluster {
			p.Steps = append(p.Steps, Step{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
				Reason: fmt.Sprintf("share %.1f%% > %.1f%%: give the tenant a cluster of its own", t.Share*100, th.Cluster*100)})
		}
	}
	if !slices.ContainsFunc(p.Steps, func(st Step) bool { return st.Action != ActionRecommend }) {
		if st, ok := balance(s, th); ok {
			p.Steps = append(p.Steps, st)
		}
	}
	return p
}

// MinBalanceGain is the least part of the most loaded shared worker's
// load above the mean that one balancing move must take off the pair it
// moves between (see balance).
const MinBalanceGain = 0.05

// balance returns the move that evens the shared workers' load best, once
// every tenant is where its share says: while the skew of their load —
// the measured load of the shards each holds now (State.ShardLoad) — is
// above th.Skew, one shard of the most loaded shared worker goes to the
// least loaded, the one that leaves the two closest, provided both end
// below the most loaded one's load now and the pair's higher load drops by
// at least MinBalanceGain of the most loaded worker's excess over the mean.
// Each such move lowers the sum of squared worker loads, so deciding again
// after each converges, in few moves. Dedicating
// a worker moves shards off it onto the others but never between them: a
// quiet tenant with a large share (a power law's second) can leave its
// worker well above the others. Citus's own rebalancer cannot do this: it
// balances shard counts or sizes, and it moves shards off dedicated workers.
func balance(s State, th Thresholds) (Step, bool) {
	load := map[string]float64{}
	var names []string
	for _, w := range sortedWorkers(s.Workers) {
		if w.ShouldHaveShards {
			load[w.Name] = 0
			names = append(names, w.Name)
		}
	}
	if len(names) < 2 {
		return Step{}, false
	}
	// Summed in shard order: a sum in map order differs in the last bit
	// from one run to the next, and ties between workers or shards would
	// not be broken the same way (Decide is deterministic).
	var total float64
	for _, id := range sortedKeys(s.Placements) {
		w := s.Placements[id]
		if _, ok := load[w]; ok {
			load[w] += s.ShardLoad[id]
			total += s.ShardLoad[id]
		}
	}
	values := make([]float64, len(names))
	hi, lo := names[0], names[0]
	for i, n := range names {
		values[i] = load[n]
		if load[n] > load[hi] {
			hi = n
		}
		if load[n] < load[lo] {
			lo = n
		}
	}
	skew := Skew(values)
	if total <= 0 || skew <= th.Skew {
		return Step{}, false
	}
	var best int64
	found, bestGap := false, load[hi]-load[lo]
	for _, id := range sortedKeys(s.Placements) {
		l := s.ShardLoad[id]
		if s.Placements[id] != hi || l <= 0 || load[lo]+l >= load[hi] {
			continue
		}
		if gap := math.Abs((load[hi] - l) - (load[lo] + l)); gap < bestGap {
			best, bestGap, found = id, gap, true
		}
	}
	if !found {
		return Step{}, false
	}
	// A move must take a fair part of the most loaded worker's excess over
	// the mean, or balancing would copy shard after shard for little: a
	// single shard above Skew × median keeps the skew up whatever else
	// moves.
	l := s.ShardLoad[best]
	if gain := load[hi] - math.Max(load[hi]-l, load[lo]+l); gain < MinBalanceGain*(load[hi]-total/float64(len(names))) {
		return Step{}, false
	}
	return Step{Action: ActionMove, ShardID: best, From: hi, To: lo, Share: l,
		Reason: fmt.Sprintf("balance the shared workers (load skew %.2fx > %.2fx): %s %.3f → %.3f, %s %.3f → %.3f",
			skew, th.Skew, hi, load[hi], load[hi]-l, lo, load[lo], load[lo]+l)}, true
}

// planner is Decide's view of the workers while it plans the dedications,
// updated as if the steps planned so far had run.
type planner struct {
	s  State
	th Thresholds
	// shared are the workers that take shards; count the shards per
	// worker.
	shared map[string]bool
	count  map[string]int
	// load is each worker's measured load.
	load map[string]float64
	// owner is the tenant each dedicated worker is for.
	owner map[string]string
	// target is the drain target (a dedicated worker its shard is not on
	// yet) of a tenant.
	target map[string]string
	// heavyOn holds the workers with a shard of a tenant above
	// th.Dedicate.
	heavyOn map[string]bool
	// bytesOn is the size of the shards on each worker; sized is false
	// when a shard's size is unknown.
	bytesOn map[string]int64
	sized   bool
}

// newPlanner finds the dedicated workers' owners and the drain targets
// (see Decide) from s; tenants are in Decide's order.
func newPlanner(s State, th Thresholds, tenants []Tenant, shared map[string]bool, count map[string]int) *planner {
	pl := &planner{s: s, th: th, shared: shared, count: count, load: map[string]float64{},
		owner: map[string]string{}, target: map[string]string{}, heavyOn: map[string]bool{},
		bytesOn: map[string]int64{}, sized: len(s.ShardBytes) > 0}
	for _, w := range s.Workers {
		pl.load[w.Name] = w.Load
	}
	for id, w := range s.Placements {
		b, ok := s.ShardBytes[id]
		pl.sized = pl.sized && ok
		pl.bytesOn[w] += b
	}
	var heavy []Tenant
	for _, t := range tenants {
		if t.Share <= th.Dedicate {
			continue
		}
		heavy = append(heavy, t)
		w, ok := s.Placements[t.ShardID]
		if !ok {
			continue
		}
		pl.heavyOn[w] = true
		if !shared[w] && pl.owner[w] == "" {
			pl.owner[w] = t.ID
		}
	}
	var free []string
	for _, w := range sortedWorkers(s.Workers) {
		if !w.ShouldHaveShards && !pl.heavyOn[w.Name] {
			free = append(free, w.Name)
		}
	}
	slices.SortStableFunc(free, func(a, b string) int {
		if c := cmp.Compare(pl.bytesOn[a], pl.bytesOn[b]); c != 0 {
			return c
		}
		return cmp.Compare(count[a], count[b])
	})
	for _, t := range heavy {
		if len(free) == 0 {
			break
		}
		if w, ok := s.Placements[t.ShardID]; ok && shared[w] {
			pl.target[t.ID], pl.owner[free[0]] = free[0], t.ID
			free = free[1:]
		}
	}
	return pl
}

// dedicate returns the steps that leave t's shard alone on a worker of its
// own, updating the planner as if they had run.
func (pl *planner) dedicate(t Tenant) []Step {
	s, th := pl.s, pl.th
	home, ok := s.Placements[t.ShardID]
	if !ok {
		return []Step{{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
			Reason: fmt.Sprintf("shard %d of tenant %s has no known placement; inspect the cluster again", t.ShardID, t.ID)}}
	}
	if o := pl.owner[home]; o != "" && o != t.ID {
		return []Step{{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
			Reason: fmt.Sprintf("its shard %d is on worker %s, dedicated to tenant %s: move it to a shared worker first", t.ShardID, home, o)}}
	}
	var steps []Step
	dest, why := home, ""
	switch {
	case pl.owner[home] == t.ID:
		// Already dedicated to t: empty it.
	case pl.target[t.ID] != "":
		dest = pl.target[t.ID]
		why = fmt.Sprintf("worker %s is being emptied for it (it takes no shards and holds no shard of a tenant above %.1f%%); %s", dest, th.Dedicate*100,
			pl.compare(dest, pl.cost(t, dest), home, pl.cost(t, home), "its current worker "))
	default:
		var ok bool
		dest, why, ok = pl.choose(t, home)
		if !ok {
			return []Step{{Action: ActionRecommend, Tenant: t.ID, Share: t.Share,
				Reason: fmt.Sprintf("share %.1f%% > %.1f%% but no other worker would be left to take shards: add a worker", t.Share*100, th.Dedicate*100)}}
		}
		steps = append(steps, Step{Action: ActionDedicate, Tenant: t.ID, Share: t.Share, To: dest,
			Reason: fmt.Sprintf("share %.1f%% > %.1f%%; %s", t.Share*100, th.Dedicate*100, why)})
		delete(pl.shared, dest)
		pl.owner[dest] = t.ID
	}
	reason := func(r string) string {
		if why == "" {
			return r
		}
		return r + "; " + why
	}
	if dest != home {
		// Counted on dest already, so the shards leaving dest balance
		// the other workers as they will be.
		pl.count[home]--
		pl.count[dest]++
	}
	// Shards to move off dest, the most loaded first, each to the shared
	// worker whose shards carry the least measured load so far (see
	// leastLoaded): the other workers end up balanced by load, not only
	// by count.
	var moving []int64
	projected := map[string]float64{}
	for _, id := range sortedKeys(s.Placements) {
		w := s.Placements[id]
		switch {
		case id == t.ShardID:
		case w != dest:
			projected[w] += s.ShardLoad[id]
		default:
			// Every other shard on dest: after an isolation on home,
			// the split remainders too.
			moving = append(moving, id)
		}
	}
	slices.SortStableFunc(moving, func(a, b int64) int { return cmp.Compare(s.ShardLoad[b], s.ShardLoad[a]) })
	for _, id := range moving {
		to := leastLoaded(pl.shared, s.ShardLoad[id] > 0, projected, pl.count, pl.load)
		steps = append(steps, Step{Action: ActionMove, Tenant: t.ID, Share: t.Share, ShardID: id, From: dest, To: to,
			Reason: reason(fmt.Sprintf("keep worker %s for tenant %s alone", dest, t.ID))})
		pl.count[dest]--
		pl.count[to]++
		projected[to] += s.ShardLoad[id]
	}
	if dest != home {
		steps = append(steps, Step{Action: ActionMove, Tenant: t.ID, Share: t.Share, ShardID: t.ShardID, From: home, To: dest,
			Reason: reason(fmt.Sprintf("give tenant %s its dedicated worker %s", t.ID, dest))})
	}
	return steps
}

// choose returns the shared worker to dedicate to t, whose shard is on the
// shared worker home, and why; false when there is none.
func (pl *planner) choose(t Tenant, home string) (string, string, bool) {
	homeOK := false
	for w := range pl.shared {
		if w != home {
			homeOK = true
		}
	}
	best := ""
	for _, w := range slices.Sorted(maps.Keys(pl.shared)) {
		if w == home || pl.heavyOn[w] {
			continue
		}
		if best == "" || pl.cost(t, w) < pl.cost(t, best) ||
			(pl.cost(t, w) == pl.cost(t, best) && pl.count[w] < pl.count[best]) {
			best = w
		}
	}
	switch {
	case best == "" && !homeOK:
		return "", "", false
	case best == "":
		return home, "no other worker can be dedicated to it", true
	case !pl.sized:
		return home, "shard sizes unknown: its current worker is dedicated", true
	case pl.cost(t, best) < pl.cost(t, home):
		return best, pl.compare(best, pl.cost(t, best), home, pl.cost(t, home), "its current worker "), true
	}
	why := pl.compare(home, pl.cost(t, home), best, pl.cost(t, best), "worker ")
	if pl.cost(t, home) == pl.cost(t, best) {
		why += " (a tie keeps its current worker)"
	}
	return home, why, true
}

// cost is the bytes to move to dedicate worker w to t: the other shards on
// w, and t's shard when it is not on w.
func (pl *planner) cost(t Tenant, w string) int64 {
	b := pl.s.ShardBytes[t.ShardID]
	if pl.s.Placements[t.ShardID] == w {
		return pl.bytesOn[w] - b
	}
	return pl.bytesOn[w] + b
}

// compare says that dedicating chosen moves cost bytes against altCost
// to dedicate alt; what names alt ("worker " or "its current worker ").
func (pl *planner) compare(chosen string, cost int64, alt string, altCost int64, what string) string {
	if !pl.sized {
		return "shard sizes unknown"
	}
	return fmt.Sprintf("dedicating %s moves %s vs %s to dedicate %s%s", chosen, formatBytes(cost), formatBytes(altCost), what, alt)
}

// formatBytes formats n bytes in units of 1024 as pg_size_pretty does (B,
// kB, MB, GB, TB), with one decimal from 1 kB: 1536 is "1.5 kB".
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	units := []string{"kB", "MB", "GB", "TB"}
	for i, u := range units {
		v /= 1024
		if v < 1023.95 || i == len(units)-1 {
			return fmt.Sprintf("%.1f %s", v, u)
		}
	}
	return ""
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
