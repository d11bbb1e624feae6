package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/directory"
)

// moveTenant is the runner of scenario.MoveTenant: isolation/directory
// Move under load, the run's router as its gate, then the checks that the
// source kept none of the tenant's rows and that no other tenant's rows
// changed on the source or the target.
type moveTenant struct{ cfg *scenario.MoveTenant }

var _ ActionRunner = moveTenant{}

// Run moves the tenant and reports the move's figures: rows and MB copied,
// copy rate, captured changes, write pause, total time, rows deleted at
// the source.
func (m moveTenant) Run(ctx context.Context, env ActionEnv) (ActionOutcome, error) {
	rt := env.Routing
	if rt == nil {
		return ActionOutcome{}, fmt.Errorf("move tenant: the run has no tenant routing (topology shards)")
	}
	tenant := strconv.Itoa(m.cfg.Tenant)
	if env.TenantKey != nil {
		tenant = env.TenantKey(m.cfg.Tenant)
	}
	source, _, _, err := rt.Catalog.Lookup(ctx, tenant)
	if err != nil {
		return ActionOutcome{}, fmt.Errorf("move tenant %s: %w", tenant, err)
	}
	nodes := []string{source, m.cfg.Target}
	othersBefore, err := othersSums(ctx, rt, nodes, tenant)
	if err != nil {
		return ActionOutcome{}, err
	}
	grace := m.cfg.Grace.Duration()
	if grace == 0 {
		grace = -1 // directory: negative is no wait
	}
	fig, err := directory.Move(ctx, directory.MoveConfig{
		Catalog: rt.Catalog, Nodes: rt.Nodes, Tables: rt.Tables, TenantColumn: rt.Column,
		BatchRows: m.cfg.BatchRows, MaxPause: m.cfg.MaxPause.Duration(), Grace: grace,
		Gates: []directory.Gate{rt.Router}, Logger: env.Logger,
	}, tenant, m.cfg.Target)
	if err != nil {
		return ActionOutcome{}, fmt.Errorf("move tenant %s to %s: %w", tenant, m.cfg.Target, err)
	}
	if err := rt.Router.Refresh(ctx); err != nil {
		return ActionOutcome{}, fmt.Errorf("move tenant %s: refresh the router: %w", tenant, err)
	}
	out := ActionOutcome{
		Detail: fmt.Sprintf("tenant %s %s → %s: copied %d rows (%.2f MB) in %.2f s: %.2f MB/s, %.0f rows/s; %d captured changes in %d rounds; write pause %.1f ms (%d attempts); total %.2f s; %d rows deleted at the source",
			fig.Tenant, fig.Source, fig.Target, fig.CopiedRows, float64(fig.CopiedBytes)/(1<<20), fig.CopySeconds, fig.MBPerSecond, fig.RowsPerSecond,
			fig.Changes, fig.CatchUpRounds, fig.PauseSeconds*1000, fig.PauseAttempts, fig.TotalSeconds, fig.DeletedRows),
		Before: map[string]float64{"rows_at_source": float64(fig.CopiedRows)},
		After: map[string]float64{"copied_rows": float64(fig.CopiedRows), "copy_mb_per_s": fig.MBPerSecond, "changes": float64(fig.Changes),
			"write_pause_ms": fig.PauseSeconds * 1000, "move_s": fig.TotalSeconds, "deleted_rows": float64(fig.DeletedRows)},
	}
	if fig.AlreadyThere {
		out.Detail = fmt.Sprintf("tenant %s already on %s: nothing moved", tenant, m.cfg.Target)
		return out, nil
	}
	// What the move must leave: none of the tenant's rows at the source,
	// every other tenant's rows as they were (the checked writer's rows,
	// ids < 0, aside).
	var left int64
	err = withDSN(ctx, rt.Nodes[fig.Source], func(c *pgx.Conn) error {
		for _, table := range rt.Tables {
			var n int64
			err := c.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+" WHERE "+pgx.Identifier{rt.Column}.Sanitize()+"::text = $1",
				tenant).Scan(&n)
			if err != nil {
				return err
			}
			left += n
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("move tenant %s: count its rows left at %s: %w", tenant, fig.Source, err)
	}
	out.After["rows_at_source"] = float64(left)
	othersAfter, err := othersSums(ctx, rt, nodes, tenant)
	if err != nil {
		return out, err
	}
	var changed []string
	for _, n := range nodes {
		if othersAfter[n] != othersBefore[n] {
			changed = append(changed, n)
		}
	}
	out.After["nodes_with_others_changed"] = float64(len(changed))
	switch {
	case left > 0:
		return out, fmt.Errorf("move tenant %s: %d of its rows left at %s after the delete", tenant, left, fig.Source)
	case len(changed) > 0:
		return out, fmt.Errorf("move tenant %s: other tenants' rows changed on %v", tenant, changed)
	}
	return out, nil
}

// othersSums returns, per node, the row count and checksum of the rows of
// every tenant but tenant: of orders without checked writes (ids < 0) on
// the built-in data set, else of each of rt.Tables.
func othersSums(ctx context.Context, rt *Routing, nodes []string, tenant string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range slices.Compact(slices.Clone(nodes)) {
		var sums []string
		err := withDSN(ctx, rt.Nodes[n], func(c *pgx.Conn) error {
			queries := []string{`SELECT count(*) || '/' || ` + directory.ChecksumSQL + ` FROM (
				SELECT tenant_id, id, created_at AT TIME ZONE 'UTC', amount, status, customer, note FROM orders WHERE tenant_id::text <> $1 AND id >= 0) t`}
			if !rt.Builtin {
				queries = nil
				for _, table := range rt.Tables {
					queries = append(queries, `SELECT count(*) || '/' || `+directory.ChecksumSQL+` FROM (
						SELECT * FROM `+pgx.Identifier{table}.Sanitize()+` WHERE `+pgx.Identifier{rt.Column}.Sanitize()+`::text <> $1) t`)
				}
			}
			for _, q := range queries {
				var v string
				if err := c.QueryRow(ctx, q, tenant).Scan(&v); err != nil {
					return err
				}
				sums = append(sums, v)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("move tenant: checksum the other tenants on %s: %w", n, err)
		}
		out[n] = strings.Join(sums, " ")
	}
	return out, nil
}

// withDSN runs f on a connection to dsn.
func withDSN(ctx context.Context, dsn string, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}

// promote is the runner of the promote policy: it keeps the tenant's share
// of each check's interval and fires move_tenant once every interval of
// the last Window was above Threshold.
type promote struct {
	cfg *scenario.Promote
	// above is how long the tenant's share has been above the threshold,
	// over the intervals checked since it last was not.
	above time.Duration
}

var _ Policy = (*promote)(nil)

// Check fires move_tenant once the share stayed above the threshold for
// Window, and is then done; it fails once DetectWithin (when set) passed
// without.
func (p *promote) Check(_ context.Context, env ActionEnv, s Sample) ([]scenario.Action, bool, error) {
	tenant := strconv.Itoa(p.cfg.Tenant)
	if env.TenantKey != nil {
		tenant = env.TenantKey(p.cfg.Tenant)
	}
	share := 0.0
	if w, ok := s.Last[tenant]; ok {
		share = w.Share
	}
	late := func() error {
		if d := p.cfg.DetectWithin.Duration(); d > 0 && s.Elapsed >= d {
			return fmt.Errorf("promote: tenant %s's share did not stay above %.2f for %s within %s (share %.2f at the last check)",
				tenant, p.cfg.Threshold, p.cfg.Window, p.cfg.DetectWithin, share)
		}
		return nil
	}
	if share <= p.cfg.Threshold {
		p.above = 0
		return nil, false, late()
	}
	p.above += s.Interval
	if p.above < p.cfg.Window.Duration() {
		return nil, false, late()
	}
	env.Logger.Info("promote: share above threshold", "tenant", tenant, "share", share, "threshold", p.cfg.Threshold,
		"for", p.above.Round(time.Millisecond), "elapsed", s.Elapsed.Round(time.Millisecond))
	return []scenario.Action{{Type: scenario.ActionMoveTenant, Config: p.cfg.Move()}}, true, nil
}

func init() {
	RegisterActionRunner(scenario.ActionMoveTenant, func(c scenario.ActionConfig) ActionRunner {
		return moveTenant{cfg: c.(*scenario.MoveTenant)}
	})
	RegisterPolicyRunner(scenario.PolicyPromote, func(c scenario.PolicyConfig) Policy {
		return &promote{cfg: c.(*scenario.Promote)}
	})
}
