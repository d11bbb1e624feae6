package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/isolation/citus"
)

func TestCitusBadInput(t *testing.T) {
	t.Setenv(envCitusDSN, "")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"citus"}, "missing subcommand"},
		{[]string{"citus", "rebalance"}, `unknown subcommand "rebalance"`},
		{[]string{"citus", "plan"}, "--dsn (or $NOISYSIM_CITUS_DSN) is required"},
		{[]string{"citus", "isolate", "--dsn", "postgres://x/y"}, "--tenant is required"},
		{[]string{"citus", "plan", "--dsn", "postgres://x/y", "--tenant", "1"}, "--tenant is for isolate"},
		{[]string{"citus", "plan", "--dsn", "postgres://x/y", "--mode", "fast"}, `--mode "fast"`},
		{[]string{"citus", "plan", "--dsn", "postgres://x/y", "--skew", "0.9"}, "--skew must be > 1"},
		{[]string{"citus", "plan", "--dsn", "postgres://x/y", "--for", "0s"}, "must be positive"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := realMain(tc.args, &out, &errOut); got != exitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", got, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, errOut.String())
			}
		})
	}
}

// TestCitusNotACoordinator: a plain PostgreSQL is bad input (exit 2, one
// line saying what to give).
func TestCitusNotACoordinator(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	var out, errOut bytes.Buffer
	got := realMain([]string{"citus", "plan", "--dsn", c.Nodes()[0].DSN(), "--for", "100ms"}, &out, &errOut)
	if got != exitUsage || !strings.Contains(errOut.String(), "no citus extension") {
		t.Fatalf("exit %d, want 2 with 'no citus extension'; stderr:\n%s", got, errOut.String())
	}
	if n := strings.Count(strings.TrimSpace(errOut.String()), "\n"); n != 0 {
		t.Errorf("stderr has %d lines, want 1:\n%s", n+1, errOut.String())
	}
}

// TestCitusPlanAndIsolate plans on an idle cluster (nothing to do), then
// isolates tenant 1 onto a dedicated worker, then isolates again (nothing
// more to do).
func TestCitusPlanAndIsolate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus, Nodes: 2})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := dataset.Load(ctx, conn, dataset.Spec{Schema: "public", Orders: map[int]int64{1: 3000, 2: 100, 3: 100}, Days: 30, Customers: 10}, time.Unix(1.7e9, 0)); err != nil {
		t.Fatal(err)
	}
	if err := citus.Distribute(ctx, conn, citus.Distribution{Tables: []string{"tenants", "orders"}, ShardCount: 8}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envCitusDSN, coord.DSN())
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if got := realMain(append([]string{"citus"}, args...), &out, &errOut); got != exitOK {
			t.Fatalf("citus %v: exit %d; stderr:\n%s\nstdout:\n%s", args, got, errOut.String(), out.String())
		}
		return out.String()
	}
	var stdout, stderr bytes.Buffer
	if got := realMain([]string{"citus", "plan", "--table", "nosuch", "--for", "100ms"}, &stdout, &stderr); got != exitUsage ||
		!strings.Contains(stderr.String(), "not a distributed table") {
		t.Errorf("plan --table nosuch: exit %d, want 2 saying it is not a distributed table; stderr:\n%s", got, stderr.String())
	}
	// A tenant the bigint column refuses is bad input naming the flag and
	// the type, not the server's 22P02.
	stdout.Reset()
	stderr.Reset()
	if got := realMain([]string{"citus", "isolate", "--tenant", "abc"}, &stdout, &stderr); got != exitUsage ||
		!strings.Contains(stderr.String(), "--tenant") || !strings.Contains(stderr.String(), "(type bigint)") {
		t.Errorf("isolate --tenant abc: exit %d, want 2 naming --tenant and the column's type bigint; stderr:\n%s", got, stderr.String())
	}
	out := run("plan", "--for", "300ms")
	if !strings.Contains(out, "worker skew") || strings.Contains(out, "step 1") {
		t.Errorf("idle plan: want figures and no step:\n%s", out)
	}
	out = run("isolate", "--tenant", "1", "--dedicate")
	if !strings.Contains(out, "isolated true") || !strings.Contains(out, "dedicate worker") {
		t.Errorf("isolate: want an isolated tenant on a dedicated worker:\n%s", out)
	}
	out = run("isolate", "--tenant", "1", "--dedicate")
	if !strings.Contains(out, "(0 step(s) run)") {
		t.Errorf("second isolate did something:\n%s", out)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil || n != 3200 {
		t.Errorf("orders = %d (%v), want 3200", n, err)
	}
}

