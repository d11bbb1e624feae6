package citus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what this package needs of a connection to the coordinator (or a
// worker): *pgx.Conn and *pgxpool.Pool satisfy it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Defaults of Distribute and Sample.
const (
	// DefaultShardCount is the shard count of distributed tables.
	DefaultShardCount = 32
	// DefaultColumn is the distribution column.
	DefaultColumn = "tenant_id"
	// DefaultSampleInterval is the time between two pg_stat_activity samples.
	DefaultSampleInterval = 100 * time.Millisecond
	// MinViaInterval is the shortest time between two samples through the
	// coordinator (Sampling.WorkersVia): each costs a connection set-up on
	// every worker, about 11 ms of CPU per worker with SCRAM on 2 cores
	// (measured with a benchmark of the former hot-shard runner: 55 ms a
	// call for 4 workers, against 0.84 ms for direct queries), so shorter intervals
	// would run calls back to back and load the workers they measure.
	MinViaInterval = 250 * time.Millisecond
	// DefaultTagPrefix is the application_name prefix of a tenant's
	// connections (the isolation stack's tag t:<tenant>).
	DefaultTagPrefix = "t:"
)

// ErrNotDistributed means a table is missing or not distributed by Citus.
var ErrNotDistributed = errors.New("not a distributed table")

// ErrNotCitus means the database has no citus extension: it is not a Citus
// coordinator.
var ErrNotCitus = errors.New("no citus extension in this database: give the DSN of a Citus coordinator")

// ErrNotKey means a tenant is not a value of the distribution column's type
// (abc for a bigint column): the server refused the cast (SQLSTATE class 22).
var ErrNotKey = errors.New("not a value of the distribution column")

// Distribution says which tables to distribute.
type Distribution struct {
	// Tables are distributed on Column, co-located with the first one.
	Tables []string
	// Reference tables are copied to every node.
	Reference []string
	// Column is the distribution column; "" means DefaultColumn.
	Column string
	// ShardCount is the shard count of the co-location group; 0 means
	// DefaultShardCount.
	ShardCount int
}

// Distribute makes d's tables distributed (create_distributed_table) and
// reference (create_reference_table) tables, moving rows already in them
// to the shards and truncating the coordinator's local copy. A table
// already distributed is left alone, so Distribute is idempotent. Errors:
// ErrNotCitus (wrapped) when db is not a Citus coordinator, the database
// error otherwise.
func Distribute(ctx context.Context, db DB, d Distribution) error {
	if err := checkCitus(ctx, db); err != nil {
		return err
	}
	col := d.Column
	if col == "" {
		col = DefaultColumn
	}
	shards := d.ShardCount
	if shards == 0 {
		shards = DefaultShardCount
	}
	for i, t := range d.Tables {
		if done, err := isDistributed(ctx, db, t); err != nil || done {
			if err != nil {
				return err
			}
			continue
		}
		var err error
		if i == 0 {
			_, err = db.Exec(ctx, "SELECT create_distributed_table($1::regclass, $2, colocate_with => 'none', shard_count => $3)", t, col, shards)
		} else {
			_, err = db.Exec(ctx, "SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)", t, col, d.Tables[0])
		}
		if err != nil {
			return fmt.Errorf("distribute table %s: %w", t, err)
		}
		if _, err := db.Exec(ctx, "SELECT truncate_local_data_after_distributing_table($1::regclass)", t); err != nil {
			return fmt.Errorf("truncate local data of %s: %w", t, err)
		}
	}
	for _, t := range d.Reference {
		if done, err := isDistributed(ctx, db, t); err != nil || done {
			if err != nil {
				return err
			}
			continue
		}
		if _, err := db.Exec(ctx, "SELECT create_reference_table($1::regclass)", t); err != nil {
			return fmt.Errorf("make reference table %s: %w", t, err)
		}
		if _, err := db.Exec(ctx, "SELECT truncate_local_data_after_distributing_table($1::regclass)", t); err != nil {
			return fmt.Errorf("truncate local data of %s: %w", t, err)
		}
	}
	return nil
}

func checkCitus(ctx context.Context, db DB) error {
	var ok bool
	if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&ok); err != nil {
		return fmt.Errorf("check citus extension: %w", err)
	}
	if !ok {
		return fmt.Errorf("check citus extension: %w", ErrNotCitus)
	}
	return nil
}

func isDistributed(ctx context.Context, db DB, table string) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::regclass)", table).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up table %s: %w", table, err)
	}
	return ok, nil
}

