package citus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// TransferMode is how Citus copies shard data during an isolation or a
// move (its citus.shard_transfer_mode).
type TransferMode string

// Transfer modes.
const (
	// TransferLogical copies with logical replication: writes continue
	// until a short final catch-up. It needs a replica identity (primary
	// key) on every co-located table.
	TransferLogical TransferMode = "force_logical"
	// TransferBlockWrites blocks writes to the shard for the whole copy.
	TransferBlockWrites TransferMode = "block_writes"
)

// DefaultTransferMode is the transfer mode of moves when none is given.
const DefaultTransferMode = TransferLogical

// DefaultSplitMode is the transfer mode of isolations when none is given.
// The two modes isolate a tenant differently (see Ladder.Execute):
//
//   - TransferBlockWrites: isolate_tenant_to_new_shard(…, 'block_writes'):
//     the new shards stay on the shard's worker, and writes to the shard
//     wait for the whole copy of its shard group.
//   - TransferLogical: citus_split_shard_by_split_points at the tenant's
//     hash (the split points isolate_tenant_to_new_shard computes), every
//     new shard on another worker, with logical replication: writes go on
//     but for the final catch-up. Not isolate_tenant_to_new_shard(…,
//     'force_logical'), which keeps the new shards on the source worker:
//     in Citus 13.2 such a split does not finish while the shard's rows
//     are updated. Its replication slot is made before the new shards on
//     the source worker have their replica identity (shard_split.c
//     NonBlockingShardSplit: CreateReplicationSlots, then
//     CreateReplicaIdentities), so an UPDATE decoded in between is sent
//     without key columns, the subscription's apply worker fails on it
//     ("publisher did not send replica identity column expected by the
//     logical replication target relation") and restarts on the same
//     change for ever, while the split waits for it to catch up (citus
//     issue #6790). New shards placed on another worker are published
//     through stand-ins on the source worker whose replica identities are
//     made before the slot (CreateDummyShardsForShardGroup,
//     CreateReplicaIdentitiesForDummyShards), and the split completes.
//
// The default stays block_writes: it moves nothing and works on one
// worker.
const DefaultSplitMode = TransferBlockWrites

// Valid reports whether m is a known mode.
func (m TransferMode) Valid() bool { return m == TransferLogical || m == TransferBlockWrites }

// ErrAdvice marks a step that is a recommendation only: Execute never runs
// it.
var ErrAdvice = errors.New("recommendation only")

// Record is one executed (or skipped) step with the placements before and
// after.
type Record struct {
	Step Step
	// Skipped is true when the step was already done (idempotent re-run).
	Skipped bool
	// Took is the step's wall time.
	Took time.Duration
	// Before and After are shard counts per worker name, and the
	// resulting plan's worker skew, around the step.
	Before, After Snapshot
}

// Snapshot is what a Record keeps of the cluster around a step.
type Snapshot struct {
	// Shards counts shards of the anchor table per worker name.
	Shards map[string]int
	// Dedicated lists workers that take no new shards.
	Dedicated []string
	// Load is each worker's load from Ladder.Measure, nil without it.
	Load map[string]float64
}

func snapshot(l Layout) Snapshot {
	s := Snapshot{Shards: map[string]int{}}
	for _, w := range l.Placements {
		s.Shards[w]++
	}
	for _, w := range l.Workers {
		if !w.ShouldHaveShards {
			s.Dedicated = append(s.Dedicated, w.Name)
		}
	}
	return s
}

// Ladder runs the policy ladder on a cluster, one step at a time.
type Ladder struct {
	// DB is a connection to the coordinator.
	DB DB
	// Table is the anchor distributed table; isolations CASCADE to its
	// co-located tables.
	Table string
	// Mode is the shard transfer mode of moves; "" means
	// DefaultTransferMode.
	Mode TransferMode
	// SplitMode is the shard transfer mode of isolations; "" means
	// DefaultSplitMode.
	SplitMode TransferMode
	// Thresholds of Decide.
	Thresholds Thresholds
	// Log receives one line per step with its figures; nil is silent.
	Log *slog.Logger
	// Measure, when not nil, measures per-worker load (e.g. a short
	// Sample) just before and after each step, for Record.Before.Load and
	// After.Load. A measuring error fails the step.
	Measure func(ctx context.Context) (map[string]float64, error)
}

