package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// Results a hot_shard_ladder watch records beside the actions it fires.
const (
	// ResultDetect is its first alert: Before holds the figures then and
	// "phase_elapsed_s", the time from the phase's start.
	ResultDetect = "detect"
	// ResultPlan is the ladder it would run (plan only).
	ResultPlan = "plan"
)

// ladderPolicy is the runner of scenario.HotShardLadder.
type ladderPolicy struct {
	cfg      *scenario.HotShardLadder
	th       citus.Thresholds
	detected bool
	planned  bool
	pending  scenario.ActionConfig
	fired    map[string]bool // kind + tenant, each fired once
}

var _ Policy = (*ladderPolicy)(nil)

func init() {
	RegisterPolicyRunner(scenario.PolicyHotShardLadder, func(c scenario.PolicyConfig) Policy {
		h := c.(*scenario.HotShardLadder)
		return &ladderPolicy{cfg: h, fired: map[string]bool{},
			th: citus.Thresholds{Skew: h.Skew, Isolate: h.Isolate, Dedicate: h.Dedicate, Cluster: h.Cluster}}
	})
}

// Check detects on the last interval's load and, with Apply, fires the
// ladder's next step once the previous one has ended.
func (p *ladderPolicy) Check(ctx context.Context, env ActionEnv, s Sample) ([]scenario.Action, bool, error) {
	if p.pending != nil {
		v, _ := citusFired.Load(p.pending)
		if v == citusPending {
			return nil, false, nil
		}
		citusFired.Delete(p.pending)
		p.pending = nil
		if err, _ := v.(error); err != nil {
			return nil, true, fmt.Errorf("%s: the ladder stopped: %w", scenario.PolicyHotShardLadder, err)
		}
	}
	coord, ok := coordinator(env.Cluster, env.Schema)
	if !ok {
		return nil, true, fmt.Errorf("%s: the cluster has no Citus coordinator", scenario.PolicyHotShardLadder)
	}
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		return nil, false, fmt.Errorf("%s: connect to coordinator: %w", scenario.PolicyHotShardLadder, err)
	}
	defer conn.Close(context.Background())

	last := dbTimes(s.Last)
	tenants := slices.Sorted(maps.Keys(last))
	layout, err := readLayout(ctx, conn, cmpOr(env.CitusTable, scenario.CitusData{}.Anchor()), tenants)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", scenario.PolicyHotShardLadder, err)
	}
	names := reports.NewWorkerNames(workerAddrs(layout))
	// Detection: the last interval's per-worker load and tenant shares.
	dom := fmt.Sprint(scenario.DominantTenant)
	if env.TenantKey != nil {
		dom = env.TenantKey(scenario.DominantTenant)
	}
	wl := layout.load(last, s.Interval, dom)
	state, err := layout.State(ctx, conn, citus.Load{Workers: wl.Workers, Tenants: shareOf(s.Last)})
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", scenario.PolicyHotShardLadder, err)
	}
	plan := citus.Decide(state, p.th)
	if !p.detected && len(plan.Alerts) > 0 {
		p.detected = true
		var alerts []string
		for _, a := range plan.Alerts {
			alerts = append(alerts, names.Rename(a.String()))
		}
		env.Record(reports.ActionResult{Phase: s.Phase, Type: ResultDetect, FiredBy: scenario.PolicyHotShardLadder,
			Detail: fmt.Sprintf("first alert %.2f s into %s: %s", s.Elapsed.Seconds(), s.Phase, strings.Join(alerts, "; ")),
			Before: map[string]float64{"phase_elapsed_s": s.Elapsed.Seconds(), "worker_skew": finiteSkew(plan.WorkerSkew),
				"shard_skew": finiteSkew(plan.ShardSkew), "hot_worker_share": wl.HotShare}})
	}
	if p.cfg.DetectOnly {
		return nil, false, nil
	}
	// The ladder decides on the tenants' shares over the last seconds,
	// steadier than one interval's.
	if env.DBTime != nil {
		recent, _ := env.DBTime(citusDecideOver)
		if state, err = layout.State(ctx, conn, citus.Load{Workers: wl.Workers, Tenants: sharesOf(recent)}); err != nil {
			return nil, false, fmt.Errorf("%s: %w", scenario.PolicyHotShardLadder, err)
		}
		plan = citus.Decide(state, p.th)
	}
	if !p.cfg.Apply {
		var steps []string
		for i, st := range plan.Steps {
			steps = append(steps, fmt.Sprintf("%d. %s", i+1, names.Rename(st.String())))
		}
		if len(steps) == 0 {
			steps = []string{"nothing to do"}
		}
		env.Record(reports.ActionResult{Phase: s.Phase, Type: ResultPlan, FiredBy: scenario.PolicyHotShardLadder,
			Detail: "plan only (noisysim run --apply acts): " + strings.Join(steps, "; ")})
		return nil, true, nil
	}
	for _, st := range plan.Steps {
		a, key, ok := p.action(st, env.Keys)
		if !ok || p.fired[key] {
			continue
		}
		p.fired[key] = true
		p.pending = a.Config
		citusFired.Store(a.Config, citusPending)
		return []scenario.Action{a}, false, nil
	}
	return nil, true, nil
}

// action returns the action that carries out step s, and its key; keys
// are the tenants' keys (tenant n's at n-1), nil when a tenant's key is
// its number.
func (p *ladderPolicy) action(s citus.Step, keys []string) (scenario.Action, string, bool) {
	var id int
	if i := slices.Index(keys, s.Tenant); i >= 0 {
		id = i + 1
	} else {
		fmt.Sscan(s.Tenant, &id)
	}
	switch {
	case s.Action == citus.ActionIsolate:
		return scenario.Action{Type: scenario.ActionIsolateTenant, Config: &scenario.IsolateTenant{Tenant: id, Mode: p.cfg.SplitMode}},
			scenario.ActionIsolateTenant + s.Tenant, true
	case (s.Action == citus.ActionDedicate || s.Action == citus.ActionMove) && s.Tenant != "":
		return scenario.Action{Type: scenario.ActionDedicateWorker, Config: &scenario.DedicateWorker{Tenant: id, Mode: p.cfg.Mode}},
			scenario.ActionDedicateWorker + s.Tenant, true
	case s.Action == citus.ActionMove:
		return scenario.Action{Type: scenario.ActionBalance, Config: &scenario.Balance{MaxSkew: p.cfg.Skew, Mode: p.cfg.Mode}},
			scenario.ActionBalance, true
	}
	return scenario.Action{}, "", false
}

// shareOf returns each tenant's share of a ledger window.
func shareOf(w map[string]*pools.Window) map[string]float64 {
	out := make(map[string]float64, len(w))
	for t, x := range w {
		out[t] = x.Share
	}
	return out
}