// Layout is the placement of a distributed table's shards.
type Layout struct {
	Table string
	// Workers are the active primary workers (Load left 0).
	Workers []Worker
	// Placements maps each shard to the worker name holding it.
	Placements map[int64]string
	// Single holds the shards whose hash range is one value: a tenant
	// isolated by isolate_tenant_to_new_shard.
	Single map[int64]bool
	// Bytes is each shard's size from citus_shards, in bytes.
	Bytes map[int64]int64
	// GroupBytes is each shard's shard group size, in bytes: the shard
	// and its co-located shards of other tables (same co-location group,
	// same hash range), which move with it.
	GroupBytes map[int64]int64
	// columnType is the distribution column's type, for tenant casts.
	columnType string
}

// Inspect reads table's shard placements from the coordinator's metadata
// (pg_dist_node, pg_dist_shard, citus_shards). Errors: ErrNotCitus or
// ErrNotDistributed (wrapped) for a database or table Citus does not
// manage, the database error otherwise.
func Inspect(ctx context.Context, db DB, table string) (Layout, error) {
	if err := checkCitus(ctx, db); err != nil {
		return Layout{}, err
	}
	var dist bool
	err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid::text = $1 OR logicalrelid = to_regclass($1))", table).Scan(&dist)
	if err != nil {
		return Layout{}, fmt.Errorf("look up table %s: %w", table, err)
	}
	if !dist {
		return Layout{}, fmt.Errorf("inspect table %s: %w", table, ErrNotDistributed)
	}
	l := Layout{Table: table, Placements: map[int64]string{}, Single: map[int64]bool{}, Bytes: map[int64]int64{}, GroupBytes: map[int64]int64{}}
	rows, err := db.Query(ctx, `SELECT nodename, nodeport, shouldhaveshards FROM pg_dist_node
		WHERE isactive AND noderole = 'primary' AND groupid > 0 ORDER BY nodename, nodeport`)
	if err != nil {
		return Layout{}, fmt.Errorf("read nodes: %w", err)
	}
	for rows.Next() {
		var w Worker
		if err := rows.Scan(&w.Host, &w.Port, &w.ShouldHaveShards); err != nil {
			return Layout{}, fmt.Errorf("read nodes: %w", err)
		}
		w.Name = w.Host + ":" + strconv.Itoa(w.Port)
		l.Workers = append(l.Workers, w)
	}
	if err := rows.Err(); err != nil {
		return Layout{}, fmt.Errorf("read nodes: %w", err)
	}
	rows, err = db.Query(ctx, `SELECT s.shardid, c.nodename, c.nodeport, s.shardminvalue = s.shardmaxvalue, coalesce(c.shard_size, 0)
		FROM pg_dist_shard s JOIN citus_shards c USING (shardid)
		WHERE s.logicalrelid = $1::regclass ORDER BY s.shardid`, table)
	if err != nil {
		return Layout{}, fmt.Errorf("read shards of %s: %w", table, err)
	}
	for rows.Next() {
		var id, size int64
		var host string
		var port int
		var single bool
		if err := rows.Scan(&id, &host, &port, &single, &size); err != nil {
			return Layout{}, fmt.Errorf("read shards of %s: %w", table, err)
		}
		l.Placements[id] = host + ":" + strconv.Itoa(port)
		l.Single[id] = single
		l.Bytes[id] = size
	}
	if err := rows.Err(); err != nil {
		return Layout{}, fmt.Errorf("read shards of %s: %w", table, err)
	}
	rows, err = db.Query(ctx, `WITH g AS (
			SELECT p.colocationid, s.shardminvalue, s.shardmaxvalue, sum(coalesce(c.shard_size, 0))::bigint AS bytes
			FROM pg_dist_shard s JOIN pg_dist_partition p USING (logicalrelid) JOIN citus_shards c USING (shardid)
			GROUP BY 1, 2, 3)
		SELECT s.shardid, g.bytes FROM pg_dist_shard s JOIN pg_dist_partition p USING (logicalrelid)
		JOIN g ON g.colocationid = p.colocationid AND g.shardminvalue = s.shardminvalue AND g.shardmaxvalue = s.shardmaxvalue
		WHERE s.logicalrelid = $1::regclass`, table)
	if err != nil {
		return Layout{}, fmt.Errorf("read shard group sizes of %s: %w", table, err)
	}
	for rows.Next() {
		var id, size int64
		if err := rows.Scan(&id, &size); err != nil {
			return Layout{}, fmt.Errorf("read shard group sizes of %s: %w", table, err)
		}
		l.GroupBytes[id] = size
	}
	if err := rows.Err(); err != nil {
		return Layout{}, fmt.Errorf("read shard group sizes of %s: %w", table, err)
	}
	err = db.QueryRow(ctx, `SELECT format_type(a.atttypid, a.atttypmod) FROM pg_dist_partition p
		JOIN pg_attribute a ON a.attrelid = p.logicalrelid AND a.attname = column_to_column_name(p.logicalrelid, p.partkey)
		WHERE p.logicalrelid = $1::regclass`, table).Scan(&l.columnType)
	if err != nil {
		return Layout{}, fmt.Errorf("read distribution column of %s: %w", table, err)
	}
	if !typeRE.MatchString(l.columnType) {
		return Layout{}, fmt.Errorf("read distribution column of %s: unsupported type %q", table, l.columnType)
	}
	return l, nil
}

