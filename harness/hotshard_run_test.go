package harness

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/hotshard"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
)

// TestHotShardReport: a hot-shard result becomes a valid report with the
// detection on "before", the ladder's outcomes on "after", and the verdict
// following the assertions.
func TestHotShardReport(t *testing.T) {
	sc, err := scenario.Load("../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.HotShard.Apply = true
	w := hotshard.Window{Queries: 1000, QuietCount: 400, QuietP50: 21 * time.Millisecond, QuietP99: 25 * time.Millisecond,
		QuietMax: 40 * time.Millisecond, Workers: map[string]float64{"w1": 2, "w2": 0.5}, SharedSkew: 1.1, HotWorkerShare: 0.6,
		DBTime: map[string]time.Duration{"1": 3 * time.Second, "2": time.Second, "3": time.Second},
		Shares: map[string]float64{"1": 0.6, "2": 0.2, "3": 0.2}}
	after := w
	after.HotWorkerShare = 0.35
	res := hotshard.Result{Detected: 500 * time.Millisecond, DetectedOK: true, Solo: w, Before: w, After: after, LedgerShare: 0.6,
		ShardBefore: hotshard.Shard{ID: 102041, Worker: "w1", Bytes: 3 << 20},
		ShardAfter:  hotshard.Shard{ID: 102076, Worker: "w1", Bytes: 2560 << 10, Isolated: true},
		Timeline: []hotshard.Point{
			{Phase: hotshard.PhaseBefore, At: 500 * time.Millisecond, WorkerSkew: 5, ShardSkew: 30, HotShare: 0.61},
			{Phase: hotshard.PhaseBefore, At: time.Second, WorkerSkew: 4.2, ShardSkew: 28.5, HotShare: 0.59},
			{Phase: hotshard.PhaseAfter, At: 500 * time.Millisecond, WorkerSkew: 1.1, ShardSkew: 2, HotShare: 0.58},
		},
		Workers: []string{"w1", "w2"},
		Alerts:  []citus.Alert{{Kind: "worker-skew", Subject: "w1", Value: 4, Threshold: 1.5}},
		Steps: []citus.Record{{Step: citus.Step{Action: citus.ActionIsolate, Tenant: "1"}, Took: time.Second,
			Before: citus.Snapshot{Shards: map[string]int{"w1": 17, "w2": 16}}, After: citus.Snapshot{Shards: map[string]int{"w1": 18, "w2": 16}}}},
		Writes: hotshard.Writes{Acked: 100, Errors: map[string]int{"40P01": 2}},
		Assertions: []hotshard.Assertion{
			{Name: hotshard.AssertDetected, OK: true, Observed: 0.5, Limit: 3.5, Unit: "s", Op: "<="},
			{Name: hotshard.AssertZeroLoss, OK: false, Observed: 1, Op: "=="},
		}}
	rep := hotShardReport(sc, hotshard.Config{Rate: 200, Before: 5 * time.Second, After: 5 * time.Second}, res, time.Unix(1.7e9, 0))
	if err := rep.Validate(); err != nil {
		t.Fatalf("invalid report: %v", err)
	}
	if rep.Passed || len(rep.Configurations) != 2 || !rep.Configurations[0].Passed || rep.Configurations[1].Passed {
		t.Fatalf("verdicts: report %v, configurations %+v", rep.Passed, rep.Configurations)
	}
	if rep.Assertions[0].Configuration != "before" || rep.Assertions[1].Configuration != "after" {
		t.Errorf("assertions on %s and %s, want before and after", rep.Assertions[0].Configuration, rep.Assertions[1].Configuration)
	}
	if q := rep.Configurations[1].QuietAll; len(q) != 1 || q[0].P99 != 25 || q[0].Count != 400 || q[0].DBTime != 2000 || math.Abs(q[0].DBTimeShare-0.4) > 1e-9 {
		t.Errorf("after quiet row = %+v", q)
	}
	if top := rep.Configurations[0].TopDBTime; len(top) != 3 || top[0].Tenant != "1" || top[0].DBTime != 3000 || top[0].Share != 0.6 || top[1].Tenant != "2" {
		t.Errorf("before top DB time = %+v, want tenant 1 (3000 ms, 0.6) then 2 and 3", top)
	}
	for _, want := range []string{
		"tenant 1: 60.0% of cluster DB time (isolation stack ledger); cross-checks: 0.0% of the tagged backends sampled on the coordinator",
		"tenant 1's orders shard before: 102041 on worker1, 3.0 MB (citus_shards)",
		"tenant 1's orders shard after: 102076 on worker1, 2.5 MB, isolated true (citus_shards)",
		"hot worker's share of worker load: 60.0% before, 35.0% after",
		"before, at 0.5 1.0 s: worker skew 5.0x 4.2x; shard skew 30.0x 28.5x; tenant 1's share of DB time 61% 59%",
		"after, at 0.5 s: worker skew 1.1x; shard skew 2.0x; tenant 1's share of DB time 58%",
		"ladder 1 steps in 0.0 s; writer 100 acknowledged, 0 lost, 0 duplicated, longest pause 0 ms, errors: 40P01=2",
	} {
		if !slices.Contains(rep.Notes, want) {
			t.Errorf("no note %q in %q", want, rep.Notes)
		}
	}
	for _, n := range rep.Notes {
		if strings.Contains(n, "map[") {
			t.Errorf("note in Go map syntax: %q", n)
		}
	}
	// Workers by address: named worker1… with their address once.
	res.Workers = []string{"127.0.0.1:34731", "127.0.0.1:9702"}
	res.ShardBefore.Worker = "127.0.0.1:34731"
	res.Alerts[0].Subject = "127.0.0.1:34731"
	res.Steps[0].After.Shards = map[string]int{"127.0.0.1:34731": 18, "127.0.0.1:9702": 16}
	named := hotShardReport(sc, hotshard.Config{Rate: 200, Before: 5 * time.Second, After: 5 * time.Second}, res, time.Now())
	if n := named.Notes[0]; n != "workers: worker1 127.0.0.1:9702, worker2 127.0.0.1:34731" {
		t.Errorf("first note = %q, want the workers with their addresses", n)
	}
	for _, want := range []string{"tenant 1's orders shard before: 102041 on worker2, 3.0 MB (citus_shards)", "alert worker-skew: worker2"} {
		if !slices.ContainsFunc(named.Notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no note %q in %q", want, named.Notes)
		}
	}
	for _, n := range named.Notes[1:] {
		if strings.Contains(n, "127.0.0.1") {
			t.Errorf("note names a worker by address: %q", n)
		}
	}
	if rep.Backend != "local citus (coordinator + 2 workers, 32 shards)" {
		t.Errorf("backend = %q, want the worker count of the layout", rep.Backend)
	}
	// The structured section carries what the notes say, for report.json.
	h := rep.HotShard
	if h == nil || h.DetectedAfter == nil || *h.DetectedAfter != 0.5 || h.LedgerShare != 0.6 || h.ShardBefore.ID != 102041 ||
		h.ShardAfter == nil || !h.ShardAfter.Isolated || h.ShardAfter.Bytes != 2560<<10 || h.StatTenantsShare != nil {
		t.Fatalf("hot_shard section = %+v", h)
	}
	if len(h.Windows) != 3 || h.Windows[0].Name != "solo" || h.Windows[2].Name != "after" || h.Windows[2].HotWorkerShare != 0.35 ||
		h.Windows[1].QuietP99 != 25 || h.Windows[1].Workers["w1"] != 2 {
		t.Errorf("windows = %+v", h.Windows)
	}
	if len(h.Timeline) != 3 || h.Timeline[1].At != 1 || h.Timeline[1].WorkerSkew != 4.2 || h.Timeline[2].Phase != hotshard.PhaseAfter {
		t.Errorf("timeline = %+v", h.Timeline)
	}
	if h.Writes == nil || len(h.Alerts) != 1 {
		t.Errorf("writes %+v, alerts %v", h.Writes, h.Alerts)
	}
	// Plan only: no after window, shard after or writer in the section.
	sc.HotShard.Apply = false
	if h := hotShardReport(sc, hotshard.Config{Rate: 200}, res, time.Now()).HotShard; len(h.Windows) != 2 || h.ShardAfter != nil || h.Writes != nil {
		t.Errorf("plan-only section = %+v", h)
	}
	sc.HotShard.Apply = true
	res.Assertions[1].OK = true
	if rep := hotShardReport(sc, hotshard.Config{Rate: 200, Before: time.Second, After: time.Second}, res, time.Now()); !rep.Passed {
		t.Errorf("all assertions passed but the report did not")
	}
}

// TestHotShardInterrupted: a hot-shard run interrupted in the ladder keeps
// what it measured (solo and before, the detection on before, the steps
// so far) in a report marked incomplete, with no after window.
func TestHotShardInterrupted(t *testing.T) {
	sc, err := scenario.Load("../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.HotShard.Apply = true
	w := hotshard.Window{Queries: 1000, QuietCount: 400, QuietP99: 25 * time.Millisecond,
		DBTime: map[string]time.Duration{"1": 3 * time.Second, "2": time.Second}, Shares: map[string]float64{"1": 0.75, "2": 0.25}}
	res := hotshard.Result{Solo: w, Before: w, DetectedOK: true, Detected: time.Second,
		ShardBefore: hotshard.Shard{ID: 102041, Worker: "127.0.0.1:9701"}, Workers: []string{"127.0.0.1:9701", "127.0.0.1:9702"},
		Assertions: []hotshard.Assertion{{Name: hotshard.AssertDetected, OK: true, Observed: 1, Limit: 3.5, Unit: "s", Op: "<="}},
		Steps:      []citus.Record{{Step: citus.Step{Action: citus.ActionIsolate, Tenant: "1"}, Took: time.Second}}}
	rep := hotShardInterrupted(sc, hotshard.Config{Rate: 200, Before: 5 * time.Second, After: 5 * time.Second}, res, time.Now(), hotshard.PhaseLadder)
	if err := rep.Validate(); err != nil {
		t.Fatalf("invalid report: %v", err)
	}
	if rep.Passed || rep.Incomplete != "interrupted during the hot-shard ladder phase" {
		t.Errorf("passed %v, incomplete %q: want an incomplete report", rep.Passed, rep.Incomplete)
	}
	if len(rep.Configurations) != 1 || rep.Configurations[0].Name != "before" || rep.Configurations[0].QuietAll[0].Count != 400 {
		t.Errorf("configurations = %+v, want before alone", rep.Configurations)
	}
	if len(rep.Assertions) != 1 || rep.Assertions[0].Name != hotshard.AssertDetected {
		t.Errorf("assertions = %+v, want the detection on before", rep.Assertions)
	}
	h := rep.HotShard
	if len(h.Windows) != 2 || h.Windows[1].Name != "before" || h.ShardAfter != nil || len(h.Steps) != 1 {
		t.Errorf("hot_shard section = %+v, want solo and before, no shard after, the step run", h)
	}
}
