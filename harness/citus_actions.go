package harness

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// Figures of the Citus actions.
const (
	// citusDecideOver is the span of ledger DB time the Citus actions
	// and the ladder policy decide on (tenant shares, shard loads) and
	// the actions report as "before": as long as hot-shard.yaml's before
	// window, so that at the ladder's start it does not reach back into
	// solo, where tenant 1 sends nothing and the quiet tenants' shares
	// are larger.
	citusDecideOver = 5 * time.Second
	// citusAfterSample is how long the Citus actions measure the load
	// after their steps, for their "after" figures.
	citusAfterSample = time.Second
	// citusStepLimit bounds one step (an isolation, a move): a step
	// still running then is cancelled and the action fails, rather than
	// hold the run (Citus cleans up what a cancelled step left, see
	// citus_cleanup_orphaned_resources).
	citusStepLimit = 5 * time.Minute
)

// citusAction is the runner of the Citus actions (scenario.IsolateTenant,
// DedicateWorker, Balance): the ladder's steps of one kind (citus.Decide
// on the current placements and the ledger's tenant shares), run one at a
// time until none is left, each logged; before and after, the per-worker
// load attributed through the placements.
type citusAction struct {
	kind   string
	tenant string // "" for balance
	mode   citus.TransferMode
	skew   float64
	// cfg is the action's config: a policy that fired it waits for its
	// end in citusFired.
	cfg scenario.ActionConfig
}

// citusFired holds, by the config (its pointer) of each Citus action a
// policy fired, citusPending until the action ends, then its error (nil
// when it succeeded).
var citusFired sync.Map

type pendingMark struct{}

var citusPending = pendingMark{}

var _ ActionRunner = citusAction{}

