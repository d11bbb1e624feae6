package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

// recordSettings is what record may change on a server: the logging
// settings in force, and what ALTER SYSTEM wrote.
const recordSettings = `SELECT concat_ws(' | ',
	(SELECT string_agg(name || '=' || setting, ',' ORDER BY name) FROM pg_settings WHERE name IN
		('logging_collector', 'log_destination', 'log_min_duration_statement', 'log_parameter_max_length',
		 'log_filename', 'log_truncate_on_rotation')),
	(SELECT coalesce(string_agg(name || '=' || setting, ',' ORDER BY seqno), 'auto.conf empty') FROM pg_file_settings
		WHERE sourcefile LIKE '%/postgresql.auto.conf'))`

// adminConn connects to dsn with its own statements left out of the log.
func adminConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["log_min_duration_statement"] = "-1"
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func settingsOf(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), recordSettings).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRecord records a real PostgreSQL that noisysim started while
// statements tagged application_name = t:<tenant> run, stopped by SIGINT
// (and, once, by the end of --for): the log written replays through the
// engine with every statement accounted for per tenant, and the server's
// settings are as they were. On a server the DSN's user cannot show to be
// noisysim's, or whose logging_collector is off, it changes nothing,
// prints the settings to set and exits 2.
func TestRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: records a real PostgreSQL in -short mode")
	}
	needPostgres(t)
	bin := noisysimBinary(t)
	c := localtest.Start(t, backend.Spec{Settings: map[string]string{"logging_collector": "on"}})
	primary, _ := backend.First(c, backend.RolePrimary)
	admin := adminConn(t, primary.DSN())
	ctx := t.Context()
	if _, err := admin.Exec(ctx, `CREATE TABLE items (tenant text, id int, v text, PRIMARY KEY (tenant, id));
		INSERT INTO items SELECT t, g, 'v' || g FROM unnest(ARRAY['acme', 'globex']) t, generate_series(1, 50) g;
		CREATE ROLE plain LOGIN PASSWORD 'plain-pw'`); err != nil {
		t.Fatal(err)
	}
	before := settingsOf(t, admin)
	t.Logf("settings before: %s", before)

	// start runs record and waits until the server writes the
	// recording's file.
	start := func(t *testing.T, out string, args ...string) (*exec.Cmd, *bytes.Buffer) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"record", "--dsn", primary.DSN(), "--out", out}, args...)...)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var f *string
			if err := admin.QueryRow(ctx, "SELECT coalesce(pg_current_logfile('csvlog'), pg_current_logfile('jsonlog'))").Scan(&f); err != nil {
				t.Fatal(err)
			}
			if f != nil && strings.Contains(*f, "noisysim-record-") {
				return cmd, &buf
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("record did not start within 30 s:\n%s", buf.String())
			}
		}
	}
	wait := func(t *testing.T, cmd *exec.Cmd, buf *bytes.Buffer) {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("record: %v\n%s", err, buf.String())
		}
		t.Logf("record:\n%s", buf.String())
		if after := settingsOf(t, admin); after != before {
			t.Errorf("settings after record:\n  %s\nwant as before:\n  %s", after, before)
		}
	}

	t.Run("tagged statements, stopped by SIGINT, replayed", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "rec.json.gz")
		cmd, buf := start(t, out, "--for", "10m")
		want := map[string]int64{}
		session := func(app string, simple bool, fn func(conn *pgx.Conn)) {
			cfg, err := pgx.ParseConfig(primary.DSN())
			if err != nil {
				t.Fatal(err)
			}
			cfg.RuntimeParams["application_name"] = app
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
			for i := 1; i <= 12; i++ {
				exec(conn, "SELECT v FROM items WHERE tenant = $1 AND id = $2", "acme", fmt.Sprint(i))
			}
			want["acme"] += 12
		})
		session("t:globex/report", true, func(conn *pgx.Conn) {
			for i := 1; i <= 5; i++ {
				exec(conn, fmt.Sprintf("SELECT count(*) FROM items WHERE tenant = 'globex' AND id <= %d", i))
			}
			want["globex"] += 5
		})
		session("psql", true, func(conn *pgx.Conn) {
			exec(conn, "SELECT 1")
			want["untagged"]++
		})
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		wait(t, cmd, buf)
		if !strings.Contains(buf.String(), "stopped early") || !strings.Contains(buf.String(), "acme 12, globex 5, untagged 1") {
			t.Errorf("record's output does not say it stopped early with acme 12, globex 5, untagged 1:\n%s", buf.String())
		}
		if m, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(m) > 0 {
			t.Errorf("left behind %v", m)
		}

		// Replayed through the engine: every statement, per tenant.
		if err := os.WriteFile(filepath.Join(dir, "items.sql"), []byte(
			"CREATE TABLE items (tenant text, id int, v text, PRIMARY KEY (tenant, id));\n"+
				"INSERT INTO items SELECT t, g, 'v' || g FROM unnest(ARRAY['acme', 'globex']) t, generate_series(1, 50) g;\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		yaml := `name: record-replay
tenants: {count: 3, keys: {type: text, list: [acme, globex, untagged]}}
data: {setup: [items.sql]}
classes:
  - {name: lookup, isolation_class: interactive, sql: "SELECT 1", rate: 1}
replay: {log: rec.json.gz}
timeline: [{name: run, length: 20s}]
phases: {drain: 2s}
configurations: [{name: isolated, mode: isolated}]
assertions: {quiet_p99: {min_samples: 1000000, baseline: run}}
`
		file := filepath.Join(dir, "replay.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		sc, err := scenario.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, w := range rep.Configurations[0].Windows {
			for _, row := range w.Tenants {
				got[row.Tenant] += row.Count + row.Dropped
				if row.Errors > 0 {
					t.Errorf("%s: %d errors %v", row.Tenant, row.Errors, row.ErrorsByClass)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("replayed per tenant %v, want %v", got, want)
		}
		if r := rep.Replay; r == nil || r.Replayed != 18 || r.Untagged != 1 {
			t.Errorf("replay section %+v, want 18 statements replayed, 1 untagged", r)
		}
	})

	t.Run("for elapses, an ALTER SYSTEM value put back", func(t *testing.T) {
		if _, err := admin.Exec(ctx, "ALTER SYSTEM SET log_min_duration_statement = '250ms'"); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			admin.Exec(ctx, "ALTER SYSTEM RESET log_min_duration_statement")
			admin.Exec(ctx, "SELECT pg_reload_conf()")
		}()
		was := before
		before = settingsOf(t, admin)
		defer func() { before = was }()
		if !strings.Contains(before, "log_min_duration_statement=250ms") {
			t.Fatalf("settings %s, want log_min_duration_statement=250ms in postgresql.auto.conf", before)
		}
		out := filepath.Join(t.TempDir(), "rec.csv")
		began := time.Now()
		cmd, buf := start(t, out, "--for", "2s")
		wait(t, cmd, buf)
		if took := time.Since(began); took < 2*time.Second {
			t.Errorf("record returned after %s, want at least --for 2s", took)
		}
		if _, err := os.Stat(out); err != nil || strings.Contains(buf.String(), "stopped early") ||
			!strings.Contains(buf.String(), "settings put back (log_destination, log_min_duration_statement, log_filename)") {
			t.Errorf("stat %s: %v; output:\n%s", out, err, buf.String())
		}
	})

	t.Run("a second record while one runs changes nothing", func(t *testing.T) {
		dir := t.TempDir()
		cmd, buf := start(t, filepath.Join(dir, "first.json"), "--for", "10m")
		during := settingsOf(t, admin)
		second := filepath.Join(dir, "second.json")
		text, code := recordCmd(t, bin, "--dsn", primary.DSN(), "--for", "1s", "--out", second)
		if code != exitUsage || !strings.Contains(text, "another noisysim record is recording this server") {
			t.Errorf("second record: exit %d, want 2 saying another record is recording:\n%s", code, text)
		}
		if now := settingsOf(t, admin); now != during {
			t.Errorf("the second record changed the settings:\n  %s\nwant the first's:\n  %s", now, during)
		}
		if _, err := os.Stat(second); err == nil {
			t.Errorf("%s written", second)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		wait(t, cmd, buf)
	})

	t.Run("a second SIGINT stops at once, settings put back, nothing left", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "rec.json")
		cmd, buf := start(t, out, "--for", "10m")
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		t.Logf("record:\n%s", buf.String())
		if after := settingsOf(t, admin); after != before {
			t.Errorf("settings after record:\n  %s\nwant as before:\n  %s", after, before)
		}
		// The second signal may land after the graceful stop wrote --out
		// (then rec.json is the recording); never a partial file.
		if m, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(m) > 0 {
			t.Errorf("left behind %v", m)
		}
		if _, err := os.Stat(out); err == nil && strings.Contains(buf.String(), "stopping immediately") {
			t.Errorf("%s written after stopping immediately", out)
		}
	})

	t.Run("settings of a killed record still set: nothing changed", func(t *testing.T) {
		if _, err := admin.Exec(ctx, "ALTER SYSTEM SET log_filename = 'noisysim-record-0d581887740c.log'"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			admin.Exec(ctx, "ALTER SYSTEM RESET log_filename")
			admin.Exec(ctx, "SELECT pg_reload_conf()")
		}()
		was := settingsOf(t, admin)
		out := filepath.Join(t.TempDir(), "rec.json")
		text, code := recordCmd(t, bin, "--dsn", primary.DSN(), "--for", "1s", "--out", out)
		if code != exitUsage || !strings.Contains(text, "a recording that did not end") || !strings.Contains(text, "ALTER SYSTEM RESET log_filename;") {
			t.Errorf("exit %d, want 2 naming the leftover and how to reset it:\n%s", code, text)
		}
		if now := settingsOf(t, admin); now != was {
			t.Errorf("settings changed:\n  %s\nwant:\n  %s", now, was)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s written", out)
		}
	})

	t.Run("the server stops while recording: record ends, not at --for", func(t *testing.T) {
		gone := localtest.Start(t, backend.Spec{Settings: map[string]string{"logging_collector": "on"}})
		p, _ := backend.First(gone, backend.RolePrimary)
		out := filepath.Join(t.TempDir(), "rec.json")
		cmd := exec.Command(bin, "record", "--dsn", p.DSN(), "--for", "10m", "--out", out)
		var buf lockedBuffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(buf.String(), "recording jsonlog"); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("record did not start:\n%s", buf.String())
			}
		}
		if err := gone.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err == nil || !strings.Contains(buf.String(), "the server stopped answering") {
				t.Errorf("record: %v, want an error saying the server stopped answering:\n%s", err, buf.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("record still waiting 30 s after its server stopped:\n%s", buf.String())
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s written", out)
		}
	})

	guidance := func(t *testing.T, dsn, why string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "rec.json")
		text, code := recordCmd(t, bin, "--dsn", dsn, "--for", "1s", "--out", out)
		if code != exitUsage {
			t.Errorf("exit %d, want 2:\n%s", code, text)
		}
		for _, s := range []string{"ALTER SYSTEM SET log_min_duration_statement = '0'", "log_destination", "logging_collector",
			"log_parameter_max_length", "pg_current_logfile('jsonlog')", "nothing was changed", why} {
			if !strings.Contains(text, s) {
				t.Errorf("output lacks %q:\n%s", s, text)
			}
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s written", out)
		}
	}
	t.Run("a server it cannot show is noisysim's", func(t *testing.T) {
		guidance(t, primary.DSNFor("plain", "plain-pw"), "not a superuser")
		if after := settingsOf(t, admin); after != before {
			t.Errorf("settings changed:\n  %s\nwant:\n  %s", after, before)
		}
	})
	t.Run("logging_collector off", func(t *testing.T) {
		off := localtest.Start(t, backend.Spec{})
		p, _ := backend.First(off, backend.RolePrimary)
		offAdmin := adminConn(t, p.DSN())
		was := settingsOf(t, offAdmin)
		guidance(t, p.DSN(), "takes effect only at server start")
		if after := settingsOf(t, offAdmin); after != was {
			t.Errorf("settings changed:\n  %s\nwant:\n  %s", after, was)
		}
	})
}

// recordCmd runs noisysim record with args and returns its stdout and
// stderr, and its exit code.
func recordCmd(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	b, err := exec.Command(bin, append([]string{"record"}, args...)...).CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("noisysim record %s: exit %d\n%s", strings.Join(args, " "), code, b)
	return string(b), code
}

// TestRecordBadInput: every bad flag exits 2 with a message naming it,
// and nothing is written.
func TestRecordBadInput(t *testing.T) {
	bin := noisysimBinary(t)
	dir := t.TempDir()
	exists := filepath.Join(dir, "mine.json")
	if err := os.WriteFile(exists, []byte("the user's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unreachable := "host=127.0.0.1 port=1 user=x dbname=x connect_timeout=2"
	isDir := filepath.Join(dir, "dir.json")
	if err := os.Mkdir(isDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"for missing", []string{"--dsn", unreachable, "--out", filepath.Join(dir, "a.json")}, "--for is missing"},
		{"for zero", []string{"--dsn", unreachable, "--for", "0s", "--out", filepath.Join(dir, "a.json")}, "--for 0s: want a duration above 0"},
		{"for negative", []string{"--dsn", unreachable, "--for", "-1m", "--out", filepath.Join(dir, "a.json")}, "--for -1m0s: want a duration above 0"},
		{"dsn missing", []string{"--for", "1s", "--out", filepath.Join(dir, "a.json")}, "--dsn is missing"},
		{"out missing", []string{"--dsn", unreachable, "--for", "1s"}, "--out is missing"},
		{"out exists", []string{"--dsn", unreachable, "--for", "1s", "--out", exists}, "exists; give --force to overwrite it"},
		{"out is a directory, forced", []string{"--dsn", unreachable, "--for", "1s", "--out", isDir, "--force"}, "--out " + isDir + " is a directory"},
		{"out in no directory", []string{"--dsn", unreachable, "--for", "1s", "--out", filepath.Join(dir, "nope", "a.json")}, "no directory"},
		{"format unknown", []string{"--dsn", unreachable, "--for", "1s", "--out", filepath.Join(dir, "a.log")}, "cannot tell the format from the name"},
		{"format against name", []string{"--dsn", unreachable, "--for", "1s", "--out", filepath.Join(dir, "a.json"), "--format", "csvlog"}, "--out " + filepath.Join(dir, "a.json") + " names jsonlog"},
		{"unreachable", []string{"--dsn", unreachable, "--for", "1s", "--out", filepath.Join(dir, "a.json")}, "--dsn: cannot connect"},
		{"unreachable, forced over a file", []string{"--dsn", unreachable, "--for", "1s", "--out", exists, "--force"}, "--dsn: cannot connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, code := recordCmd(t, bin, tc.args...)
			if code != exitUsage || !strings.Contains(text, tc.want) {
				t.Errorf("exit %d, want 2 with %q:\n%s", code, tc.want, text)
			}
		})
	}
	if b, err := os.ReadFile(exists); err != nil || string(b) != "the user's\n" {
		t.Errorf("the user's file: %q, %v", b, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 2 {
		t.Errorf("files in the out dir: %v, want the user's alone (and its directory)", m)
	}
}
