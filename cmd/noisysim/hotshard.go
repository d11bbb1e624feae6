package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/guard"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/workload"
)

const hotShardUsage = `usage: noisysim citus hot-shard [--apply] [flags]

Runs the hot-shard scenario (scenarios/hot-shard.yaml) with the figures of
the flags, through the same engine as noisysim run: a throwaway local Citus
cluster (coordinator + --workers workers, each worker with --node-cpu CPUs
of its own; the citus extension must be installed for the local
PostgreSQL), the data set with tenant 1 holding --hot-share of rows and
queries, distributed in --shards shards; the quiet tenants alone (solo),
tenant 1 joining (before: the harm, detection timed from its start), with
--apply the policy ladder (isolate_tenant, dedicate_worker, balance) under
a checked writer for tenant 1, and the after window. Prints the report of
noisysim run: per-window p99, per-worker load and skew, the actions and
the assertions. --print-scenario prints the scenario the flags make, to run
or edit with noisysim run.

flags:
  --apply            run the ladder (default: detect and plan only)
  --workers N        worker count, 2..64 (default 4)
  --node-cpu X       each worker's CPU budget in CPUs, 0 for none (default 0.4;
                     needs root and a cgroup cpu controller)
  --shards N         shard count (default 32)
  --tenants N        tenant count, 2..100000 (default 100)
  --hot-share F      tenant 1's share (default 0.6)
  --rate R           queries/s, open loop, at most 10000 (default 200)
  --query KIND       each query, through the isolation stack: the data set's
                     page (default), lookup or report on the tenant's orders
  --solo D, --before D, --after D   window lengths (default 12s, 12s, 5s)
  --ladder-max D     the ladder's bound (default 5m)
  --detect-within D  detection bound (default 3s)
  --writer-rate R    tenant 1's checked writes/s (default 100)
  --update-share F   share of the checked writes that update a row (default 0.2)
  --max-pause D      write pause bound, from the ladder on (default 2s)
  --mode MODE        shard transfer mode of the moves: force_logical (default) or
                     block_writes
  --split-mode MODE  isolate_tenant's split: force_logical (default: onto another
                     worker, writes go on) or block_writes (same worker, writes
                     wait for the copy)
  --seed N           seed (default 11)
  --out DIR          write report.json, report.md, junit.xml and report.html
  --no-progress      no progress display
  --no-wait, --allow-concurrent, --max-foreign-cpu X   as for noisysim run
  --print-scenario   print the scenario YAML and exit

exit codes: 0 all assertions held, 99 an assertion failed, 2 bad input or
Citus not installed, 1 any other error.
`

// hotShardFlags are the figures of the hot-shard scenario that
// noisysim citus hot-shard takes as flags.
type hotShardFlags struct {
	apply               bool
	workers, shards     int
	tenants             int
	nodeCPU, hotShare   float64
	rate, writerRate    float64
	updateShare         float64
	query, mode         string
	splitMode           string
	solo, before, after time.Duration
	ladderMax           time.Duration
	detectWithin, pause time.Duration
	seed                uint64
}

// Defaults of noisysim citus hot-shard, those of scenarios/hot-shard.yaml.
const (
	hotShardNodeCPU       = 0.4
	hotShardHotShare      = 0.6
	hotShardRate          = 200.0
	hotShardWriterRate    = 100.0
	hotShardUpdateShare   = 0.2
	hotShardSeed          = 11
	hotShardMaxRate       = 10000.0
	hotShardMaxWriterRate = 5000.0 // writer.rate's bound
)

