package hotshard

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/workload"
)

func TestMerge(t *testing.T) {
	a := citus.Load{Samples: 1, Workers: map[string]float64{"w1": 4}, Tenants: map[string]float64{"1": 1}}
	b := citus.Load{Samples: 3, Workers: map[string]float64{"w1": 0, "w2": 2}, Tenants: map[string]float64{"1": 0.5, "2": 0.5}}
	m := merge(a, b)
	for k, want := range map[string]float64{"w1": 1, "w2": 1.5} {
		if math.Abs(m.Workers[k]-want) > 1e-9 {
			t.Errorf("worker %s = %v, want %v", k, m.Workers[k], want)
		}
	}
	for k, want := range map[string]float64{"1": 0.625, "2": 0.375} {
		if math.Abs(m.Tenants[k]-want) > 1e-9 {
			t.Errorf("tenant %s = %v, want %v", k, m.Tenants[k], want)
		}
	}
	if m.Samples != 4 {
		t.Errorf("samples = %d, want 4", m.Samples)
	}
	if got := merge(citus.Load{}, b); got.Samples != 3 {
		t.Errorf("merge into empty: %d samples, want 3", got.Samples)
	}
}

func TestSpread(t *testing.T) {
	l := citus.Layout{Workers: []citus.Worker{{Name: "w1"}, {Name: "w2", ShouldHaveShards: true}, {Name: "w3", ShouldHaveShards: true}}}
	skew, hot := spread(map[string]float64{"w1": 6, "w2": 1, "w3": 3}, l, "w1")
	if hot != 0.6 {
		t.Errorf("hot worker share = %v, want 0.6", hot)
	}
	if skew != 1.5 { // max 3 / median 2 of w2, w3: the dedicated w1 is out
		t.Errorf("shared skew = %v, want 1.5", skew)
	}
	if _, hot := spread(map[string]float64{}, l, "w1"); hot != 0 {
		t.Errorf("hot worker share with no load = %v, want 0", hot)
	}
}

