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
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/scenario"
)

// TestExampleSaasInvoicesCitus runs examples/saas-invoices/citus.yaml
// (short phases, a small data set) on a local Citus cluster of two
// workers: the setup runs on the coordinator, the three tables are
// distributed on tenant_key in one co-location group, both configurations
// run every script, and the windows carry the per-worker load with the
// worker holding org-0001. Then a data.citus.tables entry the setup did
// not create, and a table without the tenant column, are bad input at
// their key's file:line:col.
func TestExampleSaasInvoicesCitus(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: the Citus run of the example takes about a minute (-short)")
	}
	sc := shortSaasInvoices(t, "citus.yaml")
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c, Keep: true, MaxForeignCPU: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Backend, "local citus") {
		t.Errorf("backend %q, want local citus", rep.Backend)
	}
	checkSaasInvoices(t, rep)
	if !slices.ContainsFunc(rep.Notes, func(n string) bool {
		return strings.Contains(n, "accounts, invoices, invoice_lines distributed on tenant_key in 8 co-located shards")
	}) {
		t.Errorf("notes %q: none says the tables were distributed", rep.Notes)
	}
	for _, cfg := range rep.Configurations {
		for _, w := range cfg.Windows {
			if w.Name == "run" && (len(w.Workers) != 2 || w.HotWorker == "") {
				t.Errorf("%s: run window workers %v, hot %q: want the load of 2 workers and org-0001's", cfg.Name, w.Workers, w.HotWorker)
			}
		}
	}

	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, footprint.InSchema(coord, sc.Data.SchemaName()).DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT c.relname::text, p.colocationid, column_to_column_name(p.logicalrelid, p.partkey)
		FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 ORDER BY 1`, sc.Data.SchemaName())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	groups := map[int64]bool{}
	for rows.Next() {
		var name, col string
		var group int64
		if err := rows.Scan(&name, &group, &col); err != nil {
			t.Fatal(err)
		}
		got = append(got, name+"("+col+")")
		groups[group] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"accounts(tenant_key)", "invoice_lines(tenant_key)", "invoices(tenant_key)"}; !slices.Equal(got, want) || len(groups) != 1 {
		t.Errorf("distributed tables %v in %d co-location groups, want %v in one", got, len(groups), want)
	}

	// Bad input: a table the setup did not create, a table without the
	// tenant column.
	dir := t.TempDir()
	setup := "CREATE TABLE invoices (tenant_key text, id bigint);\nCREATE TABLE products (sku text);\n"
	if err := os.WriteFile(filepath.Join(dir, "setup.sql"), []byte(setup), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ citus, want string }{
		{"{tables: [invoices, invoice_lines], column: tenant_key}",
			"s.yaml:6:30: data.citus.tables[1]: no table invoice_lines in the run's schema noisysim after data.setup ran"},
		{"{tables: [invoices, products], column: tenant_key}",
			"s.yaml:6:30: data.citus.tables[1]: table products has no column tenant_key"},
	} {
		y := `name: bad-citus
backend: {kind: local, topology: citus, workers: 2}
tenants: {count: 3, keys: {type: text, template: "t{n}"}}
data:
  setup: [setup.sql]
  citus: ` + tc.citus + `
classes: [{name: interactive, sql: "SELECT 1", rate: 1}]
phases: {warmup: 0s, solo: 1s, run: 1s}
configurations: [{name: shared, mode: shared}]
`
		if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		bad, err := scenario.Load(filepath.Join(dir, "s.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = harness.Run(ctx, bad, harness.Options{Cluster: c, MaxForeignCPU: -1})
		if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one matching ErrInvalid with %q", err, tc.want)
		}
	}
}
