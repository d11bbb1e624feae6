package harness

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/hotshard"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// The configurations of a hot-shard report.
const (
	hotShardBefore = "before"
	hotShardAfter  = "after"
	// hotShardTop is how many tenants a configuration ranks by DB time.
	hotShardTop = 5
)

// runHotShard hands a scenario with a hot_shard section to package
// hotshard and turns its result into a report: configurations before and
// after the ladder, the assertions, and the figures as notes.
func runHotShard(ctx context.Context, r *runner) (*reports.Report, error) {
	sc, h := r.sc, r.sc.HotShard
	cfg := hotshard.Config{
		Tenants: sc.Tenants.Count, HotShare: sc.Tenants.DominantShare,
		Distribution: workload.Distribution(sc.Tenants.Distribution), Exponent: sc.Tenants.Exponent, Shares: sc.Tenants.Shares, Rows: int64(sc.Data.Orders), ShardCount: h.Shards,
		Rate: h.Rate, Kind: dataset.Kind(h.Query), QueryTime: h.QueryTime.Duration(),
		Solo: h.Solo.Duration(), Before: h.Before.Duration(), After: h.After.Duration(),
		DetectEvery: h.DetectEvery.Duration(), DetectWithin: h.DetectWithin.Duration(),
		Thresholds: citus.Thresholds{Skew: h.Skew, Isolate: h.Isolate, Dedicate: h.Dedicate, Cluster: h.Cluster},
		Mode:       citus.TransferMode(h.Mode), Apply: h.Apply,
		WriterRate: h.WriterRate, MaxPause: h.MaxPause.Duration(),
		P99Factor: h.P99Factor, P99Slack: h.P99Slack.Duration(),
		Seed: uint64(sc.Seed), Schema: sc.Data.SchemaName(), Log: r.log,
		OnPhase: func(phase string, planned time.Duration) { r.setPhase("hot-shard", phase, planned) },
		OnQuery: func() { r.issued.Add(1) },
	}
	res, err := hotshard.Run(ctx, r.cluster, cfg)
	if err != nil {
		err = fmt.Errorf("%w: hot shard: %w", ErrRun, err)
		if ctx.Err() == nil {
			return nil, err
		}
		// Interrupted (the first Ctrl-C): the windows measured so far.
		r.progressMu.Lock()
		during := r.progress.Configuration
		r.progressMu.Unlock()
		return hotShardInterrupted(r.sc, cfg, res, r.started, during), err
	}
	return hotShardReport(r.sc, cfg, res, r.started), nil
}

// hotShardInterrupted is the report of a hot-shard run interrupted during
// phase: the windows it measured (those with queries), the assertions made
// on them, the ladder's steps so far, marked incomplete with no verdict.
func hotShardInterrupted(sc *scenario.Scenario, cfg hotshard.Config, res hotshard.Result, started time.Time, phase string) *reports.Report {
	rep := hotShardReport(sc, cfg, res, started)
	measured := map[string]bool{"solo": res.Solo.Queries > 0, hotShardBefore: res.Before.Queries > 0, hotShardAfter: res.After.Queries > 0}
	rep.Configurations = slices.DeleteFunc(rep.Configurations, func(c reports.Configuration) bool { return !measured[c.Name] })
	rep.Assertions = slices.DeleteFunc(rep.Assertions, func(a reports.Assertion) bool { return !measured[a.Configuration] })
	h := rep.HotShard
	h.Windows = slices.DeleteFunc(h.Windows, func(w reports.LoadWindow) bool { return !measured[w.Name] })
	if res.ShardAfter.ID == 0 {
		h.ShardAfter = nil
	}
	rep.Incomplete = "interrupted during the hot-shard " + cmp.Or(phase, "setup") + " phase"
	rep.Passed = false
	return rep
}

