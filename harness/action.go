package harness

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// ActionEnv is what an action (and a watcher's policy) may act on and
// read.
type ActionEnv struct {
	// Cluster is the run's cluster.
	Cluster backend.Cluster
	// Logger receives the action's notes; never nil.
	Logger *slog.Logger
	// Schema is the schema of the run's data set (data.schema): a session
	// opened on a node's DSN finds the tables there.
	Schema string
	// Ledger is the configuration's ledger of DB time per tenant; nil
	// before a configuration runs.
	Ledger *pools.Ledger
	// DBTime returns each tenant's DB time in the configuration's ledger
	// over about the last over (from the newest reading at least over
	// old, read every second, or the oldest one), and the span it covers;
	// nil outside a configuration's timeline.
	DBTime func(over time.Duration) (map[string]time.Duration, time.Duration)
	// Routing is the routing of tenants to nodes of topology shards; nil
	// for the other topologies, where every tenant is on every node.
	Routing *Routing
	// Record keeps what a policy saw beside the actions it fires (a
	// detection, a plan) among the phase's action results, its At set to
	// now when 0; nil outside a configuration's timeline.
	Record func(reports.ActionResult)
	// TenantKey returns tenant n's key (tenants.keys), as its sessions
	// are tagged; nil means n itself.
	TenantKey func(n int) string
	// Keys are the tenants' keys, tenant 1's first (n's at n-1); nil
	// means the numbers themselves.
	Keys []string
	// CitusTable is the distributed table whose shards the Citus actions
	// move (data.citus's anchor: orders, or data.citus.tables[0]); ""
	// means orders.
	CitusTable string
	// ops watches the timeline's ops for the fault actions; nil when the
	// timeline has none.
	ops *opTap
}

// ledgerRing keeps the ledger's readings of the last minute, one a
// second, for ActionEnv.DBTime.
type ledgerRing struct {
	mu   sync.Mutex
	read func() []pools.Usage
	at   []time.Time
	u    [][]pools.Usage
}

// ledgerKeep is how many readings a ledgerRing keeps.
const ledgerKeep = 64

func newLedgerRing(read func() []pools.Usage) *ledgerRing {
	l := &ledgerRing{read: read}
	l.add(time.Now(), read())
	return l
}

func (l *ledgerRing) add(t time.Time, u []pools.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at, l.u = append(l.at, t), append(l.u, u)
	if n := len(l.at); n > ledgerKeep {
		l.at, l.u = slices.Clone(l.at[n-ledgerKeep:]), slices.Clone(l.u[n-ledgerKeep:])
	}
}

// dbTime is ActionEnv.DBTime.
func (l *ledgerRing) dbTime(over time.Duration) (map[string]time.Duration, time.Duration) {
	now, cur := time.Now(), l.read()
	l.mu.Lock()
	i := len(l.at) - 1
	for i > 0 && now.Sub(l.at[i]) < over {
		i--
	}
	from, at := l.u[i], l.at[i]
	l.mu.Unlock()
	return dbTimes(pools.UsageWindow(from, cur)), now.Sub(at)
}

// key returns tenant n's key.
func (env ActionEnv) key(n int) string {
	if env.TenantKey == nil {
		return fmt.Sprint(n)
	}
	return env.TenantKey(n)
}

// actionEnv is the ActionEnv of a configuration running on stack st.
func (r *runner) actionEnv(st *stack) ActionEnv {
	return ActionEnv{Cluster: r.cluster, Logger: r.log, Schema: r.sc.Data.SchemaName(), Ledger: st.Ledger(), Routing: r.routing, TenantKey: r.key,
		Keys: r.keys, CitusTable: r.sc.Data.Citus.Anchor()}
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
	// byPhase counts, per phase, its actions and its watcher still
	// running.
	byPhase map[string]*sync.WaitGroup
}

// start runs phase s's actions, each At after now, in the background.
func (ar *actionRun) start(ctx context.Context, s *step) {
	begun := time.Now()
	for _, a := range s.Actions {
		ar.run(ctx, s, a, begun.Add(a.At.Duration()), "")
	}
}

// run runs action a of phase s at at in the background and keeps its
// result; firedBy names the policy that fired it ("" for the timeline's).
func (ar *actionRun) run(ctx context.Context, s *step, a scenario.Action, at time.Time, firedBy string) {
	run, err := runnerFor(a)
	wg := ar.phase(s.Name)
	wg.Add(1)
	ar.wg.Go(func() {
		defer wg.Done()
		res := reports.ActionResult{Phase: s.Name, Type: a.Type, FiredBy: firedBy}
		if err == nil && !sleepUntil(ctx, at) {
			// Never started: said so, at the time it was due.
			res.At, res.NotStarted = at.Sub(ar.t0).Seconds(), true
			res.Detail = fmt.Sprintf("not started: the run stopped before its time (%v)", context.Cause(ctx))
			ar.env.Logger.Info("action", "phase", s.Name, "type", a.Type, "fired_by", firedBy, "detail", res.Detail)
			ar.keep(res)
			return
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
		ar.env.Logger.Info("action", "phase", s.Name, "type", a.Type, "fired_by", firedBy, "took", time.Since(start).Round(time.Millisecond), "detail", res.Detail, "error", res.Error)
		ar.keep(res)
	})
}

// keep adds one result.
func (ar *actionRun) keep(res reports.ActionResult) {
	ar.mu.Lock()
	ar.out = append(ar.out, res)
	ar.mu.Unlock()
}

// phase returns the wait group of the actions (and watcher) of the phase
// named name.
func (ar *actionRun) phase(name string) *sync.WaitGroup {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.byPhase == nil {
		ar.byPhase = map[string]*sync.WaitGroup{}
	}
	wg := ar.byPhase[name]
	if wg == nil {
		wg = &sync.WaitGroup{}
		ar.byPhase[name] = wg
	}
	return wg
}

// done returns a channel closed once every action and the watcher of the
// phase named name have ended. Call it after the phase's start.
func (ar *actionRun) done(name string) <-chan struct{} {
	wg := ar.phase(name)
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
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
