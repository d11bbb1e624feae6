// Package promotion runs tenant-promotion scenarios (a scenario with a
// promotion section on topology shards): it installs a tenant catalog on
// the first node, loads each node with the tenants the hash ring places
// there, opens the scenario's first configuration on every node behind a
// directory.Router, and then:
//
//   - before: runs the load; samples pg_stat_activity per node every
//     SampleEvery (active t:* backends) and reads the ledger's DB time per
//     node; the hot node is the ring node with the most load, skew is
//     max/median over the ring;
//   - trigger: the ledger's share alert for the tenant (share > threshold
//     sustained over the window; an alert that fired and cleared between
//     two polls counts), or a request at a fixed time;
//   - move: directory.Move to the target under load, the load going on in
//     2 s chunks until it ends;
//   - after: runs the load again and samples the nodes.
//
// A writer inserts and updates the tenant's orders at a fixed rate for the
// whole run and keeps every acknowledged write; the checker then requires
// each at the tenant's node exactly once with its last acknowledged value,
// none of the tenant's rows at the source, and the other tenants' rows
// unchanged on every node. The quiet tenants of the formerly hot node are
// compared before and after. The report's configurations are the before
// and after windows, each with the generator's counters and rates (issued,
// completed, ops/s intended and achieved) and every tenant's DB time and
// share from the ledger over that window.
//
//	rep, outcome, err := promotion.Run(ctx, sc, cluster, promotion.Options{})
//	fmt.Println(rep.Passed, outcome.Move.MBPerSecond, outcome.Checker.OK())
package promotion
