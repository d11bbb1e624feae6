package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/hotshard"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/workload"
)

const hotShardUsage = `usage: noisysim citus hot-shard [--apply] [flags]

Starts a throwaway local Citus cluster (coordinator + --workers workers; the
citus extension must be installed for the local PostgreSQL), loads the data
set with tenant 1 holding --hot-share of rows and queries, distributes it
(--shards shards), and runs: the quiet tenants alone (solo p99), tenant 1
joining (detection timed from its start), with --apply the policy ladder
under a checked writer for tenant 1, and the after window. Prints per-worker
load (each tenant's DB time from the isolation stack's ledger counted on the
worker holding its shard, in mean busy backends; sampled pg_stat_activity
beside it), skew, the hot worker's share, tenant 1's share of cluster DB time
and its shard's size, quiet p99, the steps and the assertions.

flags:
  --apply            run the ladder (default: detect and plan only)
  --workers N        worker count (default 4)
  --shards N         shard count (default 32)
  --tenants N        tenant count, 2..100000 (default 100)
  --hot-share F      tenant 1's share (default 0.6)
  --rate R           queries/s, open loop, at most 10000 (default 200)
  --query KIND       each query, through the isolation stack: the data set's
                     page (default), lookup or report on the tenant's orders,
                     or sleep (a pg_sleep of --query-time on the tenant's shard)
  --query-time D     a sleep query's cost on its worker (default 20ms)
  --solo D, --before D, --after D   window lengths (default 3s, 5s, 5s)
  --detect-within D  detection bound (default 3s)
  --max-pause D      write pause bound (default 1s)
  --mode MODE        shard transfer mode: force_logical (default) or block_writes
  --seed N           seed of tenant choice (default 1)

exit codes: 0 all assertions held, 99 an assertion failed, 2 bad input or
Citus not installed, 1 any other error.
`

func citusHotShard(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("citus hot-shard", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), hotShardUsage) }
	cfg := hotshard.Config{Log: a.log}
	apply := fs.Bool("apply", false, "")
	workers := fs.Int("workers", local.DefaultCitusWorkers, "")
	fs.IntVar(&cfg.ShardCount, "shards", citus.DefaultShardCount, "")
	fs.IntVar(&cfg.Tenants, "tenants", 100, "")
	fs.Float64Var(&cfg.HotShare, "hot-share", hotshard.DefaultHotShare, "")
	fs.Float64Var(&cfg.Rate, "rate", hotshard.DefaultRate, "")
	query := fs.String("query", string(hotshard.DefaultKind), "")
	fs.DurationVar(&cfg.QueryTime, "query-time", 20*time.Millisecond, "")
	fs.DurationVar(&cfg.Solo, "solo", hotshard.DefaultSolo, "")
	fs.DurationVar(&cfg.Before, "before", hotshard.DefaultBefore, "")
	fs.DurationVar(&cfg.After, "after", hotshard.DefaultAfter, "")
	fs.DurationVar(&cfg.DetectWithin, "detect-within", hotshard.DefaultDetectWithin, "")
	fs.DurationVar(&cfg.MaxPause, "max-pause", hotshard.DefaultMaxPause, "")
	mode := fs.String("mode", string(citus.DefaultTransferMode), "")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("citus hot-shard: unexpected argument %q", fs.Arg(0))
	case *workers < 2 || *workers > 64:
		return usagef("citus hot-shard: --workers %d: want 2..64", *workers)
	case cfg.Tenants < 2 || cfg.Tenants > workload.MaxTenants || cfg.ShardCount < 1:
		return usagef("citus hot-shard: --tenants must be in 2..%d and --shards >= 1", workload.MaxTenants)
	case !(cfg.HotShare > 0 && cfg.HotShare < 1):
		return usagef("citus hot-shard: --hot-share %v: want (0, 1)", cfg.HotShare)
	case !(cfg.Rate > 0 && cfg.Rate <= hotshard.MaxRate):
		return usagef("citus hot-shard: --rate %v: want (0, %v] queries/s", cfg.Rate, hotshard.MaxRate)
	case cfg.QueryTime <= 0 || cfg.Solo <= 0 || cfg.Before <= 0 || cfg.After <= 0 || cfg.DetectWithin <= 0 || cfg.MaxPause <= 0:
		return usagef("citus hot-shard: --query-time, --solo, --before, --after, --detect-within and --max-pause must be positive")
	case !slices.Contains([]dataset.Kind{dataset.KindSleep, dataset.KindLookup, dataset.KindPage, dataset.KindReport}, dataset.Kind(*query)):
		return usagef("citus hot-shard: --query %q: want sleep, lookup, page or report", *query)
	case !citus.TransferMode(*mode).Valid():
		return usagef("citus hot-shard: --mode %q: want force_logical or block_writes", *mode)
	}
	cfg.Apply, cfg.Mode, cfg.Kind = *apply, citus.TransferMode(*mode), dataset.Kind(*query)

	b := local.New(local.WithLogger(a.log))
	td := a.teardown.add(b.CloseAll, b.KillAll)
	c, err := b.StartCluster(ctx, backend.Spec{Topology: local.TopologyCitus, Nodes: *workers})
	if err != nil {
		return fmt.Errorf("start citus cluster: %w", err)
	}
	st := c.Stat()
	fmt.Fprintf(a.stdout, "citus cluster up: coordinator + %d workers in %.1f s\n", *workers, st.Ready.Seconds())
	res, err := runHotShard(ctx, c, cfg)
	printHotShard(a.stdout, res)
	if cerr := a.teardown.finish(td); cerr != nil && err == nil {
		err = fmt.Errorf("stop cluster: %w", cerr)
	}
	if err != nil {
		return err
	}
	if f := res.Failed(); len(f) > 0 {
		return fmt.Errorf("citus hot-shard: %d assertion(s) failed: %w", len(f), errAssertionFailed)
	}
	return nil
}