// hotShardReport turns a hot-shard result into a report.
func hotShardReport(sc *scenario.Scenario, cfg hotshard.Config, res hotshard.Result, started time.Time) *reports.Report {
	h := sc.HotShard
	sum := sha256.Sum256(fmt.Appendf(nil, "%+v", cfg))
	rep := &reports.Report{
		Scenario: sc.Name, Seed: sc.Seed, ScheduleHash: hex.EncodeToString(sum[:])[:16],
		StartedAt: started, Duration: time.Since(started).Seconds(),
		Backend:  fmt.Sprintf("%s citus (coordinator + %d workers, %d shards)", sc.Backend.Kind, len(res.Workers), h.Shards),
		Dominant: "1",
		HotShard: hotShardSection(cfg, res, h.Apply),
	}
	// Workers are named worker1… with their addresses in one note, as the
	// CLI names them; every other note uses the short names.
	names := reports.NewWorkerNames(res.Workers)
	if len(names.Addrs) > 0 {
		rep.Notes = append(rep.Notes, "workers: "+names.List())
	}
	note := func(format string, args ...any) {
		rep.Notes = append(rep.Notes, names.Rename(fmt.Sprintf(format, args...)))
	}
	if res.DetectedOK {
		note("detected %.2f s after tenant 1 started", res.Detected.Seconds())
	}
	for _, a := range res.Alerts {
		note("alert %s", a)
	}
	n := fmt.Sprintf("tenant 1: %.1f%% of cluster DB time (isolation stack ledger); cross-checks: %.1f%% of the tagged backends sampled on the coordinator",
		res.LedgerShare*100, res.SampledShare*100)
	if res.StatTenantsOK {
		n += fmt.Sprintf(", %.1f%% of the queries citus_stat_tenants counted", res.StatTenantsShare*100)
	}
	note("%s", n)
	if s := res.ShardBefore; s.ID != 0 {
		note("tenant 1's orders shard before: %d on %s, %s (citus_shards)", s.ID, s.Worker, reports.FormatBytes(s.Bytes))
	}
	if s := res.ShardAfter; s.ID != 0 {
		note("tenant 1's orders shard after: %d on %s, %s, isolated %v (citus_shards)", s.ID, s.Worker, reports.FormatBytes(s.Bytes), s.Isolated)
	}
	if h.Apply && res.Before.Workers != nil && res.After.Workers != nil {
		note("hot worker's share of worker load: %.1f%% before, %.1f%% after", res.Before.HotWorkerShare*100, res.After.HotWorkerShare*100)
	}
	for _, w := range []struct {
		name string
		w    hotshard.Window
	}{{"solo", res.Solo}, {"before", res.Before}, {"after", res.After}} {
		if w.w.Queries == 0 {
			continue
		}
		n := fmt.Sprintf("%s: quiet p99 %.1f ms over %d queries (%d dropped)", w.name, float64(w.w.QuietP99)/1e6, w.w.Queries, w.w.Dropped)
		if w.w.Workers != nil {
			n += fmt.Sprintf(", hot worker share %.1f%%, skew over shared workers %.2fx", w.w.HotWorkerShare*100, w.w.SharedSkew)
		}
		note("%s", n)
	}
	if !h.Apply {
		for i, s := range res.Plan.Steps {
			note("plan %d: %s", i+1, s)
		}
		note("plan only: run with --apply (or hot_shard.apply: true) to act")
	}
	for _, phase := range []string{hotshard.PhaseBefore, hotshard.PhaseAfter} {
		if n := timeline(res.Timeline, phase); n != "" {
			note("%s", n)
		}
	}
	for _, rec := range res.Steps {
		note("step %s: %.2f s, shards per worker after %s, worker load (busy backends: ledger DB time through the placements) before %s after %s",
			rec.Step, rec.Took.Seconds(), fmtCounts(rec.After.Shards), fmtLoad(rec.Before.Load), fmtLoad(rec.After.Load))
	}
	for _, s := range res.Advice {
		note("advice: %s", s)
	}
	if len(res.Steps) > 0 {
		errs := "none"
		if len(res.Writes.Errors) > 0 {
			errs = fmtCounts(res.Writes.Errors)
		}
		note("ladder %d steps in %.1f s; writer %d acknowledged, %d lost, %d duplicated, longest pause %.0f ms, errors: %s",
			len(res.Steps), res.LadderTook.Seconds(), res.Writes.Acked, res.Writes.Lost, res.Writes.Duplicated,
			float64(res.Writes.MaxPause)/1e6, errs)
	}
	// Two configurations: "before" (tenant 1 hot, before the ladder) and
	// "after"; each shows the quiet tenants against their solo baseline.
	// Detection is judged on before, the ladder's outcomes on after.
	row := func(w hotshard.Window) []reports.TenantRow {
		if w.QuietCount == 0 {
			return nil
		}
		var quiet time.Duration
		for t, d := range w.DBTime {
			if t != "1" {
				quiet += d
			}
		}
		share := 0.0
		if len(w.Shares) > 0 {
			share = 1 - w.Shares["1"]
		}
		return []reports.TenantRow{{Tenant: reports.QuietAll, Class: string(h.Query), Count: w.QuietCount, Dropped: w.Dropped,
			P50: ms(w.QuietP50), P99: ms(w.QuietP99), Max: ms(w.QuietMax), DBTime: ms(quiet), DBTimeShare: share}}
	}
	// top ranks the window's tenants by DB time in the ledger.
	top := func(w hotshard.Window) []reports.Share {
		var out []reports.Share
		for t, d := range w.DBTime {
			out = append(out, reports.Share{Tenant: t, DBTime: ms(d), Share: w.Shares[t]})
		}
		slices.SortFunc(out, func(a, b reports.Share) int {
			return cmp.Or(cmp.Compare(b.DBTime, a.DBTime), strings.Compare(a.Tenant, b.Tenant))
		})
		return out[:min(len(out), hotShardTop)]
	}
	conf := func(name string, w hotshard.Window, d time.Duration) reports.Configuration {
		return reports.Configuration{Name: name, Passed: true, Duration: d.Seconds(), QuietAll: row(w), SoloQuietAll: row(res.Solo), TopDBTime: top(w),
			Stats: reports.RunStats{Issued: w.Queries, Completed: w.Queries, Dropped: w.Dropped, TargetRate: cfg.Rate,
				AchievedRate: float64(w.Queries) / d.Seconds()}}
	}
	rep.Configurations = []reports.Configuration{conf(hotShardBefore, res.Before, cfg.Before)}
	if h.Apply {
		rep.Configurations = append(rep.Configurations, conf(hotShardAfter, res.After, cfg.After))
	}
	passed := true
	for _, a := range res.Assertions {
		c := hotShardAfter
		if a.Name == hotshard.AssertDetected {
			c = hotShardBefore
		}
		rep.Assertions = append(rep.Assertions, reports.Assertion{Name: a.Name, Configuration: c,
			Observed: a.Observed, Limit: a.Limit, Unit: a.Unit, Op: a.Op, Passed: a.OK, Detail: a.Detail})
		if !a.OK {
			passed = false
			for i := range rep.Configurations {
				if rep.Configurations[i].Name == c {
					rep.Configurations[i].Passed = false
				}
			}
		}
	}
	rep.Passed = passed
	return rep
}

