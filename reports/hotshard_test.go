package reports

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// hotShardReport is sampleReport(4) with the hot-shard section of an
// applied ladder: detection, the shard before and after, three windows,
// a timeline with an idle-worker skew, two steps and the writer.
func hotShardReport() *Report {
	r := sampleReport(4)
	detected, stat := 0.5, 0.58
	w := map[string]float64{"w1:5432": 0.0786, "w2:5432": 0.0171, "w3:5432": 0.0093}
	s := map[string]float64{"w1:5432": 0.02, "w2:5432": 0.005, "w3:5432": 0}
	r.HotShard = &HotShard{
		HotTenant: "1", Query: "page", DetectedAfter: &detected,
		Alerts:      []string{"worker-skew: w1:5432 at 5.04x median > 1.50x", "tenant-share: tenant 1 at 62.6% > 5.0%"},
		LedgerShare: 0.59, SampledShare: 0.521, StatTenantsShare: &stat,
		ShardBefore: ShardPlacement{ID: 102041, Worker: "w1:5432", Bytes: 3194880},
		ShardAfter:  &ShardPlacement{ID: 102076, Worker: "w1:5432", Bytes: 4014080, Isolated: true},
		Windows: []LoadWindow{
			{Name: "solo", Length: 2, QuietP50: 1.8, QuietP99: 3.1, QuietMax: 4, QuietCount: 400, Queries: 400},
			{Name: "before", Length: 4.01, Workers: w, Sampled: s, Samples: 199, Skew: 5.09, SampledSkew: math.MaxFloat64,
				HotWorkerShare: 0.66, SampledHotWorkerShare: 0.8, HotShare: 0.59, QuietP50: 1.9, QuietP99: 3.8, QuietCount: 320, Queries: 800},
			{Name: "after", Length: 4, Workers: w, Sampled: s, Samples: 199, Skew: 1.28, SampledSkew: 2.25,
				HotWorkerShare: 0.55, SampledHotWorkerShare: 0.41, HotShare: 0.53, QuietP50: 2, QuietP99: 4.4, QuietCount: 330, Queries: 800, Errors: 1},
		},
		Timeline: []LoadPoint{
			{Phase: "before", At: 0.5, Workers: w, Sampled: s, Shards: map[int64]float64{102041: 0.0712, 102042: 0.002}, HotShard: 102041,
				WorkerSkew: 5.04, ShardSkew: 35.4, HotShare: 0.626},
			{Phase: "after", At: 0.5, Workers: w, Sampled: map[string]float64{"w4:5432": 0.01}, WorkerSkew: math.MaxFloat64, ShardSkew: 2, HotShare: 0.5},
		},
		Plan: []string{"isolate tenant 1 (share 59.0%) from shard 102041: share 59.0% > 5.0%"},
		Steps: []LadderStep{
			{Action: "isolate", Step: "isolate tenant 1 (share 59.0%) from shard 102041: share 59.0% > 5.0%", Shard: 102041, Took: 1.35,
				ShardsBefore: map[string]int64{"w1:5432": 8, "w2:5432": 8}, ShardsAfter: map[string]int64{"w1:5432": 10, "w2:5432": 8}},
			{Action: "move", Step: "move shard 102049 from w1:5432 to w2:5432: keep worker w1:5432 for tenant 1 alone", Shard: 102049,
				From: "w1:5432", To: "w2:5432", Skipped: true, Took: 0.01,
				ShardsBefore: map[string]int64{"w1:5432": 10, "w2:5432": 8}, ShardsAfter: map[string]int64{"w1:5432": 9, "w2:5432": 9},
				LoadBefore: map[string]float64{"w1:5432": 0.08}, LoadAfter: map[string]float64{"w1:5432": 0.06}},
		},
		Advice: []string{"recommend for tenant 1 (share 59.0%): share 59.0% > 50.0%: give the tenant a cluster of its own"},
		Ladder: 47.6,
		Writes: &CheckedWrites{Acked: 4763, MaxPause: 53.6, PauseEnd: 0.61, Errors: map[string]int64{"57P01": 2}},
	}
	return r
}

