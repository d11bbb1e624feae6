package footprint_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/isolation/pools"
)

func TestValidSchema(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"noisysim", true},
		{"_scratch2", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"public", false},
		{"information_schema", false},
		{"pg_temp", false},
		{"Noisysim", false},
		{"2fast", false},
		{"a-b", false},
		{`a"b`, false},
	}
	for _, tc := range tests {
		if err := footprint.ValidSchema(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidSchema(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestInSchemaSetsSearchPathOnly(t *testing.T) {
	n := backend.Node{Name: "primary", Host: "h", Port: 5432, Database: "db", User: "u", Params: map[string]string{"sslmode": "require"}}
	in := footprint.InSchema(n, "noisysim")
	if got := in.DSNFor("r", "p"); got != "postgres://r:p@h:5432/db?search_path=noisysim&sslmode=require" {
		t.Errorf("DSN %s", got)
	}
	if len(n.Params) != 1 {
		t.Errorf("InSchema changed the node it was given: %v", n.Params)
	}
}

// TestClaimEnsureRemove checks the contract on a real server: what noisysim
// did not create is refused and never changed, what it created (and only
// that) is removed, sessions included.
func TestClaimEnsureRemove(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	one := func(sql string) string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, "SELECT coalesce(("+sql+")::text, '')").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	p := footprint.Plan{Schema: "nsim", Roles: []string{"nsim_a", "nsim_b"}, Run: "r1"}

	// A user's role of one of the names: refused, nothing created.
	if _, err := conn.Exec(ctx, "CREATE ROLE nsim_b CONNECTION LIMIT 3"); err != nil {
		t.Fatal(err)
	}
	err = footprint.Claim(ctx, conn, "primary", p)
	var fe *footprint.ForeignError
	if !errors.As(err, &fe) || !errors.Is(err, backend.ErrBadInput) || strings.Join(fe.Objects, ",") != `role "nsim_b"` {
		t.Fatalf("Claim with a user's role: %v", err)
	}
	if s := one("SELECT nspname FROM pg_namespace WHERE nspname = 'nsim'"); s != "" {
		t.Errorf("refused Claim created the schema")
	}
	if _, err := footprint.EnsureRoles(ctx, conn, "primary", "postgres", "r1", pools.RoleConfig{Name: "nsim_a"}, pools.RoleConfig{Name: "nsim_b", ConnectionLimit: 9}); !errors.As(err, &fe) {
		t.Fatalf("EnsureRoles over a user's role: %v", err)
	}
	if s := one("SELECT string_agg(rolname || rolconnlimit, ',') FROM pg_roles WHERE rolname LIKE 'nsim%'"); s != "nsim_b3" {
		t.Errorf("refused EnsureRoles left roles %q, want the user's nsim_b3 alone", s)
	}
	// Remove takes nothing that is not marked.
	if err := footprint.Remove(ctx, conn, p); err != nil {
		t.Fatal(err)
	}
	if s := one("SELECT rolname FROM pg_roles WHERE rolname = 'nsim_b'"); s != "nsim_b" {
		t.Fatalf("Remove dropped the user's role")
	}
	if _, err := conn.Exec(ctx, "DROP ROLE nsim_b"); err != nil {
		t.Fatal(err)
	}

	// Claimed, roles made and in use: Remove ends the sessions and drops all.
	if err := footprint.Claim(ctx, conn, "primary", p); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE nsim.t (id int)"); err != nil {
		t.Fatal(err)
	}
	pw, err := footprint.EnsureRoles(ctx, conn, "primary", "postgres", "r1",
		pools.RoleConfig{Name: "nsim_a", Schemas: []string{"nsim"}, ReadTables: []string{"nsim.t"}}, pools.RoleConfig{Name: "nsim_b"})
	if err != nil {
		t.Fatal(err)
	}
	if s := one("SELECT string_agg(shobj_description(oid, 'pg_authid'), ',') FROM pg_roles WHERE rolname = 'nsim_a'"); s != footprint.Mark("r1") {
		t.Errorf("role mark %q", s)
	}
	session, err := pgx.Connect(ctx, footprint.InSchema(primary, "nsim").DSNFor("nsim_a", pw["nsim_a"]))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(context.Background())
	if _, err := session.Exec(ctx, "SELECT * FROM t"); err != nil {
		t.Fatalf("a role's session does not find its table unqualified: %v", err)
	}
	// Another run, while r1's holder session is connected, leaves r1's
	// schema and roles alone; once r1 is gone it takes them over (a run
	// after one that was kept, or cut off): the schema's tables are gone.
	holder, err := pgx.Connect(ctx, footprint.Holding(primary, "r1").DSN())
	if err != nil {
		t.Fatal(err)
	}
	p2 := p
	p2.Run = "r2"
	var be *footprint.BusyError
	if err := footprint.Claim(ctx, conn, "primary", p2); !errors.As(err, &be) || be.Run != "r1" || !errors.Is(err, backend.ErrBadInput) {
		t.Fatalf("Claim while r1 runs: %v", err)
	}
	if _, err := footprint.EnsureRoles(ctx, conn, "primary", "postgres", "r2", pools.RoleConfig{Name: "nsim_b"}); !errors.As(err, &be) {
		t.Fatalf("EnsureRoles while r1 runs: %v", err)
	}
	if s := one("SELECT to_regclass('nsim.t')"); s != "nsim.t" {
		t.Fatalf("a refused Claim touched r1's schema")
	}
	holder.Close(ctx)
	for deadline := time.Now().Add(5 * time.Second); one("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'noisysim-run-r1'") != "0"; {
		if time.Now().After(deadline) {
			t.Fatal("r1's holder session is still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := footprint.Claim(ctx, conn, "primary", p2); err != nil {
		t.Fatal(err)
	}
	if s := one("SELECT to_regclass('nsim.t')"); s != "" {
		t.Errorf("Claim over a marked schema kept its table")
	}
	if err := footprint.Remove(ctx, conn, p); err != nil {
		t.Fatal(err)
	}
	if s := one("SELECT string_agg(nspname, ',') FROM pg_namespace WHERE nspname LIKE 'nsim%'") + one("SELECT string_agg(rolname, ',') FROM pg_roles WHERE rolname LIKE 'nsim%'") +
		one("SELECT string_agg(usename, ',') FROM pg_stat_activity WHERE usename LIKE 'nsim%'"); s != "" {
		t.Errorf("left after Remove: %q", s)
	}
}

// What the README asks of an external database's user, CREATEROLE and
// CREATE on the database, is enough to create the footprint and remove it
// again, sessions of its roles included.
func TestRemoveAsCreateRole(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `CREATE ROLE creator LOGIN CREATEROLE PASSWORD 'creator-pw'; GRANT CREATE ON DATABASE `+primary.Database+` TO creator`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, primary.DSNFor("creator", "creator-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	p := footprint.Plan{Schema: "nsim", Roles: []string{"nsim_a"}, Run: "r1"}
	if err := footprint.Claim(ctx, conn, "primary", p); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE nsim.t (id int)"); err != nil {
		t.Fatal(err)
	}
	pw, err := footprint.EnsureRoles(ctx, conn, "primary", primary.Database, "r1",
		pools.RoleConfig{Name: "nsim_a", Schemas: []string{"nsim"}, ReadTables: []string{"nsim.t"}})
	if err != nil {
		t.Fatalf("EnsureRoles as a CREATEROLE user: %v", err)
	}
	session, err := pgx.Connect(ctx, footprint.InSchema(primary, "nsim").DSNFor("nsim_a", pw["nsim_a"]))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(context.Background())
	if err := footprint.Remove(ctx, conn, p); err != nil {
		t.Fatalf("Remove as a CREATEROLE user: %v", err)
	}
	var left string
	err = admin.QueryRow(ctx, `SELECT coalesce((SELECT string_agg(nspname, ',') FROM pg_namespace WHERE nspname LIKE 'nsim%'), '') ||
		coalesce((SELECT string_agg(rolname, ',') FROM pg_roles WHERE rolname LIKE 'nsim%'), '') ||
		coalesce((SELECT string_agg(usename, ',') FROM pg_stat_activity WHERE usename LIKE 'nsim%'), '')`).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left != "" {
		t.Errorf("left after Remove: %q", left)
	}
}

// Roles left by a run that is over (stopped at once, killed, kept) are
// removed whatever their names; a live run's roles and a user's roles stay.
func TestRemoveStaleRoles(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE ROLE user_role; COMMENT ON ROLE user_role IS 'the application''s'"); err != nil {
		t.Fatal(err)
	}
	passwords := map[string]string{}
	for run, role := range map[string]string{"dead": "nsim_dead", "live": "nsim_live"} {
		pw, err := footprint.EnsureRoles(ctx, conn, "primary", primary.Database, run, pools.RoleConfig{Name: role})
		if err != nil {
			t.Fatal(err)
		}
		passwords[role] = pw[role]
	}
	holder, err := pgx.Connect(ctx, footprint.Holding(primary, "live").DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	// A session of the dead run's role, still connected.
	session, err := pgx.Connect(ctx, primary.DSNFor("nsim_dead", passwords["nsim_dead"]))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(context.Background())

	removed, err := footprint.RemoveStaleRoles(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(removed, ",") != "nsim_dead" {
		t.Errorf("removed %q, want nsim_dead alone", removed)
	}
	var left string
	if err := conn.QueryRow(ctx, "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname IN ('user_role', 'nsim_dead', 'nsim_live')").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != "nsim_live,user_role" {
		t.Errorf("roles left %q, want nsim_live,user_role", left)
	}
}

// TestCitusRoles checks the roles of a Citus run on a real local cluster:
// made on the coordinator, Citus propagates them with their settings and
// grants to the workers; with their passwords in pg_dist_authinfo the
// coordinator reaches the workers as them, so a role's statement_timeout
// cancels a query on a tenant's shard; Remove leaves no role and no
// pg_dist_authinfo row of noisysim's on any node, and a user's row stays.
func TestCitusRoles(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus, Nodes: 2})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	p := footprint.Plan{Schema: "nsim", Roles: []string{"nsim_fast"}, Run: "r1"}
	if err := footprint.Claim(ctx, conn, "coordinator", p); err != nil {
		t.Fatal(err)
	}
	// A user's role with a row of its own: never touched.
	if _, err := conn.Exec(ctx, `CREATE ROLE nsim_user LOGIN;
		INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, 'nsim_user', 'password=theirs');
		CREATE TABLE nsim.t (tenant_id bigint, v int);
		SELECT create_distributed_table('nsim.t', 'tenant_id', shard_count => 4);
		INSERT INTO nsim.t SELECT g % 4, g FROM generate_series(1, 40) g`); err != nil {
		t.Fatal(err)
	}
	if err := footprint.CitusAuthinfo(ctx, conn, "coordinator", "r1", map[string]string{"nsim_user": "x"}); err == nil {
		t.Error("CitusAuthinfo accepted a role noisysim did not create")
	}
	pw, err := footprint.EnsureRoles(ctx, conn, "coordinator", coord.Database, "r1", pools.RoleConfig{
		Name: "nsim_fast", StatementTimeout: 100 * time.Millisecond, WorkMem: "2MB",
		Schemas: []string{"nsim"}, ReadTables: []string{"nsim.t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := footprint.CitusAuthinfo(ctx, conn, "coordinator", "r1", pw); err != nil {
		t.Fatal(err)
	}

	var workers []backend.Node
	for _, n := range c.Nodes() {
		if n.Role == backend.RoleWorker {
			workers = append(workers, n)
		}
	}
	if len(workers) != 2 {
		t.Fatalf("%d workers, want 2", len(workers))
	}
	onEach := func(query string, f func(n backend.Node, got string)) {
		t.Helper()
		for _, n := range append([]backend.Node{coord}, workers...) {
			wc, err := pgx.Connect(ctx, n.DSN())
			if err != nil {
				t.Fatal(err)
			}
			var got string
			err = wc.QueryRow(ctx, "SELECT coalesce(("+query+")::text, '')").Scan(&got)
			wc.Close(context.Background())
			if err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
			f(n, got)
		}
	}
	onEach(`SELECT concat_ws(' ', array_to_string(rolconfig, ','), starts_with(shobj_description(oid, 'pg_authid'), 'created by noisysim run r1')::text)
		FROM pg_roles WHERE rolname = 'nsim_fast'`, func(n backend.Node, got string) {
		if got != "statement_timeout=100ms,work_mem=2MB true" {
			t.Errorf("%s: role nsim_fast settings and mark %q, want statement_timeout=100ms,work_mem=2MB true", n.Name, got)
		}
	})

	// As the role through the coordinator: a sleep on tenant 1's shard
	// outlives the role's statement_timeout.
	role, err := pgx.Connect(ctx, coord.DSNFor("nsim_fast", pw["nsim_fast"]))
	if err != nil {
		t.Fatal(err)
	}
	defer role.Close(context.Background())
	// On the coordinator without a timeout, so that opening the
	// connection to the worker (scram, on a busy machine) is not cut
	// short; the worker's session of the role has the role's 100 ms.
	if _, err := role.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := role.QueryRow(ctx, "SELECT count(*) FROM nsim.t WHERE tenant_id = 1").Scan(&n); err != nil || n != 10 {
		t.Fatalf("tenant 1's rows as nsim_fast: %d, %v; want 10", n, err)
	}
	// The coordinator keeps its connection to tenant 1's worker after
	// the count: a session of the role there.
	seen := 0
	onEach("SELECT count(*) FROM pg_stat_activity WHERE usename = 'nsim_fast'", func(n backend.Node, got string) {
		if n.Role == backend.RoleWorker && got != "0" {
			seen++
		}
	})
	if seen == 0 {
		t.Error("no worker has a session of nsim_fast: the coordinator did not log in to the workers as the role")
	}
	sleep := "SELECT pg_sleep(0.3) FROM nsim.t WHERE tenant_id = 1 LIMIT 1"
	_, err = role.Exec(ctx, sleep)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("a 0.3 s sleep on tenant 1's shard as nsim_fast, timeout from the worker's role setting: %v, want SQLSTATE 57014", err)
	}
	// And the coordinator's own session, back to the role's setting.
	if _, err := role.Exec(ctx, "RESET statement_timeout"); err != nil {
		t.Fatal(err)
	}
	var timeout string
	if err := role.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "100ms" {
		t.Errorf("statement_timeout as nsim_fast on the coordinator: %q, %v; want 100ms", timeout, err)
	}
	_, err = role.Exec(ctx, sleep)
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("a 0.3 s sleep on tenant 1's shard as nsim_fast: %v, want SQLSTATE 57014", err)
	}
	role.Close(ctx)

	if err := footprint.Remove(ctx, conn, p); err != nil {
		t.Fatal(err)
	}
	onEach(`SELECT concat_ws(' ', (SELECT string_agg(rolname, ',') FROM pg_roles WHERE rolname LIKE 'nsim%'),
		(SELECT string_agg(rolename, ',') FROM pg_dist_authinfo))`, func(n backend.Node, got string) {
		want := "nsim_user"
		if n.Role == backend.RoleCoordinator {
			want = "nsim_user nsim_user" // the user's role and its row
		}
		if got != want {
			t.Errorf("%s: roles and pg_dist_authinfo rows after Remove %q, want %q", n.Name, got, want)
		}
	})
}