// runHotShard makes the data set's schema on the throwaway cluster's
// coordinator, then runs the scenario.
func runHotShard(ctx context.Context, c backend.Cluster, cfg hotshard.Config) (hotshard.Result, error) {
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		return hotshard.Result{}, fmt.Errorf("connect to coordinator: %w", err)
	}
	err = footprint.Claim(ctx, conn, "coordinator", footprint.Plan{Schema: footprint.DefaultSchema, Run: "citus-hot-shard"})
	conn.Close(context.Background())
	if err != nil {
		return hotshard.Result{}, err
	}
	return hotshard.Run(ctx, c, cfg)
}

func printHotShard(w io.Writer, res hotshard.Result) {
	addrs := slices.Clone(res.Workers)
	for _, r := range res.Steps {
		addrs = slices.AppendSeq(addrs, maps.Keys(r.Before.Shards))
		addrs = slices.AppendSeq(addrs, maps.Keys(r.After.Shards))
	}
	names := newWorkerNames(addrs)
	if len(names.Addrs) > 0 {
		fmt.Fprintf(w, "workers:\n")
		names.Table(w)
	}
	if res.DetectedOK {
		fmt.Fprintf(w, "detected %.2f s after tenant 1 started:\n", res.Detected.Seconds())
		for _, al := range res.Alerts {
			fmt.Fprintf(w, "  alert %s\n", names.Rename(al.String()))
		}
	} else {
		fmt.Fprintf(w, "no alert fired\n")
	}
	fmt.Fprintf(w, "tenant 1: %.1f%% of cluster DB time (ledger); cross-checks %.1f%% sampled on the coordinator", res.LedgerShare*100, res.SampledShare*100)
	if res.StatTenantsOK {
		fmt.Fprintf(w, ", %.1f%% in citus_stat_tenants", res.StatTenantsShare*100)
	}
	fmt.Fprintln(w)
	for _, s := range []struct {
		when  string
		shard hotshard.Shard
	}{{"before", res.ShardBefore}, {"after", res.ShardAfter}} {
		if s.shard.ID != 0 {
			fmt.Fprintf(w, "tenant 1's shard %-6s %d on %s, %d bytes, isolated %v\n", s.when, s.shard.ID, names.Name(s.shard.Worker), s.shard.Bytes, s.shard.Isolated)
		}
	}
	for _, win := range []struct {
		name string
		w    hotshard.Window
	}{{"solo", res.Solo}, {"before", res.Before}, {"after", res.After}} {
		if win.w.Queries == 0 {
			continue
		}
		fmt.Fprintf(w, "%-6s quiet p99 %6.1f ms  %5d queries %d dropped", win.name, ms(win.w.QuietP99), win.w.Queries, win.w.Dropped)
		if win.w.Workers != nil {
			fmt.Fprintf(w, "  hot worker share %4.1f%% (sampled %4.1f%%)  skew (shared workers) %s (sampled %s)",
				win.w.HotWorkerShare*100, win.w.SampledHotWorkerShare*100, fmtSkew(win.w.SharedSkew), fmtSkew(win.w.SampledSkew))
		}
		fmt.Fprintln(w)
	}
	printWindowLoads(w, names, res)
	for i, s := range res.Plan.Steps {
		fmt.Fprintf(w, "plan %d: %s\n", i+1, names.Rename(s.String()))
	}
	printRecords(w, names, res.Steps)
	for _, s := range res.Advice {
		fmt.Fprintf(w, "advice: %s\n", names.Rename(s.String()))
	}
	if len(res.Steps) > 0 {
		fmt.Fprintf(w, "ladder: %d steps in %.1f s; writer %d acknowledged, %d lost, %d duplicated, longest pause %.0f ms, errors: %s\n",
			len(res.Steps), res.LadderTook.Seconds(), res.Writes.Acked, res.Writes.Lost, res.Writes.Duplicated, ms(res.Writes.MaxPause), counts(res.Writes.Errors))
	}
	for _, as := range res.Assertions {
		mark := "ok  "
		if !as.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-20s %s\n", mark, as.Name, names.Rename(as.Detail))
	}
}

// printWindowLoads prints each worker's load per measured window as a
// table: from the ledger, and sampled in pg_stat_activity.
func printWindowLoads(w io.Writer, names workerNames, res hotshard.Result) {
	type col struct {
		name string
		load map[string]float64
	}
	var cols []col
	for _, win := range []struct {
		name string
		w    hotshard.Window
	}{{"solo", res.Solo}, {"before", res.Before}, {"after", res.After}} {
		if win.w.Workers != nil {
			cols = append(cols, col{win.name, win.w.Workers})
		}
	}
	for _, win := range []struct {
		name string
		w    hotshard.Window
	}{{"solo", res.Solo}, {"before", res.Before}, {"after", res.After}} {
		if win.w.Sampled != nil {
			cols = append(cols, col{win.name + " sampled", win.w.Sampled})
		}
	}
	if len(cols) == 0 || len(names.Addrs) == 0 {
		return
	}
	fmt.Fprintf(w, "load per worker (mean busy backends: ledger DB time through the placements; sampled: pg_stat_activity):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  worker\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t", c.name)
	}
	fmt.Fprintln(tw)
	for _, a := range names.Addrs {
		fmt.Fprintf(tw, "  %s\t", names.Name(a))
		for _, c := range cols {
			fmt.Fprintf(tw, "%.2f\t", c.load[a])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