func TestHotShardGolden(t *testing.T) {
	var md bytes.Buffer
	if err := WriteMarkdown(&md, hotShardReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "hotshard.md", md.Bytes())
}

// TestHotShardJSON: the section round-trips through report.json with its
// units in the keys, a skew over idle workers stays valid JSON, and a
// report without it has no hot_shard key.
func TestHotShardJSON(t *testing.T) {
	b := renderJSON(t, hotShardReport())
	var got Report
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	h := got.HotShard
	if h == nil || h.DetectedAfter == nil || *h.DetectedAfter != 0.5 || h.StatTenantsShare == nil || *h.StatTenantsShare != 0.58 ||
		h.ShardAfter == nil || !h.ShardAfter.Isolated || len(h.Windows) != 3 || h.Windows[1].Workers["w1:5432"] != 0.0786 ||
		len(h.Timeline) != 2 || h.Timeline[1].WorkerSkew != math.MaxFloat64 || h.Timeline[0].Shards[102041] != 0.0712 || h.Timeline[0].HotShard != 102041 || len(h.Steps) != 2 || !h.Steps[1].Skipped ||
		h.Steps[1].ShardsAfter["w2:5432"] != 9 || h.Writes == nil || h.Writes.Acked != 4763 || h.Writes.Errors["57P01"] != 2 {
		t.Errorf("hot_shard after a round trip = %+v", h)
	}
	for _, key := range []string{`"detected_after_s"`, `"timeline"`, `"at_s"`, `"length_s"`, `"bytes"`, `"took_s"`, `"max_pause_ms"`, `"quiet_p99_ms"`, `"sampled"`, `"hot_shard_id"`, `"102041"`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("report.json lacks %s", key)
		}
	}
	if bytes.Contains(renderJSON(t, sampleReport(4)), []byte(`"hot_shard"`)) {
		t.Errorf("hot_shard in a report without a hot-shard run")
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, sampleReport(4)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "Hot shard") {
		t.Errorf("hot-shard section in a Markdown report without one")
	}
}

// TestHotShardValidate: a non-finite figure in the section is caught by
// Validate, before report.json would fail to be written.
func TestHotShardValidate(t *testing.T) {
	if err := hotShardReport().Validate(); err != nil {
		t.Fatalf("valid section: %v", err)
	}
	r := hotShardReport()
	r.HotShard.Timeline[0].WorkerSkew = math.Inf(1)
	r.HotShard.Windows[1].Workers["w1:5432"] = math.NaN()
	err := r.Validate()
	if err == nil || !strings.Contains(err.Error(), "hot_shard.timeline[0].worker_skew") || !strings.Contains(err.Error(), "hot_shard.windows[1].workers.w1:5432") {
		t.Errorf("Validate = %v, want the infinite skew and the NaN load named", err)
	}
}

// TestHotShardValidateOrder: the problems in the section's maps (worker
// loads, shard loads) come in key order, the same on every call.
func TestHotShardValidateOrder(t *testing.T) {
	r := hotShardReport()
	r.HotShard.Windows[1].Workers = map[string]float64{"w1:5432": math.NaN(), "w2:5432": math.NaN(), "w3:5432": math.NaN(), "w4:5432": math.NaN()}
	r.HotShard.Timeline[0].Shards = map[int64]float64{1: math.NaN(), 2: math.NaN(), 3: math.NaN(), 4: math.NaN()}
	first := r.Validate().Error()
	if !strings.Contains(first, "workers.w1:5432: not a finite number\n") || strings.Index(first, "w1:5432") > strings.Index(first, "w4:5432") ||
		strings.Index(first, "shards.1:") > strings.Index(first, "shards.4:") {
		t.Errorf("Validate = %q, want the keys in order", first)
	}
	for range 20 {
		if got := r.Validate().Error(); got != first {
			t.Fatalf("Validate = %q, then %q", first, got)
		}
	}
}
