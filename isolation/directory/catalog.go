package directory

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema is the schema that holds noisysim's directory objects, on the
// control node (the catalog) and on every data node (change capture).
const Schema = "noisysim_directory"

// NotifyChannel is the channel the catalog NOTIFYs with the new version
// after every change.
const NotifyChannel = "noisysim_directory"

// Tenant states in the catalog.
const (
	// StateActive: the tenant's data is at Entry.Node; reads and writes go
	// there.
	StateActive = "active"
	// StateMoving: a move is under way; Entry.Node (the source) still holds
	// the tenant and takes its reads and writes until the switch.
	StateMoving = "moving"
)

// catalogDDL creates the catalog. It is idempotent.
const catalogDDL = `
CREATE SCHEMA IF NOT EXISTS noisysim_directory;
CREATE TABLE IF NOT EXISTS noisysim_directory.meta (
	one     boolean PRIMARY KEY DEFAULT true CHECK (one),
	version bigint NOT NULL
);
INSERT INTO noisysim_directory.meta VALUES (true, 1) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS noisysim_directory.nodes (
	name     text PRIMARY KEY,
	ring     boolean NOT NULL,
	position int NOT NULL
);
CREATE TABLE IF NOT EXISTS noisysim_directory.tenants (
	tenant_id  text PRIMARY KEY,
	node       text NOT NULL REFERENCES noisysim_directory.nodes (name),
	state      text NOT NULL CHECK (state IN ('active', 'moving')),
	version    bigint NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS noisysim_directory.moves (
	tenant_id  text PRIMARY KEY,
	source     text NOT NULL,
	target     text NOT NULL,
	step       text NOT NULL,
	attempts   int NOT NULL DEFAULT 1,
	started_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now(),
	figures    jsonb
);`

// NodeSpec registers a node in the catalog.
type NodeSpec struct {
	// Name identifies the node, e.g. "primary2".
	Name string
	// Ring is true for nodes that take hash-placed tenants; a node outside
	// the ring only holds tenants assigned to it (promoted tenants).
	Ring bool
}

// Entry is a tenant's explicit row in the catalog. Tenants without one are
// placed by hash over the ring.
type Entry struct {
	Tenant    string
	Node      string
	State     string
	Version   int64
	UpdatedAt time.Time
}

// Snapshot is the whole catalog at one version.
type Snapshot struct {
	// Version increases with every change to the catalog.
	Version int64
	// Nodes are every registered node, and Ring the hash-placement ones, in
	// registration order.
	Nodes, Ring []string
	// Entries are the explicit placements by tenant.
	Entries map[string]Entry
}

// Resolve returns the node holding tenant: its explicit entry's node, or
// HashPlace over the ring. It returns "" when there is neither.
func (s Snapshot) Resolve(tenant string) string {
	if e, ok := s.Entries[tenant]; ok {
		return e.Node
	}
	return HashPlace(tenant, s.Ring)
}

// HashPlace places tenant on one of ring by rendezvous (highest random
// weight) hashing with FNV-1a: adding or removing a node only moves the
// tenants of that node. It returns "" for an empty ring.
func HashPlace(tenant string, ring []string) string {
	best, bestW := "", uint64(0)
	for _, n := range ring {
		h := fnv.New64a()
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write([]byte(tenant))
		if w := mix(h.Sum64()); best == "" || w > bestW {
			best, bestW = n, w
		}
	}
	return best
}

// mix is splitmix64's finaliser: it spreads FNV's weak low bits.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Catalog is the tenant directory on the control node: which node holds
// each tenant, and the moves under way. It is safe for concurrent use and
// several processes may share one catalog.
type Catalog struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

// OpenCatalog connects to the control node at dsn (a libpq URL or
// key=value string; the role must be able to create a schema on first
// Install). It does not create anything: call Install once. log may be nil.
func OpenCatalog(ctx context.Context, dsn string, log *slog.Logger) (*Catalog, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse catalog DSN: %w: %w", ErrInvalidConfig, err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = "noisysim-directory"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Catalog{pool: pool, log: log}, nil
}

