package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
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
	rt := &Routing{Nodes: map[string]string{}}
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
	place := map[string][]int64{}
	for _, t := range r.pop.Tenants {
		n := snap.Resolve(strconv.Itoa(t.ID))
		place[n] = append(place[n], int64(t.ID))
	}
	roles := r.shardRoles()
	now := r.opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	t0 := time.Now()
	// Every node gets the whole data set, then keeps only its tenants: the
	// same rows a single node holds.
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range r.shardNodes {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, n.DSN())
			if err != nil {
				return fmt.Errorf("connect to %s: %w", n.Name, err)
			}
			defer conn.Close(context.Background())
			if err := dataset.Load(gctx, conn, dataset.Spec{Schema: r.sc.Data.SchemaName(), Orders: r.params.Orders,
				Days: r.sc.Data.Days, Customers: r.sc.Data.Customers}, now); err != nil {
				return fmt.Errorf("load data on %s: %w", n.Name, err)
			}
			keep := place[n.Name]
			if keep == nil {
				keep = []int64{}
			}
			for _, table := range shardTables {
				if _, err := conn.Exec(gctx, "DELETE FROM "+table+" WHERE tenant_id <> ALL ($1)", keep); err != nil {
					return fmt.Errorf("keep %s's tenants: %w", n.Name, err)
				}
			}
			if _, err := conn.Exec(gctx, "ANALYZE orders, tenants"); err != nil {
				return fmt.Errorf("analyze %s: %w", n.Name, err)
			}
			if reset {
				return nil
			}
			where := fmt.Sprintf("database %q on %s", n.Database, n.Name)
			if _, err := footprint.EnsureRoles(gctx, conn, where, n.Database, r.runID, roles...); err != nil {
				return fmt.Errorf("create roles on %s: %w", n.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	if !reset {
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

// shardRoles are every configuration's roles, each with one password for
// every node.
func (r *runner) shardRoles() []pools.RoleConfig {
	var access tableAccess
	for _, t := range dataset.Tables {
		access.read = append(access.read, r.sc.Data.SchemaName()+"."+t)
	}
	var roles []pools.RoleConfig
	for i := range r.sc.Configurations {
		for _, ro := range r.rolesOf(&r.sc.Configurations[i], access) {
			b := make([]byte, 18)
			rand.Read(b)
			ro.Password = hex.EncodeToString(b)
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
