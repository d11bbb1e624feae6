package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/dataset"
)

func TestTenantMoveBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"tenant"}, "missing subcommand"},
		{[]string{"tenant", "shove"}, `unknown subcommand "shove"`},
		{[]string{"tenant", "move", "--to", "a", "--node", "a=postgres://x/y"}, "--tenant is required"},
		{[]string{"tenant", "move", "--tenant", "1", "--node", "a=postgres://x/y"}, "--to is required"},
		{[]string{"tenant", "move", "--tenant", "1", "--to", "b", "--node", "a=postgres://x/y"}, `--to "b" is not one of`},
		{[]string{"tenant", "move", "--tenant", "1", "--to", "a", "--node", "nodsn"}, "want NAME=DSN"},
		{[]string{"tenant", "move", "--tenant", "1", "--to", "a", "--node", "a=postgres://x/y", "--batch-rows", "0"}, "--batch-rows 0: must be > 0"},
		{[]string{"tenant", "move", "--tenant", "1", "--to", "a", "--node", "a=postgres://x/y", "--max-pause", "0s"}, "--max-pause 0s: must be > 0"},
		{[]string{"tenant", "move", "--tenant", "1", "--to", "a", "--node", "a=postgres://x/y", "--grace", "-1s"}, "--grace -1s: must be >= 0"},
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

// TestTenantMove moves a tenant between two running nodes given by DSN,
// then runs the same command again (nothing to do).
func TestTenantMove(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 2})
	nodes := c.Nodes()
	ctx := t.Context()
	for i, n := range nodes {
		conn, err := pgx.Connect(ctx, n.DSN())
		if err != nil {
			t.Fatal(err)
		}
		orders := map[int]int64{1: 5000, 2: 10}
		if err := dataset.Load(ctx, conn, dataset.Spec{Schema: "public", Orders: orders, Days: 30, Customers: 10}, time.Unix(1.7e9, 0)); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // the target starts empty
			if _, err := conn.Exec(ctx, "TRUNCATE orders, tenants"); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close(ctx)
	}
	args := []string{"tenant", "move", "--install", "--tenant", "1", "--to", nodes[1].Name, "--grace", "0s",
		"--node", nodes[0].Name + "=" + nodes[0].DSN(), "--node", nodes[1].Name + "=" + nodes[1].DSN()}
	var out, errOut bytes.Buffer
	if got := realMain(args, &out, &errOut); got != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", got, errOut.String())
	}
	t.Logf("%s", out.String())
	if !strings.Contains(out.String(), "tenant 1 moved "+nodes[0].Name+" → "+nodes[1].Name) || !strings.Contains(out.String(), "5000 rows") {
		t.Errorf("output lacks the move's figures:\n%s", out.String())
	}
	conn, err := pgx.Connect(ctx, nodes[1].DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE tenant_id = 1").Scan(&n); err != nil || n != 5000 {
		t.Errorf("target holds %d orders of tenant 1 (%v), want 5000", n, err)
	}
	out.Reset()
	if got := realMain(args, &out, &errOut); got != exitOK || !strings.Contains(out.String(), "already on") {
		t.Errorf("second run: exit %d, output %q; want 0 and already on", got, out.String())
	}
	// --install again towards the other node must not change the hash
	// ring: tenant 2 stays placed on the node holding its rows.
	back := []string{"tenant", "move", "--install", "--tenant", "2", "--to", nodes[0].Name, "--grace", "0s",
		"--node", nodes[0].Name + "=" + nodes[0].DSN(), "--node", nodes[1].Name + "=" + nodes[1].DSN()}
	out.Reset()
	if got := realMain(back, &out, &errOut); got != exitOK || !strings.Contains(out.String(), "already on") {
		t.Errorf("tenant 2 to its own node with --install: exit %d, output %q; want 0 and already on; stderr:\n%s", got, out.String(), errOut.String())
	}
	src, err := pgx.Connect(ctx, nodes[0].DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	if err := src.QueryRow(ctx, "SELECT count(*) FROM orders WHERE tenant_id = 2").Scan(&n); err != nil || n != 10 {
		t.Errorf("%s holds %d orders of tenant 2 (%v), want 10", nodes[0].Name, n, err)
	}
}