// Close closes the catalog's connections. It is idempotent.
func (c *Catalog) Close() { c.pool.Close() }

// Install creates the catalog if it is missing and registers the nodes not
// registered yet. The hash ring is fixed by the first Install: a node
// already registered keeps its place and its Ring flag, and a new node may
// join the ring only while it is empty, because changing the ring re-places
// hash-placed tenants without moving their data. Register later nodes
// outside the ring and Move tenants to them. It is idempotent and safe to
// run from several processes at once. Errors: ErrInvalidConfig (wrapped)
// for a node without a name or a new node joining a non-empty ring.
func (c *Catalog) Install(ctx context.Context, nodes ...NodeSpec) error {
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('noisysim_directory.install', 0))"); err != nil {
			return fmt.Errorf("install catalog: %w", err)
		}
		if _, err := tx.Exec(ctx, catalogDDL); err != nil {
			return fmt.Errorf("install catalog: %w", err)
		}
		var ring []string
		if err := tx.QueryRow(ctx, "SELECT coalesce(array_agg(name ORDER BY position), '{}') FROM noisysim_directory.nodes WHERE ring").Scan(&ring); err != nil {
			return fmt.Errorf("install catalog: %w", err)
		}
		for _, n := range nodes {
			if n.Name == "" {
				return fmt.Errorf("install catalog: node without a name: %w", ErrInvalidConfig)
			}
			var known bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM noisysim_directory.nodes WHERE name = $1)", n.Name).Scan(&known); err != nil {
				return fmt.Errorf("install catalog: %w", err)
			}
			if known {
				continue
			}
			if n.Ring && len(ring) > 0 {
				return fmt.Errorf("install catalog: node %s cannot join the hash ring %v: tenants placed by hash would be re-placed without their data (register it outside the ring and move tenants to it): %w",
					n.Name, ring, ErrInvalidConfig)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO noisysim_directory.nodes (name, ring, position)
				VALUES ($1, $2, (SELECT coalesce(max(position), 0) + 1 FROM noisysim_directory.nodes))`, n.Name, n.Ring); err != nil {
				return fmt.Errorf("install catalog: register node %s: %w", n.Name, err)
			}
		}
		return bump(ctx, tx)
	})
}

// Installed reports whether the catalog exists and registers at least one
// node.
func (c *Catalog) Installed(ctx context.Context) (bool, error) {
	var ok bool
	err := c.pool.QueryRow(ctx, `SELECT to_regclass('noisysim_directory.nodes') IS NOT NULL`).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read catalog: %w", err)
	}
	if !ok {
		return false, nil
	}
	if err := c.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM noisysim_directory.nodes)").Scan(&ok); err != nil {
		return false, fmt.Errorf("read catalog: %w", err)
	}
	return ok, nil
}

// bump increases the catalog version and notifies listeners, inside tx.
func bump(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `WITH u AS (UPDATE noisysim_directory.meta SET version = version + 1 RETURNING version)
		SELECT pg_notify('noisysim_directory', version::text) FROM u`)
	if err != nil {
		return fmt.Errorf("bump catalog version: %w", err)
	}
	return nil
}

// Version returns the catalog's current version: one indexed read, cheap
// enough to poll.
func (c *Catalog) Version(ctx context.Context) (int64, error) {
	var v int64
	if err := c.pool.QueryRow(ctx, "SELECT version FROM noisysim_directory.meta").Scan(&v); err != nil {
		return 0, fmt.Errorf("read catalog version: %w", err)
	}
	return v, nil
}

// Snapshot reads the whole catalog in one repeatable-read transaction.
func (c *Catalog) Snapshot(ctx context.Context) (Snapshot, error) {
	s := Snapshot{Entries: map[string]Entry{}}
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT version FROM noisysim_directory.meta").Scan(&s.Version); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT name, ring FROM noisysim_directory.nodes ORDER BY position, name")
		if err != nil {
			return err
		}
		var name string
		var ring bool
		if _, err := pgx.ForEachRow(rows, []any{&name, &ring}, func() error {
			s.Nodes = append(s.Nodes, name)
			if ring {
				s.Ring = append(s.Ring, name)
			}
			return nil
		}); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, "SELECT tenant_id, node, state, version, updated_at FROM noisysim_directory.tenants")
		if err != nil {
			return err
		}
		var e Entry
		_, err = pgx.ForEachRow(rows, []any{&e.Tenant, &e.Node, &e.State, &e.Version, &e.UpdatedAt}, func() error {
			s.Entries[e.Tenant] = e
			return nil
		})
		return err
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("read catalog: %w", err)
	}
	return s, nil
}

// Lookup returns tenant's node as the catalog says now (see
// Snapshot.Resolve) and its entry, if it has one.
func (c *Catalog) Lookup(ctx context.Context, tenant string) (node string, e Entry, explicit bool, err error) {
	s, err := c.Snapshot(ctx)
	if err != nil {
		return "", Entry{}, false, err
	}
	e, explicit = s.Entries[tenant]
	return s.Resolve(tenant), e, explicit, nil
}

// Assign gives tenant an explicit destination (state active) without
// moving any data: for placing a new tenant, or correcting the catalog by
// hand. Use Move to move a tenant that has data. It returns the new
// catalog version; ErrUnknownNode when node is not registered.
func (c *Catalog) Assign(ctx context.Context, tenant, node string) (int64, error) {
	var v int64
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if err := checkNode(ctx, tx, node); err != nil {
			return err
		}
		if err := bump(ctx, tx); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO noisysim_directory.tenants AS t (tenant_id, node, state, version, updated_at)
			SELECT $1, $2, 'active', version, now() FROM noisysim_directory.meta
			ON CONFLICT (tenant_id) DO UPDATE SET node = EXCLUDED.node, state = 'active', version = EXCLUDED.version, updated_at = now()
			RETURNING version`, tenant, node).Scan(&v)
	})
	if err != nil {
		return 0, fmt.Errorf("assign tenant %s to %s: %w", tenant, node, err)
	}
	return v, nil
}

