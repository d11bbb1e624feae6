package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/scenario"
)

// shardsScenario: three shards, the last one spare; tenant 1's sleeps make
// its node hot; the promote policy moves it to primary3 in a phase that
// lasts until the move has ended, under a checked writer.
const shardsScenario = `
name: small-promotion
seed: 5
backend: {kind: local, topology: shards, shards: 3, spare_nodes: 1}
tenants: {count: 6, dominant_share: 0.5}
data: {orders: 3000, customers: 20}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 60}
  - {name: slow, isolation_class: heavy, query: sleep, sleep: 20ms, rate: 40, senders: dominant}
phases: {drain: 1s}
timeline:
  - {name: before, length: 1s}
  - name: move
    until: actions_done
    max: 30s
    watch: {policy: promote, every: 100ms, tenant: 1, target: primary3, threshold: 0.3, window: 300ms, batch_rows: 200, grace: 100ms}
  - {name: after, length: 1s}
writer: {tenant: 1, rate: 50}
configurations:
  - {name: sharded, mode: shared, shared: {pool_size: 4}}
assertions:
  quiet_p99: {window: after, baseline: before, min_samples: 1000000}
  zero_loss: true
  write_pause: {max: 5s}
`

// TestShardsPromotion runs a promotion on a small real cluster of local
// shards: the watcher's policy fires move_tenant, the move phase ends
// when the move has, after starts where it ended, the writer's every
// acknowledged write is found at the target, and the move left nothing at
// the source.
func TestShardsPromotion(t *testing.T) {
	sc, err := scenario.Parse([]byte(shardsScenario), "shards.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rep.Configurations[0]
	if len(cfg.Windows) != 3 {
		t.Fatalf("%d windows, want 3", len(cfg.Windows))
	}
	move, after := cfg.Windows[1], cfg.Windows[2]
	if move.Start != 1 || move.End <= 1.3 || move.End >= 31 || after.Start != move.End || after.End-after.Start < 0.999 {
		t.Errorf("move [%v, %v), after [%v, %v): want move from 1 s until the move ended, after 1 s from there",
			move.Start, move.End, after.Start, after.End)
	}
	if len(cfg.Actions) != 1 {
		t.Fatalf("actions %+v, want one move", cfg.Actions)
	}
	a := cfg.Actions[0]
	if a.Type != scenario.ActionMoveTenant || a.FiredBy != scenario.PolicyPromote || a.Phase != "move" || a.Error != "" {
		t.Errorf("action %+v: want move_tenant fired by promote in move, no error", a)
	}
	if a.After["rows_at_source"] != 0 || a.After["nodes_with_others_changed"] != 0 || a.After["copied_rows"] < 1000 || a.After["move_s"] <= 0 {
		t.Errorf("move figures %v: want the tenant's rows copied (about 1500), none left at the source, no other tenant changed", a.After)
	}
	// The move ended the phase: it ran at most its own length beyond it.
	if end := a.At + a.Took; end > move.End+0.2 {
		t.Errorf("move ended at %.2f s, after its phase (%.2f s)", end, move.End)
	}
	w := cfg.Writer
	if w == nil || w.Node != "primary3" || w.Inserts == 0 || w.Lost+w.Duplicated+w.Stale+w.Vanished != 0 {
		t.Errorf("writer %+v: want writes read back at primary3, none lost", w)
	}
	passed := map[string]bool{}
	for _, as := range rep.Assertions {
		if !as.Skipped {
			passed[as.Name] = as.Passed
		}
	}
	for _, name := range []string{harness.AssertZeroLoss, harness.AssertWritePause, harness.AssertActionsOK} {
		if ok, there := passed[name]; !there || !ok {
			t.Errorf("assertion %s: present %v, passed %v", name, there, ok)
		}
	}
	// After the move, tenant 1's calls ran on primary3: its ledger share
	// in after is its own and the requests of after were served.
	var afterCount int64
	for _, row := range after.Tenants {
		afterCount += row.Count
	}
	if afterCount == 0 {
		t.Error("no request measured in after")
	}
}

// TestShardsOwnWorkload: directory sharding on a data set of the user's
// own. Every node runs data.setup and keeps the rows of the tenants placed
// on it (text keys, data.directory's tables and column); a scripted
// workload runs on each tenant's node; move_tenant copies the user's
// tables, by their tenant column, to the spare node. A lookup of a row
// that is not on the tenant's node fails (\gset wants one row), so no
// error means every call went to the node holding its tenant.
func TestShardsOwnWorkload(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"setup.sql": `CREATE TABLE accounts (org text NOT NULL, id bigint NOT NULL, name text NOT NULL, PRIMARY KEY (org, id));
CREATE TABLE invoices (org text NOT NULL, id bigint NOT NULL, account bigint NOT NULL, total numeric(10,2) NOT NULL, PRIMARY KEY (org, id));
INSERT INTO accounts SELECT t.key, g, 'account ' || g FROM noisysim_tenants t, generate_series(1, t.rows_accounts) g;
INSERT INTO invoices SELECT t.key, g, 1 + g % t.rows_accounts, g / 7.0 FROM noisysim_tenants t, generate_series(1, t.rows_invoices) g;
`,
		"lookup.sql": `\set id random(1, :rows_invoices)
SELECT i.total, a.name FROM invoices i JOIN accounts a ON a.org = i.org AND a.id = i.account
WHERE i.org = :tenant AND i.id = :id \gset
`,
		"s.yaml": `name: own-shards
seed: 3
backend: {kind: local, topology: shards, shards: 3, spare_nodes: 1}
tenants: {count: 5, dominant_share: 0.5, keys: {type: text, template: "org-{n}"}}
data:
  setup: [setup.sql]
  rows: {accounts: 100, invoices: 2000}
  directory: {tables: [accounts, invoices], column: org}
classes:
  - {name: interactive, script: lookup.sql, rate: 60}
phases: {drain: 1s}
timeline:
  - {name: before, length: 1s}
  - name: move
    length: 3s
    actions: [{type: move_tenant, tenant: 1, target: primary3, batch_rows: 200, grace: 100ms}]
  - {name: after, length: 1s}
configurations:
  - {name: sharded, mode: shared, shared: {pool_size: 4}}
assertions:
  quiet_p99: {window: after, baseline: before, min_samples: 1000000}
`,
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rep.Configurations[0]
	if len(cfg.Actions) != 1 {
		t.Fatalf("actions %+v, want one move", cfg.Actions)
	}
	a := cfg.Actions[0]
	// org-1 holds half of each table: 50 accounts and 1,000 invoices.
	if a.Type != scenario.ActionMoveTenant || a.Error != "" || a.After["copied_rows"] != 1050 ||
		a.After["rows_at_source"] != 0 || a.After["nodes_with_others_changed"] != 0 {
		t.Errorf("action %+v: want org-1's 1,050 rows of accounts and invoices moved, none left, no other tenant changed", a)
	}
	var ran, failed int64
	tenants := map[string]bool{}
	for _, w := range cfg.Windows {
		for _, row := range w.Tenants {
			ran += row.Count
			failed += row.Errors
			tenants[row.Tenant] = true
		}
	}
	if ran == 0 || failed != 0 {
		t.Errorf("%d lookups, %d failed: want some, none failed (each on its tenant's node)", ran, failed)
	}
	if !tenants["org-1"] || tenants["1"] {
		t.Errorf("tenants %v: want them named by their keys", tenants)
	}
	// Every node kept only its own tenants (the run kept its schema): the
	// three nodes hold each invoice once, org-1's at primary3.
	var total, want int64
	for _, n := range c.Nodes() {
		conn, err := pgx.Connect(ctx, footprint.InSchema(n, sc.Data.SchemaName()).DSN())
		if err != nil {
			t.Fatal(err)
		}
		var k, org1 int64
		err = conn.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE org = 'org-1') FROM invoices").Scan(&k, &org1)
		if err == nil {
			// Every tenant's part, rounded: about 2,000.
			err = conn.QueryRow(ctx, "SELECT sum(rows_invoices) FROM noisysim_tenants").Scan(&want)
		}
		conn.Close(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		if (n.Name == "primary3") != (org1 == 1000) || org1 != 0 && org1 != 1000 {
			t.Errorf("%s holds %d of org-1's invoices; want all 1,000 at primary3, none elsewhere", n.Name, org1)
		}
		total += k
	}
	if total != want {
		t.Errorf("the nodes hold %d invoices, want %d (each tenant's on its node alone)", total, want)
	}
}

// TestShardsSecondConfiguration: on topology shards each configuration
// after the first starts from a reloaded data set (the tables made anew).
// Its roles must still read the tables and its writer write them: every
// call of the second configuration, a stack of roles of its own, succeeds,
// and so does every write.
func TestShardsSecondConfiguration(t *testing.T) {
	sc, err := scenario.Parse([]byte(`
name: two-configurations
seed: 5
backend: {kind: local, topology: shards, shards: 2}
tenants: {count: 4, dominant_share: 0.5}
data: {orders: 1000, customers: 20}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 40}
phases: {drain: 1s}
timeline:
  - {name: before, length: 1s}
  - {name: after, length: 1s}
writer: {tenant: 1, rate: 20}
configurations:
  - {name: first, mode: shared, shared: {pool_size: 2}}
  - {name: second, mode: isolated}
assertions:
  quiet_p99: {window: after, baseline: before, min_samples: 1000000}
  noisy_rejections: false
  zero_loss: true
`), "two.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Configurations) != 2 {
		t.Fatalf("%d configurations, want 2", len(rep.Configurations))
	}
	for _, cfg := range rep.Configurations {
		var ran, failed int64
		for _, w := range cfg.Windows {
			for _, row := range w.Tenants {
				ran += row.Count
				failed += row.Errors
			}
		}
		if ran == 0 || failed != 0 {
			t.Errorf("%s: %d lookups, %d failed: want some, none failed", cfg.Name, ran, failed)
		}
		if w := cfg.Writer; w == nil || w.Inserts == 0 || w.Errors != 0 {
			t.Errorf("%s: writer %+v: want writes acknowledged, none failed", cfg.Name, w)
		}
	}
}
