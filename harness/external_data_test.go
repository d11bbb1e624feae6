package harness_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

// userDB is an existing database, as a user of noisysim would point an
// external scenario at: a table orders of their own with one row, and a
// role of their own.
type userDB struct {
	admin *pgx.Conn
	role  string // the user's role, as pg_roles and its settings showed it before any run
}

const userOrders = `
CREATE TABLE public.orders (id int PRIMARY KEY, customer text NOT NULL);
INSERT INTO public.orders VALUES (1, 'the user''s only order');
CREATE ROLE app_user LOGIN CONNECTION LIMIT 7 PASSWORD 'secret';
ALTER ROLE app_user SET statement_timeout = '1234ms';
GRANT SELECT ON public.orders TO app_user;`

// roleState is everything about the user's role a run could change.
const roleState = `SELECT r.rolname || ' ' || r.rolcanlogin || ' ' || r.rolconnlimit || ' ' || coalesce(r.rolpassword, '') || ' ' ||
	coalesce((SELECT string_agg(s, ',') FROM pg_db_role_setting d, unnest(d.setconfig) s WHERE d.setrole = r.oid), '') || ' ' ||
	coalesce(shobj_description(r.oid, 'pg_authid'), '') || ' ' ||
	has_table_privilege(r.oid, 'public.orders', 'SELECT')
	FROM pg_authid r WHERE rolname = 'app_user'`

func newUserDB(t *testing.T, c backend.Cluster) *userDB {
	t.Helper()
	primary, _ := backend.First(c, backend.RolePrimary)
	admin, err := pgx.Connect(t.Context(), primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(t.Context(), userOrders); err != nil {
		t.Fatal(err)
	}
	u := &userDB{admin: admin}
	if err := admin.QueryRow(t.Context(), roleState).Scan(&u.role); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOISYSIM_TEST_USER_DSN", primary.DSN())
	return u
}

// check fails t unless the user's table, its row and role are as they were
// and nothing of noisysim is left: no schema, no role, no session.
func (u *userDB) check(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var rows []string
	r, err := u.admin.Query(ctx, "SELECT id || ' ' || customer FROM public.orders ORDER BY id")
	if err != nil {
		t.Fatalf("the user's table orders: %v", err)
	}
	rows, err = pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rows) != "[1 the user's only order]" {
		t.Errorf("the user's orders hold %d rows %q, want their one row", len(rows), rows[:min(len(rows), 3)])
	}
	var role string
	if err := u.admin.QueryRow(ctx, roleState).Scan(&role); err != nil {
		t.Fatalf("the user's role: %v", err)
	}
	if role != u.role {
		t.Errorf("the user's role changed:\n got %s\nwant %s", role, u.role)
	}
	left := func(what, sql string) {
		r, err := u.admin.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(names) > 0 {
			t.Errorf("%s left behind: %v", what, names)
		}
	}
	left("schemas", "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'noisysim%'")
	left("roles", "SELECT rolname::text FROM pg_roles WHERE rolname LIKE 'noisysim%'")
	left("tables", "SELECT oid::regclass::text FROM pg_class WHERE relkind IN ('r', 'p') AND relnamespace <> 'pg_catalog'::regnamespace AND relnamespace <> 'information_schema'::regnamespace AND oid <> 'public.orders'::regclass")
	left("sessions", "SELECT usename::text FROM pg_stat_activity WHERE usename LIKE 'noisysim%' OR application_name LIKE 't:%'")
}

const onUserDB = `
name: external
seed: 5
backend: {kind: external, primary_dsn: "${NOISYSIM_TEST_USER_DSN}"}
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 500ms}
configurations:
  - {name: naive, mode: shared, expect: fail}
  - {name: isolated, mode: isolated}
assertions: {quiet_p99: {min_samples: 1000000}}
`