func citusHotShard(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("citus hot-shard", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), hotShardUsage) }
	var h hotShardFlags
	fs.BoolVar(&h.apply, "apply", false, "")
	fs.IntVar(&h.workers, "workers", local.DefaultCitusWorkers, "")
	fs.Float64Var(&h.nodeCPU, "node-cpu", hotShardNodeCPU, "")
	fs.IntVar(&h.shards, "shards", citus.DefaultShardCount, "")
	fs.IntVar(&h.tenants, "tenants", 100, "")
	fs.Float64Var(&h.hotShare, "hot-share", hotShardHotShare, "")
	fs.Float64Var(&h.rate, "rate", hotShardRate, "")
	fs.StringVar(&h.query, "query", string(scenario.QueryPage), "")
	fs.DurationVar(&h.solo, "solo", 12*time.Second, "")
	fs.DurationVar(&h.before, "before", 12*time.Second, "")
	fs.DurationVar(&h.after, "after", 5*time.Second, "")
	fs.DurationVar(&h.ladderMax, "ladder-max", 5*time.Minute, "")
	fs.DurationVar(&h.detectWithin, "detect-within", 3*time.Second, "")
	fs.Float64Var(&h.writerRate, "writer-rate", hotShardWriterRate, "")
	fs.Float64Var(&h.updateShare, "update-share", hotShardUpdateShare, "")
	fs.DurationVar(&h.pause, "max-pause", 2*time.Second, "")
	fs.StringVar(&h.mode, "mode", string(citus.DefaultTransferMode), "")
	fs.StringVar(&h.splitMode, "split-mode", string(citus.TransferLogical), "")
	fs.Uint64Var(&h.seed, "seed", hotShardSeed, "")
	var x execFlags
	fs.StringVar(&x.out, "out", "", "")
	fs.BoolVar(&x.noProgress, "no-progress", false, "")
	fs.BoolVar(&x.noWait, "no-wait", false, "")
	fs.BoolVar(&x.allowConcurrent, "allow-concurrent", false, "")
	fs.Float64Var(&x.maxForeign, "max-foreign-cpu", guard.DefaultMaxForeignCPU, "")
	print := fs.Bool("print-scenario", false, "")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("citus hot-shard: unexpected argument %q", fs.Arg(0))
	}
	if err := h.check(); err != nil {
		return err
	}
	switch {
	case badMaxForeign(x.maxForeign):
		return usagef("citus hot-shard: --max-foreign-cpu %v: %s", x.maxForeign, wantMaxForeign)
	case x.noWait && x.allowConcurrent:
		return usagef("citus hot-shard: --no-wait and --allow-concurrent exclude each other")
	}
	yml := h.scenario()
	if *print {
		_, err := io.WriteString(a.stdout, yml)
		return err
	}
	sc, err := scenario.Parse([]byte(yml), "citus hot-shard flags")
	if err != nil {
		// The flags were checked: a problem here is the generated
		// scenario's, shown whole.
		return fmt.Errorf("citus hot-shard: %w", err)
	}
	return execScenario(ctx, a, sc, x)
}

// check returns a usage error naming the first flag no run can be carried
// out with.
func (h hotShardFlags) check() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case h.workers < 2 || h.workers > 64:
		return usagef("citus hot-shard: --workers %d: want 2..64", h.workers)
	case h.tenants < 2 || h.tenants > workload.MaxTenants:
		return usagef("citus hot-shard: --tenants %d: want 2..%d", h.tenants, workload.MaxTenants)
	case h.shards < 1:
		return usagef("citus hot-shard: --shards %d: want >= 1", h.shards)
	case !(h.hotShare > 0 && h.hotShare < 1):
		return usagef("citus hot-shard: --hot-share %v: want (0, 1)", h.hotShare)
	case !(h.rate > 0 && h.rate <= hotShardMaxRate):
		return usagef("citus hot-shard: --rate %v: want (0, %v] queries/s", h.rate, hotShardMaxRate)
	case !(h.writerRate > 0 && h.writerRate <= hotShardMaxWriterRate):
		return usagef("citus hot-shard: --writer-rate %v: want (0, %v] writes/s", h.writerRate, hotShardMaxWriterRate)
	case !(h.updateShare >= 0 && h.updateShare < 1):
		return usagef("citus hot-shard: --update-share %v: want [0, 1)", h.updateShare)
	case !finite(h.nodeCPU) || h.nodeCPU < 0 || (h.nodeCPU > 0 && h.nodeCPU < 0.01):
		return usagef("citus hot-shard: --node-cpu %v: want 0 (no budget) or at least 0.01 CPUs", h.nodeCPU)
	case h.solo <= 0 || h.before <= 0 || h.after <= 0 || h.ladderMax <= 0 || h.detectWithin <= 0 || h.pause <= 0:
		return usagef("citus hot-shard: --solo, --before, --after, --ladder-max, --detect-within and --max-pause must be positive")
	case !slices.Contains([]scenario.Query{scenario.QueryLookup, scenario.QueryPage, scenario.QueryReport}, scenario.Query(h.query)):
		return usagef("citus hot-shard: --query %q: want page, lookup or report", h.query)
	case !citus.TransferMode(h.mode).Valid():
		return usagef("citus hot-shard: --mode %q: want force_logical or block_writes", h.mode)
	case !citus.TransferMode(h.splitMode).Valid():
		return usagef("citus hot-shard: --split-mode %q: want force_logical or block_writes", h.splitMode)
	}
	return nil
}

