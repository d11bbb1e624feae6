// Package citus finds and cures a hot shard on a Citus cluster: a tenant
// with a large share of the traffic makes its hash shard, and that shard's
// worker, hot while the other workers idle.
//
// # Measure
//
// Sample reads pg_stat_activity every Sampling.Interval (default 100 ms):
// active client backends on every worker give per-worker load, and active
// backends on the coordinator tagged application_name t:<tenant> (the
// isolation stack's tag) give each tenant's share of cluster DB time.
// Workers are read over direct connections (Sampling.Workers, about 1 ms a
// sample for 4 workers) or, when only the coordinator is reachable (an
// existing cluster by DSN), through it (Sampling.WorkersVia:
// WorkerActivity, one run_command_on_workers call, about 55 ms for 4
// workers, so at most every MinViaInterval). Sampling sees every client of
// the cluster but seldom catches short queries: where the caller has each
// tenant's DB time (the isolation stack's ledger), Attribute gives exact
// per-worker and per-shard load by counting it on the shard that holds the
// tenant (TenantShards) and that shard's worker.
// Inspect reads the shard placements from the Citus metadata (pg_dist_node,
// pg_dist_shard, citus_shards); Layout.State joins both, attributing each
// tenant's load to its shard (get_shard_id_for_distribution_column).
//
// # Decide
//
// Decide is pure: Skew is max / median of per-worker (and per-shard) load
// and alerts above Thresholds.Skew (default 1.5); a tenant above
// Thresholds.Isolate (5%) gets its own shard (isolate_tenant_to_new_shard,
// CASCADE to co-located tables); above Thresholds.Dedicate (20%) a worker is
// dedicated to it (shouldhaveshards = false), every other shard moves off
// it (citus_move_shard_placement), the most loaded first, to the shared
// worker whose shards carry the least measured load, and the tenant's shard
// moves onto it if it is elsewhere. That worker is the cheapest in bytes
// moved (citus_shards sizes): the shard's current worker costs its other
// shards, another shared worker its own shards plus the tenant's; a tie or
// unknown sizes keep the current worker, so the hot tenant's rows and
// writes stay put.
// Once chosen, a worker that takes no shards and holds no shard of a tenant
// above Thresholds.Dedicate stays that tenant's target while it is emptied,
// whatever the sizes say then, so re-deciding after each step never
// dedicates a second worker. Above Thresholds.Cluster (50%) a cluster of
// its own is recommended, never applied. Once every tenant is where its
// share says, the shared workers are balanced by measured shard load: one
// shard at a time from the most to the least loaded while their skew is
// above Thresholds.Skew (a power law's second tenant can leave its worker
// well above the others). A step already done is not planned again.
//
// # Apply
//
// Ladder.Run runs one step, reads the placements again and re-decides,
// until nothing is left; each step is logged with its duration and the
// shard counts per worker before and after. Data moves with the explicit
// TransferMode (default force_logical: writes continue during the copy).
// A later citus_rebalance_start honours shouldhaveshards = false and would
// move the dedicated tenant's shard away too: do not rebalance a cluster
// with dedicated workers without excluding them.
//
// # Example
//
//	layout, err := citus.Inspect(ctx, coordinator, "orders")
//	load, err := citus.Sample(ctx, citus.Sampling{Coordinator: coordinator, Workers: workers}, 5*time.Second)
//	state, err := layout.State(ctx, coordinator, load)
//	plan := citus.Decide(state, citus.Thresholds{})
//	for _, s := range plan.Steps {
//		fmt.Println(s)
//	}
//	records, advice, err := citus.Ladder{DB: coordinator, Table: "orders"}.Run(ctx, load, "", 0)
package citus