// Run decides with the tenant shares of load (measured once: the shares do
// not change because a tenant moves), runs the first actionable step,
// re-reads the placements and decides again, until no step is left or
// maxSteps ran (0 means 100 plus twice the table's shard count: a
// dedication moves up to every other shard, balancing a few more). Only steps for tenant are run when tenant is
// not "". Recommendations are returned in advice, never run. It returns
// the records of the steps it ran; on error, those that completed and the
// error.
func (l Ladder) Run(ctx context.Context, load Load, tenant string, maxSteps int) (records []Record, advice []Step, err error) {
	auto := maxSteps <= 0
	if auto {
		maxSteps = 100
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for i := 0; i < maxSteps; i++ {
		layout, err := Inspect(ctx, l.DB, l.Table)
		if err != nil {
			return records, advice, err
		}
		if auto && i == 0 {
			maxSteps = 100 + 2*len(layout.Placements)
		}
		state, err := layout.State(ctx, l.DB, load)
		if err != nil {
			return records, advice, err
		}
		plan := Decide(state, l.Thresholds)
		advice = advice[:0]
		var next *Step
		for i, s := range plan.Steps {
			if tenant != "" && s.Tenant != tenant {
				continue
			}
			if s.Action == ActionRecommend {
				advice = append(advice, s)
				continue
			}
			if next == nil {
				next = &plan.Steps[i]
			}
		}
		if next == nil {
			return records, advice, nil
		}
		rec, err := l.Execute(ctx, layout, *next)
		if err != nil {
			return records, advice, err
		}
		log.Info("citus step", "action", rec.Step.Action, "tenant", rec.Step.Tenant, "shard", rec.Step.ShardID,
			"from", rec.Step.From, "to", rec.Step.To, "skipped", rec.Skipped, "took_ms", rec.Took.Milliseconds(),
			"shards_before", rec.Before.Shards, "shards_after", rec.After.Shards,
			"load_before", rec.Before.Load, "load_after", rec.After.Load)
		records = append(records, rec)
	}
	return records, advice, fmt.Errorf("run ladder: still steps left after %d", maxSteps)
}

// Execute runs one step against the cluster whose current layout is
// before, unless it is already done (then Record.Skipped). Isolation
// with SplitMode block_writes: isolate_tenant_to_new_shard(Table, tenant,
// 'CASCADE', shard_transfer_mode => 'block_writes'), the new shards on the
// shard's worker; with force_logical: citus_split_shard_by_split_points at
// the same points, the new shards on worker s.To or, when it is "", on
// the worker that takes shards holding the fewest bytes (Record.Step.To
// names it; see DefaultSplitMode for why not on the same worker); dedicate: citus_set_node_property(host, port,
// 'shouldhaveshards', false); move: citus_move_shard_placement(shard,
// from, to, shard_transfer_mode => Mode), from the worker holding the shard
// now. Citus refuses to move a shard onto a worker with shouldhaveshards =
// false, so a move onto a dedicated worker (its tenant's shard arriving)
// sets it true for the move and false again after it, also when the move
// fails; while the move runs, new shards may land there. A recommendation
// returns an error wrapping ErrAdvice.
func (l Ladder) Execute(ctx context.Context, before Layout, s Step) (Record, error) {
	mode := l.Mode
	if mode == "" {
		mode = DefaultTransferMode
	}
	splitMode := l.SplitMode
	if splitMode == "" {
		splitMode = DefaultSplitMode
	}
	if !mode.Valid() || !splitMode.Valid() {
		return Record{}, fmt.Errorf("execute step: unknown transfer mode %q or %q", mode, splitMode)
	}
	rec := Record{Step: s, Before: snapshot(before)}
	if l.Measure != nil {
		load, err := l.Measure(ctx)
		if err != nil {
			return rec, fmt.Errorf("measure before %s: %w", s.Action, err)
		}
		rec.Before.Load = load
	}
	t0 := time.Now()
	switch s.Action {
	case ActionIsolate:
		shard, err := before.TenantShard(ctx, l.DB, s.Tenant)
		if err != nil {
			return rec, err
		}
		if before.Single[shard] {
			rec.Skipped = true
			break
		}
		if splitMode == TransferLogical {
			to, err := splitTarget(before, shard, s.To)
			if err != nil {
				return rec, fmt.Errorf("isolate tenant %s: %w", s.Tenant, err)
			}
			rec.Step.To = to.Name
			if err := splitOff(ctx, l.DB, before, shard, s.Tenant, to); err != nil {
				return rec, fmt.Errorf("isolate tenant %s onto %s: %w", s.Tenant, to.Name, err)
			}
			break
		}
		_, err = l.DB.Exec(ctx, "SELECT isolate_tenant_to_new_shard($1::regclass, $2::text::"+before.columnType+
			", 'CASCADE', shard_transfer_mode => $3::citus.shard_transfer_mode)", before.Table, s.Tenant, string(splitMode))
		if err != nil {
			return rec, fmt.Errorf("isolate tenant %s: %w", s.Tenant, err)
		}
	case ActionDedicate:
		w, ok := worker(before, s.To)
		if !ok {
			return rec, fmt.Errorf("dedicate worker %s: not an active worker", s.To)
		}
		if !w.ShouldHaveShards {
			rec.Skipped = true
			break
		}
		if _, err := l.DB.Exec(ctx, "SELECT citus_set_node_property($1, $2, 'shouldhaveshards', false)", w.Host, w.Port); err != nil {
			return rec, fmt.Errorf("dedicate worker %s: %w", s.To, err)
		}
	case ActionMove:
		at, ok := before.Placements[s.ShardID]
		if !ok {
			return rec, fmt.Errorf("move shard %d: no such shard of %s", s.ShardID, before.Table)
		}
		if at == s.To {
			rec.Skipped = true
			break
		}
		from, ok1 := worker(before, at)
		to, ok2 := worker(before, s.To)
		if !ok1 || !ok2 {
			return rec, fmt.Errorf("move shard %d from %s to %s: not an active worker", s.ShardID, at, s.To)
		}
		if err := moveShard(ctx, l.DB, s.ShardID, from, to, mode); err != nil {
			return rec, err
		}
	default:
		return rec, fmt.Errorf("execute %s: %w", s, ErrAdvice)
	}
	rec.Took = time.Since(t0)
	after, err := Inspect(ctx, l.DB, before.Table)
	if err != nil {
		return rec, err
	}
	rec.After = snapshot(after)
	if l.Measure != nil {
		load, err := l.Measure(ctx)
		if err != nil {
			return rec, fmt.Errorf("measure after %s: %w", s.Action, err)
		}
		rec.After.Load = load
	}
	return rec, nil
}

// moveShard moves shard id (and its co-located shards) from worker from
// to worker to. When to takes no shards, the mark is lifted for the move
// (Citus, shard_transfer.c ErrorIfTargetNodeIsNotSafeToMove: "Moving shards
// to a node that shouldn't have a shard is not supported") and set back
// after it, failed or not.
func moveShard(ctx context.Context, db DB, id int64, from, to Worker, mode TransferMode) (err error) {
	if !to.ShouldHaveShards {
		if _, err := db.Exec(ctx, "SELECT citus_set_node_property($1, $2, 'shouldhaveshards', true)", to.Host, to.Port); err != nil {
			return fmt.Errorf("move shard %d from %s to %s: let the dedicated worker take it: %w", id, from.Name, to.Name, err)
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resetTimeout)
			defer cancel()
			rerr := withOpenDB(rctx, db, func(db DB) error {
				_, err := db.Exec(rctx, "SELECT citus_set_node_property($1, $2, 'shouldhaveshards', false)", to.Host, to.Port)
				return err
			})
			if rerr != nil {
				err = errors.Join(err, fmt.Errorf("worker %s takes shards again, dedicate it again (citus_set_node_property shouldhaveshards false): %w", to.Name, rerr))
			}
		}()
	}
	_, err = db.Exec(ctx, "SELECT citus_move_shard_placement($1, $2, $3, $4, $5, shard_transfer_mode => $6::citus.shard_transfer_mode)",
		id, from.Host, from.Port, to.Host, to.Port, string(mode))
	if err != nil {
		return fmt.Errorf("move shard %d from %s to %s: %w", id, from.Name, to.Name, err)
	}
	return nil
}

