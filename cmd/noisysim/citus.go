package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/isolation/citus"
)

// envCitusDSN is where the coordinator DSN is read from when --dsn is not
// given (a DSN with a password on the command line shows in ps).
const envCitusDSN = "NOISYSIM_CITUS_DSN"

// stepSample is how long plan --apply samples worker load before and after
// each ladder step.
const stepSample = 500 * time.Millisecond

const citusUsage = `usage: noisysim citus plan    [--dsn DSN] [--for D] [--apply] [flags]
       noisysim citus isolate --tenant ID [--dedicate] [--dsn DSN] [flags]
       noisysim citus hot-shard [--apply] [flags]   (see noisysim citus hot-shard -h)

plan samples the cluster's load for --for (pg_stat_activity on every worker
and tenant-tagged backends, application_name t:<tenant>, on the
coordinator), prints per-worker load, skew (max / median), the alerts and
the policy ladder: tenant share > --isolate → isolate_tenant_to_new_shard;
> --dedicate → its worker dedicated (shouldhaveshards = false) and every
other shard moved off it; > --cluster → a cluster of its own, recommended
only. With --apply it runs the ladder one step at a time and samples again.

isolate gives tenant ID a shard of its own whatever its share, and with
--dedicate a worker of its own too. Every step is idempotent: running the
command again does nothing more.

flags:
  --dsn DSN        the coordinator (default $` + envCitusDSN + `); workers are reached with
                   the same user, password and database, or, where they cannot
                   be reached from here, sampled through the coordinator
  --table NAME     distributed table the steps name (default orders); isolation
                   cascades to its co-located tables
  --mode MODE      shard transfer mode: force_logical (default) or block_writes
  --for D          how long plan samples the load (default 5s)
  --interval D     time between samples (default 100ms)
  --skew X         skew alert threshold (default 1.5)
  --isolate F      share above which a tenant is isolated (default 0.05)
  --dedicate-share F  share above which a tenant gets a worker (default 0.20)
  --dedicate       (isolate) give the tenant a worker of its own too
  --cluster F      share above which a cluster is recommended (default 0.50);
                   shares are in (0, 1), --isolate <= --dedicate-share <= --cluster

exit codes: 0 done (or nothing to do), 2 bad input or not a Citus
coordinator, 1 any other error.
`

