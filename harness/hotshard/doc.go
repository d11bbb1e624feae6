// Package hotshard runs the hot-shard experiment on a Citus cluster: a
// tenant with most of the traffic makes its hash shard, and that shard's
// worker, hot; noisysim detects it, runs the policy ladder of package
// isolation/citus and measures what that does for everyone else.
//
// Run loads the data set of package harness/dataset (tenant 1 holds
// HotShare of the rows), distributes it (create_distributed_table on
// tenant_id, tenants and orders co-located) and analyzes it, then drives
// open-loop queries through the isolation stack (pools.Stack against the
// coordinator: each call tagged application_name t:<tenant>, its DB time
// in the stack's ledger), latencies from the intended start in
// HdrHistograms (harness/metrics). Each query is Kind on the tenant's own
// orders: by default the data set's page (real SQL, an index scan), or a
// lookup, a report, or a pg_sleep of QueryTime on the tenant's shard (a
// query of exact cost). Four windows:
//
//   - solo: the quiet tenants alone; their p99 is the baseline;
//   - before: tenant 1 joins with HotShare of the queries; every
//     DetectEvery, each tenant's DB time is read from the ledger and
//     counted on the worker and shard that hold it (citus.Attribute: the
//     per-worker and per-shard load), its share of cluster DB time is the
//     tenant's share, and the first alert (skew or share) is timed from
//     tenant 1's start. pg_stat_activity is sampled on every worker
//     meanwhile (active client backends) and the tagged backends on the
//     coordinator, and citus_stat_tenants is reset at the window's start
//     and read at its end: cross-checks;
//   - ladder (with Apply): citus.Ladder.Run while a writer inserts tenant
//     1 rows at WriterRate and records each acknowledged one; each step
//     logged with the attributed per-worker load before and after it;
//   - after (once citus_cleanup_orphaned_resources has dropped the moved
//     shards' old copies, ANALYZE has given the moved shards statistics,
//     and a discarded second): per-worker load, skew over the workers that
//     still take shards, the hot worker's share and the quiet tenants' p99.
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
// queueing, not CPU isolation. Why per-worker load is attributed rather
// than sampled: at 200 page queries/s (about 2 ms each) a worker is busy a
// few percent of the time, and 25 samples of pg_stat_activity per 0.5 s
// interval catch 0 to 4 active backends on it — a skew from them swings
// from 1× to infinite — while the ledger times every query. Reports (cost
// growing with the tenant's rows) put tenant 1 at 94% of DB time and
// saturate 2 cores; the sleep query loads workers without their CPUs.
// citus_stat_tenants counts over its period (citus.stat_tenants_period,
// 60 s): without the reset, the solo window's quiet queries made tenant 1
// look like a third of the queries instead of 60%.
package hotshard