// hotShardYAML is the hot-shard scenario of the flags: the shape of
// scenarios/hot-shard.yaml (see there each key's why), the flags' figures.
var hotShardYAML = template.Must(template.New("hot-shard").Parse(`# noisysim citus hot-shard's scenario (see scenarios/hot-shard.yaml for each key's why)
name: hot-shard
seed: {{.Seed}}
backend:
  kind: local
  topology: citus
  workers: {{.Workers}}
{{- if gt .NodeCPU 0.0}}
  node_cpu: {{.NodeCPU}}
  node_cpu_roles: {coordinator: 1}
{{- end}}
  settings: {max_connections: "200"}
tenants: {count: {{.Tenants}}, dominant_share: {{.HotShare}}}
data:
  orders: 20000
  days: 30
  customers: 50
  citus: {shards: {{.Shards}}}
classes:
  - {name: {{.Query}}, isolation_class: interactive, query: {{.Query}}, rate: {{.Rate}}}
phases: {drain: 2s}
timeline:
  - {name: solo_warmup, length: 3s, senders: quiet, measure: false}
  - {name: solo, length: {{.Solo}}, senders: quiet}
  - name: before
    length: {{.Before}}
    watch: {policy: hot_shard_ladder, every: 500ms, detect_only: true}
  - name: ladder
    until: actions_done
    max: {{.LadderMax}}
    measure: false
    watch: {policy: hot_shard_ladder, every: 500ms, skew: 1.5, isolate: 0.05, dedicate: 0.20, cluster: 0.50, mode: {{.Mode}}, split_mode: {{.SplitMode}}, apply: {{.Apply}}}
  - {name: after_warmup, length: 3s, measure: false}
  - {name: after, length: {{.After}}}
writer: {tenant: 1, rate: {{.WriterRate}}, update_share: {{.UpdateShare}}}
configurations:
  - name: citus
    mode: shared
    shared: {pool_size: 32, acquire_timeout: 10s}
assertions:
  quiet_p99: {window: after, baseline: solo, factor: 1.5, slack: 5ms}
  harm_before: {window: before, tenants: hot_worker, factor: 5}
  skew: {window: after, max: 1.5}
  zero_loss: true
  write_pause: {max: {{.Pause}}, from: ladder}
  detect_within: {{.DetectWithin}}
`))

// scenario returns the hot-shard scenario of the flags as YAML.
func (h hotShardFlags) scenario() string {
	var b strings.Builder
	err := hotShardYAML.Execute(&b, map[string]any{
		"Seed": h.seed, "Workers": h.workers, "NodeCPU": h.nodeCPU, "Tenants": h.tenants, "HotShare": h.hotShare,
		"Shards": h.shards, "Query": h.query, "Rate": h.rate, "Solo": h.solo, "Before": h.before, "LadderMax": h.ladderMax,
		"Mode": h.mode, "SplitMode": h.splitMode, "Apply": h.apply, "After": h.after, "WriterRate": h.writerRate, "UpdateShare": h.updateShare,
		"Pause": h.pause, "DetectWithin": h.detectWithin,
	})
	if err != nil {
		panic("hot-shard scenario template: " + err.Error()) // the template and its data are this file's
	}
	return b.String()
}