// splitTarget is the worker a non-blocking isolation of shard puts the
// new shards on: to when it names one, else the active worker that takes
// shards, other than the shard's, holding the fewest bytes of shard
// groups (then the fewest shards, then the first by name).
func splitTarget(l Layout, shard int64, to string) (Worker, error) {
	from := l.Placements[shard]
	if to != "" {
		w, ok := worker(l, to)
		if !ok || w.Name == from {
			return Worker{}, fmt.Errorf("split onto %s: not an active worker other than the shard's (%s)", to, from)
		}
		return w, nil
	}
	bytes, count := map[string]int64{}, map[string]int{}
	for id, w := range l.Placements {
		bytes[w] += l.GroupBytes[id]
		count[w]++
	}
	var best *Worker
	for i, w := range l.Workers {
		if w.Name == from || !w.ShouldHaveShards {
			continue
		}
		if best == nil || cmp.Or(cmp.Compare(bytes[w.Name], bytes[best.Name]), cmp.Compare(count[w.Name], count[best.Name]),
			cmp.Compare(w.Name, best.Name)) < 0 {
			best = &l.Workers[i]
		}
	}
	if best == nil {
		return Worker{}, fmt.Errorf("a non-blocking isolation splits onto another worker, and %s has none that takes shards (use %s)", from, TransferBlockWrites)
	}
	return *best, nil
}