func checkNode(ctx context.Context, tx pgx.Tx, node string) error {
	var ok bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM noisysim_directory.nodes WHERE name = $1)", node).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("node %q: %w", node, ErrUnknownNode)
	}
	return nil
}

// MoveRecord is a move's row in the catalog.
type MoveRecord struct {
	Tenant, Source, Target string
	// Step is the last step completed.
	Step Step
	// Attempts counts the runs of this move (1 for a move never resumed).
	Attempts             int
	StartedAt, UpdatedAt time.Time
	// Figures are the finished move's figures (Step StepDone), else nil.
	Figures *Figures
}

// Moves returns the catalog's move records, by tenant.
func (c *Catalog) Moves(ctx context.Context) ([]MoveRecord, error) {
	rows, err := c.pool.Query(ctx, `SELECT tenant_id, source, target, step, attempts, started_at, updated_at, figures
		FROM noisysim_directory.moves ORDER BY tenant_id`)
	if err != nil {
		return nil, fmt.Errorf("read moves: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MoveRecord, error) {
		var m MoveRecord
		var step string
		err := row.Scan(&m.Tenant, &m.Source, &m.Target, &step, &m.Attempts, &m.StartedAt, &m.UpdatedAt, &m.Figures)
		m.Step = Step(step)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read moves: %w", err)
	}
	return out, nil
}

// move returns tenant's move record, or false.
func (c *Catalog) move(ctx context.Context, tenant string) (MoveRecord, bool, error) {
	all, err := c.Moves(ctx)
	if err != nil {
		return MoveRecord{}, false, err
	}
	i := slices.IndexFunc(all, func(m MoveRecord) bool { return m.Tenant == tenant })
	if i < 0 {
		return MoveRecord{}, false, nil
	}
	return all[i], true, nil
}

// isNoRows reports pgx.ErrNoRows.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
