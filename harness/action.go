package harness

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// ActionEnv is what an action may act on.
type ActionEnv struct {
	// Cluster is the run's cluster.
	Cluster backend.Cluster
	// Logger receives the action's notes; never nil.
	Logger *slog.Logger
	// TenantKey returns tenant n's key (tenants.keys), as its sessions
	// are tagged; nil means n itself.
	TenantKey func(n int) string
}

// key returns tenant n's key.
func (env ActionEnv) key(n int) string {
	if env.TenantKey == nil {
		return fmt.Sprint(n)
	}
	return env.TenantKey(n)
}

// ActionOutcome is what an action reports: a line for people and its
// figures before and after, by name.
type ActionOutcome struct {
	Detail        string
	Before, After map[string]float64
}

// ActionRunner carries out one action of a timeline. Run blocks until the
// action is done or ctx ends (it then returns ctx.Err()).
type ActionRunner interface {
	Run(ctx context.Context, env ActionEnv) (ActionOutcome, error)
}

var (
	runnersMu sync.RWMutex
	runners   = map[string]func(scenario.ActionConfig) ActionRunner{}
)

// RegisterActionRunner makes the harness run actions of type name (a type
// registered with scenario.RegisterAction) with the runner newRunner builds
// from the action's config. It panics on a duplicate name.
func RegisterActionRunner(name string, newRunner func(scenario.ActionConfig) ActionRunner) {
	runnersMu.Lock()
	defer runnersMu.Unlock()
	if runners[name] != nil {
		panic("harness: action runner " + name + " registered twice")
	}
	runners[name] = newRunner
}

func runnerFor(a scenario.Action) (ActionRunner, error) {
	runnersMu.RLock()
	mk := runners[a.Type]
	runnersMu.RUnlock()
	if mk == nil || a.Config == nil {
		return nil, fmt.Errorf("%w: action %q has no runner", scenario.ErrInvalid, a.Type)
	}
	return mk(a.Config), nil
}

// actionRun runs the actions of one configuration's timeline.
type actionRun struct {
	env ActionEnv
	t0  time.Time
	wg  sync.WaitGroup
	mu  sync.Mutex
	out []reports.ActionResult
}

// start runs phase s's actions, each At after now, in the background.
func (ar *actionRun) start(ctx context.Context, s *step) {
	begun := time.Now()
	for _, a := range s.Actions {
		run, err := runnerFor(a)
		ar.wg.Go(func() {
			res := reports.ActionResult{Phase: s.Name, Type: a.Type}
			if err == nil && !sleepUntil(ctx, begun.Add(a.At.Duration())) {
				err = ctx.Err()
			}
			start := time.Now()
			res.At = start.Sub(ar.t0).Seconds()
			if err == nil {
				var o ActionOutcome
				o, err = run.Run(ctx, ar.env)
				res.Detail, res.Before, res.After = o.Detail, o.Before, o.After
			}
			res.Took = time.Since(start).Seconds()
			if err != nil {
				res.Error = err.Error()
			}
			ar.env.Logger.Info("action", "phase", s.Name, "type", a.Type, "took", time.Since(start).Round(time.Millisecond), "detail", res.Detail, "error", res.Error)
			ar.mu.Lock()
			ar.out = append(ar.out, res)
			ar.mu.Unlock()
		})
	}
}

// finish waits for every action started and returns their results in
// start order.
func (ar *actionRun) finish() []reports.ActionResult {
	ar.wg.Wait()
	ar.mu.Lock()
	defer ar.mu.Unlock()
	out := ar.out
	for i := 1; i < len(out); i++ { // few actions: insertion sort by start
		for j := i; j > 0 && out[j].At < out[j-1].At; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// terminateSessions is the runner of scenario.TerminateSessions.
type terminateSessions struct{ tenant int }

var _ ActionRunner = terminateSessions{}

func init() {
	RegisterActionRunner(scenario.ActionTerminateSessions, func(c scenario.ActionConfig) ActionRunner {
		return terminateSessions{tenant: c.(*scenario.TerminateSessions).Tenant}
	})
}

// tenantSessions matches the sessions of noisysim's roles tagged for a
// tenant ($1 is the tag).
const tenantSessions = `FROM pg_stat_activity WHERE application_name = $1 AND usename LIKE 'noisysim\_%' AND pid <> pg_backend_pid()`

// Run terminates the tenant's sessions on every node and counts them
// before and after.
func (t terminateSessions) Run(ctx context.Context, env ActionEnv) (ActionOutcome, error) {
	tag := pools.TagPrefix + env.key(t.tenant)
	var before, ended, after int64
	for _, n := range env.Cluster.Nodes() {
		conn, err := pgx.Connect(ctx, n.DSN())
		if err != nil {
			return ActionOutcome{}, fmt.Errorf("terminate sessions: connect to %s: %w", n.Name, err)
		}
		var b, e, a int64
		err = conn.QueryRow(ctx, `SELECT count(*) `+tenantSessions, tag).Scan(&b)
		if err == nil {
			err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) `+tenantSessions, tag).Scan(&e)
		}
		if err == nil {
			err = conn.QueryRow(ctx, `SELECT count(*) `+tenantSessions, tag).Scan(&a)
		}
		conn.Close(context.Background())
		if err != nil {
			return ActionOutcome{}, fmt.Errorf("terminate sessions on %s: %w", n.Name, err)
		}
		before, ended, after = before+b, ended+e, after+a
	}
	return ActionOutcome{
		Detail: fmt.Sprintf("terminated %d sessions of tenant %s", ended, env.key(t.tenant)),
		Before: map[string]float64{"sessions": float64(before)},
		After:  map[string]float64{"sessions": float64(after)},
	}, nil
}