// typeRE accepts the built-in type names a distribution column has.
var typeRE = regexp.MustCompile(`^[a-z][a-z0-9_ ]*(\([0-9, ]+\))?$`)

// TenantShard returns the shard of l.Table holding tenant
// (get_shard_id_for_distribution_column, the tenant cast to the
// distribution column's type). A tenant the column's type refuses is
// ErrNotKey (wrapped), naming the type.
func (l Layout) TenantShard(ctx context.Context, db DB, tenant string) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, "SELECT get_shard_id_for_distribution_column($1::regclass, $2::text::"+l.columnType+")", l.Table, tenant).Scan(&id)
	if isDataException(err) {
		return 0, fmt.Errorf("tenant %q is %w of %s (type %s): %w", tenant, ErrNotKey, l.Table, l.columnType, err)
	}
	if err != nil {
		return 0, fmt.Errorf("find shard of tenant %s: %w", tenant, err)
	}
	return id, nil
}

// State builds Decide's input from l and the measured load: tenants with
// their shards, load per worker and per shard (a shard's load is the sum
// of its tenants'), and each shard's size in bytes: its shard group's
// (l.GroupBytes, what a move carries), or l.Bytes when the group sizes were
// not read. Tenants' shards are looked up in one round trip (TenantShards);
// a tenant that is not a value of the distribution column (a tag such as
// t:multi) goes to State.Unplaced with its share.
func (l Layout) State(ctx context.Context, db DB, load Load) (State, error) {
	bytes := l.GroupBytes
	if len(bytes) < len(l.Placements) {
		bytes = l.Bytes
	}
	s := State{Table: l.Table, Placements: l.Placements, ShardLoad: map[int64]float64{}, ShardBytes: bytes}
	for _, w := range l.Workers {
		w.Load = load.Workers[w.Name]
		s.Workers = append(s.Workers, w)
	}
	ids := sortedTenants(load.Tenants)
	shards, err := l.TenantShards(ctx, db, ids)
	if err != nil {
		return State{}, err
	}
	for _, id := range ids {
		share := load.Tenants[id]
		shard, ok := shards[id]
		if !ok {
			s.Unplaced = append(s.Unplaced, Tenant{ID: id, Share: share})
			continue
		}
		s.Tenants = append(s.Tenants, Tenant{ID: id, Share: share, ShardID: shard, Isolated: l.Single[shard]})
		s.ShardLoad[shard] += share
	}
	return s, nil
}

// Load is what Sample measured.
type Load struct {
	// Samples is the number of samples taken.
	Samples int
	// Duration is the time sampled.
	Duration time.Duration
	// Workers is each worker's mean number of active client backends
	// (pg_stat_activity on the worker, the sampling query's own backend
	// left out), by worker name: Sampling.Workers' keys, or with
	// Sampling.WorkersVia the "nodename:nodeport" of pg_dist_node.
	Workers map[string]float64
	// Tenants is each tenant's share (0..1) of the active tagged backends
	// on the coordinator: its share of cluster DB time, sampled.
	Tenants map[string]float64
}

// Sampling says where and how often Sample looks.
//
// Worker load is read one of two ways. With Workers (the faster path, for a
// caller that can reach every worker itself), each sample is one
// pg_stat_activity query per worker on connections the caller holds open.
// Without Workers, WorkersVia samples every worker through the coordinator
// (WorkerActivity: run_command_on_workers), for a caller that only reaches
// the coordinator — containers whose workers are known to Citus by network
// alias, or an existing cluster given by the coordinator's DSN. With
// neither, Load.Workers stays empty.
type Sampling struct {
	// Coordinator is where tenant-tagged connections run; nil means no
	// tenant shares are sampled.
	Coordinator DB
	// Workers are connections to each worker by worker name. Name them as
	// pg_dist_node does ("nodename:nodeport", see Inspect) for Layout.State
	// to find their load. When not empty, WorkersVia is not used.
	Workers map[string]DB
	// WorkersVia, when Workers is empty, is a connection to the coordinator
	// through which every active primary worker is sampled (see
	// WorkerActivity for its cost), keyed "nodename:nodeport" as in
	// pg_dist_node. It may be Coordinator itself: Sample uses its
	// connections one query at a time.
	WorkersVia DB
	// Interval is the time between samples; 0 means DefaultSampleInterval.
	// Sampling through WorkersVia takes at least MinViaInterval.
	Interval time.Duration
	// TagPrefix is the application_name prefix of tenant connections; ""
	// means DefaultTagPrefix.
	TagPrefix string
}