func parse(t *testing.T, text string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(text), "external.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestExternalDatabaseKeepsUserData runs scenarios against a database
// noisysim did not start, which holds a table orders and a role of the
// user's: after a run, a failed run and an interrupted one, the user's
// table, row and role are as they were and nothing noisysim created is
// left. A schema or role of the names noisysim would use that it did not
// create makes the run refuse to start, touching nothing.
func TestExternalDatabaseKeepsUserData(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: scenario runs in -short mode")
	}
	c := localtest.Start(t, backend.Spec{})
	u := newUserDB(t, c)
	run := func(t *testing.T, sc *scenario.Scenario, opts harness.Options) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		_, err := harness.Run(ctx, sc, opts)
		return err
	}

	t.Run("run", func(t *testing.T) {
		if err := run(t, parse(t, onUserDB), harness.Options{}); err != nil {
			t.Fatal(err)
		}
		u.check(t)
	})
	t.Run("assertion fails", func(t *testing.T) {
		if err := run(t, parse(t, onUserDB), harness.Options{Only: "naive"}); err != nil {
			t.Fatal(err)
		}
		u.check(t)
	})
	t.Run("run fails", func(t *testing.T) {
		// The server refuses a step of the last role's set-up (an event
		// trigger of the user's raises on its GRANT on the schema): the
		// run fails once the data set is loaded and two roles and part
		// of the third exist. A value validate could catch (work_mem
		// 9000TB) no longer gets this far.
		if _, err := u.admin.Exec(t.Context(), `
			CREATE FUNCTION public.refuse_heavy_grant() RETURNS event_trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'noisysim_isolated_heavy') THEN
					RAISE EXCEPTION 'the user''s event trigger refuses this GRANT';
				END IF;
			END $$;
			CREATE EVENT TRIGGER refuse_heavy_grant ON ddl_command_end WHEN TAG IN ('GRANT') EXECUTE FUNCTION public.refuse_heavy_grant()`); err != nil {
			t.Fatal(err)
		}
		defer u.admin.Exec(context.Background(), "DROP EVENT TRIGGER refuse_heavy_grant; DROP FUNCTION public.refuse_heavy_grant()")
		err := run(t, parse(t, onUserDB), harness.Options{})
		if !errors.Is(err, harness.ErrRun) || !strings.Contains(err.Error(), "refuses this GRANT") {
			t.Fatalf("got %v, want the run failed by the trigger", err)
		}
		u.check(t)
	})
	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var once sync.Once
		_, err := harness.Run(ctx, parse(t, onUserDB), harness.Options{ProgressEvery: 50 * time.Millisecond,
			Progress: func(p harness.Progress) {
				if p.Phase == harness.PhaseRun && p.Elapsed > 300*time.Millisecond {
					once.Do(cancel)
				}
			}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want the run cancelled", err)
		}
		u.check(t)
	})
	t.Run("cleanup cannot log in", func(t *testing.T) {
		// The DSN's password changes mid-run: the run cannot log in to
		// remove what it created. It says so, naming what it left and
		// that the next run removes it; the next run does.
		cfg, err := pgx.ParseConfig(os.Getenv("NOISYSIM_TEST_USER_DSN"))
		if err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		var once sync.Once
		var alterErr error
		_, err = harness.Run(ctx, parse(t, onUserDB), harness.Options{Only: "isolated",
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), ProgressEvery: 50 * time.Millisecond,
			Progress: func(p harness.Progress) {
				if p.Phase == harness.PhaseRun {
					once.Do(func() {
						_, alterErr = u.admin.Exec(context.Background(), "ALTER ROLE "+pgx.Identifier{cfg.User}.Sanitize()+" PASSWORD 'changed mid-run'")
					})
				}
			}})
		if _, rerr := u.admin.Exec(context.Background(), "ALTER ROLE "+pgx.Identifier{cfg.User}.Sanitize()+" PASSWORD "+quote(cfg.Password)); rerr != nil {
			t.Fatal(rerr)
		}
		if alterErr != nil {
			t.Fatal(alterErr)
		}
		t.Logf("run: %v", err)
		for _, want := range []string{"could not remove what the run created", "the next run against this database removes it",
			`schema=noisysim`, "noisysim_isolated_interactive", "authentication failed"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the log lacks %q:\n%s", want, logs.String())
			}
		}
		if err := run(t, parse(t, onUserDB), harness.Options{Only: "naive"}); err != nil {
			t.Fatal(err)
		}
		u.check(t)
	})
	t.Run("kept", func(t *testing.T) {
		// --keep leaves the schema and roles for a look, and the report
		// says what it left; the next run takes them over (they carry
		// noisysim's mark) and removes them, the roles of configurations
		// it does not run too.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		rep, err := harness.Run(ctx, parse(t, onUserDB), harness.Options{Only: "isolated", Keep: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(rep.Notes, func(s string) bool {
			return strings.Contains(s, "--keep") && strings.Contains(s, `schema "noisysim"`) && strings.Contains(s, "noisysim_isolated_interactive")
		}) {
			t.Errorf("the report's notes do not say what --keep left: %q", rep.Notes)
		}
		var n int
		if err := u.admin.QueryRow(t.Context(), "SELECT count(*) FROM noisysim.orders").Scan(&n); err != nil || n != 2000 {
			t.Errorf("kept noisysim.orders: %d rows, %v; want 2000", n, err)
		}
		if err := run(t, parse(t, onUserDB), harness.Options{Only: "naive"}); err != nil {
			t.Fatal(err)
		}
		u.check(t)
	})

	refuse := []struct {
		name, create, drop, want string
	}{
		{"schema", "CREATE SCHEMA noisysim; CREATE TABLE noisysim.orders (id int); INSERT INTO noisysim.orders VALUES (7)",
			"DROP SCHEMA noisysim CASCADE", `schema "noisysim"`},
		{"role", "CREATE ROLE noisysim_isolated_interactive CONNECTION LIMIT 3",
			"DROP ROLE noisysim_isolated_interactive", `role "noisysim_isolated_interactive"`},
	}
	for _, tc := range refuse {
		t.Run("refuses a "+tc.name+" it did not create", func(t *testing.T) {
			if _, err := u.admin.Exec(t.Context(), tc.create); err != nil {
				t.Fatal(err)
			}
			var before string
			// Every schema, its comment, tables and rows, and every role of
			// noisysim's names, with their settings.
			state := `SELECT concat_ws('|',
				(SELECT string_agg(nspname || ' ' || coalesce(obj_description(oid, 'pg_namespace'), ''), ',') FROM pg_namespace WHERE nspname LIKE 'noisysim%'),
				(SELECT string_agg(c.oid::regclass::text || ' ' || c.reltuples, ',') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname LIKE 'noisysim%'),
				(SELECT string_agg(query_to_xml('SELECT * FROM ' || c.oid::regclass, false, false, '')::text, ',') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname LIKE 'noisysim%' AND relkind = 'r'),
				(SELECT string_agg(rolname || ' ' || rolcanlogin || ' ' || rolconnlimit || ' ' || coalesce(shobj_description(oid, 'pg_authid'), ''), ',') FROM pg_roles WHERE rolname LIKE 'noisysim%'))`
			if err := u.admin.QueryRow(t.Context(), state).Scan(&before); err != nil {
				t.Fatal(err)
			}
			err := run(t, parse(t, onUserDB), harness.Options{})
			if !errors.Is(err, backend.ErrBadInput) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v; want one line naming %s, as bad input", err, tc.want)
			}
			var after string
			if err := u.admin.QueryRow(t.Context(), state).Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Errorf("the user's %s changed: %q, was %q", tc.name, after, before)
			}
			if _, err := u.admin.Exec(t.Context(), tc.drop); err != nil {
				t.Fatal(err)
			}
			u.check(t)
		})
	}
}

