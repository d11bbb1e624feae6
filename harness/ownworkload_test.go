package harness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// pgbenchTables are pgbench's tables with a tenant column; each tenant
// gets its one branch and ten tellers (pgbench -i at scale 1), and
// accounts are left empty: the script's UPDATE of an account finds none.
const pgbenchTables = `
CREATE TABLE pgbench_branches (tenant text, bid int, bbalance int, filler char(88), PRIMARY KEY (tenant, bid));
CREATE TABLE pgbench_tellers (tenant text, tid int, bid int, tbalance int, filler char(84), PRIMARY KEY (tenant, tid));
CREATE TABLE pgbench_accounts (tenant text, aid int, bid int, abalance int, filler char(84), PRIMARY KEY (tenant, aid));
CREATE TABLE pgbench_history (tenant text, tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
INSERT INTO pgbench_branches SELECT key, 1, 0 FROM noisysim_tenants;
INSERT INTO pgbench_tellers SELECT key, g, 1, 0 FROM noisysim_tenants, generate_series(1, 10) AS g;
`

// writeScenario writes files into a temp dir and returns the dir.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRunPgbenchScript runs pgbench's TPC-B-like builtin script (with
// :tenant added) as a class on a schema of the test's own, with text
// tenant keys, and checks what it left in the database: every transaction
// applied the same delta to its teller, its branch and the history, with
// values in the ranges pgbench's random() gives.
func TestRunPgbenchScript(t *testing.T) {
	tpcb, err := os.ReadFile("../workload/pgscript/testdata/tpcb-like.sql")
	if err != nil {
		t.Fatal(err)
	}
	dir := writeFiles(t, map[string]string{
		"pgbench.sql": pgbenchTables,
		"tpcb.sql":    string(tpcb),
		"s.yaml": `name: own
seed: 3
tenants: {count: 5, keys: {type: text, template: "acme-{n}"}}
data: {setup: [pgbench.sql]}
classes:
  - {name: tpcb, isolation_class: interactive, script: tpcb.sql, rate: 80}
  - {name: history, isolation_class: heavy, sql: "SELECT count(*) FROM pgbench_history WHERE tenant = $1", args: [":tenant"], rate: 5}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 2s}
configurations: [{name: isolated, mode: isolated}]
assertions: {quiet_p99: {min_samples: 1000000}}
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, backend.Spec{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dominant != "acme-1" {
		t.Errorf("dominant %q, want acme-1", rep.Dominant)
	}
	ran := map[string]int64{}
	for _, row := range rep.Configurations[0].Tenants {
		if !strings.HasPrefix(row.Tenant, "acme-") {
			t.Errorf("report row of tenant %q, want a key acme-N", row.Tenant)
		}
		ran[row.Class] += row.Count
		if row.Errors > 0 {
			t.Errorf("tenant %s class %s: %d errors %v", row.Tenant, row.Class, row.Errors, row.ErrorsByClass)
		}
	}
	if ran["tpcb"] == 0 || ran["history"] == 0 {
		t.Fatalf("requests measured by class: %v", ran)
	}

	primary, _ := backend.First(c, backend.RolePrimary)
	conn, err := pgx.Connect(ctx, footprint.InSchema(primary, sc.Data.SchemaName()).DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n, tenants, badTenant, badRange, aids int64
	err = conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT tenant),
		count(*) FILTER (WHERE tenant NOT IN ('acme-1', 'acme-2', 'acme-3', 'acme-4', 'acme-5')),
		count(*) FILTER (WHERE aid NOT BETWEEN 1 AND 100000 OR bid <> 1 OR tid NOT BETWEEN 1 AND 10 OR delta NOT BETWEEN -5000 AND 5000),
		count(DISTINCT aid)
		FROM pgbench_history`).Scan(&n, &tenants, &badTenant, &badRange, &aids)
	if err != nil {
		t.Fatal(err)
	}
	// Every measured tpcb run committed one history row; warm-up runs add more.
	if n < ran["tpcb"] || badTenant != 0 || badRange != 0 || aids < n*9/10 {
		t.Errorf("history: %d rows (measured %d runs), %d tenants, %d of unknown tenants, %d out of pgbench's ranges, %d distinct aids",
			n, ran["tpcb"], tenants, badTenant, badRange, aids)
	}
	// One transaction, one delta: per tenant the history's deltas, the
	// branch's balance and the tellers' balances agree.
	var mismatched int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT b.tenant, b.bbalance, (SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers t WHERE t.tenant = b.tenant) AS tellers,
		       (SELECT coalesce(sum(delta), 0) FROM pgbench_history h WHERE h.tenant = b.tenant) AS history
		FROM pgbench_branches b) s WHERE bbalance <> tellers OR bbalance <> history`).Scan(&mismatched)
	if err != nil || mismatched != 0 {
		t.Errorf("%d tenants whose branch, tellers and history disagree (%v)", mismatched, err)
	}
}

// TestSetupError: a statement of data.setup the server refuses stops the
// run as bad input, naming the file, line and column and the server's
// message.
func TestSetupError(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"setup.sql": "CREATE TABLE t (id int);\n\nINSERT INTO t\n  VALUES (1, 2);\n",
		"s.yaml": `name: bad-setup
tenants: {count: 3}
data: {setup: [setup.sql]}
classes: [{name: interactive, sql: "SELECT 1", rate: 1}]
phases: {warmup: 0s, solo: 1s, run: 1s}
configurations: [{name: shared, mode: shared}]
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, backend.Spec{})
	_, err = harness.Run(t.Context(), sc, harness.Options{Cluster: c})
	want := filepath.Join(dir, "setup.sql") + ":4:14: setup statement failed: ERROR: INSERT has more expressions than target columns (SQLSTATE 42601)"
	if !errors.Is(err, scenario.ErrInvalid) || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one matching ErrInvalid with %q", err, want)
	}
}

