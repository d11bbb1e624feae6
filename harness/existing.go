package harness

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload/pgscript"
)

// searchPath is every session's search_path: the run's schema, then with
// data.existing the schemas of the database's own tables.
func (r *runner) searchPath() string {
	parts := []string{pgx.Identifier{r.sc.Data.SchemaName()}.Sanitize()}
	for _, s := range r.sc.Data.Existing.Schemas {
		parts = append(parts, pgx.Identifier{s}.Sanitize())
	}
	if len(parts) == 1 {
		return r.sc.Data.SchemaName()
	}
	return strings.Join(parts, ",")
}

// loadExisting prepares a workload on the database's own tables: it reads
// the tenants' keys and row counts (tenants.keys.query) when the scenario
// asks, then creates noisysim_tenants in the run's schema. Nothing outside
// the run's schema is written.
func (r *runner) loadExisting(ctx context.Context, conn *pgx.Conn) error {
	if q := r.sc.Tenants.Keys.Query; q != "" {
		if err := r.readKeys(ctx, conn, q); err != nil {
			return err
		}
		if err := r.bindTenants(); err != nil {
			return err
		}
	}
	spec := dataset.SetupSpec{
		Schema: r.sc.Data.SchemaName(), KeyType: r.sc.Tenants.Keys.SQLType(), Keys: r.keys,
		RowNames: r.sc.RowNames(), Rows: r.rowCounts,
	}
	for _, t := range r.pop.Tenants {
		spec.Shares = append(spec.Shares, t.Share)
	}
	if err := dataset.LoadSetup(ctx, conn, spec); err != nil {
		return fmt.Errorf("%w: create %s: %w", ErrRun, dataset.TenantsTable, err)
	}
	return nil
}

// readKeys runs the keys query in a read-only transaction: its first
// tenants.count rows are the tenants, the first the dominant one; its
// first column the key, then one integer column per tenants.keys.counts
// name. A query that fails or does not fit is bad input.
func (r *runner) readKeys(ctx context.Context, conn *pgx.Conn, query string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", scenario.ErrInvalid, r.sc.Where("tenants.keys.query"), fmt.Sprintf(format, args...))
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("%w: begin the keys query: %w", ErrRun, err)
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return bad("%v", err)
	}
	defer rows.Close()
	counts := r.sc.Tenants.Keys.Counts
	fields := rows.FieldDescriptions()
	var names []string
	for _, f := range fields {
		names = append(names, f.Name)
	}
	if len(fields) != 1+len(counts) || !equalNames(names[1:], counts) {
		return bad("returns the columns %s; want the key, then %s (tenants.keys.counts)", strings.Join(names, ", "), describeCounts(counts))
	}
	want := r.pop.Len()
	keys := make([]string, 0, want)
	seen := map[string]int{}
	r.rowCounts = map[string]map[int]int64{}
	for _, c := range counts {
		r.rowCounts[c] = map[int]int64{}
	}
	for rows.Next() && len(keys) < want {
		vals, err := rows.Values()
		if err != nil {
			return bad("%v", err)
		}
		n := len(keys) + 1
		if vals[0] == nil {
			return bad("row %d has a NULL key", n)
		}
		key := pgscript.FromAny(gsetValue(vals[0])).String()
		if err := scenario.CheckKey(r.sc.Tenants.Keys.Type, key); err != nil {
			return bad("row %d: %v (tenants.keys.type %s)", n, err, r.sc.Tenants.Keys.SQLType())
		}
		if prev, dup := seen[key]; dup {
			return bad("rows %d and %d have the same key %q", prev, n, key)
		}
		seen[key] = n
		keys = append(keys, key)
		for i, c := range counts {
			v := pgscript.FromAny(gsetValue(vals[i+1]))
			count, ok := v.Any().(int64)
			if !ok {
				if f, isF := v.Any().(float64); isF {
					count, ok = int64(f), true
				}
			}
			if !ok {
				return bad("row %d: column %s is %v, not an integer", n, c, vals[i+1])
			}
			r.rowCounts[c][n] = count
		}
	}
	if err := rows.Err(); err != nil {
		return bad("%v", err)
	}
	if len(keys) < want {
		return bad("returned %d rows; tenants.count is %d: it needs a key per tenant", len(keys), want)
	}
	r.keys = keys
	return nil
}

func equalNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func describeCounts(counts []string) string {
	if len(counts) == 0 {
		return "nothing"
	}
	return strings.Join(counts, ", ")
}

// readOnly returns node with every session opened on it read only
// (default_transaction_read_only): a workload on the database's own
// tables never writes them, whatever its scripts say.
func readOnly(node backend.Node) backend.Node {
	params := maps.Clone(node.Params)
	if params == nil {
		params = map[string]string{}
	}
	params["default_transaction_read_only"] = "on"
	node.Params = params
	return node
}
