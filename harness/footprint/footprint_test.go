package footprint_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
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