func runCitus(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 && args[0] == "hot-shard" {
		return citusHotShard(ctx, a, args[1:])
	}
	if len(args) == 0 || (args[0] != "plan" && args[0] != "isolate") {
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprint(a.stdout, citusUsage)
			return nil
		}
		fmt.Fprint(a.stderr, citusUsage)
		if len(args) == 0 {
			return usagef("citus: missing subcommand (plan, isolate or hot-shard)")
		}
		return usagef("citus: unknown subcommand %q (want plan, isolate or hot-shard)", args[0])
	}
	sub := args[0]
	fs := flag.NewFlagSet("citus "+sub, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), citusUsage) }
	dsn := fs.String("dsn", os.Getenv(envCitusDSN), "")
	table := fs.String("table", "orders", "")
	mode := fs.String("mode", string(citus.DefaultTransferMode), "")
	dur := fs.Duration("for", 5*time.Second, "")
	interval := fs.Duration("interval", citus.DefaultSampleInterval, "")
	apply := fs.Bool("apply", false, "")
	tenant := fs.String("tenant", "", "")
	dedicate := fs.Bool("dedicate", false, "")
	th := citus.Thresholds{}
	fs.Float64Var(&th.Skew, "skew", citus.DefaultSkew, "")
	fs.Float64Var(&th.Isolate, "isolate", citus.DefaultIsolate, "")
	fs.Float64Var(&th.Dedicate, "dedicate-share", citus.DefaultDedicate, "")
	fs.Float64Var(&th.Cluster, "cluster", citus.DefaultCluster, "")
	if err := parseFlags(a, fs, args[1:]); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("citus %s: unexpected argument %q", sub, fs.Arg(0))
	case *dsn == "":
		return usagef("citus %s: --dsn (or $%s) is required", sub, envCitusDSN)
	case !citus.TransferMode(*mode).Valid():
		return usagef("citus %s: --mode %q: want force_logical or block_writes", sub, *mode)
	case sub == "isolate" && *tenant == "":
		return usagef("citus isolate: --tenant is required")
	case sub == "plan" && *tenant != "":
		return usagef("citus plan: --tenant is for isolate")
	case *dur <= 0 || *interval <= 0:
		return usagef("citus %s: --for and --interval must be positive", sub)
	case !(th.Skew > 1) || math.IsInf(th.Skew, 1):
		return usagef("citus %s: --skew must be > 1 (and finite), got %v", sub, th.Skew)
	}
	for _, f := range []struct {
		flag string
		v    float64
	}{{"--isolate", th.Isolate}, {"--dedicate-share", th.Dedicate}, {"--cluster", th.Cluster}} {
		if !(f.v > 0 && f.v < 1) {
			return usagef("citus %s: %s %v: want a share in (0, 1)", sub, f.flag, f.v)
		}
	}
	if th.Isolate > th.Dedicate || th.Dedicate > th.Cluster {
		return usagef("citus %s: the ladder needs --isolate <= --dedicate-share <= --cluster, got %v, %v, %v", sub, th.Isolate, th.Dedicate, th.Cluster)
	}
	cfg, err := pgx.ParseConfig(*dsn)
	if err != nil {
		return usagef("citus %s: --dsn: %v", sub, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return backend.ConnectError(ctx, "coordinator", err)
	}
	defer conn.Close(context.Background())
	layout, err := citus.Inspect(ctx, conn, *table)
	if err != nil {
		return err
	}
	ladder := citus.Ladder{DB: conn, Table: *table, Mode: citus.TransferMode(*mode), Thresholds: th, Log: a.log}
	names := layoutNames(layout)

	if sub == "isolate" {
		// A tenant the column's type refuses (abc for bigint) is bad input.
		if _, err := layout.TenantShard(ctx, conn, *tenant); errors.Is(err, citus.ErrNotKey) {
			return usagef("citus isolate: --tenant: %v", err)
		}
		// The user chose the tenant: act whatever its measured share.
		load := citus.Load{Tenants: map[string]float64{*tenant: 1}}
		ladder.Thresholds = citus.Thresholds{Skew: th.Skew, Isolate: 1e-9, Dedicate: 1, Cluster: 1}
		if *dedicate {
			ladder.Thresholds.Dedicate = 1e-9
		}
		records, _, err := ladder.Run(ctx, load, *tenant, 0)
		names.Table(a.stdout)
		printRecords(a.stdout, names, records)
		if err != nil {
			return err
		}
		after, err := citus.Inspect(ctx, conn, *table)
		if err != nil {
			return err
		}
		shard, err := after.TenantShard(ctx, conn, *tenant)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "tenant %s: shard %d on %s, isolated %v (%d step(s) run)\n", *tenant, shard, names.Name(after.Placements[shard]), after.Single[shard], len(records))
		return nil
	}

	sampling := citus.Sampling{Coordinator: conn, Interval: *interval}
	workers, closeWorkers, err := connectWorkers(ctx, cfg, layout)
	switch {
	case err == nil:
		defer closeWorkers()
		sampling.Workers = workers
	case ctx.Err() != nil:
		return err
	default:
		// Workers this process cannot reach (e.g. registered by container
		// or private names): sample them through the coordinator, on a
		// connection of their own.
		via, verr := pgx.ConnectConfig(ctx, cfg)
		if verr != nil {
			return fmt.Errorf("connect to coordinator: %w", verr)
		}
		defer via.Close(context.Background())
		fmt.Fprintf(a.stderr, "noisysim: %v: sampling the workers through the coordinator instead (at most every %s)\n", err, citus.MinViaInterval)
		sampling.WorkersVia = via
	}
	ladder.Measure = func(ctx context.Context) (map[string]float64, error) {
		l, err := citus.Sample(ctx, citus.Sampling{Workers: sampling.Workers, WorkersVia: sampling.WorkersVia, Interval: *interval}, stepSample)
		return l.Workers, err
	}
	load, err := citus.Sample(ctx, sampling, *dur)
	if err != nil {
		return err
	}
	state, err := layout.State(ctx, conn, load)
	if err != nil {
		return err
	}
	plan := citus.Decide(state, th)
	names.Table(a.stdout)
	printState(a.stdout, "before", names, layout, load, plan)
	if !*apply {
		if len(plan.Steps) > 0 {
			fmt.Fprintf(a.stdout, "plan only: run again with --apply to act\n")
		}
		return nil
	}
	records, advice, err := ladder.Run(ctx, load, "", 0)
	printRecords(a.stdout, names, records)
	if err != nil {
		return err
	}
	for _, s := range advice {
		fmt.Fprintf(a.stdout, "advice: %s\n", names.Rename(s.String()))
	}
	after, err := citus.Inspect(ctx, conn, *table)
	if err != nil {
		return err
	}
	loadAfter, err := citus.Sample(ctx, sampling, *dur)
	if err != nil {
		return err
	}
	stateAfter, err := after.State(ctx, conn, loadAfter)
	if err != nil {
		return err
	}
	printState(a.stdout, "after", names, after, loadAfter, citus.Decide(stateAfter, th))
	return nil
}

