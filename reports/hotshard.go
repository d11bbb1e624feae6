package reports

import (
	"bufio"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// HotShard is what a hot-shard run measured on a Citus cluster (a scenario
// with a hot_shard section): detection, the hot tenant's shard before and
// after the policy ladder, the load per worker in each window and over
// time, the ladder's steps and the checked writer's outcome.
//
// Worker load is in mean busy backends: Workers attributes each tenant's DB
// time from the isolation stack's ledger to the worker holding its shard
// (DB time / window length); Sampled is the mean count of active client
// backends in pg_stat_activity on each worker, a cross-check that also sees
// traffic outside the stack. Skews are max / median over the workers that
// take shards (a dedicated worker is left out); a skew over idle workers is
// the largest float64.
type HotShard struct {
	// HotTenant is the hot tenant's id; Query the query kind every tenant
	// ran (e.g. "page").
	HotTenant string `json:"hot_tenant"`
	Query     string `json:"query"`
	// DetectedAfter is the time from the hot tenant's start to the first
	// alert, in seconds; nil when no alert fired.
	DetectedAfter *float64 `json:"detected_after_s"`
	// Alerts are the first detection's alerts, one line each.
	Alerts []string `json:"alerts,omitempty"`
	// LedgerShare is the hot tenant's share of cluster DB time in the
	// before window, 0..1, from the ledger: what the ladder decides on.
	// SampledShare is its share of the tagged backends sampled on the
	// coordinator, StatTenantsShare its share of the queries
	// citus_stat_tenants counted in the same window (nil when Citus
	// counted nothing or could not be read): cross-checks.
	LedgerShare      float64  `json:"ledger_share"`
	SampledShare     float64  `json:"sampled_share"`
	StatTenantsShare *float64 `json:"stat_tenants_share"`
	// ShardBefore is the hot tenant's shard once distributed; ShardAfter
	// once the ladder ran (nil in plan-only runs).
	ShardBefore ShardPlacement  `json:"shard_before"`
	ShardAfter  *ShardPlacement `json:"shard_after,omitempty"`
	// Windows are "solo", "before" and, after the ladder, "after".
	Windows []LoadWindow `json:"windows"`
	// Timeline is the load per detection interval of the before and
	// after windows, in order.
	Timeline []LoadPoint `json:"timeline"`
	// Plan is the ladder decided from the before window, one line per
	// step (plan-only runs act on none of it).
	Plan []string `json:"plan,omitempty"`
	// Steps are the ladder's executed steps, Advice what it recommends
	// but never applies.
	Steps  []LadderStep `json:"steps,omitempty"`
	Advice []string     `json:"advice,omitempty"`
	// Ladder is the ladder's wall time, in seconds.
	Ladder float64 `json:"ladder_s,omitempty"`
	// Writes is the checked writer's outcome during the ladder.
	Writes *CheckedWrites `json:"writes,omitempty"`
}

// ShardPlacement is one shard as citus_shards shows it.
type ShardPlacement struct {
	ID     int64  `json:"shard_id"`
	Worker string `json:"worker"`
	// Bytes is the shard's size, bytes.
	Bytes int64 `json:"bytes"`
	// Isolated is true when the shard holds one tenant only.
	Isolated bool `json:"isolated"`
}

// LoadWindow is one measured window of a hot-shard run.
type LoadWindow struct {
	Name string `json:"name"`
	// Length is the window's wall time, in seconds.
	Length float64 `json:"length_s"`
	// Workers and Sampled are per-worker load (see HotShard), by worker
	// "host:port"; Samples is the number of pg_stat_activity samples.
	Workers map[string]float64 `json:"workers,omitempty"`
	Sampled map[string]float64 `json:"sampled,omitempty"`
	Samples int                `json:"samples,omitempty"`
	// Skew and SampledSkew are max / median over the workers that take
	// shards; HotWorkerShare and SampledHotWorkerShare the hot tenant's
	// worker's share of all workers' load, 0..1.
	Skew                  float64 `json:"skew"`
	SampledSkew           float64 `json:"sampled_skew"`
	HotWorkerShare        float64 `json:"hot_worker_share"`
	SampledHotWorkerShare float64 `json:"sampled_hot_worker_share"`
	// HotShare is the hot tenant's share of cluster DB time, 0..1.
	HotShare float64 `json:"hot_share"`
	// Quiet tenants' response times from the intended start (HdrHistogram),
	// and service time p99, in ms, over QuietCount queries.
	QuietP50        float64 `json:"quiet_p50_ms"`
	QuietP99        float64 `json:"quiet_p99_ms"`
	QuietMax        float64 `json:"quiet_max_ms"`
	QuietServiceP99 float64 `json:"quiet_service_p99_ms"`
	QuietCount      int64   `json:"quiet_count"`
	// Queries, Dropped and Errors count all tenants' queries.
	Queries int64 `json:"queries"`
	Dropped int64 `json:"dropped"`
	Errors  int64 `json:"errors"`
}

// LoadPoint is the load over one detection interval.
type LoadPoint struct {
	// Phase is "before" or "after"; At the interval's end, in seconds
	// from the phase's start.
	Phase string  `json:"phase"`
	At    float64 `json:"at_s"`
	// Workers and Sampled are per-worker load (see HotShard).
	Workers map[string]float64 `json:"workers"`
	Sampled map[string]float64 `json:"sampled"`
	// Shards is per-shard load (DB time attributed as for Workers) by
	// shard id, shards with load only; HotShard is the hot tenant's shard
	// id then.
	Shards   map[int64]float64 `json:"shards,omitempty"`
	HotShard int64             `json:"hot_shard_id,omitempty"`
	// WorkerSkew is over the workers that take shards, ShardSkew over
	// the shards with load.
	WorkerSkew float64 `json:"worker_skew"`
	ShardSkew  float64 `json:"shard_skew"`
	// HotShare is the hot tenant's share of cluster DB time, 0..1.
	HotShare float64 `json:"hot_share"`
}

// LadderStep is one executed step of the policy ladder.
type LadderStep struct {
	// Action is "isolate", "dedicate" or "move"; Step the step in one line.
	Action string `json:"action"`
	Step   string `json:"step"`
	// Shard, From and To name what moved, where they apply.
	Shard int64  `json:"shard_id,omitempty"`
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	// Skipped is true for a step found already done.
	Skipped bool `json:"skipped,omitempty"`
	// Took is the step's wall time, in seconds.
	Took float64 `json:"took_s"`
	// ShardsBefore and ShardsAfter count shards per worker; LoadBefore
	// and LoadAfter are per-worker load around the step.
	ShardsBefore map[string]int64   `json:"shards_before"`
	ShardsAfter  map[string]int64   `json:"shards_after"`
	LoadBefore   map[string]float64 `json:"load_before,omitempty"`
	LoadAfter    map[string]float64 `json:"load_after,omitempty"`
}

// CheckedWrites is a checked writer's outcome: every acknowledged insert
// looked up afterwards.
type CheckedWrites struct {
	Acked      int `json:"acked"`
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	// MaxPause is the longest gap between two acknowledgements, in ms,
	// ending PauseEnd seconds after the writer started.
	MaxPause float64 `json:"max_pause_ms"`
	PauseEnd float64 `json:"pause_end_s"`
	// Errors counts failed inserts by SQLSTATE ("other" without one).
	Errors map[string]int64 `json:"errors,omitempty"`
}

// mdHotShard writes the hot-shard section of a Markdown report.
func mdHotShard(w *bufio.Writer, h *HotShard) {
	if h == nil {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	// Workers are named worker1… (NewWorkerNames), with their addresses
	// once, as the CLI names them.
	workers := hotShardWorkers(h)
	names := NewWorkerNames(workers)
	p("\n## Hot shard\n\n")
	if len(names.Addrs) > 0 {
		p("Workers: %s.\n\n", md(names.List()))
	}
	if h.DetectedAfter != nil {
		p("Detected %s after tenant %s started", fmtSeconds(*h.DetectedAfter), md(h.HotTenant))
		if len(h.Alerts) > 0 {
			p(": %s", md(names.Rename(strings.Join(h.Alerts, "; "))))
		}
		p(".\n\n")
	} else {
		p("No alert fired.\n\n")
	}
	p("Tenant %s's share of cluster DB time: %s (ledger); cross-checks %s of the tagged backends sampled",
		md(h.HotTenant), fmtShare(h.LedgerShare), fmtShare(h.SampledShare))
	if h.StatTenantsShare != nil {
		p(", %s of the queries citus_stat_tenants counted", fmtShare(*h.StatTenantsShare))
	}
	p(".\n\n")
	p("| Shard | Id | Worker | Size | Isolated |\n|---|--:|---|--:|---|\n")
	p("| before | %d | %s | %s | %s |\n", h.ShardBefore.ID, md(names.Name(h.ShardBefore.Worker)), FormatBytes(h.ShardBefore.Bytes), yesNo(h.ShardBefore.Isolated))
	if s := h.ShardAfter; s != nil {
		p("| after | %d | %s | %s | %s |\n", s.ID, md(names.Name(s.Worker)), FormatBytes(s.Bytes), yesNo(s.Isolated))
	}

	p("\n### Load per worker\n\nMean busy backends: DB time from the ledger through the placements (sampled pg_stat_activity in brackets); the timeline adds the hot tenant's shard's load.\n\n")
	p("| Window | Length | %s | Skew | Hot worker share | Tenant %s share | Quiet p50 ms | Quiet p99 ms | Queries | Dropped | Errors |\n",
		strings.Join(mdAll(names, workers), " | "), md(h.HotTenant))
	p("|---|--:|%s--:|--:|--:|--:|--:|--:|--:|--:|\n", strings.Repeat("--:|", len(workers)))
	for _, win := range h.Windows {
		cells := make([]string, len(workers))
		for i, wk := range workers {
			cells[i] = loadCell(win.Workers, win.Sampled, wk)
		}
		skew, share := "-", "-"
		if len(win.Workers) > 0 || len(win.Sampled) > 0 {
			skew = fmtSkew(win.Skew) + " (" + fmtSkew(win.SampledSkew) + ")"
			share = fmtShare(win.HotWorkerShare) + " (" + fmtShare(win.SampledHotWorkerShare) + ")"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d |\n", md(win.Name), fmtSeconds(win.Length), strings.Join(cells, " | "),
			skew, share, fmtShare(win.HotShare), fmtMS(win.QuietP50), fmtMS(win.QuietP99), win.Queries, win.Dropped, win.Errors)
	}
	if len(h.Timeline) > 0 {
		p("\n### Timeline\n\n| Phase | At | %s | Tenant %s's shard | Worker skew | Shard skew | Tenant %s share |\n", strings.Join(mdAll(names, workers), " | "), md(h.HotTenant), md(h.HotTenant))
		p("|---|--:|%s--:|--:|--:|--:|\n", strings.Repeat("--:|", len(workers)))
		for _, pt := range h.Timeline {
			cells := make([]string, len(workers))
			for i, wk := range workers {
				cells[i] = loadCell(pt.Workers, pt.Sampled, wk)
			}
			hot := "-"
			if v, ok := pt.Shards[pt.HotShard]; ok {
				hot = fmt.Sprintf("%.3f", zero(v))
			}
			p("| %s | %s | %s | %s | %s | %s | %s |\n", md(pt.Phase), fmtSeconds(pt.At), strings.Join(cells, " | "), hot,
				fmtSkew(pt.WorkerSkew), fmtSkew(pt.ShardSkew), fmtShare(pt.HotShare))
		}
	}
	if len(h.Plan) > 0 && len(h.Steps) == 0 {
		p("\n### Plan (not applied)\n\n")
		for i, s := range h.Plan {
			p("%d. %s\n", i+1, md(names.Rename(s)))
		}
	}
	if len(h.Steps) > 0 {
		p("\n### Ladder (%s)\n\n| # | Step | Took | Shards per worker after |\n|--:|---|--:|---|\n", fmtSeconds(h.Ladder))
		for i, s := range h.Steps {
			step := names.Rename(s.Step)
			if s.Skipped {
				step += " (already done)"
			}
			p("| %d | %s | %s | %s |\n", i+1, md(step), fmtSeconds(s.Took), md(names.Rename(fmtCounts(s.ShardsAfter))))
		}
	}
	for _, a := range h.Advice {
		p("\nAdvice: %s\n", md(names.Rename(a)))
	}
	if wr := h.Writes; wr != nil {
		p("\nChecked writer: %d acknowledged, %d lost, %d duplicated; longest pause %s ms ending %s into the ladder",
			wr.Acked, wr.Lost, wr.Duplicated, fmtMS(wr.MaxPause), fmtSeconds(wr.PauseEnd))
		if len(wr.Errors) > 0 {
			p("; errors %s", md(fmtCounts(wr.Errors)))
		}
		p(".\n")
	}
}

// hotShardWorkers returns every worker named in h's windows, timeline,
// shard placements and ladder steps, sorted.
func hotShardWorkers(h *HotShard) []string {
	set := map[string]bool{}
	if h.ShardBefore.Worker != "" {
		set[h.ShardBefore.Worker] = true
	}
	if h.ShardAfter != nil && h.ShardAfter.Worker != "" {
		set[h.ShardAfter.Worker] = true
	}
	for _, s := range h.Steps {
		for k := range s.ShardsBefore {
			set[k] = true
		}
		for k := range s.ShardsAfter {
			set[k] = true
		}
	}
	add := func(m map[string]float64) {
		for k := range m {
			set[k] = true
		}
	}
	for _, w := range h.Windows {
		add(w.Workers)
		add(w.Sampled)
	}
	for _, p := range h.Timeline {
		add(p.Workers)
		add(p.Sampled)
	}
	return slices.Sorted(maps.Keys(set))
}

// mdAll is the short names of workers, for Markdown.
func mdAll(names WorkerNames, workers []string) []string {
	out := make([]string, len(workers))
	for i, s := range workers {
		out[i] = md(names.Name(s))
	}
	return out
}

// loadCell is a worker's load with the sampled figure in brackets; "-"
// where neither was measured.
func loadCell(workers, sampled map[string]float64, wk string) string {
	v, ok := workers[wk]
	s, sok := sampled[wk]
	switch {
	case ok && sok:
		return fmt.Sprintf("%.3f (%.3f)", zero(v), zero(s))
	case ok:
		return fmt.Sprintf("%.3f", zero(v))
	case sok:
		return fmt.Sprintf("(%.3f)", zero(s))
	}
	return "-"
}

// fmtSkew formats a skew as "2.50x"; the largest float64 (a skew over idle
// workers) as "inf".
func fmtSkew(v float64) string {
	if v >= 1e300 {
		return "inf"
	}
	return strconv.FormatFloat(zero(v), 'f', 2, 64) + "x"
}

// FormatBytes formats a size in bytes as "3.0 MB", "832 kB" or "512 bytes"
// (1024-based, as pg_size_pretty).
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
