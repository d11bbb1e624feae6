package scenario

import (
	"fmt"
	"time"
)

// ActionMoveTenant is the type of MoveTenant; PolicyPromote the name of
// Promote.
const (
	ActionMoveTenant = "move_tenant"
	PolicyPromote    = "promote"
)

// Defaults of move_tenant and promote.
const (
	DefaultMoveBatchRows          = 1000
	DefaultMoveMaxPause  Duration = Duration(time.Second)
	DefaultMoveGrace     Duration = Duration(time.Second)
	DefaultPromoteShare           = 0.25
	DefaultPromoteWindow Duration = Duration(2 * time.Second)
)

// MoveTenant moves a tenant of topology shards to another node under load
// (isolation/directory Move): copy, catch-up of the writes captured
// meanwhile, a fenced write pause bounded by MaxPause, validation, the
// switch in the catalog, and the delete at the source after Grace.
type MoveTenant struct {
	// Tenant is the tenant to move, 1..tenants.count. Required.
	Tenant int `yaml:"tenant"`
	// Target is the node it moves to, e.g. primary4. Required.
	Target string `yaml:"target"`
	// BatchRows is the rows per copy batch, >= 1. Default 1000.
	BatchRows int `yaml:"batch_rows"`
	// MaxPause bounds the write pause, > 0: a longer one is undone and
	// tried again (at most 3 times, then the move fails). Default 1s.
	MaxPause Duration `yaml:"max_pause"`
	// Grace is the wait between the switch and the delete at the source,
	// >= 0. Default 1s.
	Grace Duration `yaml:"grace"`
}

// Validate checks the tenant, the target and the move's settings.
func (m *MoveTenant) Validate(s *Scenario) []ActionProblem {
	ps := shardNode(s, "target", m.Target)
	ps = append(ps, tenantProblems(s, "tenant", m.Tenant)...)
	if m.BatchRows < 1 {
		ps = append(ps, ActionProblem{Key: "batch_rows", Msg: fmt.Sprintf("must be >= 1, got %d", m.BatchRows)})
	}
	if m.MaxPause <= 0 {
		ps = append(ps, ActionProblem{Key: "max_pause", Msg: fmt.Sprintf("must be a duration > 0, got %s", m.MaxPause)})
	}
	if m.Grace < 0 {
		ps = append(ps, ActionProblem{Key: "grace", Msg: fmt.Sprintf("must be a duration >= 0, got %s", m.Grace)})
	}
	return ps
}

func tenantProblems(s *Scenario, key string, id int) []ActionProblem {
	switch {
	case id == 0:
		return []ActionProblem{{Key: key, Msg: "required: a tenant id, 1.." + fmt.Sprint(s.Tenants.Count)}}
	case id < 1 || (s.Tenants.Count >= 2 && id > s.Tenants.Count):
		return []ActionProblem{{Key: key, Msg: fmt.Sprintf("no such tenant %d: ids run from 1 to tenants.count (%d)", id, s.Tenants.Count)}}
	}
	return nil
}

// Promote is the promotion policy: once Tenant's share of the ledger's
// DB time stays above Threshold over Window (every check's interval
// within the last Window), it fires move_tenant of the tenant to Target
// (with BatchRows, MaxPause and Grace) and is done.
type Promote struct {
	// Tenant is the tenant watched, 1..tenants.count. Default 1.
	Tenant int `yaml:"tenant"`
	// Target is the node it moves to. Required.
	Target string `yaml:"target"`
	// Threshold is the share of all tenants' DB time above which the
	// tenant is promoted, in (0, 1]. Default 0.25.
	Threshold float64 `yaml:"threshold"`
	// Window is how long the share must stay above Threshold, > 0 and at
	// least watch.every. Default 2s.
	Window Duration `yaml:"window"`
	// DetectWithin, when > 0, bounds the detection: a policy that has not
	// fired DetectWithin after its phase started fails (actions_ok).
	// Default 0: no bound but the phase's.
	DetectWithin Duration `yaml:"detect_within"`
	// BatchRows, MaxPause and Grace are move_tenant's.
	BatchRows int      `yaml:"batch_rows"`
	MaxPause  Duration `yaml:"max_pause"`
	Grace     Duration `yaml:"grace"`
}

// ShareThreshold returns the tenant watched and Threshold (ShareWatcher).
func (p *Promote) ShareThreshold() (tenant int, threshold float64) { return p.Tenant, p.Threshold }

// Move returns the move_tenant action the policy fires.
func (p *Promote) Move() *MoveTenant {
	return &MoveTenant{Tenant: p.Tenant, Target: p.Target, BatchRows: p.BatchRows, MaxPause: p.MaxPause, Grace: p.Grace}
}

// Validate checks the trigger and the move it fires.
func (p *Promote) Validate(s *Scenario) []ActionProblem {
	ps := p.Move().Validate(s)
	// The policy fires when the share is above the threshold: a share is
	// at most 1, so a threshold of 1 would never fire.
	if !(p.Threshold > 0 && p.Threshold < 1) {
		ps = append(ps, ActionProblem{Key: "threshold", Msg: "must be in (0, 1): the policy fires when the tenant's share of DB time is above it, got " + fmtFloat(p.Threshold)})
	}
	if p.Window <= 0 {
		ps = append(ps, ActionProblem{Key: "window", Msg: fmt.Sprintf("must be a duration > 0, got %s", p.Window)})
	}
	switch {
	case p.DetectWithin < 0:
		ps = append(ps, ActionProblem{Key: "detect_within", Msg: fmt.Sprintf("must be a duration >= 0, got %s", p.DetectWithin)})
	case p.DetectWithin > 0 && p.DetectWithin < p.Window:
		ps = append(ps, ActionProblem{Key: "detect_within", Msg: fmt.Sprintf("must be at least window (%s): the share must stay above the threshold that long, got %s", p.Window, p.DetectWithin)})
	}
	return ps
}

func init() {
	RegisterAction(ActionMoveTenant, func() ActionConfig {
		return &MoveTenant{BatchRows: DefaultMoveBatchRows, MaxPause: DefaultMoveMaxPause, Grace: DefaultMoveGrace}
	})
	RegisterPolicy(PolicyPromote, func() PolicyConfig {
		return &Promote{Tenant: DominantTenant, Threshold: DefaultPromoteShare, Window: DefaultPromoteWindow,
			BatchRows: DefaultMoveBatchRows, MaxPause: DefaultMoveMaxPause, Grace: DefaultMoveGrace}
	})
}