// TestRun runs the whole experiment on a local Citus cluster of 4 workers.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: the hot-shard run takes about a minute (-short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := footprint.Claim(ctx, conn, "coordinator", footprint.Plan{Schema: footprint.DefaultSchema, Run: t.Name()}); err != nil {
		t.Fatal(err)
	}
	var phases []string
	var queries atomic.Int64
	res, err := Run(ctx, c, Config{Apply: true, Tenants: 100,
		OnPhase: func(p string, _ time.Duration) { phases = append(phases, p) }, OnQuery: func() { queries.Add(1) },
		Solo: 2 * time.Second, Before: 4 * time.Second, After: 4 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("detected after %.2f s: %v", res.Detected.Seconds(), res.Alerts)
	if want := []string{PhaseLoad, PhaseWarmup, PhaseSolo, PhaseBefore, PhaseLadder, PhaseAfter}; !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	if n := queries.Load(); n < res.Solo.Queries+res.Before.Queries+res.After.Queries {
		t.Errorf("OnQuery called %d times, fewer than the %d queries of the windows", n, res.Solo.Queries+res.Before.Queries+res.After.Queries)
	}
	t.Logf("tenant 1: %.1f%% of cluster DB time (ledger), %.1f%% sampled, %.1f%% citus_stat_tenants (%v); shard before %+v, after %+v",
		res.LedgerShare*100, res.SampledShare*100, res.StatTenantsShare*100, res.StatTenantsOK, res.ShardBefore, res.ShardAfter)
	for _, w := range []struct {
		name string
		w    Window
	}{{"solo", res.Solo}, {"before", res.Before}, {"after", res.After}} {
		t.Logf("%-6s workers %v (sampled %v over %d samples), shared skew %.2f (sampled %.2f), hot worker share %.2f (sampled %.2f), quiet p50 %.1f ms p99 %.1f ms, %d queries, %d dropped, %d errors, tenant 1 DB time %.1f%%",
			w.name, w.w.Workers, w.w.Sampled, w.w.Samples, w.w.SharedSkew, w.w.SampledSkew, w.w.HotWorkerShare, w.w.SampledHotWorkerShare, ms(w.w.QuietP50), ms(w.w.QuietP99), w.w.Queries, w.w.Dropped, w.w.Errors, w.w.Shares["1"]*100)
	}
	t.Logf("ladder: %d steps in %.1f s, advice %v; writes %+v", len(res.Steps), res.LadderTook.Seconds(), res.Advice, res.Writes)
	var at time.Duration
	for _, s := range res.Steps {
		t.Logf("  %6.1f s  %v (%.2f s)", at.Seconds(), s.Step, s.Took.Seconds())
		at += s.Took
	}
	// The queries went through the isolation stack: its ledger saw tenant 1
	// with about its share of the (equal-cost) queries.
	if math.Abs(res.LedgerShare-DefaultHotShare) > 0.15 {
		t.Errorf("tenant 1 holds %.1f%% of the ledger's DB time, want about %.0f%%", res.LedgerShare*100, DefaultHotShare*100)
	}
	if !res.ShardAfter.Isolated || res.ShardBefore.Bytes <= 0 || res.ShardAfter.Bytes <= 0 {
		t.Errorf("tenant 1's shard before %+v, after %+v: want sizes and an isolated shard after", res.ShardBefore, res.ShardAfter)
	}
	points := map[string]int{}
	for _, p := range res.Timeline {
		points[p.Phase]++
		t.Logf("%-6s %4.1f s  worker skew %5.2fx  shard skew %6.2fx  tenant 1 %4.1f%%", p.Phase, p.At.Seconds(), p.WorkerSkew, p.ShardSkew, p.HotShare*100)
	}
	if points[PhaseBefore] < 2 || points[PhaseAfter] < 2 {
		t.Errorf("timeline has %v points per phase, want several in before and after", points)
	}
	// Placement and data outcomes must hold; timing outcomes (write pause,
	// skew, p99) on a shared 2-core machine are figures, logged.
	strict := map[string]bool{AssertDetected: true, AssertAlone: true, AssertZeroLoss: true}
	for _, a := range res.Assertions {
		t.Logf("%-20s %v  %s", a.Name, a.OK, a.Detail)
		if strict[a.Name] && !a.OK {
			t.Errorf("%s failed: %s", a.Name, a.Detail)
		}
	}
}

// TestDBTime: a window's DB time and shares are the ledger's deltas; a
// tenant idle in the window is left out.
func TestDBTime(t *testing.T) {
	ms := time.Millisecond
	from := []pools.Usage{{Tenant: warmTenant, Class: pools.Interactive, DBTime: 900 * ms}, {Tenant: "1", Class: pools.Interactive, DBTime: 100 * ms},
		{Tenant: "2", Class: pools.Interactive, DBTime: 50 * ms}}
	to := []pools.Usage{{Tenant: warmTenant, Class: pools.Interactive, DBTime: 900 * ms}, {Tenant: "1", Class: pools.Interactive, DBTime: 400 * ms},
		{Tenant: "2", Class: pools.Interactive, DBTime: 150 * ms}, {Tenant: "3", Class: pools.Interactive, DBTime: 0}}
	total, share := dbTime(from, to)
	if len(total) != 2 || total["1"] != 300*ms || total["2"] != 100*ms {
		t.Errorf("DB time = %v, want 1: 300ms, 2: 100ms", total)
	}
	if len(share) != 2 || math.Abs(share["1"]-0.75) > 1e-9 || math.Abs(share["2"]-0.25) > 1e-9 {
		t.Errorf("shares = %v, want 1: 0.75, 2: 0.25", share)
	}
}

func TestRunBadKind(t *testing.T) {
	_, err := Run(context.Background(), nil, Config{Kind: dataset.KindExport})
	if !errors.Is(err, backend.ErrBadInput) {
		t.Fatalf("Run with kind export: err = %v, want ErrBadInput", err)
	}
}

// TestFillIdleWorkers: a window whose load sits on one of three shared
// workers (few queries, or page queries too short for most samples to
// catch) has a skew over idle workers; the window keeps it finite (the
// largest float64, as the timeline does) so that report.json can hold it.
func TestFillIdleWorkers(t *testing.T) {
	l := citus.Layout{Workers: []citus.Worker{{Name: "w1", ShouldHaveShards: true}, {Name: "w2", ShouldHaveShards: true}, {Name: "w3", ShouldHaveShards: true}},
		Placements: map[int64]string{10: "w1", 11: "w2", 12: "w3"}}
	m := &meter{layout: l, shardOf: map[string]int64{"1": 10, "2": 10}}
	w := Window{Length: time.Second, DBTime: map[string]time.Duration{"2": 10 * time.Millisecond}}
	m.fill(&w, citus.Load{Samples: 5, Workers: map[string]float64{"w1": 0.2, "w2": 0, "w3": 0}}, "w1")
	for name, v := range map[string]float64{"SharedSkew": w.SharedSkew, "SampledSkew": w.SampledSkew} {
		if v != math.MaxFloat64 {
			t.Errorf("%s = %v over idle workers, want the largest float64", name, v)
		}
	}
}

// TestRunBadConfig: values no run can be carried out with are refused
// before any cluster is touched (nil here), each with ErrBadInput: NaN
// passes every "<= 0" default check, and a rate whose gap rounds to a
// nanosecond or two keeps the load loop spinning for minutes.
func TestRunBadConfig(t *testing.T) {
	nan := math.NaN()
	for name, cfg := range map[string]Config{
		"rate NaN":        {Rate: nan},
		"rate +Inf":       {Rate: math.Inf(1)},
		"rate 1e9":        {Rate: 1e9},
		"hot share NaN":   {HotShare: nan},
		"writer rate NaN": {WriterRate: nan},
		"writer rate 1e9": {WriterRate: 1e9},
		"p99 factor NaN":  {P99Factor: nan},
		"tenants 1e9":     {Tenants: 1e9},
		"skew NaN":        {Thresholds: citus.Thresholds{Skew: nan}},
		"isolate NaN":     {Thresholds: citus.Thresholds{Isolate: nan}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Run(context.Background(), nil, cfg)
			if !errors.Is(err, backend.ErrBadInput) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line wrapping ErrBadInput", err)
			}
		})
	}
}

