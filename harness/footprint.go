package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/scenario"
)

// removeTimeout bounds the removal of what a run created, which runs after
// the run's context may have ended.
const removeTimeout = time.Minute

// footprintNodes are the nodes a run creates its schema and roles on: the
// writable ones (replicas replay them, Citus propagates them to workers).
func footprintNodes(c backend.Cluster) []backend.Node {
	var out []backend.Node
	for _, n := range c.Nodes() {
		switch n.Role {
		case backend.RolePrimary, backend.RoleCoordinator, backend.RoleShard:
			out = append(out, n)
		}
	}
	return out
}

// roleNames are the login roles the scenario's run creates.
func (r *runner) roleNames() []string {
	var out []string
	for i := range r.sc.Configurations {
		for _, rc := range rolesOf(&r.sc.Configurations[i], r.sc.Data.SchemaName(), r.roleTag, tableAccess{}) {
			out = append(out, rc.Name)
		}
	}
	return out
}

// claim makes the run's schema on every writable node, refusing (before
// anything is created) a schema or role of the run's names that noisysim
// did not create, or that another noisysim run still uses. A holder
// session per node (footprint.Holding) marks the run as running until
// remove. The returned remove drops what the run created, whatever the
// run's outcome (not with Options.Keep), then closes the holders.
func (r *runner) claim(ctx context.Context) (remove func(), err error) {
	r.runID = fmt.Sprintf("%s-%d", r.started.UTC().Format("20060102T150405Z"), os.Getpid())
	plan := footprint.Plan{Schema: r.sc.Data.SchemaName(), Roles: r.roleNames(), Run: r.runID}
	var claimed []backend.Node
	var holders []*pgx.Conn
	remove = func() {
		defer func() {
			for _, h := range holders {
				h.Close(context.Background())
			}
		}()
		if r.opts.Keep {
			for _, n := range claimed {
				r.log.Info("kept", "node", n.Name, "schema", plan.Schema, "roles", plan.Roles)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		for _, n := range claimed {
			err := withConn(ctx, n, func(conn *pgx.Conn) error { return footprint.Remove(ctx, conn, plan) })
			if err != nil {
				// What is left carries noisysim's mark and no live holder:
				// the next run's claim removes it.
				r.log.Error("could not remove what the run created: it stays until the next run against this database removes it",
					"node", n.Name, "database", n.Database, "schema", plan.Schema, "roles", plan.Roles, "err", err)
			}
		}
	}
	for _, n := range footprintNodes(r.cluster) {
		where := fmt.Sprintf("database %q on %s", n.Database, n.Name)
		h, err := pgx.Connect(ctx, footprint.Holding(n, r.runID).DSN())
		if err != nil {
			remove()
			return nil, fmt.Errorf("%w: connect to %s %s: %w", ErrRun, n.Name, n.RedactedDSN(), err)
		}
		holders = append(holders, h)
		if err := footprint.Claim(ctx, h, where, plan); err != nil {
			remove()
			return nil, fmt.Errorf("%w: %w", ErrRun, err)
		}
		claimed = append(claimed, n)
		if r.opts.Keep && r.sc.Backend.Kind == scenario.BackendExternal {
			what := fmt.Sprintf("schema %q", plan.Schema)
			if len(plan.Roles) > 0 {
				what += " and roles " + strings.Join(plan.Roles, ", ")
			}
			r.note("kept after the run (--keep) in %s: %s; the next run removes them", where, what)
		}
		// Roles of runs that are over, under whatever names (a run stopped
		// at once by a second signal, or killed): best effort.
		stale, err := footprint.RemoveStaleRoles(ctx, h)
		if err != nil {
			r.log.Warn("remove roles earlier noisysim runs left", "node", n.Name, "roles", stale, "err", err)
		} else if len(stale) > 0 {
			r.log.Info("removed roles earlier noisysim runs left", "node", n.Name, "roles", stale)
		}
	}
	return remove, nil
}

// withConn runs f on a connection to n as its superuser.
func withConn(ctx context.Context, n backend.Node, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return fmt.Errorf("connect to %s %s: %w", n.Name, n.RedactedDSN(), err)
	}
	defer conn.Close(context.Background())
	return f(conn)
}