// TestSetupKeyTypeMismatch: text keys put into a bigint tenant column stop
// the run as bad input at the setup statement, with the server's message.
func TestSetupKeyTypeMismatch(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"setup.sql": "CREATE TABLE t (tenant bigint, id int);\nINSERT INTO t\n  SELECT key, 1 FROM noisysim_tenants;\n",
		"s.yaml": `name: key-type
tenants: {count: 3, keys: {type: text, template: "org-{n}"}}
data: {setup: [setup.sql]}
classes: [{name: interactive, sql: "SELECT 1", rate: 1}]
phases: {warmup: 0s, solo: 1s, run: 1s}
configurations: [{name: shared, mode: shared}]
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, backend.Spec{})
	_, err = harness.Run(t.Context(), sc, harness.Options{Cluster: c})
	want := filepath.Join(dir, "setup.sql") + ":3:10: setup statement failed: ERROR: column \"tenant\" is of type bigint but expression is of type text"
	if !errors.Is(err, scenario.ErrInvalid) || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one matching ErrInvalid with %q", err, want)
	}
}

// shortSaasInvoices is the example file (scenario.yaml, citus.yaml) of
// examples/saas-invoices with short phases and a small data set.
func shortSaasInvoices(t *testing.T, file string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load("../examples/saas-invoices/" + file)
	if err != nil {
		t.Fatal(err)
	}
	sc.Phases = scenario.Phases{Warmup: scenario.Duration(200 * time.Millisecond), Solo: scenario.Duration(1500 * time.Millisecond),
		Run: scenario.Duration(1500 * time.Millisecond), Drain: scenario.Duration(3 * time.Second)}
	sc.Data.Rows = map[string]int64{"accounts": 200, "invoices": 3000}
	return sc
}

// TestExampleSaasInvoices runs examples/saas-invoices end to end with
// short phases and a small data set: its setup, its three scripts under
// both configurations, the tenants named by their keys.
func TestExampleSaasInvoices(t *testing.T) {
	sc := shortSaasInvoices(t, "scenario.yaml")
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	checkSaasInvoices(t, rep)
}

// TestExampleSaasInvoicesContainers runs the same on the container
// backend (a primary and its replica in containers of the local test
// image), and checks that nothing of the run is left in Docker.
func TestExampleSaasInvoicesContainers(t *testing.T) {
	image := container.LocalTestImage
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	needDockerImage(ctx, t, image)
	sc := shortSaasInvoices(t, "scenario.yaml")
	sc.Backend.Kind, sc.Backend.Image = scenario.BackendDocker, image
	var run string
	rep, err := harness.Run(ctx, sc, harness.Options{OnCluster: func(c backend.Cluster) {
		run = c.(*container.Cluster).RunID()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Backend, "docker replica") {
		t.Errorf("backend %q, want docker replica", rep.Backend)
	}
	checkSaasInvoices(t, rep)
	cs, ns, err := container.Leftovers(context.Background(), container.LabelRun+"="+run)
	if err != nil || len(cs)+len(ns) > 0 || run == "" {
		t.Errorf("run %q left in Docker: containers %v, networks %v (%v)", run, cs, ns, err)
	}
}

// checkSaasInvoices checks a report of examples/saas-invoices: the
// dominant tenant and every row named by key, both configurations, every
// class measured, no error of class other.
func checkSaasInvoices(t *testing.T, rep *reports.Report) {
	t.Helper()
	if rep.Dominant != "org-0001" || len(rep.Configurations) != 2 {
		t.Fatalf("dominant %q, %d configurations; want org-0001 and 2", rep.Dominant, len(rep.Configurations))
	}
	for _, cfg := range rep.Configurations {
		ran := map[string]int64{}
		for _, row := range cfg.Tenants {
			ran[row.Class] += row.Count
			if !strings.HasPrefix(row.Tenant, "org-00") {
				t.Errorf("%s: row of tenant %q, want a key org-00NN", cfg.Name, row.Tenant)
			}
			if n := row.ErrorsByClass[string(scenario.ErrorOther)]; n > 0 {
				t.Errorf("%s: tenant %s class %s: %d errors of class other", cfg.Name, row.Tenant, row.Class, n)
			}
		}
		for _, class := range []string{"lookup", "page", "report"} {
			if ran[class] == 0 {
				t.Errorf("%s: no %s requests measured (%v)", cfg.Name, class, ran)
			}
		}
	}
}

// TestRunScriptOnBuiltinData: scripts and inline statements run on the
// built-in data set too, with :rows_orders; the \gset fails a request whose
// drawn order does not exist, so no error means every id drawn was there.
func TestRunScriptOnBuiltinData(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"lookup.sql": "\\set id random(1, :rows_orders)\nSELECT id AS found FROM orders WHERE tenant_id = :tenant AND id = :id \\gset\nSELECT :found;\n",
		"s.yaml": `name: builtin-scripts
tenants: {count: 4}
data: {orders: 4000}
classes:
  - {name: lookup, isolation_class: interactive, script: lookup.sql, rate: 60}
  - {name: count, isolation_class: heavy, sql: "SELECT count(*) FROM orders WHERE tenant_id = $1 AND id <= $2", args: [":tenant", "least(:rows_orders, 100)"], rate: 5}
  - {name: cal, isolation_class: heavy, sql: "SELECT pg_sleep(0.02)", load_factor: 0.1, calibrate: 200ms, senders: dominant}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 2s}
