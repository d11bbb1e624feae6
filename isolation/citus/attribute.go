package citus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TenantShards returns the shard of l.Table holding each tenant
// (get_shard_id_for_distribution_column, each tenant cast to the
// distribution column's type). A tenant that is not a value of that type —
// a tag such as t:multi or t: on an integer column, which the server
// refuses with an SQLSTATE of class 22 (data exception) — is left out of
// the map, and the others are still placed: one bad tag does not blind
// the rest. It takes one round trip when every tenant is a valid value;
// each invalid one costs about 2·log2(len(tenants)) more (the batch is
// halved until the invalid values stand alone). Errors: any other database
// error, wrapped.
func (l Layout) TenantShards(ctx context.Context, db DB, tenants []string) (map[string]int64, error) {
	out := make(map[string]int64, len(tenants))
	if err := l.tenantShards(ctx, db, tenants, out); err != nil {
		return nil, fmt.Errorf("find shards of %d tenants: %w", len(tenants), err)
	}
	return out, nil
}

// tenantShards adds the shards of tenants to out, halving the batch when
// the server refuses a value in it.
func (l Layout) tenantShards(ctx context.Context, db DB, tenants []string, out map[string]int64) error {
	if len(tenants) == 0 {
		return nil
	}
	found, err := l.shardBatch(ctx, db, tenants)
	if err == nil {
		maps.Copy(out, found)
		return nil
	}
	if !isDataException(err) {
		return err
	}
	if len(tenants) == 1 {
		return nil // not a value of the column's type: unplaced
	}
	half := len(tenants) / 2
	if err := l.tenantShards(ctx, db, tenants[:half], out); err != nil {
		return err
	}
	return l.tenantShards(ctx, db, tenants[half:], out)
}

func (l Layout) shardBatch(ctx context.Context, db DB, tenants []string) (map[string]int64, error) {
	rows, err := db.Query(ctx, "SELECT t, get_shard_id_for_distribution_column($1::regclass, t::"+l.columnType+") FROM unnest($2::text[]) t",
		l.Table, tenants)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]int64, len(tenants))
	for rows.Next() {
		var t string
		var id int64
		if err := rows.Scan(&t, &id); err != nil {
			return nil, err
		}
		out[t] = id
	}
	return out, rows.Err()
}

// isDataException reports whether err is the server refusing a value
// (SQLSTATE class 22: invalid text representation, out of range, …).
func isDataException(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
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
