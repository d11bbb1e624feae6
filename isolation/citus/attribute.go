package citus

import (
	"context"
	"fmt"
	"time"
)

// TenantShards returns the shard of l.Table holding each tenant, in one
// round trip (get_shard_id_for_distribution_column, each tenant cast to
// the distribution column's type). Errors: the database error, wrapped.
func (l Layout) TenantShards(ctx context.Context, db DB, tenants []string) (map[string]int64, error) {
	rows, err := db.Query(ctx, "SELECT t, get_shard_id_for_distribution_column($1::regclass, t::"+l.columnType+") FROM unnest($2::text[]) t",
		l.Table, tenants)
	if err != nil {
		return nil, fmt.Errorf("find shards of %d tenants: %w", len(tenants), err)
	}
	defer rows.Close()
	out := make(map[string]int64, len(tenants))
	for rows.Next() {
		var t string
		var id int64
		if err := rows.Scan(&t, &id); err != nil {
			return nil, fmt.Errorf("find shards of %d tenants: %w", len(tenants), err)
		}
		out[t] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find shards of %d tenants: %w", len(tenants), err)
	}
	return out, nil
}

// Attribute returns per-worker and per-shard load from each tenant's DB
// time over a window of length over: a tenant's DB time counts on the
// shard that holds it (shardOf) and on that shard's worker (placements).
// The unit is mean busy backends (DB time / over), the unit Sample's
// active-backend counts have, so the two can be compared. Every worker of
// workers is in the result, 0 when none of the tenants measured lives
// there; tenants with no DB time are skipped, and tenants without a known shard or placement are left out and
// returned in unplaced, sorted. Attribute is pure.
//
// For single-tenant (router) queries this is exact where sampling is not:
// short queries are seldom caught active by a sample, while the ledger
// times every one. It sees only the traffic whose DB time was recorded
// (e.g. the isolation stack's ledger), not other clients of the cluster:
// Sample does.
func Attribute(workers []Worker, placements map[int64]string, shardOf map[string]int64, dbTime map[string]time.Duration, over time.Duration) (perWorker map[string]float64, perShard map[int64]float64, unplaced []string) {
	perWorker = make(map[string]float64, len(workers))
	for _, w := range workers {
		perWorker[w.Name] = 0
	}
	perShard = map[int64]float64{}
	if over <= 0 {
		return perWorker, perShard, nil
	}
	for t, d := range dbTime {
		if d <= 0 {
			continue
		}
		shard, ok := shardOf[t]
		w, placed := placements[shard]
		if !ok || !placed {
			unplaced = append(unplaced, t)
			continue
		}
		v := d.Seconds() / over.Seconds()
		perShard[shard] += v
		perWorker[w] += v
	}
	sortIDs(unplaced)
	return perWorker, perShard, unplaced
}