configurations: [{name: shared, mode: shared, shared: {pool_size: 4}}]
assertions: {quiet_p99: {min_samples: 1000000}}
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, backend.Spec{})
	rep, err := harness.Run(t.Context(), sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int64{}
	for _, row := range rep.Configurations[0].Tenants {
		ran[row.Class] += row.Count
		if row.Errors > 0 {
			t.Errorf("tenant %s class %s: %d errors %v", row.Tenant, row.Class, row.Errors, row.ErrorsByClass)
		}
	}
	if ran["lookup"] == 0 || ran["count"] == 0 || ran["cal"] == 0 {
		t.Errorf("requests measured by class: %v", ran)
	}
	// A calibrated class runs its statement to measure its service time:
	// 20 ms of pg_sleep, so 0.1 × 4 connections / 20 ms is about 20/s.
	if len(rep.Calibrations) != 1 || rep.Calibrations[0].Query != "sql" || rep.Calibrations[0].ServiceMean < 20 ||
		rep.Calibrations[0].Rate > 20 || rep.Calibrations[0].Rate < 5 {
		t.Errorf("calibrations %+v, want one of class cal (sql) at about 20/s", rep.Calibrations)
	}
}

// TestRunExistingData runs a workload on tables already in the database
// (data.existing): the tenants' keys and invoice counts come from a query,
// scripts read the tables unqualified, and nothing of the user's is
// written: a class that tries fails, the rows stay as they were, and no
// privilege of noisysim's roles is left on the user's table.
func TestRunExistingData(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Six tenants with 600, 500, ... 100 invoices: the query orders them by
	// count, so t-a is the dominant tenant; the run takes the first four.
	_, err = conn.Exec(ctx, `CREATE SCHEMA app;
		CREATE TABLE app.invoices (tenant_key text, id bigint, amount numeric(10,2), PRIMARY KEY (tenant_key, id));
		INSERT INTO app.invoices SELECT 't-' || chr(96 + k), g, g / 10.0 FROM generate_series(1, 6) AS k, generate_series(1, (7 - k) * 100) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	sum := func() (s string) {
		if err := conn.QueryRow(ctx, "SELECT sum(amount)::text || '/' || count(*) FROM app.invoices").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := sum()
	dir := writeFiles(t, map[string]string{
		"lookup.sql": "\\set id random(1, :rows_invoices)\nSELECT amount AS found FROM invoices WHERE tenant_key = :tenant AND id = :id \\gset\n",
		"s.yaml": `name: existing
tenants:
  count: 4
  keys: {type: text, query: "SELECT tenant_key, count(*) AS invoices FROM app.invoices GROUP BY 1 ORDER BY 2 DESC, 1", counts: [invoices]}
data: {existing: {schemas: [app]}}
classes:
  - {name: lookup, isolation_class: interactive, script: lookup.sql, rate: 40}
  - {name: write, isolation_class: heavy, sql: "UPDATE invoices SET amount = 0 WHERE tenant_key = $1", args: [":tenant"], rate: 5}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 2s}
configurations: [{name: shared, mode: shared}]
assertions: {quiet_p99: {min_samples: 1000000}}
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dominant != "t-a" {
		t.Errorf("dominant %q, want t-a (the most invoices)", rep.Dominant)
	}
	ran, failed := map[string]int64{}, map[string]int64{}
	for _, row := range rep.Configurations[0].Tenants {
		if !slices.Contains([]string{"t-a", "t-b", "t-c", "t-d"}, row.Tenant) {
			t.Errorf("row of tenant %q, want one of the query's first four", row.Tenant)
		}
		ran[row.Class] += row.Count
		failed[row.Class] += row.Errors
	}
	// The \gset fails a lookup of an invoice that is not there: none is,
	// so :rows_invoices was each tenant's own count.
	if ran["lookup"] == 0 || failed["lookup"] != 0 {
		t.Errorf("lookups: %d measured, %d failed; want some, none failed", ran["lookup"], failed["lookup"])
	}
	if ran["write"] == 0 || failed["write"] != ran["write"] {
		t.Errorf("writes: %d measured, %d failed; want every one refused", ran["write"], failed["write"])
	}
	if after := sum(); after != before {
		t.Errorf("app.invoices changed: %s before, %s after", before, after)
	}
	var acl string
	if err := conn.QueryRow(ctx, "SELECT coalesce(relacl::text, '') FROM pg_class WHERE oid = 'app.invoices'::regclass").Scan(&acl); err != nil || strings.Contains(acl, "noisysim") {
		t.Errorf("app.invoices privileges after the run: %q (%v)", acl, err)
	}
}