// connectWorkers opens one connection per worker with cfg's credentials.
func connectWorkers(ctx context.Context, cfg *pgx.ConnConfig, l citus.Layout) (map[string]citus.DB, func(), error) {
	conns := map[string]citus.DB{}
	var opened []*pgx.Conn
	closeAll := func() {
		for _, c := range opened {
			c.Close(context.Background())
		}
	}
	for _, w := range l.Workers {
		wc := cfg.Copy()
		wc.Host, wc.Port = w.Host, uint16(w.Port)
		wc.Fallbacks = nil
		c, err := pgx.ConnectConfig(ctx, wc)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("connect to worker %s: %w", w.Name, err)
		}
		opened = append(opened, c)
		conns[w.Name] = c
	}
	return conns, closeAll, nil
}

// layoutNames names l's workers worker1… (see workerNames).
func layoutNames(l citus.Layout) workerNames {
	var addrs []string
	for _, w := range l.Workers {
		addrs = append(addrs, w.Name)
	}
	return newWorkerNames(addrs)
}

func printState(w io.Writer, when string, names workerNames, l citus.Layout, load citus.Load, p citus.Plan) {
	counts := map[string]int{}
	for _, wk := range l.Placements {
		counts[wk]++
	}
	var total float64
	for _, v := range load.Workers {
		total += v
	}
	fmt.Fprintf(w, "%s: %d samples over %.1f s\n", when, load.Samples, load.Duration.Seconds())
	// Workers by name (worker1 first); their addresses are in the workers
	// table printed once before.
	rank := func(addr string) int {
		if i := slices.Index(names.Addrs, addr); i >= 0 {
			return i
		}
		return len(names.Addrs)
	}
	workers := slices.Clone(l.Workers)
	slices.SortStableFunc(workers, func(a, b citus.Worker) int { return cmp.Compare(rank(a.Name), rank(b.Name)) })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  worker\tshards\tactive\tshare\ttakes shards\n")
	for _, wk := range workers {
		share := 0.0
		if total > 0 {
			share = load.Workers[wk.Name] / total * 100
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.2f\t%.1f%%\t%s\n", names.Name(wk.Name), counts[wk.Name], load.Workers[wk.Name], share, yesNo(wk.ShouldHaveShards))
	}
	tw.Flush()
	fmt.Fprintf(w, "  worker skew %s (shared workers), shard skew %s\n", fmtSkew(p.WorkerSkew), fmtSkew(p.ShardSkew))
	unplaced := map[string]bool{}
	for _, u := range p.Unplaced {
		unplaced[u.ID] = true
	}
	ids := make([]string, 0, len(load.Tenants))
	for id := range load.Tenants {
		if !unplaced[id] {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		if load.Tenants[a] != load.Tenants[b] {
			if load.Tenants[a] > load.Tenants[b] {
				return -1
			}
			return 1
		}
		return cmpID(a, b)
	})
	if len(ids) > 5 {
		ids = ids[:5]
	}
	for _, id := range ids {
		fmt.Fprintf(w, "  tenant %s: %.1f%% of cluster load\n", id, load.Tenants[id]*100)
	}
	if len(p.Unplaced) > 0 {
		var total float64
		tags := make([]string, len(p.Unplaced))
		for i, u := range p.Unplaced {
			total += u.Share
			tags[i] = fmt.Sprintf("%q %.1f%%", citus.DefaultTagPrefix+u.ID, u.Share*100)
		}
		fmt.Fprintf(w, "  unplaced load: %.1f%% of cluster load is tagged with no value of %s's distribution column: %s\n",
			total*100, l.Table, strings.Join(tags, ", "))
	}
	for _, al := range p.Alerts {
		fmt.Fprintf(w, "  alert %s\n", names.Rename(al.String()))
	}
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  step %d: %s\n", i+1, names.Rename(s.String()))
	}
}

func cmpID(a, b string) int {
	ai, aerr := strconv.ParseInt(a, 10, 64)
	bi, berr := strconv.ParseInt(b, 10, 64)
	if aerr == nil && berr == nil {
		return cmp.Compare(ai, bi)
	}
	return cmp.Compare(a, b)
}

func fmtSkew(s float64) string {
	if s > 1e9 {
		return "inf"
	}
	return fmt.Sprintf("%.2fx", s)
}

func printRecords(w io.Writer, names workerNames, records []citus.Record) {
	for i, r := range records {
		state := "done"
		if r.Skipped {
			state = "already done"
		}
		fmt.Fprintf(w, "step %d: %s in %.2f s (%s)\n", i+1, names.Rename(r.Step.String()), r.Took.Seconds(), state)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		if r.Before.Load != nil {
			fmt.Fprintf(tw, "  worker\tshards before\tafter\tload before\tafter\t\n")
		} else {
			fmt.Fprintf(tw, "  worker\tshards before\tafter\t\n")
		}
		for _, a := range names.Addrs {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t", names.Name(a), r.Before.Shards[a], r.After.Shards[a])
			if r.Before.Load != nil {
				fmt.Fprintf(tw, "%.2f\t%.2f\t", r.Before.Load[a], r.After.Load[a])
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
}