// hotShardSection is the structured hot-shard part of the report.
func hotShardSection(cfg hotshard.Config, res hotshard.Result, applied bool) *reports.HotShard {
	placement := func(s hotshard.Shard) reports.ShardPlacement {
		return reports.ShardPlacement{ID: s.ID, Worker: s.Worker, Bytes: s.Bytes, Isolated: s.Isolated}
	}
	out := &reports.HotShard{HotTenant: "1", Query: string(cfg.Kind), LedgerShare: res.LedgerShare, SampledShare: res.SampledShare,
		ShardBefore: placement(res.ShardBefore), Timeline: []reports.LoadPoint{}}
	if res.DetectedOK {
		s := res.Detected.Seconds()
		out.DetectedAfter = &s
	}
	for _, a := range res.Alerts {
		out.Alerts = append(out.Alerts, a.String())
	}
	if res.StatTenantsOK {
		s := res.StatTenantsShare
		out.StatTenantsShare = &s
	}
	window := func(name string, w hotshard.Window) reports.LoadWindow {
		return reports.LoadWindow{Name: name, Length: w.Length.Seconds(), Workers: w.Workers, Sampled: w.Sampled, Samples: w.Samples,
			Skew: w.SharedSkew, SampledSkew: w.SampledSkew, HotWorkerShare: w.HotWorkerShare, SampledHotWorkerShare: w.SampledHotWorkerShare,
			HotShare: w.Shares["1"], QuietP50: ms(w.QuietP50), QuietP99: ms(w.QuietP99), QuietMax: ms(w.QuietMax),
			QuietServiceP99: ms(w.QuietServiceP99), QuietCount: w.QuietCount, Queries: w.Queries, Dropped: w.Dropped, Errors: w.Errors}
	}
	out.Windows = []reports.LoadWindow{window("solo", res.Solo), window(hotShardBefore, res.Before)}
	for _, p := range res.Timeline {
		out.Timeline = append(out.Timeline, reports.LoadPoint{Phase: p.Phase, At: p.At.Seconds(), Workers: p.Workers, Sampled: p.Sampled,
			Shards: p.Shards, HotShard: p.HotShard,
			WorkerSkew: p.WorkerSkew, ShardSkew: p.ShardSkew, HotShare: p.HotShare})
	}
	for _, s := range res.Plan.Steps {
		out.Plan = append(out.Plan, s.String())
	}
	if !applied {
		return out
	}
	after := placement(res.ShardAfter)
	out.ShardAfter = &after
	out.Windows = append(out.Windows, window(hotShardAfter, res.After))
	counts := func(m map[string]int) map[string]int64 {
		c := make(map[string]int64, len(m))
		for k, v := range m {
			c[k] = int64(v)
		}
		return c
	}
	for _, r := range res.Steps {
		out.Steps = append(out.Steps, reports.LadderStep{Action: string(r.Step.Action), Step: r.Step.String(), Shard: r.Step.ShardID,
			From: r.Step.From, To: r.Step.To, Skipped: r.Skipped, Took: r.Took.Seconds(),
			ShardsBefore: counts(r.Before.Shards), ShardsAfter: counts(r.After.Shards), LoadBefore: r.Before.Load, LoadAfter: r.After.Load})
	}
	for _, a := range res.Advice {
		out.Advice = append(out.Advice, a.String())
	}
	out.Ladder = res.LadderTook.Seconds()
	errs := map[string]int64{}
	for k, v := range res.Writes.Errors {
		errs[k] = int64(v)
	}
	out.Writes = &reports.CheckedWrites{Acked: res.Writes.Acked, Lost: res.Writes.Lost, Duplicated: res.Writes.Duplicated,
		MaxPause: ms(res.Writes.MaxPause), PauseEnd: res.Writes.PauseEnd.Seconds(), Errors: errs}
	return out
}

// fmtLoad formats a per-worker load map in worker order.
// fmtCounts formats counts by name as "a=1 b=2", in name order.
func fmtCounts(m map[string]int) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

func fmtLoad(m map[string]float64) string {
	if m == nil {
		return "-"
	}
	var b strings.Builder
	for i, w := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%.2f", w, m[w])
	}
	return b.String()
}

// timeline formats one phase's points of tl as one line: the skews and
// tenant 1's share of DB time per interval.
func timeline(tl []hotshard.Point, phase string) string {
	var worker, shard, share []string
	var at []string
	for _, p := range tl {
		if p.Phase != phase {
			continue
		}
		at = append(at, fmt.Sprintf("%.1f", p.At.Seconds()))
		worker = append(worker, fmt.Sprintf("%.1fx", p.WorkerSkew))
		shard = append(shard, fmt.Sprintf("%.1fx", p.ShardSkew))
		share = append(share, fmt.Sprintf("%.0f%%", p.HotShare*100))
	}
	if len(at) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, at %s s: worker skew %s; shard skew %s; tenant 1's share of DB time %s",
		phase, strings.Join(at, " "), strings.Join(worker, " "), strings.Join(shard, " "), strings.Join(share, " "))
}