// TestCitusPlanUnplacedTags: backends tagged t:7, t:abc and t: on an
// integer-distributed table. The two tags that are not tenant keys do not
// blind detection: tenant 7 is placed and planned for, the others are
// reported as unplaced load with their shares.
func TestCitusPlanUnplacedTags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus, Nodes: 2})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := dataset.Load(ctx, conn, dataset.Spec{Schema: "public", Orders: map[int]int64{7: 100, 8: 100}, Days: 30, Customers: 10}, time.Unix(1.7e9, 0)); err != nil {
		t.Fatal(err)
	}
	if err := citus.Distribute(ctx, conn, citus.Distribution{Tables: []string{"tenants", "orders"}, ShardCount: 8}); err != nil {
		t.Fatal(err)
	}
	// One busy backend per tag on the coordinator, for the whole sampling.
	sleepCtx, stopSleeping := context.WithCancel(ctx)
	var sleepers sync.WaitGroup
	defer func() { stopSleeping(); sleepers.Wait() }()
	for _, tag := range []string{"t:7", "t:abc", "t:"} {
		cfg, err := pgx.ParseConfig(coord.DSN())
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = tag
		sc, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		sleepers.Go(func() {
			defer sc.Close(context.Background())
			_, _ = sc.Exec(sleepCtx, "SELECT pg_sleep(60)")
		})
	}
	if err := waitActive(ctx, conn, 3); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envCitusDSN, coord.DSN())
	var out, errOut bytes.Buffer
	if got := realMain([]string{"citus", "plan", "--for", "1s", "--interval", "50ms"}, &out, &errOut); got != exitOK {
		t.Fatalf("citus plan: exit %d; stderr:\n%s\nstdout:\n%s", got, errOut.String(), out.String())
	}
	for _, want := range []string{
		"tenant 7: 33.3% of cluster load",
		`unplaced load: 66.7% of cluster load is tagged with no value of orders's distribution column: "t:" 33.3%, "t:abc" 33.3%`,
		"alert tenant-share: tenant 7 at 33.3%",
		"isolate tenant 7",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "tenant abc") {
		t.Errorf("an unplaced tag listed as a tenant:\n%s", out.String())
	}
}

// waitActive waits until n backends tagged t:… are active on conn's server.
func waitActive(ctx context.Context, conn *pgx.Conn, n int) error {
	for {
		var got int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND starts_with(application_name, 't:')").Scan(&got); err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d tagged backends active, want %d: %w", got, n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestCitusHotShardBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"citus", "hot-shard", "--workers", "1"}, "--workers 1"},
		{[]string{"citus", "hot-shard", "--hot-share", "1"}, "--hot-share 1"},
		{[]string{"citus", "hot-shard", "--mode", "auto"}, `--mode "auto"`},
		{[]string{"citus", "hot-shard", "--query", "export"}, `--query "export"`},
		{[]string{"citus", "hot-shard", "--before", "0s"}, "must be positive"},
		{[]string{"citus", "hot-shard", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := realMain(tc.args, &out, &errOut); got != exitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", got, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, errOut.String())
			}
		})
	}
}