// WorkerNames returns the "nodename:nodeport" of every active primary
// worker in the coordinator's pg_dist_node, in name order: the workers
// WorkerActivity samples and Inspect lists, and the names Sample's load
// must be keyed by. Errors: ErrNotCitus (wrapped) when db has no citus
// extension, the database error otherwise.
func WorkerNames(ctx context.Context, db DB) ([]string, error) {
	if err := checkCitus(ctx, db); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT nodename || ':' || nodeport FROM pg_dist_node
		WHERE isactive AND noderole = 'primary' AND groupid > 0 ORDER BY nodename, nodeport`)
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	return names, nil
}

// workerActivityQuery counts a worker's active client backends but the
// one running it. Through run_command_on_workers that one is the
// coordinator's new connection for this command (Citus 13
// operations/citus_tools.c: FORCE_NEW_CONNECTION, application_name
// "citus_run_command gpid=…"), so both paths count the same backends.
const workerActivityQuery = `SELECT count(*) FROM pg_stat_activity
	WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`

// WorkerActivity returns the number of active client backends on every
// active primary worker, keyed "nodename:nodeport" as pg_dist_node has it,
// read through coordinator with one call of Citus's
// run_command_on_workers: the coordinator opens a new connection to each
// worker (in parallel) for the call, runs the pg_stat_activity count there
// and closes it, so one call costs a connection set-up (authentication and
// a backend start) on every worker plus the query — see MinViaInterval for
// figures; Sampling.Workers is the faster path. That connection is not
// counted. Errors: ErrNotCitus (wrapped) when coordinator has no
// citus extension; a *WorkerError when the command failed on a worker (its
// text is Citus's, e.g. "failed to connect to …"); the database error
// otherwise.
func WorkerActivity(ctx context.Context, coordinator DB) (map[string]int, error) {
	out, err := workerActivity(ctx, coordinator)
	if err != nil && isUndefinedFunction(err) {
		if cerr := checkCitus(ctx, coordinator); cerr != nil {
			return nil, cerr
		}
	}
	return out, err
}

func workerActivity(ctx context.Context, coordinator DB) (map[string]int, error) {
	rows, err := coordinator.Query(ctx, "SELECT nodename, nodeport, success, result FROM run_command_on_workers($1)", workerActivityQuery)
	if err != nil {
		return nil, fmt.Errorf("sample workers through the coordinator: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var host, result string
		var port int
		var ok bool
		if err := rows.Scan(&host, &port, &ok, &result); err != nil {
			return nil, fmt.Errorf("sample workers through the coordinator: %w", err)
		}
		name := host + ":" + strconv.Itoa(port)
		n, perr := strconv.Atoi(result)
		if !ok || perr != nil {
			return nil, &WorkerError{Worker: name, Result: result}
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sample workers through the coordinator: %w", err)
	}
	return out, nil
}

// isUndefinedFunction reports SQLSTATE 42883: run_command_on_workers does
// not exist (no citus extension).
func isUndefinedFunction(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42883"
}

// WorkerError reports a worker on which run_command_on_workers failed.
type WorkerError struct {
	// Worker is the worker's "nodename:nodeport".
	Worker string
	// Result is what Citus returned for it: its error text.
	Result string
}

func (e *WorkerError) Error() string {
	return fmt.Sprintf("sample worker %s through the coordinator: %s", e.Worker, e.Result)
}

// Sample samples pg_stat_activity every s.Interval for d — the first
// sample at once, the last before d ends, so a call lasts about d plus one
// sample's queries: active client backends on every worker (on s.Workers,
// else through s.WorkersVia), and active backends tagged TagPrefix+tenant
// on the coordinator. It returns
// what it measured when ctx ends early, with ctx.Err() only if no sample
// was taken; other errors (wrapped, e.g. a *WorkerError) end sampling and
// are returned with what was measured before.
func Sample(ctx context.Context, s Sampling, d time.Duration) (Load, error) {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultSampleInterval
	}
	if len(s.Workers) == 0 && s.WorkersVia != nil {
		interval = max(interval, MinViaInterval)
	}
	prefix := s.TagPrefix
	if prefix == "" {
		prefix = DefaultTagPrefix
	}
	load := Load{Workers: map[string]float64{}, Tenants: map[string]float64{}}
	tenantHits := map[string]float64{}
	var tagged float64
	start := time.Now()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	// Sampling ends at d, not at the first tick after it: an interval
	// longer than what is left of d does not stretch the call.
	end := time.NewTimer(d)
	defer end.Stop()
	for time.Since(start) < d {
		for name, db := range s.Workers {
			var n int
			if err := db.QueryRow(ctx, workerActivityQuery).Scan(&n); err != nil {
				return finish(load, tenantHits, tagged, start, err)
			}
			load.Workers[name] += float64(n)
		}
		if len(s.Workers) == 0 && s.WorkersVia != nil {
			counts, err := WorkerActivity(ctx, s.WorkersVia)
			if err != nil {
				return finish(load, tenantHits, tagged, start, err)
			}
			for name, n := range counts {
				load.Workers[name] += float64(n)
			}
		}
		if s.Coordinator != nil {
			rows, err := s.Coordinator.Query(ctx, `SELECT substr(application_name, length($1) + 1), count(*) FROM pg_stat_activity
				WHERE state = 'active' AND starts_with(application_name, $1) AND pid <> pg_backend_pid() GROUP BY 1`, prefix)
			if err != nil {
				return finish(load, tenantHits, tagged, start, err)
			}
			for rows.Next() {
				var tenant string
				var n int
				if err := rows.Scan(&tenant, &n); err != nil {
					rows.Close()
					return finish(load, tenantHits, tagged, start, err)
				}
				tenantHits[tenant] += float64(n)
				tagged += float64(n)
			}
			if err := rows.Err(); err != nil {
				return finish(load, tenantHits, tagged, start, err)
			}
		}
		load.Samples++
		select {
		case <-ctx.Done():
			return finish(load, tenantHits, tagged, start, ctx.Err())
		case <-end.C:
			return finish(load, tenantHits, tagged, start, nil)
		case <-ticker.C:
		}
	}
	return finish(load, tenantHits, tagged, start, nil)
}

func finish(load Load, hits map[string]float64, tagged float64, start time.Time, err error) (Load, error) {
	load.Duration = time.Since(start)
	if load.Samples > 0 {
		for w := range load.Workers {
			load.Workers[w] /= float64(load.Samples)
		}
	}
	if tagged > 0 {
		for t, n := range hits {
			load.Tenants[t] = n / tagged
		}
	}
	if err != nil && (load.Samples == 0 || !isCtxErr(err)) {
		return load, fmt.Errorf("sample load: %w", err)
	}
	return load, nil
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func sortedTenants(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Numeric ids in numeric order, then the rest.
	sortIDs(keys)
	return keys
}

func sortIDs(ids []string) {
	less := func(a, b string) bool {
		ai, aerr := strconv.ParseInt(a, 10, 64)
		bi, berr := strconv.ParseInt(b, 10, 64)
		if aerr == nil && berr == nil {
			return ai < bi
		}
		if (aerr == nil) != (berr == nil) {
			return aerr == nil
		}
		return strings.Compare(a, b) < 0
	}
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && less(ids[j], ids[j-1]); j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}

// StatTenants returns each tenant's share (0..1) of the queries Citus
// counted in citus_stat_tenants over its current and last period
// (citus.stat_tenants_period), summed over nodes. It is a cross-check of
// Sample's shares only: Citus tracks the top citus.stat_tenants_limit
// tenants and does not count every kind of query, and it needs
// citus.stat_tenants_track = 'all'. An empty map means nothing was counted.
func StatTenants(ctx context.Context, db DB) (map[string]float64, error) {
	rows, err := db.Query(ctx, `SELECT tenant_attribute, sum(query_count_in_this_period + query_count_in_last_period)::float8
		FROM citus_stat_tenants(true) GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("read citus_stat_tenants: %w", err)
	}
	defer rows.Close()
	out := map[string]float64{}
	var total float64
	for rows.Next() {
		var tenant string
		var n float64
		if err := rows.Scan(&tenant, &n); err != nil {
			return nil, fmt.Errorf("read citus_stat_tenants: %w", err)
		}
		out[tenant] += n
		total += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read citus_stat_tenants: %w", err)
	}
	if total > 0 {
		for t := range out {
			out[t] /= total
		}
	}
	return out, nil
}
