package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/directory"
	"github.com/noisysim/noisysim/isolation/pools"
)

// routerPoll is how often the run's router reads the catalog's version.
const routerPoll = 100 * time.Millisecond

// shardTables are the data set's tables that hold tenant rows, in the
// order a move copies them.
var shardTables = []string{"tenants", "orders"}

// loadShards prepares topology shards: the tenant catalog on the first
// node (every node but the last backend.spare_nodes in the hash ring),
// every node loaded with the tenants placed there, the configurations'
// roles on every node with the same passwords, and the router the
// isolation stacks route each call with (r.routing). A configuration
// after the first starts from the same placement: the catalog is
// installed afresh and the nodes reloaded (reset).
func (r *runner) loadShards(ctx context.Context, reset bool) error {
	if r.routing != nil {
		r.routing.close()
		r.routing = nil
	}
	r.shardNodes = nil
	for _, n := range r.cluster.Nodes() {
		r.shardNodes = append(r.shardNodes, footprint.InSchema(n, r.sc.Data.SchemaName()))
	}
	if len(r.shardNodes) < 2 {
		return fmt.Errorf("%w: topology shards needs at least 2 nodes, the cluster has %d", ErrRun, len(r.shardNodes))
	}
	rt := &Routing{Nodes: map[string]string{}, Tables: shardTables, Column: directory.DefaultTenantColumn, Builtin: r.sc.Data.Builtin()}
	if !rt.Builtin {
		rt.Tables, rt.Column = r.sc.Data.Directory.Tables, r.sc.Data.Directory.Column
	}
	var specs []directory.NodeSpec
	ring := len(r.shardNodes) - r.sc.Backend.SpareNodes
	for i, n := range r.shardNodes {
		rt.Nodes[n.Name] = n.DSN()
		rt.Names = append(rt.Names, n.Name)
		specs = append(specs, directory.NodeSpec{Name: n.Name, Ring: i < ring})
	}
	if reset {
		for _, n := range r.shardNodes {
			err := withConn(ctx, n, func(conn *pgx.Conn) error {
				_, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+directory.Schema+" CASCADE")
				return err
			})
			if err != nil {
				return fmt.Errorf("%w: reset the catalog on %s: %w", ErrRun, n.Name, err)
			}
		}
	}
	var err error
	if rt.Catalog, err = directory.OpenCatalog(ctx, r.shardNodes[0].DSN(), r.log); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	r.routing = rt
	if err := rt.Catalog.Install(ctx, specs...); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	snap, err := rt.Catalog.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	place := map[string][]string{}
	for _, t := range r.pop.Tenants {
		n := snap.Resolve(r.key(t.ID))
		place[n] = append(place[n], r.key(t.ID))
	}
	now := r.opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	t0 := time.Now()
	// Every node gets the whole data set, then keeps only its tenants: the
	// same rows a single node holds. noisysim_tenants (data.setup) stays
	// whole on every node.
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range r.shardNodes {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, n.DSN())
			if err != nil {
				return fmt.Errorf("%w: connect to %s: %w", ErrRun, n.Name, err)
			}
			defer conn.Close(context.Background())
			if rt.Builtin {
				if err := dataset.Load(gctx, conn, dataset.Spec{Schema: r.sc.Data.SchemaName(), Orders: r.params.Orders,
					Days: r.sc.Data.Days, Customers: r.sc.Data.Customers}, now); err != nil {
					return fmt.Errorf("%w: load data on %s: %w", ErrRun, n.Name, err)
				}
			} else {
				if err := r.loadSetup(gctx, conn); err != nil {
					return err
				}
				if err := r.checkDirectoryTables(gctx, conn); err != nil {
					return err
				}
			}
			keep := place[n.Name]
			if keep == nil {
				keep = []string{}
			}
			for _, table := range rt.Tables {
				del := "DELETE FROM " + pgx.Identifier{table}.Sanitize() + " WHERE " + pgx.Identifier{rt.Column}.Sanitize() + "::text <> ALL ($1::text[])"
				if _, err := conn.Exec(gctx, del, keep); err != nil {
					return fmt.Errorf("%w: keep %s's tenants in %s: %w", ErrRun, n.Name, table, err)
				}
			}
			var tables []string
			for _, t := range rt.Tables {
				tables = append(tables, pgx.Identifier{t}.Sanitize())
			}
			if _, err := conn.Exec(gctx, "ANALYZE "+strings.Join(tables, ", ")); err != nil {
				return fmt.Errorf("%w: analyze %s: %w", ErrRun, n.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// The roles' grants name the tables, which the load made anew: grant
	// them again after a reset (the roles keep their passwords).
	{
		access, err := r.shardAccess(ctx)
		if err != nil {
			return err
		}
		roles := r.shardRoles(access)
		g, gctx := errgroup.WithContext(ctx)
		for _, n := range r.shardNodes {
			g.Go(func() error {
				return withConn(gctx, n, func(conn *pgx.Conn) error {
					where := fmt.Sprintf("database %q on %s", n.Database, n.Name)
					if _, err := footprint.EnsureRoles(gctx, conn, where, n.Database, r.runID, roles...); err != nil {
						return fmt.Errorf("%w: create roles on %s: %w", ErrRun, n.Name, err)
					}
					return nil
				})
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		r.passwords = map[string]string{}
		for _, ro := range roles {
			r.passwords[ro.Name] = ro.Password
		}
	}
	r.log.Info("shards loaded", "nodes", len(r.shardNodes), "ring", ring, "took", time.Since(t0).Round(time.Millisecond))
	if rt.Router, err = directory.NewRouter(ctx, directory.RouterConfig{Catalog: rt.Catalog, PollInterval: routerPoll, Logger: r.log}); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	return nil
}

// shardAccess is what the workload roles may touch on every node: the
// built-in data set's tables read only, or data.setup's tables and
// sequences (listed on the first node) read and written.
func (r *runner) shardAccess(ctx context.Context) (tableAccess, error) {
	var access tableAccess
	schema := r.sc.Data.SchemaName()
	if r.sc.Data.Builtin() {
		for _, t := range dataset.Tables {
			access.read = append(access.read, schema+"."+t)
		}
		return access, nil
	}
	err := withConn(ctx, r.shardNodes[0], func(conn *pgx.Conn) error {
		var err error
		access.write, access.sequences, err = dataset.SchemaObjects(ctx, conn, schema)
		return err
	})
	if err != nil {
		return access, fmt.Errorf("%w: list the data set's tables: %w", ErrRun, err)
	}
	return access, nil
}

// checkDirectoryTables checks, after data.setup ran, that every table of
// data.directory is in the run's schema with the tenant column: else bad
// input at the key's file:line:col.
func (r *runner) checkDirectoryTables(ctx context.Context, conn *pgx.Conn) error {
	dd := r.sc.Data.Directory
	schema := r.sc.Data.SchemaName()
	for i, table := range dd.Tables {
		var isTable, hasColumn bool
		err := conn.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			        WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')),
			EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = $3)`,
			schema, table, dd.Column).Scan(&isTable, &hasColumn)
		key := fmt.Sprintf("data.directory.tables[%d]", i)
		switch {
		case err != nil:
			return fmt.Errorf("%w: look up table %s: %w", ErrRun, table, err)
		case !isTable:
			return fmt.Errorf("%w: %s: no table %s in the run's schema %s after data.setup ran: name a table your setup files create",
				scenario.ErrInvalid, r.sc.Where(key), table, schema)
		case !hasColumn:
			return fmt.Errorf("%w: %s: table %s has no column %s (data.directory.column, the tenant column every table needs)",
				scenario.ErrInvalid, r.sc.Where(key), table, dd.Column)
		}
	}
	return nil
}

// shardRoles are every configuration's roles with access, each with one
// password for every node: the one it was given before, if any.
func (r *runner) shardRoles(access tableAccess) []pools.RoleConfig {
	var roles []pools.RoleConfig
	for i := range r.sc.Configurations {
		for _, ro := range r.rolesOf(&r.sc.Configurations[i], access) {
			if pw, ok := r.passwords[ro.Name]; ok {
				ro.Password = pw
			} else {
				b := make([]byte, 18)
				rand.Read(b)
				ro.Password = hex.EncodeToString(b)
			}
			roles = append(roles, ro)
		}
	}
	return roles
}

// close stops the router and closes the catalog. It is idempotent.
func (rt *Routing) close() {
	if rt.Router != nil {
		rt.Router.Close()
	}
	if rt.Catalog != nil {
		rt.Catalog.Close()
		rt.Catalog = nil
	}
}

// sharded reports whether the scenario runs on topology shards.
func (r *runner) sharded() bool { return r.sc.Backend.Topology == scenario.TopologyShards }