// TestCitusNotInstalledExit2: a missing citus extension is exit 2 with one
// line saying how to provide it.
func TestCitusNotInstalledExit2(t *testing.T) {
	err := fmt.Errorf("start citus cluster: %w", &local.CitusNotInstalledError{Major: 15, Missing: []string{"/usr/lib/postgresql/15/lib/citus.so"}})
	if got := exitCode(err); got != exitUsage {
		t.Errorf("exit %d, want 2", got)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "install the citus extension") {
		t.Errorf("message is not one line saying how to provide Citus: %q", msg)
	}
}

// TestRunHotShardWithoutCitus: the shipped hot-shard scenario on a
// PostgreSQL without Citus exits 2 with one line saying how to provide it.
func TestRunHotShardWithoutCitus(t *testing.T) {
	bin, err := local.FindBinaries(context.Background(), "")
	if err != nil {
		t.Skip("skipping: PostgreSQL server binaries not found")
	}
	// The same binaries, seen from a directory with no Citus beside it.
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"postgres", "initdb", "pg_ctl", "pg_basebackup"} {
		if err := os.Symlink(bin.Path(p), filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(local.EnvBinDir, dir)
	var out, errOut bytes.Buffer
	got := realMain([]string{"run", "--no-progress", "../../scenarios/hot-shard.yaml", "--apply"}, &out, &errOut)
	// The lines before the error are what run says at its start (the
	// quiet sample plan, a wait for the machine).
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	msg := lines[len(lines)-1]
	if got != exitUsage || !strings.Contains(msg, "Citus is not installed") || strings.Contains(strings.Join(lines[:len(lines)-1], "\n"), "Citus") {
		t.Fatalf("exit %d, want 2 with one line saying Citus is not installed; stderr:\n%s", got, errOut.String())
	}
}

// TestCitusReadme: the README's hot-shard section runs the shipped
// scenario and the citus commands, and names only flags they have.
func TestCitusReadme(t *testing.T) {
	sec := readmeSection(t, "Hot shard on Citus")
	for _, want := range []string{"noisysim run scenarios/hot-shard.yaml --apply", "noisysim citus plan", "noisysim citus isolate"} {
		if !strings.Contains(sec, want) {
			t.Errorf("the section does not show %q", want)
		}
	}
	if _, err := os.Stat("../../scenarios/hot-shard.yaml"); err != nil {
		t.Error(err)
	}
	// The section's flags are the citus commands' (hot-shard's included)
	// or noisysim run's.
	var runHelp, runErr bytes.Buffer
	realMain([]string{"run", "--help"}, &runHelp, &runErr)
	runFlags := runHelp.String() + runErr.String()
	for _, f := range flagsIn(sec) {
		if !strings.Contains(citusUsage, f) && !strings.Contains(hotShardUsage, "  "+f+" ") && !strings.Contains(runFlags, "  "+f[1:]+" ") && f != "--help" && f != "--apply" {
			t.Errorf("README names %s, which neither noisysim citus nor noisysim run has", f)
		}
	}
}

// readmeSection returns the README's section under "## heading", up to the
// next "## ", failing t when there is none.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(raw), "\n## "+heading)
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	return sec
}

// flagsIn returns the --flags a text names.
func flagsIn(text string) []string {
	return regexp.MustCompile(`--[a-z][a-z-]+`).FindAllString(text, -1)
}

// TestRunApplyWithoutLadder: --apply on a scenario without a
// hot_shard_ladder watch is a usage error naming what it needs.
func TestRunApplyWithoutLadder(t *testing.T) {
	var out, errOut bytes.Buffer
	got := realMain([]string{"run", "--no-progress", "../../scenarios/ci-gate.yaml", "--apply"}, &out, &errOut)
	if got != exitUsage || !strings.Contains(errOut.String(), "--apply is for scenarios with a hot_shard_ladder watch") {
		t.Fatalf("exit %d, want 2 naming the hot_shard_ladder watch; stderr:\n%s", got, errOut.String())
	}
}
