// Package hotshard runs the hot-shard experiment on a Citus cluster: a
// tenant with most of the traffic makes its hash shard, and that shard's
// worker, hot; noisysim detects it, runs the policy ladder of package
// isolation/citus and measures what that does for everyone else.
//
// Run loads the data set of package harness/dataset (tenant 1 holds
// HotShare of the rows), distributes it (create_distributed_table on
// tenant_id, tenants and orders co-located), then drives open-loop queries
// through the isolation stack (pools.Stack against the coordinator: each
// call tagged application_name t:<tenant>, its DB time in the stack's
// ledger). Each query is Kind on the tenant's own orders: a data-set
// lookup, page or report, or a pg_sleep of QueryTime on the tenant's shard
// (a query of exact cost). Four windows:
//
//   - solo: the quiet tenants alone; their p99 is the baseline;
//   - before: tenant 1 joins with HotShare of the queries; every
//     DetectEvery, per-worker load is sampled (active backends in
//     pg_stat_activity on every worker) and each tenant's share of cluster
//     DB time is read from the ledger, and the first alert (skew or share)
//     is timed from tenant 1's start; citus_stat_tenants and the tagged
//     backends sampled on the coordinator are cross-checks only;
//   - ladder (with Apply): citus.Ladder.Run while a writer inserts tenant
//     1 rows at WriterRate and records each acknowledged one;
//   - after (once citus_cleanup_orphaned_resources has dropped the moved
//     shards' old copies, and a discarded second): per-worker load, skew
//     over the workers that still take shards, the hot worker's share and
//     the quiet tenants' p99.
//
// Result.Timeline keeps, per DetectEvery of before and after, the
// per-worker load, worker and shard skew and tenant 1's share of DB time;
// ShardBefore and ShardAfter tenant 1's shard (citus_shards: id, worker,
// bytes) before and after the ladder.
//
// Assertions: detection within DetectWithin; tenant 1 isolated and alone on
// a dedicated worker; load skew over the other workers <= the skew
// threshold; quiet p99 after <= P99Factor × solo p99 + P99Slack; every
// acknowledged write present exactly once; write pause <= MaxPause.
//
//	res, err := hotshard.Run(ctx, cluster, hotshard.Config{Apply: true})
//	if err != nil {
//		return err
//	}
//	for _, a := range res.Assertions {
//		fmt.Println(a.Name, a.OK, a.Detail)
//	}
//
// On one machine every worker shares the same CPUs, so the quiet p99 shows
// queueing, not CPU isolation. That is why DefaultKind is a sleep: on 2
// cores, with 100 tenants, 20,000 rows and 200 queries/s, reports (cost
// growing with the tenant's rows) put tenant 1 at 94% of DB time and its
// worker at 5 to 11 active backends, and the quiet p99 went from 5 ms alone
// to 131 ms after the ladder, queued on the CPUs rather than on the worker;
// pages kept every worker under 0.06 active backends, too few samples for
// a stable skew.
package hotshard