// splitOff splits shard (and its co-located shards) at tenant's hash as
// isolate_tenant_to_new_shard does — the tenant's hash value a shard of
// its own, the values below and above it the others — with
// citus_split_shard_by_split_points, every new shard on worker to, with
// shard_transfer_mode force_logical (see DefaultSplitMode).
func splitOff(ctx context.Context, db DB, l Layout, shard int64, tenant string, to Worker) error {
	var lo, hi string
	var hash int32
	var node int32
	err := db.QueryRow(ctx, "SELECT s.shardminvalue, s.shardmaxvalue, worker_hash($2::text::"+l.columnType+"), n.nodeid "+
		"FROM pg_dist_shard s, pg_dist_node n WHERE s.shardid = $1 AND n.nodename = $3 AND n.nodeport = $4",
		shard, tenant, to.Host, to.Port).Scan(&lo, &hi, &hash, &node)
	if err != nil {
		return fmt.Errorf("read shard %d's hash range and the tenant's hash: %w", shard, err)
	}
	points, err := splitPoints(lo, hi, hash)
	if err != nil {
		return fmt.Errorf("shard %d: %w", shard, err)
	}
	nodes := make([]int32, len(points)+1)
	for i := range nodes {
		nodes[i] = node
	}
	_, err = db.Exec(ctx, "SELECT citus_split_shard_by_split_points($1, $2::text[], $3::int[], shard_transfer_mode => 'force_logical')",
		shard, points, nodes)
	return err
}

// splitPoints are the split points that give hash a shard of its own in
// the shard whose hash range is lo..hi (decimal int32s), as
// isolate_tenant_to_new_shard computes them (isolate_shards.c): hash at
// either end of the range needs one point, inside it two (hash-1 and
// hash: each point is the last value of the shard below it).
func splitPoints(lo, hi string, hash int32) ([]string, error) {
	first, err1 := strconv.ParseInt(lo, 10, 32)
	last, err2 := strconv.ParseInt(hi, 10, 32)
	if err := errors.Join(err1, err2); err != nil || int64(hash) < first || int64(hash) > last || first == last {
		return nil, fmt.Errorf("hash range %s..%s cannot be split at %d", lo, hi, hash)
	}
	switch int64(hash) {
	case first:
		return []string{strconv.Itoa(int(hash))}, nil
	case last:
		return []string{strconv.Itoa(int(hash) - 1)}, nil
	}
	return []string{strconv.Itoa(int(hash) - 1), strconv.Itoa(int(hash))}, nil
}

// resetTimeout bounds setting a dedicated worker back after a move onto
// it, which runs even when the move's context has ended.
const resetTimeout = 30 * time.Second

// withOpenDB runs f on db, or, when db is a single connection that is
// closed — pgx closes a connection whose query's context was cancelled, as
// a Ctrl-C during a move does — on a new connection with its
// configuration, closed afterwards.
func withOpenDB(ctx context.Context, db DB, f func(DB) error) error {
	c, ok := db.(interface {
		IsClosed() bool
		Config() *pgx.ConnConfig
	})
	if !ok || !c.IsClosed() {
		return f(db)
	}
	nc, err := pgx.ConnectConfig(ctx, c.Config())
	if err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	defer nc.Close(context.WithoutCancel(ctx))
	return f(nc)
}

func worker(l Layout, name string) (Worker, bool) {
	for _, w := range l.Workers {
		if w.Name == name {
			return w, true
		}
	}
	return Worker{}, false
}
