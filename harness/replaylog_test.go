package harness_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

// TestReplayPostgresLog records a tenant-tagged workload in a real
// PostgreSQL's csvlog and jsonlog (log_min_duration_statement = 0), then
// replays each log: every statement record is replayed or skipped with its
// cause, each replayed statement is measured for its tenant and the class
// its rule gave it, and the report counts what each rule classified.
func TestReplayPostgresLog(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Settings: map[string]string{
		"logging_collector": "on", "log_destination": "csvlog,jsonlog",
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	primary, _ := backend.First(c, backend.RolePrimary)
	admin, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `CREATE SCHEMA rec; CREATE TABLE rec.items (tenant text, id int, v text, PRIMARY KEY (tenant, id));
		INSERT INTO rec.items SELECT t, g, 'v' || g FROM unnest(ARRAY['acme', 'globex', 'nobody']) t, generate_series(1, 50) g`); err != nil {
		t.Fatal(err)
	}
	// want counts the statements a replay sends, per tenant/class.
	want := map[string]int64{}
	session := func(app string, simple bool, fn func(conn *pgx.Conn)) {
		cfg, err := pgx.ParseConfig(primary.DSN())
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		cfg.RuntimeParams["search_path"] = "rec"
		// Only the recorded sessions log their statements, not the
		// cluster's set-up or the replays.
		cfg.RuntimeParams["log_min_duration_statement"] = "0"
		if simple {
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		fn(conn)
	}
	exec := func(conn *pgx.Conn, sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	session("t:acme", false, func(conn *pgx.Conn) {
		for i := 1; i <= 20; i++ {
			exec(conn, "SELECT v FROM items WHERE tenant = $1 AND id = $2", "acme", fmt.Sprint(i))
		}
		exec(conn, "SELECT count(*)\nFROM items\nWHERE tenant = $1 AND v <> $2", "acme", "it's")
		want["acme/lookup"] += 20
		want["acme/report"]++
		// A transaction block: SAVEPOINT and RELEASE fail outside one, so
		// the replay must run the block on one connection.
		exec(conn, "BEGIN")
		exec(conn, "SAVEPOINT s1")
		exec(conn, "UPDATE items SET v = $3 WHERE tenant = $1 AND id = $2", "acme", "1", "v1")
		exec(conn, "RELEASE SAVEPOINT s1")
		exec(conn, "COMMIT")
		want["acme/lookup"] += 5
	})
	session("t:globex/batch", true, func(conn *pgx.Conn) {
		for i := 1; i <= 5; i++ {
			exec(conn, fmt.Sprintf("SELECT v FROM items WHERE tenant = 'globex' AND id = %d", i))
		}
		want["globex/report"] += 5
	})
	session("", true, func(conn *pgx.Conn) {
		exec(conn, "SELECT 1")
		want["untagged/lookup"]++
	})
	session("t:nobody", false, func(conn *pgx.Conn) {
		exec(conn, "SELECT v FROM items WHERE tenant = $1 AND id = 1", "nobody")
	})
	session("t:nobody", true, func(conn *pgx.Conn) { exec(conn, "SELECT 'end of the recording'") })

	// The collector writes the logs a moment later.
	dir := t.TempDir()
	var dataDir string
	if err := admin.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		t.Fatal(err)
	}
	logs := map[string]string{}
	for _, f := range []string{"csvlog", "jsonlog"} {
		var rel string
		if err := admin.QueryRow(ctx, "SELECT pg_current_logfile($1)", f).Scan(&rel); err != nil {
			t.Fatal(err)
		}
		path := rel
		if !filepath.IsAbs(path) {
			path = filepath.Join(dataDir, rel)
		}
		var b []byte
		for deadline := time.Now().Add(10 * time.Second); ; {
			b, _ = os.ReadFile(path)
			if i := bytes.Index(b, []byte("end of the recording")); i >= 0 {
				if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
					b = b[:i+j+1]
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no end marker after 10 s", path)
			}
			time.Sleep(100 * time.Millisecond)
		}
		name := map[string]string{"csvlog": "pg.csv", "jsonlog": "pg.json"}[f]
		logs[f] = name
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "items.sql"), []byte(
		"CREATE TABLE items (tenant text, id int, v text, PRIMARY KEY (tenant, id));\n"+
			"INSERT INTO items SELECT t, g, 'v' || g FROM unnest(ARRAY['acme', 'globex']) t, generate_series(1, 50) g;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for format, name := range logs {
		t.Run(format, func(t *testing.T) {
			yaml := fmt.Sprintf(`name: log-replay
tenants: {count: 3, keys: {type: text, list: [acme, globex, untagged]}}
data: {setup: [items.sql]}
classes:
  - {name: lookup, isolation_class: interactive, sql: "SELECT 1", rate: 1}
  - {name: report, isolation_class: heavy, sql: "SELECT 1", rate: 1}
replay:
  log: %s
  rules:
    - {class: report, statement: "(?i)count\\("}
    - {class: report, application_suffix: /batch}
  reorder: 2s
timeline:
  - {name: solo, length: 30s}
  - {name: run, length: 30s}
phases: {drain: 2s}
configurations: [{name: naive, mode: shared, shared: {pool_size: 4}}, {name: isolated, mode: isolated}]
assertions: {quiet_p99: {min_samples: 1000000}}
`, name)
			file := filepath.Join(dir, format+".yaml")
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c, Trace: &bytes.Buffer{}})
			if err != nil {
				t.Fatal(err)
			}
			for _, cfg := range rep.Configurations {
				got := map[string]int64{}
				for _, w := range cfg.Windows {
					for _, row := range w.Tenants {
						got[row.Tenant+"/"+row.Class] += row.Count + row.Dropped
						if row.Errors > 0 {
							t.Errorf("%s: %s/%s: %d errors %v", cfg.Name, row.Tenant, row.Class, row.Errors, row.ErrorsByClass)
						}
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s replayed per tenant/class %v, want %v", cfg.Name, got, want)
				}
			}
			r := rep.Replay
			if r == nil {
				t.Fatal("report without a replay section")
			}
			var skipped int64
			for _, s := range r.Skipped {
				skipped += s.Count
			}
			if r.Replayed != 32 || r.Untagged != 1 || r.Records != r.Replayed+skipped {
				t.Errorf("replay: %d records, %d replayed, %d skipped %+v, %d untagged; want 32 replayed, 1 untagged, every record accounted for",
					r.Records, r.Replayed, skipped, r.Skipped, r.Untagged)
			}
			causes := map[string]int64{}
			for _, s := range r.Skipped {
				causes[s.Cause] = s.Count
			}
			// nobody's two statements.
			if causes["tenant not in the scenario"] != 2 {
				t.Errorf("skipped by cause %v", causes)
			}
			rules := map[string]int64{}
			for _, rc := range r.Rules {
				rules[rc.Rule] = rc.Count
			}
			if rules[`rules[0] (statement ~ (?i)count\()`] != 1 || rules["rules[1] (application_name suffix /batch)"] != 5 ||
				rules["default_class lookup"] != 26 {
				t.Errorf("rules %v", rules)
			}
		})
	}
}