// TestRunTenantPromotion runs scenarios/tenant-promotion.yaml end to end
// with the built binary: exit 0; the promote policy fired the move, which
// left nothing at the source and no other tenant changed; the checker
// found every acknowledged write; the quiet tenants are no slower after.
func TestRunTenantPromotion(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	if _, err := local.FindBinaries(context.Background(), ""); errors.Is(err, backend.ErrNotInstalled) {
		t.Skipf("skipping: PostgreSQL server binaries not found: %v", err)
	}
	// The binary is built without -race: the race detector's overhead would
	// be measured as the database's latency.
	bin := noisysimBinary(t)
	dir := filepath.Join(t.TempDir(), "report")
	// Retried as ci/gate.sh does when a check failed on a DISTURBED window.
	cmd := exec.Command(bin, "run", "--no-progress", "--retry-disturbed", "2", "../../scenarios/tenant-promotion.yaml", "--out", dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("noisysim run tenant-promotion.yaml:\n%s\n%s", out.String(), errOut.String())
	if err != nil {
		t.Fatalf("run: %v, want exit 0", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Passed     bool `json:"passed"`
		Assertions []struct {
			Name    string `json:"name"`
			Passed  bool   `json:"passed"`
			Skipped bool   `json:"skipped"`
		} `json:"assertions"`
		Configurations []struct {
			Name  string `json:"name"`
			Stats struct {
				Issued       int64   `json:"issued"`
				AchievedRate float64 `json:"achieved_rate_per_s"`
			} `json:"stats"`
			TopDBTime []struct {
				Tenant string  `json:"tenant"`
				Share  float64 `json:"share"`
			} `json:"top_db_time"`
			Actions []struct {
				Type    string             `json:"type"`
				FiredBy string             `json:"fired_by"`
				Detail  string             `json:"detail"`
				Error   string             `json:"error"`
				After   map[string]float64 `json:"after"`
			} `json:"actions"`
			Writer *struct {
				Node    string `json:"node"`
				Inserts int64  `json:"inserts"`
				Lost    int64  `json:"lost"`
			} `json:"writer"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, a := range rep.Assertions {
		if !a.Skipped {
			names[a.Name] = a.Passed
		}
	}
	for _, want := range []string{"zero_loss", "write_pause", "actions_ok", "quiet_p99"} {
		if pass, ok := names[want]; !ok || !pass {
			t.Errorf("assertion %s: present %v, passed %v", want, ok, pass)
		}
	}
	if len(rep.Configurations) != 1 {
		t.Fatalf("%d configurations, want 1", len(rep.Configurations))
	}
	c := rep.Configurations[0]
	if c.Stats.Issued == 0 || c.Stats.AchievedRate == 0 || len(c.TopDBTime) == 0 || c.TopDBTime[0].Share == 0 {
		t.Errorf("stats %+v, top DB time %+v; want issued ops, a rate and DB-time shares", c.Stats, c.TopDBTime)
	}
	if len(c.Actions) != 1 {
		t.Fatalf("actions %+v, want the one move", c.Actions)
	}
	a := c.Actions[0]
	if a.Type != "move_tenant" || a.FiredBy != "promote" || a.Error != "" || !strings.Contains(a.Detail, "MB/s") ||
		a.After["rows_at_source"] != 0 || a.After["nodes_with_others_changed"] != 0 {
		t.Errorf("action %+v: want move_tenant fired by promote with its figures, nothing left at the source, no other tenant changed", a)
	}
	if w := c.Writer; w == nil || w.Node != "primary4" || w.Inserts == 0 || w.Lost != 0 {
		t.Errorf("writer %+v: want the writes read back at primary4, none lost", w)
	}
	if !rep.Passed {
		t.Error("report did not pass")
	}
}

// TestRunIncidentDrill runs scenarios/incident-drill.yaml end to end with
// the built binary: exit 0; the promote policy moved the hot tenant to the
// spare node, every acknowledged write was found there, and the quiet
// tenants' p99 after the move passed against their solo baseline (in one of
// up to three attempts when the guard found the machine disturbed).
func TestRunIncidentDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	if _, err := local.FindBinaries(context.Background(), ""); errors.Is(err, backend.ErrNotInstalled) {
		t.Skipf("skipping: PostgreSQL server binaries not found: %v", err)
	}
	bin := noisysimBinary(t)
	dir := filepath.Join(t.TempDir(), "report")
	// As ci/gate.sh does: a quiet_p99 that failed on a window the guard
	// marked DISTURBED (hypervisor steal on a shared host) runs again; a
	// failure on undisturbed windows still fails at once.
	cmd := exec.Command(bin, "run", "--no-progress", "--retry-disturbed", "2", "../../scenarios/incident-drill.yaml", "--out", dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("noisysim run incident-drill.yaml:\n%s\n%s", out.String(), errOut.String())
	if err != nil {
		t.Fatalf("run: %v, want exit 0", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Passed     bool `json:"passed"`
		Assertions []struct {
			Name    string `json:"name"`
			Tenant  string `json:"tenant"`
			Passed  bool   `json:"passed"`
			Skipped bool   `json:"skipped"`
			Window  string `json:"window"`
		} `json:"assertions"`
		Configurations []struct {
			Actions []struct {
				Type    string `json:"type"`
				FiredBy string `json:"fired_by"`
				Error   string `json:"error"`
			} `json:"actions"`
			Writer *struct {
				Node string `json:"node"`
				Lost int64  `json:"lost"`
			} `json:"writer"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	quiet, zero := false, false
	for _, a := range rep.Assertions {
		quiet = quiet || a.Name == "quiet_p99" && a.Tenant == "quiet (all)" && a.Window == "after" && a.Passed && !a.Skipped
		zero = zero || a.Name == "zero_loss" && a.Passed
	}
	if !quiet || !zero {
		t.Errorf("quiet_p99 over all quiet tenants in after passed %v, zero_loss passed %v; want both", quiet, zero)
	}
	c := rep.Configurations[0]
	if len(c.Actions) != 1 || c.Actions[0].Type != "move_tenant" || c.Actions[0].FiredBy != "promote" || c.Actions[0].Error != "" {
		t.Errorf("actions %+v, want one move_tenant fired by promote", c.Actions)
	}
	if c.Writer == nil || c.Writer.Node != "primary3" || c.Writer.Lost != 0 {
		t.Errorf("writer %+v, want its rows read back at primary3, none lost", c.Writer)
	}
	if !rep.Passed {
		t.Error("report did not pass")
	}
}

// twoNodes starts two primaries with the data set, tenants 1 (5000
// orders) and 2 (10 orders) on the first; the second starts empty.
func twoNodes(t *testing.T) []backend.Node {
	t.Helper()
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 2})
	nodes := c.Nodes()
	ctx := t.Context()
	for i, n := range nodes {
		conn, err := pgx.Connect(ctx, n.DSN())
		if err != nil {
			t.Fatal(err)
		}
		if err := dataset.Load(ctx, conn, dataset.Spec{Schema: "public", Orders: map[int]int64{1: 5000, 2: 10}, Days: 30, Customers: 10}, time.Unix(1.7e9, 0)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if _, err := conn.Exec(ctx, "TRUNCATE orders, tenants"); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close(ctx)
	}
	return nodes
}

// catalogState is what the catalog on node holds: its version, entries and
// moves ("none" when it does not exist).
func catalogState(t *testing.T, node backend.Node) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), node.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(t.Context(), `SELECT CASE WHEN to_regclass('noisysim_directory.meta') IS NULL THEN 'none' END`).Scan(&s)
	if err == nil && s == "none" {
		return s
	}
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT version FROM noisysim_directory.meta) || ' tenants ' ||
		(SELECT coalesce(string_agg(tenant_id || ':' || node || ':' || state, ','), '') FROM noisysim_directory.tenants) || ' moves ' ||
		(SELECT coalesce(string_agg(tenant_id || ':' || step, ','), '') FROM noisysim_directory.moves)`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTenantMoveInvalidTenant: a tenant id the tenant column cannot hold
// is bad input (exit 2, naming --tenant) and writes nothing to the
// catalog, whether --install would create it or it exists.
func TestTenantMoveInvalidTenant(t *testing.T) {
	nodes := twoNodes(t)
	move := func(install bool, tenant string) []string {
		args := []string{"tenant", "move", "--tenant", tenant, "--to", nodes[1].Name, "--grace", "0s",
			"--node", nodes[0].Name + "=" + nodes[0].DSN(), "--node", nodes[1].Name + "=" + nodes[1].DSN()}
		if install {
			args = append(args, "--install")
		}
		return args
	}
	bad := []string{"abc", "1.5", "99999999999999999999", " "}
	for _, tenant := range bad {
		var out, errOut bytes.Buffer
		if got := realMain(move(true, tenant), &out, &errOut); got != exitUsage || !strings.Contains(errOut.String(), "--tenant") {
			t.Errorf("--install --tenant %q: exit %d, stderr %q; want 2 naming --tenant", tenant, got, errOut.String())
		}
		if s := catalogState(t, nodes[0]); s != "none" {
			t.Errorf("--install --tenant %q created the catalog: %s", tenant, s)
		}
	}
	// An installed catalog: move tenant 2 there and back is not needed,
	// installing is enough.
	var out, errOut bytes.Buffer
	if got := realMain(move(true, "2"), &out, &errOut); got != exitOK {
		t.Fatalf("move tenant 2: exit %d; stderr:\n%s", got, errOut.String())
	}
	before := catalogState(t, nodes[0])
	for _, tenant := range bad {
		for _, install := range []bool{false, true} {
			out.Reset()
			errOut.Reset()
			if got := realMain(move(install, tenant), &out, &errOut); got != exitUsage || !strings.Contains(errOut.String(), "--tenant") {
				t.Errorf("--tenant %q (install %v): exit %d, stderr %q; want 2 naming --tenant", tenant, install, got, errOut.String())
			}
			if s := catalogState(t, nodes[0]); s != before {
				t.Errorf("--tenant %q (install %v) changed the catalog: %s, was %s", tenant, install, s, before)
			}
		}
	}
}

// TestTenantMoveOccupiedTarget: a target that already holds rows of the
// tenant is refused (exit 2, naming --overwrite-target) and keeps them;
// --overwrite-target replaces them with the source's.
func TestTenantMoveOccupiedTarget(t *testing.T) {
	nodes := twoNodes(t)
	ctx := t.Context()
	dst, err := pgx.Connect(ctx, nodes[1].DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(context.Background())
	if _, err := dst.Exec(ctx, `INSERT INTO orders (tenant_id, id, created_at, amount, status, customer, note)
		VALUES (2, 1, now(), 1, 'paid', 'hand', 'restored by hand'), (2, 999999, now(), 1, 'paid', 'hand', 'only here')`); err != nil {
		t.Fatal(err)
	}
	args := []string{"tenant", "move", "--install", "--tenant", "2", "--to", nodes[1].Name, "--grace", "0s",
		"--node", nodes[0].Name + "=" + nodes[0].DSN(), "--node", nodes[1].Name + "=" + nodes[1].DSN()}
	var out, errOut bytes.Buffer
	if got := realMain(args, &out, &errOut); got != exitUsage || !strings.Contains(errOut.String(), "--overwrite-target") ||
		!strings.Contains(errOut.String(), "2 rows of tenant 2") {
		t.Fatalf("move to a target holding 2 rows of the tenant: exit %d, stderr %q; want 2 naming the rows and --overwrite-target", got, errOut.String())
	}
	count := func() (n int, note string) {
		t.Helper()
		if err := dst.QueryRow(ctx, "SELECT count(*), coalesce(max(note) FILTER (WHERE id = 999999), '') FROM orders WHERE tenant_id = 2").Scan(&n, &note); err != nil {
			t.Fatal(err)
		}
		return n, note
	}
	if n, note := count(); n != 2 || note != "only here" {
		t.Errorf("the refused move left %d rows (%q), want the 2 it found", n, note)
	}
	if s := catalogState(t, nodes[0]); strings.Contains(s, "2:") {
		t.Errorf("the refused move wrote tenant 2 to the catalog: %s", s)
	}
	out.Reset()
	errOut.Reset()
	if got := realMain(append(args, "--overwrite-target"), &out, &errOut); got != exitOK {
		t.Fatalf("--overwrite-target: exit %d; stderr:\n%s", got, errOut.String())
	}
	if n, note := count(); n != 10 || note != "" {
		t.Errorf("after --overwrite-target the target holds %d rows of tenant 2 (stray %q), want the source's 10", n, note)
	}
}

// TestTenantReadme: the README's tenant promotion section runs the shipped
// scenario and names only flags tenant move has.
func TestTenantReadme(t *testing.T) {
	sec := readmeSection(t, "Tenant promotion")
	if !strings.Contains(sec, "noisysim run scenarios/tenant-promotion.yaml") || !strings.Contains(sec, "noisysim tenant move") {
		t.Errorf("the section shows neither the scenario run nor tenant move:\n%s", sec)
	}
	if _, err := os.Stat("../../scenarios/tenant-promotion.yaml"); err != nil {
		t.Error(err)
	}
	for _, f := range flagsIn(sec) {
		if !strings.Contains(tenantUsage, "  "+f+" ") && f != "--help" {
			t.Errorf("README names %s, which tenant move does not have", f)
		}
	}
}

// A node's DSN with a wrong password is bad input: exit 2, saying what the
// server said, before anything is written.
func TestTenantMoveWrongPassword(t *testing.T) {
	nodes := twoNodes(t)
	for _, wrong := range []int{1, 0} {
		dsn := func(i int) string {
			if i == wrong {
				return nodes[i].DSNFor(nodes[i].User, "wrong-password")
			}
			return nodes[i].DSN()
		}
		var out, errOut bytes.Buffer
		code := realMain([]string{"tenant", "move", "--install", "--tenant", "2", "--to", nodes[1].Name, "--grace", "0s",
			"--node", nodes[0].Name + "=" + dsn(0), "--node", nodes[1].Name + "=" + dsn(1)}, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "authentication failed") {
			t.Errorf("wrong password on node %d: exit %d, stderr %q; want 2 and \"authentication failed\"", wrong, code, errOut.String())
		}
		if s := catalogState(t, nodes[0]); s != "none" {
			t.Errorf("wrong password on node %d: the catalog was created: %s", wrong, s)
		}
	}
}