const onUserCitus = `
name: external-citus
seed: 11
backend: {kind: external, topology: citus, primary_dsn: "${NOISYSIM_TEST_USER_DSN}"}
tenants: {count: 20}
data: {orders: 4000, days: 30, customers: 20, citus: {shards: 8}}
classes:
  - {name: page, isolation_class: interactive, query: page, rate: 100}
configurations:
  - {name: citus, mode: shared}
timeline:
  - {name: solo, length: 1s, senders: quiet}
  - {name: before, length: 2s}
  - {name: ladder, until: actions_done, max: 90s, measure: false, watch: {policy: hot_shard_ladder, apply: true}}
  - {name: after, length: 1s}
assertions:
  quiet_p99: {window: after, baseline: solo}
`

// TestExternalCitusKeepsUserData runs a hot-shard scenario, ladder
// included, on an existing Citus cluster whose coordinator holds a
// distributed table orders of the user's and a role with its
// pg_dist_authinfo row: afterwards its rows and that row are all there,
// and neither the coordinator nor a worker holds anything of noisysim's
// (schema, roles, pg_dist_authinfo rows).
func TestExternalCitusKeepsUserData(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: scenario runs in -short mode")
	}
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus, Nodes: 2})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	admin, err := pgx.Connect(t.Context(), coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(t.Context(), `
		CREATE TABLE public.orders (tenant_id bigint, id bigint, customer text, PRIMARY KEY (tenant_id, id));
		SELECT create_distributed_table('public.orders', 'tenant_id', shard_count => 4);
		INSERT INTO public.orders SELECT 1, g, 'mine' FROM generate_series(1, 100) g`); err != nil {
		t.Fatal(err)
	}
	// Apart: Citus refuses a role made in one transaction with the
	// distribution.
	if _, err := admin.Exec(t.Context(), `CREATE ROLE app_reader LOGIN;
		INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, 'app_reader', 'password=theirs')`); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOISYSIM_TEST_USER_DSN", coord.DSN())
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	if _, err := harness.Run(ctx, parse(t, onUserCitus), harness.Options{}); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM public.orders WHERE customer = 'mine'").Scan(&rows); err != nil || rows != 100 {
		t.Errorf("the user's distributed orders: %d rows, %v; want 100", rows, err)
	}
	var theirs string
	if err := admin.QueryRow(t.Context(), "SELECT string_agg(authinfo, ',') FROM pg_dist_authinfo WHERE rolename = 'app_reader'").Scan(&theirs); err != nil || theirs != "password=theirs" {
		t.Errorf("the user's pg_dist_authinfo row: %q, %v; want password=theirs", theirs, err)
	}
	for _, n := range c.Nodes() {
		conn, err := pgx.Connect(t.Context(), n.DSN())
		if err != nil {
			t.Fatal(err)
		}
		var left string
		err = conn.QueryRow(t.Context(), `SELECT concat_ws(' ',
			(SELECT string_agg(nspname, ',') FROM pg_namespace WHERE nspname = 'noisysim'),
			(SELECT string_agg(rolname, ',') FROM pg_roles WHERE rolname LIKE 'noisysim%'),
			(SELECT string_agg(rolename || ' ' || authinfo, ',') FROM pg_dist_authinfo WHERE rolename <> 'app_reader'))`).Scan(&left)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if left != "" {
			t.Errorf("%s: left behind: %s", n.Name, left)
		}
	}
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// syncBuffer is a strings.Builder safe for a logger writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
