package scenario

import "math"

// PolicyHotShardLadder is the name of HotShardLadder.
const PolicyHotShardLadder = "hot_shard_ladder"

// HotShardLadder is the policy ladder of a hot shard on topology citus, as
// a watcher's policy: at each check each tenant's DB time from the ledger
// over the last interval is counted on the worker holding its shard
// (per-worker load) and citus.Decide looks at it: a worker or shard skew
// (max / median) above Skew, or a tenant above Isolate of cluster DB time,
// is an alert (the first is reported as the detection, timed from the
// phase's start). With Apply the ladder's next step is fired as an action,
// one at a time: isolate_tenant above Isolate, dedicate_worker above
// Dedicate, then balance while the shared workers' skew is above Skew;
// above Cluster a cluster of its own is recommended (never applied). The
// policy is done when no step is left. Without Apply it reports the plan
// and is done; with DetectOnly it only detects, for the phase's length.
type HotShardLadder struct {
	// Skew is the skew alert threshold and balance's bound, > 1. Default
	// 1.5.
	Skew float64 `yaml:"skew"`
	// Isolate, Dedicate and Cluster are the ladder's tenant shares of
	// cluster DB time, in (0, 1), isolate <= dedicate <= cluster: own
	// shard, own worker, own cluster (recommended only). Defaults 0.05,
	// 0.20, 0.50.
	Isolate  float64 `yaml:"isolate"`
	Dedicate float64 `yaml:"dedicate"`
	Cluster  float64 `yaml:"cluster"`
	// Mode is the shard transfer mode of the fired actions' moves:
	// force_logical (default) or block_writes.
	Mode string `yaml:"mode"`
	// SplitMode is the shard transfer mode of isolate_tenant's split:
	// block_writes (default, DefaultSplitMode: same worker, writes paused
	// for the copy) or force_logical (onto another worker, writes go on).
	SplitMode string `yaml:"split_mode"`
	// Apply fires the ladder's actions; false (the default) reports the
	// plan only. noisysim run --apply sets it on every hot_shard_ladder
	// watch without detect_only.
	Apply bool `yaml:"apply"`
	// DetectOnly detects and fires nothing for the whole phase (the
	// window before the remedy). Default false.
	DetectOnly bool `yaml:"detect_only"`
}

// Validate checks the topology, the thresholds and the mode.
func (h *HotShardLadder) Validate(s *Scenario) []ActionProblem {
	ps := needCitus(s, "policy", PolicyHotShardLadder)
	if !(h.Skew > 1) || math.IsInf(h.Skew, 1) {
		ps = append(ps, ActionProblem{Key: "skew", Msg: "must be > 1 and finite, got " + fmtFloat(h.Skew)})
	}
	ok := true
	for _, f := range []struct {
		key string
		v   float64
	}{{"isolate", h.Isolate}, {"dedicate", h.Dedicate}, {"cluster", h.Cluster}} {
		if !(f.v > 0 && f.v < 1) {
			ps = append(ps, ActionProblem{Key: f.key, Msg: "must be a share in (0, 1), got " + fmtFloat(f.v)})
			ok = false
		}
	}
	if ok && (h.Isolate > h.Dedicate || h.Dedicate > h.Cluster) {
		ps = append(ps, ActionProblem{Key: "dedicate", Msg: "the ladder needs isolate <= dedicate <= cluster, got " +
			fmtFloat(h.Isolate) + ", " + fmtFloat(h.Dedicate) + ", " + fmtFloat(h.Cluster)})
	}
	if h.Apply && h.DetectOnly {
		ps = append(ps, ActionProblem{Key: "apply", Msg: "not with detect_only: true (a detecting watch fires nothing)"})
	}
	ps = append(ps, transferMode("mode", h.Mode)...)
	return append(ps, transferMode("split_mode", h.SplitMode)...)
}

// PlanOnly reports whether the policy plans without acting: the windows
// after its phase see no remedy.
func (h *HotShardLadder) PlanOnly() bool { return !h.Apply && !h.DetectOnly }

// SetApply makes every hot_shard_ladder watch without detect_only apply
// its ladder (noisysim run --apply); false when the scenario has none.
func (s *Scenario) SetApply() bool {
	found := false
	for i := range s.Timeline {
		if w := s.Timeline[i].Watch; w != nil {
			if h, ok := w.Config.(*HotShardLadder); ok && !h.DetectOnly {
				h.Apply, found = true, true
			}
		}
	}
	return found
}

func init() {
	RegisterPolicy(PolicyHotShardLadder, func() PolicyConfig {
		return &HotShardLadder{Skew: DefaultMaxSkew, Isolate: 0.05, Dedicate: 0.20, Cluster: 0.50, Mode: DefaultTransferMode, SplitMode: DefaultSplitMode}
	})
}
