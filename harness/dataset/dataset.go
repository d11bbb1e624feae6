package dataset

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kind is a query kind a scenario class can name.
type Kind string

// Query kinds.
const (
	// KindLookup is an indexed point lookup of one order by primary key.
	KindLookup Kind = "lookup"
	// KindPage is a small page (20 rows) of one customer's newest orders.
	KindPage Kind = "page"
	// KindReport aggregates a year of one tenant's orders by month and status.
	KindReport Kind = "report"
	// KindExport reads all of one tenant's orders in key-ordered batches.
	KindExport Kind = "export"
	// KindSleep runs pg_sleep for a known duration: a query of exact cost.
	KindSleep Kind = "sleep"
)

// Kinds lists every query kind.
var Kinds = []Kind{KindLookup, KindPage, KindReport, KindExport, KindSleep}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, v := range Kinds {
		if v == k {
			return true
		}
	}
	return false
}

// Spec says what to load.
type Spec struct {
	// Schema is the schema the tables are created in; it must exist.
	// Required: Load never picks one, so that a data set never lands
	// among a user's tables by accident.
	Schema string
	// Orders maps tenant_id to its number of orders rows (>= 1 each).
	Orders map[int]int64
	// Days spreads created_at over the last Days days (>= 1).
	Days int
	// Customers is the number of distinct customers per tenant (>= 1); a
	// tenant with fewer orders has fewer customers.
	Customers int
}

// ErrSpec is returned (wrapped) for an unusable Spec.
var ErrSpec = errors.New("dataset: invalid spec")

// Counts splits total rows over tenants 1..len(shares) in proportion to
// shares (shares[i] is tenant i+1's), giving every tenant at least one row.
func Counts(shares []float64, total int64) map[int]int64 {
	out := make(map[int]int64, len(shares))
	for i, s := range shares {
		n := int64(math.Round(s * float64(total)))
		if n < 1 {
			n = 1
		}
		out[i+1] = n
	}
	return out
}

// DDL returns the data set's tables in schema, without secondary indexes
// (Load builds them after the rows are in, which is several times faster).
// Tables of the data set already in schema are dropped first; nothing
// outside schema is touched.
func DDL(schema string) string {
	return strings.NewReplacer("$s", pgx.Identifier{schema}.Sanitize()).Replace(`
DROP TABLE IF EXISTS $s.orders;
DROP TABLE IF EXISTS $s.tenants;
CREATE TABLE $s.tenants (
	tenant_id  bigint PRIMARY KEY,
	name       text NOT NULL,
	plan       text NOT NULL,
	orders     bigint NOT NULL,
	created_at timestamptz NOT NULL
);
CREATE TABLE $s.orders (
	tenant_id  bigint NOT NULL,
	id         bigint NOT NULL,
	created_at timestamptz NOT NULL,
	amount     numeric(12,2) NOT NULL,
	status     text NOT NULL,
	customer   text NOT NULL,
	note       text NOT NULL
);`)
}

// indexes are built after the load; the index names follow their table
// into its schema.
const indexes = `
ALTER TABLE $s.orders ADD PRIMARY KEY (tenant_id, id);
CREATE INDEX orders_tenant_created ON $s.orders (tenant_id, created_at DESC);
CREATE INDEX orders_tenant_customer ON $s.orders (tenant_id, customer, created_at DESC);`

// Tables lists the tables a workload role needs access to (in the
// schema the data set was loaded into).
var Tables = []string{"tenants", "orders"}

// loadOrders generates every tenant's rows in one statement. Values are pure
// functions of (tenant_id, id): Knuth's multiplicative hash spreads them.
const loadOrders = `
INSERT INTO $s.orders (tenant_id, id, created_at, amount, status, customer, note)
SELECT t.id, g,
       $3::timestamptz - make_interval(secs => ((g * 2654435761 + t.id * 40503) % ($4::bigint * 86400))::double precision),
       (((g * 7919 + t.id * 104729) % 100000) / 100.0)::numeric(12,2),
       (ARRAY['paid','pending','shipped','refunded','cancelled'])[1 + ((g * 31 + t.id) % 5)],
       'c' || ((g * 48271 + t.id) % LEAST($5::bigint, t.n)),
       repeat('x', 20 + ((g * 13) % 60)::int)
FROM unnest($1::bigint[], $2::bigint[]) AS t(id, n), generate_series(1, t.n) AS g`

// Load creates the tables tenants and orders in spec.Schema on conn and
// loads spec's rows, then builds the indexes and vacuums and analyzes the
// tables, as pgbench -i does: a measured run then starts from settled
// pages (hint bits set, visibility map built) rather than meeting
// autovacuum's first pass over the fresh rows mid-run. It replaces
// the data set's tables in spec.Schema, nothing else. now anchors
// created_at; pass a fixed time for a reproducible data set.
func Load(ctx context.Context, conn *pgx.Conn, spec Spec, now time.Time) error {
	if spec.Schema == "" || len(spec.Orders) == 0 || spec.Days < 1 || spec.Customers < 1 {
		return fmt.Errorf("%w: need a schema, orders per tenant, days >= 1 and customers >= 1", ErrSpec)
	}
	in := strings.NewReplacer("$s", pgx.Identifier{spec.Schema}.Sanitize()).Replace
	ids := make([]int64, 0, len(spec.Orders))
	ns := make([]int64, 0, len(spec.Orders))
	for id := 1; len(ids) < len(spec.Orders); id++ {
		n, ok := spec.Orders[id]
		if !ok {
			if id > len(spec.Orders)*4+16 {
				return fmt.Errorf("%w: tenant ids must be 1..N", ErrSpec)
			}
			continue
		}
		if n < 1 {
			return fmt.Errorf("%w: tenant %d has %d orders, need >= 1", ErrSpec, id, n)
		}
		ids = append(ids, int64(id))
		ns = append(ns, n)
	}
	steps := []struct {
		what string
		sql  string
		args []any
	}{
		{"create tables", DDL(spec.Schema), nil},
		{"load tenants", `INSERT INTO $s.tenants SELECT t.id, 'tenant-' || t.id, CASE WHEN t.id = 1 THEN 'enterprise' ELSE 'standard' END, t.n, $3::timestamptz
			FROM unnest($1::bigint[], $2::bigint[]) AS t(id, n)`, []any{ids, ns, now}},
		{"load orders", loadOrders, []any{ids, ns, now, spec.Days, spec.Customers}},
		{"build indexes", indexes, nil},
		// VACUUM cannot run in the implicit transaction of a
		// multi-statement text: one statement each.
		{"vacuum tenants", "VACUUM (ANALYZE) $s.tenants", nil},
		{"vacuum orders", "VACUUM (ANALYZE) $s.orders", nil},
	}
	for _, s := range steps {
		var err error
		if s.args == nil {
			// Multi-statement text goes over the simple protocol.
			_, err = conn.PgConn().Exec(ctx, in(s.sql)).ReadAll()
		} else {
			_, err = conn.Exec(ctx, in(s.sql), s.args...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// Params are what the data set was loaded with.
type Params struct {
	// Orders maps tenant_id to its row count, as loaded.
	Orders map[int]int64
	// Customers is Spec.Customers as loaded.
	Customers int
}