// TestRunForCancelled: a cancelled load loop sends nothing and returns
// ctx.Err() at once, also when it is behind its schedule (no wait left to
// notice the cancellation in), so that Run stops at the window it was in
// (it went on to the next step, logging a citus_stat_tenants warning).
func TestRunForCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := &driver{cfg: Config{Rate: 1e9, Tenants: 2, HotShare: 0.5}.withDefaults(), rng: rand.New(rand.NewPCG(1, 2)), rec: newRecorder()}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result)
	go func() {
		n, err := d.runFor(ctx, time.Hour)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		if r.n != 0 || !errors.Is(r.err, context.Canceled) {
			t.Errorf("cancelled runFor sent %d queries and returned %v, want 0 and context.Canceled", r.n, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled runFor still running after 5 s")
	}
}

// TestPickQuiet: quiet tenants are drawn by their shares (tenant 2 the
// largest), every slot boundary to the right tenant.
func TestPickQuiet(t *testing.T) {
	cum := []float64{0.2, 0.3, 0.4} // tenants 2, 3, 4: shares 0.2, 0.1, 0.1 of 0.4
	for _, tc := range []struct {
		u    float64
		want int
	}{{0, 2}, {0.49, 2}, {0.5, 2}, {0.51, 3}, {0.74, 3}, {0.76, 4}, {0.999999, 4}} {
		if got := pickQuiet(cum, tc.u); got != tc.want {
			t.Errorf("pickQuiet(u=%v) = %d, want %d", tc.u, got, tc.want)
		}
	}
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 100, DominantShare: 0.6}, 11)
	if err != nil {
		t.Fatal(err)
	}
	var c []float64
	var sum float64
	for _, q := range pop.Quiet() {
		sum += q.Share
		c = append(c, sum)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 200000
	got := map[int]int{}
	for range n {
		got[pickQuiet(c, rng.Float64())]++
	}
	for _, id := range []int{2, 3, 10, 100} {
		want := pop.Share(id) / sum
		if f := float64(got[id]) / float64(n); math.Abs(f-want) > 0.01+want*0.1 {
			t.Errorf("tenant %d drawn %.4f of the time, want %.4f (its share of the quiet tenants)", id, f, want)
		}
	}
	if got[2] <= got[3] || got[3] <= got[100] {
		t.Errorf("draws %d, %d, %d for tenants 2, 3, 100: want a power law, largest first", got[2], got[3], got[100])
	}
}