// TestExistingKeysProblems: a tenants.keys.query whose rows cannot be the
// tenants is bad input naming the key's file:line:col, before any load.
func TestExistingKeysProblems(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	conn, err := pgx.Connect(t.Context(), primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `CREATE SCHEMA app; CREATE TABLE app.accounts (key text, plan text);
		INSERT INTO app.accounts VALUES ('a', 'free'), ('b', 'free'), ('b', 'pro'), ('c', 'pro')`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, keys, want string }{
		{"no rows", `{type: text, query: "SELECT key FROM app.accounts WHERE false"}`,
			"s.yaml:4:22: tenants.keys.query: returned 0 rows; tenants.count is 3: it needs a key per tenant"},
		{"duplicate keys", `{type: text, query: "SELECT key FROM app.accounts ORDER BY key"}`,
			`s.yaml:4:22: tenants.keys.query: rows 2 and 3 have the same key "b"`},
		{"not a bigint", `{query: "SELECT DISTINCT key FROM app.accounts ORDER BY key"}`,
			`s.yaml:4:10: tenants.keys.query: row 1: key "a" is not a bigint; use keys.type text (tenants.keys.type bigint)`},
		{"not a uuid", `{type: uuid, query: "SELECT DISTINCT key FROM app.accounts ORDER BY key"}`,
			`s.yaml:4:22: tenants.keys.query: row 1: key "a" is not a uuid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"s.yaml": `name: keys
tenants:
  count: 3
  keys: ` + tc.keys + `
data: {existing: {schemas: [app]}}
classes: [{name: interactive, sql: "SELECT 1", rate: 1}]
phases: {warmup: 0s, solo: 1s, run: 1s}
configurations: [{name: shared, mode: shared}]
`})
			sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = harness.Run(t.Context(), sc, harness.Options{Cluster: c})
			if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) {
				t.Errorf("error %v\nwant ErrInvalid with %q", err, filepath.Join(dir, tc.want))
			}
		})
	}
}