func init() {
	mode := func(m string) citus.TransferMode { return citus.TransferMode(cmpOr(m, scenario.DefaultTransferMode)) }
	RegisterActionRunner(scenario.ActionIsolateTenant, func(c scenario.ActionConfig) ActionRunner {
		a := c.(*scenario.IsolateTenant)
		split := citus.TransferMode(cmpOr(a.Mode, scenario.DefaultSplitMode))
		return citusAction{kind: scenario.ActionIsolateTenant, tenant: fmt.Sprint(a.Tenant), mode: split, cfg: c}
	})
	RegisterActionRunner(scenario.ActionDedicateWorker, func(c scenario.ActionConfig) ActionRunner {
		a := c.(*scenario.DedicateWorker)
		return citusAction{kind: scenario.ActionDedicateWorker, tenant: fmt.Sprint(a.Tenant), mode: mode(a.Mode), cfg: c}
	})
	RegisterActionRunner(scenario.ActionBalance, func(c scenario.ActionConfig) ActionRunner {
		a := c.(*scenario.Balance)
		skew := a.MaxSkew
		if skew == 0 {
			skew = scenario.DefaultMaxSkew
		}
		return citusAction{kind: scenario.ActionBalance, mode: mode(a.Mode), skew: skew, cfg: c}
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// thresholds returns Decide's thresholds for the action: for a tenant's
// action the tenant's share is taken as 1 (the action names it, whatever
// its share), the other tenants' steps are not run; balance plans no
// tenant step at all.
func (a citusAction) thresholds() citus.Thresholds {
	if a.kind == scenario.ActionBalance {
		return citus.Thresholds{Skew: a.skew, Isolate: 2, Dedicate: 2, Cluster: 2}
	}
	return citus.Thresholds{Isolate: citus.DefaultIsolate, Dedicate: citus.DefaultDedicate, Cluster: 2}
}

// wants reports whether step s is one of the action's.
func (a citusAction) wants(s citus.Step) bool {
	switch a.kind {
	case scenario.ActionIsolateTenant:
		return s.Action == citus.ActionIsolate && s.Tenant == a.tenant
	case scenario.ActionDedicateWorker:
		return (s.Action == citus.ActionDedicate || s.Action == citus.ActionMove) && s.Tenant == a.tenant
	}
	return s.Action == citus.ActionMove && s.Tenant == ""
}

// Run runs the action's steps on the coordinator.
func (a citusAction) Run(ctx context.Context, env ActionEnv) (o ActionOutcome, err error) {
	defer func() {
		if _, fired := citusFired.Load(a.cfg); fired {
			citusFired.Store(a.cfg, err)
		}
	}()
	coord, ok := coordinator(env.Cluster, env.Schema)
	if !ok {
		return ActionOutcome{}, fmt.Errorf("%s: the cluster has no Citus coordinator", a.kind)
	}
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		return ActionOutcome{}, fmt.Errorf("%s: connect to coordinator: %w", a.kind, err)
	}
	defer conn.Close(context.Background())

	var dbT map[string]time.Duration
	span := time.Duration(0)
	if env.DBTime != nil {
		dbT, span = env.DBTime(citusDecideOver)
	}
	// The ledger, the layout and the steps name tenants by their keys.
	key := func(n string) string {
		if id, err := strconv.Atoi(n); err == nil && env.TenantKey != nil {
			return env.TenantKey(id)
		}
		return n
	}
	tenant := ""
	if a.tenant != "" {
		tenant = key(a.tenant)
		a.tenant = tenant // as the plan's steps name it (wants)
	}
	anchor := cmpOr(env.CitusTable, scenario.CitusData{}.Anchor())
	tenants := slices.Sorted(maps.Keys(dbT))
	if tenant != "" && !slices.Contains(tenants, tenant) {
		tenants = append(tenants, tenant)
	}
	hot := cmpOr(tenant, key(fmt.Sprint(scenario.DominantTenant)))
	before, err := readLayout(ctx, conn, anchor, tenants)
	if err != nil {
		return ActionOutcome{}, fmt.Errorf("%s: %w", a.kind, err)
	}
	names := reports.NewWorkerNames(workerAddrs(before))
	beforeLoad := before.load(dbT, span, hot)

	shares := sharesOf(dbT)
	if tenant != "" {
		// The action names its tenant whatever its share: above the
		// rungs it runs (isolate, dedicate), below a cluster of its own.
		shares[tenant] = max(shares[tenant], citus.DefaultDedicate+0.01)
	}
	th := a.thresholds()
	// Only isolate_tenant splits: its mode is the split's.
	ladder := citus.Ladder{DB: conn, Table: anchor, Mode: a.mode, SplitMode: a.mode, Thresholds: th}
	var recs []citus.Record
	var advice []string
	maxSteps := 100 + 2*len(before.Placements)
	for range maxSteps {
		layout, err := citus.Inspect(ctx, conn, anchor)
		if err != nil {
			return a.outcome(names, beforeLoad, nil, recs, advice), fmt.Errorf("%s: %w", a.kind, err)
		}
		state, err := layout.State(ctx, conn, citus.Load{Tenants: shares})
		if err != nil {
			return a.outcome(names, beforeLoad, nil, recs, advice), fmt.Errorf("%s: %w", a.kind, err)
		}
		var next *citus.Step
		advice = advice[:0]
		plan := citus.Decide(state, th)
		for i, s := range plan.Steps {
			if s.Action == citus.ActionRecommend && s.Tenant == a.tenant && a.kind == scenario.ActionDedicateWorker {
				advice = append(advice, names.Rename(s.String()))
			}
			if next == nil && a.wants(s) {
				next = &plan.Steps[i]
			}
		}
		if next == nil {
			break
		}
		stepCtx, cancel := context.WithTimeout(ctx, citusStepLimit)
		rec, err := ladder.Execute(stepCtx, layout, *next)
		cancel()
		if err != nil {
			return a.outcome(names, beforeLoad, nil, recs, advice), fmt.Errorf("%s: %s: %w", a.kind, names.Rename(next.String()), err)
		}
		env.Logger.Info("citus step", "action", a.kind, "step", names.Rename(rec.Step.String()), "skipped", rec.Skipped,
			"took", rec.Took.Round(time.Millisecond), "shards_before", rec.Before.Shards, "shards_after", rec.After.Shards)
		recs = append(recs, rec)
	}
	if len(recs) == maxSteps {
		return a.outcome(names, beforeLoad, nil, recs, advice), fmt.Errorf("%s: still steps left after %d", a.kind, maxSteps)
	}

	// The moves and splits leave their old placements for Citus's
	// deferred cleanup (every citus.defer_shard_delete_interval, 15 s):
	// dropped now, as part of the action, they do not stall the queries
	// of a later window.
	if len(recs) > 0 {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, "CALL citus_cleanup_orphaned_resources()"); err != nil {
			return a.outcome(names, beforeLoad, nil, recs, advice), fmt.Errorf("%s: cleaning up the old placements: %w", a.kind, err)
		}
		env.Logger.Info("citus cleanup", "action", a.kind, "took", time.Since(t0).Round(time.Millisecond))
	}

	// After: the load over citusAfterSample through the new placements.
	var afterLoad *workerLoad
	if env.Ledger != nil && len(recs) > 0 {
		u0, t0 := env.Ledger.Usage(), time.Now()
		if !sleepUntil(ctx, t0.Add(citusAfterSample)) {
			return a.outcome(names, beforeLoad, nil, recs, advice), ctx.Err()
		}
		after, err := readLayout(ctx, conn, anchor, tenants)
		if err != nil {
			return a.outcome(names, beforeLoad, nil, recs, advice), fmt.Errorf("%s: %w", a.kind, err)
		}
		l := after.load(dbTimes(pools.UsageWindow(u0, env.Ledger.Usage())), time.Since(t0), hot)
		afterLoad = &l
	}
	return a.outcome(names, beforeLoad, afterLoad, recs, advice), nil
}

// outcome is the action's report: the steps in one line, per-worker load,
// skew and the hot worker's share before and after (nil: not measured).
func (a citusAction) outcome(names reports.WorkerNames, before workerLoad, after *workerLoad, recs []citus.Record, advice []string) ActionOutcome {
	figures := func(l workerLoad) map[string]float64 {
		m := map[string]float64{"skew": l.Skew, "hot_worker_share": l.HotShare}
		for w, v := range l.Workers {
			m["load "+names.Name(w)] = v
		}
		return m
	}
	var steps []string
	var took time.Duration
	for _, r := range recs {
		s := names.Rename(r.Step.String())
		if r.Skipped {
			s += " (already done)"
		}
		steps = append(steps, s)
		took += r.Took
	}
	o := ActionOutcome{Before: figures(before)}
	if len(steps) == 0 {
		o.Detail = "nothing to do"
	} else {
		o.Detail = fmt.Sprintf("%d steps in %.2f s: %s", len(steps), took.Seconds(), strings.Join(steps, "; "))
	}
	if len(advice) > 0 {
		o.Detail += "; advice: " + strings.Join(advice, "; ")
	}
	if after != nil {
		o.After = figures(*after)
		o.Detail += fmt.Sprintf("; skew %s → %s, hot worker %.0f%% → %.0f%% of worker load", fmtSkew(before.Skew), fmtSkew(after.Skew), before.HotShare*100, after.HotShare*100)
	}
	return o
}

func workerAddrs(l *citusLayout) []string {
	out := make([]string, len(l.Workers))
	for i, w := range l.Workers {
		out[i] = w.Name
	}
	return out
}

// sharesOf returns each tenant's share of the DB time in d.
func sharesOf(d map[string]time.Duration) map[string]float64 {
	var total time.Duration
	for _, v := range d {
		total += v
	}
	out := make(map[string]float64, len(d))
	for t, v := range d {
		out[t] = float64(v) / float64(max(total, 1))
	}
	return out
}

// fmtSkew formats a skew as "1.28x", one over idle workers (the largest
// float64) as "inf".
func fmtSkew(v float64) string {
	if v == math.MaxFloat64 {
		return "inf"
	}
	return fmt.Sprintf("%.2fx", v)
}
