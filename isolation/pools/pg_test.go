package pools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/isolation/limiter"
)

func TestEnsureRoles(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	ctx := t.Context()
	if _, err := db.admin.Exec(ctx, `CREATE TABLE orders (id int); CREATE TABLE prices (id int); CREATE SCHEMA app; CREATE TABLE app.hits (n serial)`); err != nil {
		t.Fatal(err)
	}
	interactive, heavy := DefaultRoles()
	interactive.WriteTables = []string{"orders"}
	interactive.ReadTables = []string{"prices"}
	interactive.Schemas = []string{"app"}
	interactive.WriteTables = append(interactive.WriteTables, "app.hits")
	interactive.Sequences = []string{"app.hits_n_seq"}
	heavy.ReadTables = []string{"orders", "prices"}
	odd := RoleConfig{Name: `odd "role' \name`, Password: `pa'ss\"word`}
	dsns, _ := db.roles(t, interactive, heavy, NaiveRole(), odd)

	type role struct {
		super, createDB, createRole, login, replication, bypassRLS bool
		connLimit                                                  int
		settings                                                   []string
	}
	read := func(name string) role {
		var r role
		err := queryRow(ctx, db.admin, `
			SELECT rolsuper, rolcreatedb, rolcreaterole, rolcanlogin, rolreplication, rolbypassrls, rolconnlimit,
			       coalesce((SELECT setconfig FROM pg_db_role_setting s WHERE s.setrole = r.oid AND s.setdatabase = 0), '{}')
			FROM pg_roles r WHERE rolname = $1`, []any{name},
			&r.super, &r.createDB, &r.createRole, &r.login, &r.replication, &r.bypassRLS, &r.connLimit, &r.settings)
		if err != nil {
			t.Fatalf("read role %s: %v", name, err)
		}
		slices.Sort(r.settings)
		return r
	}
	for _, tc := range []struct {
		name      string
		connLimit int
		settings  []string
	}{
		{InteractiveRoleName, 40, []string{"idle_in_transaction_session_timeout=10000ms", "statement_timeout=3000ms"}},
		{HeavyRoleName, 6, []string{"idle_in_transaction_session_timeout=30000ms", "statement_timeout=120000ms", "work_mem=64MB"}},
		{NaiveRoleName, -1, []string{}},
		{odd.Name, -1, []string{}},
	} {
		r := read(tc.name)
		if r.super || r.createDB || r.createRole || r.replication || r.bypassRLS || !r.login {
			t.Errorf("%s: attributes %+v, want login only", tc.name, r)
		}
		if r.connLimit != tc.connLimit || !slices.Equal(r.settings, tc.settings) {
			t.Errorf("%s: connection limit %d, settings %q; want %d, %q", tc.name, r.connLimit, r.settings, tc.connLimit, tc.settings)
		}
	}

	// The roles log in with their passwords (the cluster uses scram-sha-256)
	// and see their settings.
	c := connect(t, dsns[InteractiveRoleName])
	if got := scalar[string](t, c, "SHOW statement_timeout"); got != "3s" {
		t.Errorf("interactive session statement_timeout = %s, want 3s", got)
	}
	if got := scalar[string](t, connect(t, dsns[odd.Name]), "SELECT current_user::text"); got != odd.Name {
		t.Errorf("odd role logged in as %q", got)
	}

	// Least privilege: only what was granted.
	for _, p := range []struct {
		role, table, priv string
		want              bool
	}{
		{InteractiveRoleName, "orders", "INSERT", true},
		{InteractiveRoleName, "prices", "SELECT", true},
		{InteractiveRoleName, "prices", "UPDATE", false},
		{InteractiveRoleName, "app.hits", "INSERT", true},
		{HeavyRoleName, "orders", "SELECT", true},
		{HeavyRoleName, "orders", "INSERT", false},
		{NaiveRoleName, "orders", "SELECT", false},
	} {
		if got := scalar[bool](t, db.admin, "SELECT has_table_privilege($1, $2, $3)", p.role, p.table, p.priv); got != p.want {
			t.Errorf("%s %s on %s = %v, want %v", p.role, p.priv, p.table, got, p.want)
		}
	}
	if _, err := c.Exec(ctx, "INSERT INTO app.hits DEFAULT VALUES"); err != nil {
		t.Errorf("insert using the granted sequence: %v", err)
	}

	// Idempotent, and converges: a setting now 0 is reset.
	interactive.StatementTimeout = 0
	interactive.ConnectionLimit = 0
	if _, err := EnsureRoles(ctx, db.admin, db.primary.Database, interactive, heavy); err != nil {
		t.Fatalf("second EnsureRoles: %v", err)
	}
	r := read(InteractiveRoleName)
	if r.connLimit != -1 || !slices.Equal(r.settings, []string{"idle_in_transaction_session_timeout=10000ms"}) {
		t.Errorf("after reconfiguring: connection limit %d, settings %q", r.connLimit, r.settings)
	}
}

func TestEnsureRolesRejectsBadConfig(t *testing.T) {
	for name, r := range map[string]RoleConfig{
		"no name":          {},
		"negative timeout": {Name: "x", StatementTimeout: -time.Second},
		"negative limit":   {Name: "x", ConnectionLimit: -2},
		"bad work_mem":     {Name: "x", WorkMem: "64MB'; DROP TABLE t; --"},
		"non-ASCII pw":     {Name: "x", Password: "pässword"},
	} {
		// A nil Execer: the config must be refused before any statement.
		if _, err := EnsureRoles(context.Background(), nil, "db", r); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// The verifier EnsureRoles sends is the one PostgreSQL computes itself.
func TestSCRAMVerifierMatchesPostgreSQL(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	if _, err := db.admin.Exec(t.Context(), `SET password_encryption = 'scram-sha-256'; CREATE ROLE scramcheck PASSWORD 'correct horse'`); err != nil {
		t.Fatal(err)
	}
	stored := scalar[string](t, db.admin, "SELECT rolpassword FROM pg_authid WHERE rolname = 'scramcheck'")
	// SCRAM-SHA-256$<iter>:<salt>$<stored>:<server>
	head, _, _ := strings.Cut(strings.TrimPrefix(stored, "SCRAM-SHA-256$"), "$")
	iter, saltB64, _ := strings.Cut(head, ":")
	n, err := strconv.Atoi(iter)
	if err != nil {
		t.Fatalf("parse %q: %v", stored, err)
	}
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil {
		t.Fatal(err)
	}
	if got := scramVerifierSalt("correct horse", salt, n); got != stored {
		t.Errorf("verifier\n got %s\nwant %s", got, stored)
	}
}

func TestInteractiveStatementTimeout(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	interactive, _ := DefaultRoles()
	dsns, _ := db.roles(t, interactive)
	s := newStack(t, onePool(dsns[InteractiveRoleName], 2))

	start := time.Now()
	res, err := s.Query(t.Context(), Interactive, "slow", "SELECT pg_sleep(4)")
	took := time.Since(start)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("err = %v, want SQLSTATE 57014", err)
	}
	if took < 2900*time.Millisecond || took > 3500*time.Millisecond {
		t.Errorf("failed after %s, want ≈ 3s (the role's statement_timeout)", took)
	}
	if got := Classify(err); got != ErrorStatementTimeout {
		t.Errorf("Classify = %s, want %s", got, ErrorStatementTimeout)
	}
	if got := s.Errors("slow", Interactive); got[ErrorStatementTimeout] != 1 || len(got) != 1 {
		t.Errorf("Errors = %v, want one statement_timeout", got)
	}
	// The timed-out statement's time is DB time the tenant used.
	if u := s.Ledger().Usage(); len(u) != 1 || u[0].DBTime < 2900*time.Millisecond || res.DBTime != u[0].DBTime {
		t.Errorf("ledger %+v, result DB time %s; want ≈ 3s recorded", u, res.DBTime)
	}
}

func TestHeavyRunsOnStandby(t *testing.T) {
	db := startDB(t, backend.TopologyReplica)
	interactive, heavy := DefaultRoles()
	onPrimary, onReplica := db.roles(t, interactive, heavy)
	cfg, err := DefaultIsolated(onPrimary[InteractiveRoleName], onReplica[HeavyRoleName])
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, cfg)

	inRecovery := func(c Class) (rec bool, workMem, timeout string) {
		_, err := s.WithConn(t.Context(), c, "t1", func(ctx context.Context, conn *pgx.Conn) error {
			return queryRow(ctx, conn, "SELECT pg_is_in_recovery(), current_setting('work_mem'), current_setting('statement_timeout')", nil, &rec, &workMem, &timeout)
		})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		return rec, workMem, timeout
	}
	if rec, workMem, timeout := inRecovery(Heavy); !rec || workMem != "64MB" || timeout != "2min" {
		t.Errorf("heavy: in recovery %v, work_mem %s, statement_timeout %s; want true, 64MB, 2min", rec, workMem, timeout)
	}
	if rec, _, timeout := inRecovery(Interactive); rec || timeout != "3s" {
		t.Errorf("interactive: in recovery %v, statement_timeout %s; want false, 3s", rec, timeout)
	}
	if p, _ := s.Placement(Heavy); !p.Standby || p.Addr != fmt.Sprintf("%s:%d", db.replica.Host, db.replica.Port) {
		t.Errorf("Placement(heavy) = %v, want the standby %s", p, db.replica)
	}
	if p, _ := s.Placement(Interactive); p.Standby {
		t.Errorf("Placement(interactive) = %v, want the primary", p)
	}
	st := s.Stat()
	t.Log(st.Placements)
	for _, c := range []Class{Interactive, Heavy} {
		if ls, ok := st.Limiters[c]; !ok || ls.Total.Admitted != 1 || ls.Total.InFlight != 0 {
			t.Errorf("Stat().Limiters[%s] = %+v, want one admission, none in flight", c, ls)
		}
	}
	for _, p := range st.Pools {
		if p.Destroyed != 0 || p.TotalConns != 1 || p.Standby != (p.Name == "heavy") {
			t.Errorf("pool %+v: want one reused connection, standby only for heavy", p)
		}
	}
}

func TestHeavyOnPrimaryWithoutReplica(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, NaiveRole())
	s := newStack(t, DefaultNaive(dsns[NaiveRoleName]))
	var rec bool
	if _, err := s.WithConn(t.Context(), Heavy, "t1", func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec)
	}); err != nil {
		t.Fatal(err)
	}
	p, _ := s.Placement(Heavy)
	if rec || p.Standby || p.Pool != NaivePoolName {
		t.Errorf("naive heavy: in recovery %v, placement %v; want the primary through the naive pool", rec, p)
	}
}

func TestTagVisibleDuringQuery(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 4))

	done := make(chan error, 1)
	go func() {
		_, err := s.Query(context.Background(), Interactive, "tenant-42", "SELECT pg_sleep(0.5)")
		done <- err
	}()
	var seen ActivityGroup
	ok := eventually(2*time.Second, func() bool {
		groups, err := Activity(t.Context(), db.admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if g.ApplicationName == "t:tenant-42" && g.Active == 1 {
				seen = g
				return true
			}
		}
		return false
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("pg_stat_activity never showed t:tenant-42 active during its query")
	}
	if seen.Tenant != "tenant-42" || seen.Connections != 1 || seen.LongestQuery <= 0 || seen.LongestQuery > time.Second {
		t.Errorf("group %+v", seen)
	}
}

// L5: a sequential borrower uses exactly one connection, sees its own tag
// on every query, and a failing borrow-time step is retried a bounded
// number of times, giving the limiter slot back.
func TestL5SequentialBorrowsUseOneConnection(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 10))

	var maxConns int32
	for i := range 1000 {
		tenant := fmt.Sprint(i % 5)
		var got string
		_, err := s.WithConn(t.Context(), Interactive, tenant, func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&got)
		})
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if got != "t:"+tenant {
			t.Fatalf("cycle %d: query saw application_name %q, want t:%s", i, got, tenant)
		}
		maxConns = max(maxConns, s.Stat().Pools[0].TotalConns)
	}
	if maxConns != 1 {
		t.Errorf("pool held up to %d connections, want exactly 1 (synchronous reset)", maxConns)
	}
	if n := backends(t, db.admin, "app"); n != 1 {
		t.Errorf("%d backends of the role, want 1", n)
	}
	if st := s.Stat().Pools[0]; st.Destroyed != 0 || st.Borrowed != 0 {
		t.Errorf("pool stat %+v: want nothing destroyed or borrowed", st)
	}
}

// TestL5FailingTagIsBounded: a tag that fails every time gives up after at
// most pool size + 1 attempts with a *TagError and gives the limiter slot
// back; one broken connection is replaced. Query tags in the same round trip
// as its statement (the failing tag is a statement the server refuses);
// WithConn tags on its own (the failing tag is injected).
func TestL5FailingTagIsBounded(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	for _, path := range []string{"Query", "WithConn"} {
		t.Run(path, func(t *testing.T) {
			lim, err := limiter.New(limiter.Config{MaxPerTenant: 1, MaxQueue: 0, MaxWait: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			cfg := onePool(dsns["app"], 10)
			cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: lim}
			s := newStack(t, cfg)
			call := func() error {
				if path == "Query" {
					_, err := s.Query(t.Context(), Interactive, "a", "SELECT 1")
					return err
				}
				_, err := s.WithConn(t.Context(), Interactive, "a", func(ctx context.Context, conn *pgx.Conn) error {
					_, err := conn.Exec(ctx, "SELECT 1")
					return err
				})
				return err
			}
			// Query prepares its statement on a connection's first call,
			// tagged as WithConn tags: warm one connection up so that the
			// tag goes with the statement.
			if path == "Query" {
				if err := call(); err != nil {
					t.Fatal(err)
				}
			}

			var calls atomic.Int64
			failing := func(context.Context, *pgx.Conn, string) error {
				calls.Add(1)
				return errors.New("injected tag failure")
			}
			s.tag = failing
			if path == "Query" {
				s.queryTagSQL = "SELECT set_config('application_name', $1, true) WHERE 1/0 = 1"
			}
			start := time.Now()
			err = call()
			var tagErr *TagError
			if !errors.Is(err, ErrTagFailed) || !errors.As(err, &tagErr) {
				t.Fatalf("err = %v, want a *TagError", err)
			}
			waitClosed(t, s)
			st := s.Stat().Pools[0]
			if path == "Query" {
				calls.Store(st.TagFailures)
			}
			if n := calls.Load(); n > 11 || n < 1 || int64(tagErr.Attempts) != n {
				t.Errorf("%d tag attempts (error says %d), want 1..11 (pool size + 1)", n, tagErr.Attempts)
			}
			t.Logf("gave up after %d attempts in %s", calls.Load(), time.Since(start))
			if st := lim.TenantStat("a"); st.InFlight != 0 || st.Admitted != st.Released {
				t.Errorf("limiter slot not returned: %+v", st)
			}
			if st.TotalConns != 0 || st.Destroyed != calls.Load() || st.TagFailures != calls.Load() {
				t.Errorf("pool stat %+v: want every failed connection destroyed", st)
			}

			// A connection that fails once is replaced; the call succeeds
			// and the slot is free again (cap 1, no queue: a held slot
			// would reject).
			s.queryTagSQL = tagLocalSQL
			calls.Store(0)
			s.tag = func(ctx context.Context, c *pgx.Conn, tenant string) error {
				if calls.Add(1) == 1 {
					return errors.New("injected: first connection broken")
				}
				return setTag(ctx, c, tenant)
			}
			if err := call(); err != nil {
				t.Fatalf("with one failing connection: %v", err)
			}
			if calls.Load() != 2 {
				t.Errorf("%d tag attempts, want 2", calls.Load())
			}
		})
	}
}

// TestL5LedgerDoesNotDependOnReset: the DB time is in the ledger whatever
// the reset does, and a connection whose reset failed is destroyed. After
// WithConn a failed reset is not the caller's failure; Query resets in its
// statement's transaction, so a failed reset rolls the statement back and
// is the call's error (and the full reset then runs on its own).
func TestL5LedgerDoesNotDependOnReset(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	for _, path := range []string{"Query", "WithConn"} {
		t.Run(path, func(t *testing.T) {
			s := newStack(t, onePool(dsns["app"], 2))
			failReset := func() {
				s.reset = func(context.Context, *pgx.Conn) error { return errors.New("injected reset failure") }
			}
			var res Result
			var err error
			var before []Usage
			if path == "Query" {
				// Warm up (the first call prepares the statement and the
				// reset's commands, and is reset as WithConn), then fail
				// the reset Query runs with its statement, and the full
				// reset that follows.
				s.queryReset = append(slices.Clone(queryReset), "SELECT 1/0")
				if _, err := s.Query(t.Context(), Interactive, "a", "SELECT pg_sleep(0.05)"); err != nil {
					t.Fatal(err)
				}
				failReset()
				before = s.Ledger().Usage()
				res, err = s.Query(t.Context(), Interactive, "a", "SELECT pg_sleep(0.05)")
				if err == nil || !strings.Contains(err.Error(), "reset after the statement") {
					t.Fatalf("err = %v, want the failed reset", err)
				}
				err = nil
			} else {
				failReset()
				res, err = s.WithConn(t.Context(), Interactive, "a", func(ctx context.Context, conn *pgx.Conn) error {
					_, err := conn.Exec(ctx, "SELECT pg_sleep(0.05)")
					return err
				})
			}
			if err != nil {
				t.Fatalf("a failed reset is not the caller's failure: %v", err)
			}
			u := UsageWindow(before, s.Ledger().Usage())
			if len(u) != 1 || u["a"] == nil || u["a"].Total < 50*time.Millisecond || u["a"].Total != res.DBTime {
				t.Errorf("ledger window %+v, want a's ≥ 50ms, the call's %v", u, res.DBTime)
			}
			waitClosed(t, s)
			if st := s.Stat().Pools[0]; st.Destroyed != 1 || st.TotalConns != 0 {
				t.Errorf("pool stat %+v: want the unreset connection destroyed", st)
			}
		})
	}
}

// L6: settings one borrower changes never reach the next; the reset keeps
// the driver's prepared statements.
func TestL6SessionSettingsDoNotLeak(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 2*time.Second))
	s := newStack(t, onePool(dsns["app"], 1))
	ctx := t.Context()

	const preparedSQL = "SELECT $1::int + 1"
	prepared := func(conn *pgx.Conn) []string {
		rows, err := conn.Query(ctx, "SELECT name FROM pg_prepared_statements WHERE statement = $1", preparedSQL)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	var pidA uint32
	var cachedA []string
	if _, err := s.WithConn(ctx, Interactive, "A", func(ctx context.Context, conn *pgx.Conn) error {
		var n int
		if err := conn.QueryRow(ctx, preparedSQL, 1).Scan(&n); err != nil {
			return err
		}
		cachedA = prepared(conn)
		_, err := conn.Exec(ctx, "SET statement_timeout = 0")
		pidA = conn.PgConn().PID()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(cachedA) != 1 {
		t.Fatalf("A: prepared statements %v, want pgx's one for %q", cachedA, preparedSQL)
	}

	var (
		shown   string
		took    time.Duration
		sleeErr error
	)
	if _, err := s.WithConn(ctx, Interactive, "B", func(ctx context.Context, conn *pgx.Conn) error {
		if conn.PgConn().PID() != pidA {
			t.Fatalf("B got backend %d, A had %d: the pool of 1 must reuse it", conn.PgConn().PID(), pidA)
		}
		if err := conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&shown); err != nil {
			return err
		}
		// The prepared statement survived the reset and is used as is.
		if got := prepared(conn); !slices.Equal(got, cachedA) {
			t.Errorf("B: prepared statements %v, want A's %v kept", got, cachedA)
		}
		var n int
		if err := conn.QueryRow(ctx, preparedSQL, 2).Scan(&n); err != nil || n != 3 {
			t.Errorf("B: cached statement gave %d, %v", n, err)
		}
		start := time.Now()
		_, sleeErr = conn.Exec(ctx, "SELECT pg_sleep(3)")
		took = time.Since(start)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if shown != "2s" {
		t.Errorf("B: SHOW statement_timeout = %s, want the role's 2s", shown)
	}
	var pgErr *pgconn.PgError
	if !errors.As(sleeErr, &pgErr) || pgErr.Code != "57014" {
		t.Errorf("B: pg_sleep(3) err = %v, want 57014", sleeErr)
	}
	if took < 1800*time.Millisecond || took > 2200*time.Millisecond {
		t.Errorf("B: pg_sleep(3) failed after %s, want 2.0s ± 0.2s", took)
	}
}

// L7 (a): a returned connection shows the pool's name, never the tenant.
func TestL7IdleShowsClassName(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 2))

	var pid uint32
	if _, err := s.WithConn(t.Context(), Interactive, "42", func(ctx context.Context, conn *pgx.Conn) error {
		pid = conn.PgConn().PID()
		_, err := conn.Exec(ctx, "SELECT 1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var app, state string
	if err := queryRow(t.Context(), db.admin, "SELECT application_name, state FROM pg_stat_activity WHERE pid = $1",
		[]any{int32(pid)}, &app, &state); err != nil {
		t.Fatal(err)
	}
	if app != "noisysim-interactive" || state != "idle" {
		t.Errorf("returned backend shows application_name %q, state %q; want noisysim-interactive, idle", app, state)
	}
}

// L7 (b): the tag is set outside the tenant's transaction, so a rolled-back
// transaction (even one that set application_name) cannot undo it.
func TestL7TagSurvivesRollback(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 1))
	ctx := t.Context()

	appOf := func(pid uint32) string {
		return scalar[string](t, db.admin, "SELECT application_name FROM pg_stat_activity WHERE pid = $1", int32(pid))
	}
	if _, err := s.Query(ctx, Interactive, "3", "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	var during, afterRollback string
	_, err := s.WithConn(ctx, Interactive, "7", func(ctx context.Context, conn *pgx.Conn) error {
		pid := conn.PgConn().PID()
		txErr := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET work_mem = '1MB'"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "SET application_name = 'inside-the-transaction'"); err != nil {
				return err
			}
			during = appOf(pid)
			_, err := tx.Exec(ctx, "SELECT 1/0")
			return err
		})
		if txErr == nil {
			t.Error("division by zero did not fail")
		}
		return conn.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&afterRollback)
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != "inside-the-transaction" || afterRollback != "t:7" {
		t.Errorf("application_name %q inside, %q after ROLLBACK; want the tenant's own SET, then t:7 (not t:3, not the pool's name)", during, afterRollback)
	}

	// Tenant 7's next query shows t:7 while it runs, through a rolled-back
	// transaction (Tx) first.
	_, err = s.Tx(ctx, Interactive, "7", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '1s'"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT 1/0")
		return err
	})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22012" {
		t.Fatalf("Tx err = %v, want division_by_zero", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Query(context.Background(), Interactive, "7", "SELECT pg_sleep(0.3)")
		done <- err
	}()
	// Sampled until the call returns, not a fixed number of times: a
	// goroutine started late on a busy machine would run its query after
	// the last sample. The stack's own tag and reset run active under the
	// pool's name (the tag sets it mid-statement, RESET ALL restores it
	// before the rest of the reset): they are not the tenant's query.
	seen := map[string]int{}
	for sampling := true; sampling; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			sampling = false
		case <-time.After(10 * time.Millisecond):
		}
		rows, err := db.admin.Query(ctx, "SELECT application_name, query FROM pg_stat_activity WHERE usename = 'app' AND state = 'active'")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var app, query string
			if err := rows.Scan(&app, &query); err != nil {
				t.Fatal(err)
			}
			if !Housekeeping(query) {
				seen[app]++
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if seen["t:7"] == 0 || len(seen) != 1 {
		t.Errorf("active samples by application_name %v, want only t:7", seen)
	}
}

// L7 (c): under a workload with 10% aborted transactions, every sample of a
// running tenant query shows the tenant that borrowed the connection.
func TestL7SamplesUnderAbortedTransactions(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 6))
	ctx := t.Context()

	stop := make(chan struct{})
	var (
		samples, wrong int
		firstWrong     string
	)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, err := db.admin.Query(ctx, `SELECT application_name, query FROM pg_stat_activity
				WHERE usename = 'app' AND state = 'active' AND query LIKE '%/* tenant=%'`)
			if err != nil {
				t.Error(err)
				return
			}
			for rows.Next() {
				var app, query string
				if err := rows.Scan(&app, &query); err != nil {
					t.Error(err)
					return
				}
				_, marker, _ := strings.Cut(query, "/* tenant=")
				tenant, _, _ := strings.Cut(marker, " */")
				samples++
				if app != "t:"+tenant {
					wrong++
					firstWrong = fmt.Sprintf("application_name %q running %q", app, query)
				}
			}
			rows.Close()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	var wg sync.WaitGroup
	var aborted atomic.Int64
	for w := range 6 {
		wg.Go(func() {
			for i := range 40 {
				tenant := fmt.Sprint((w*7 + i*3) % 10)
				abort := (w*40+i)%10 == 0
				_, err := s.Tx(ctx, Interactive, tenant, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, "SET LOCAL work_mem = '2MB'"); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, fmt.Sprintf("SELECT pg_sleep(0.005) /* tenant=%s */", tenant)); err != nil {
						return err
					}
					if abort {
						_, err := tx.Exec(ctx, fmt.Sprintf("SELECT 1/0 /* tenant=%s */", tenant))
						return err
					}
					return nil
				})
				if abort != (err != nil) {
					t.Errorf("tenant %s, abort %v: err %v", tenant, abort, err)
				}
				if err != nil {
					aborted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	t.Logf("%d calls, %d aborted, %d samples of running tenant queries", 240, aborted.Load(), samples)
	if aborted.Load() != 24 {
		t.Errorf("%d aborted transactions, want 24 (10%%)", aborted.Load())
	}
	if samples < 20 || wrong != 0 {
		t.Errorf("%d of %d samples showed another tag (first: %s); want 0 of at least 20", wrong, samples, firstWrong)
	}
	// And no idle connection is left tagged.
	if n := scalar[int64](t, db.admin, "SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND application_name <> 'noisysim-interactive'"); n != 0 {
		t.Errorf("%d idle backends still tagged after the workload", n)
	}
}

// L3, PostgreSQL half: with a limiter (per tenant 4, global 10) in front,
// pg_stat_activity never shows more tagged backends than the caps. The
// field case makes 100,000 calls; against a real server this test makes
// 3,000 (3 tenants × 50 goroutines × 20) to stay within seconds on two
// cores — the limiter's own L3 test makes the full count.
func TestL3DatabaseCaps(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	lim, err := limiter.New(limiter.Config{MaxPerTenant: 4, MaxGlobal: 10, MaxQueue: 50, MaxWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := onePool(dsns["app"], InteractivePoolSize)
	cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: lim}
	s := newStack(t, cfg)
	ctx := t.Context()
	tenants := []string{"a", "b", "c"}

	// Sample pg_stat_activity every 5 ms.
	stop := make(chan struct{})
	sampled := make(chan struct{})
	var (
		dbMaxTenant = map[string]int64{}
		dbMaxGlobal int64
		samples     int
	)
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			rows, err := db.admin.Query(ctx, "SELECT application_name, count(*) FROM pg_stat_activity WHERE application_name LIKE 't:%' GROUP BY 1")
			if err != nil {
				t.Error(err)
				return
			}
			var global int64
			for rows.Next() {
				var app string
				var n int64
				if err := rows.Scan(&app, &n); err != nil {
					t.Error(err)
					return
				}
				dbMaxTenant[app] = max(dbMaxTenant[app], n)
				global += n
			}
			rows.Close()
			dbMaxGlobal = max(dbMaxGlobal, global)
			samples++
		}
	}()

	var (
		inFlight    [3]atomic.Int64
		maxInFlight [3]atomic.Int64
		global      atomic.Int64
		maxGlobal   atomic.Int64
		ok, limited atomic.Int64
	)
	raise := func(m *atomic.Int64, v int64) {
		for cur := m.Load(); v > cur && !m.CompareAndSwap(cur, v); cur = m.Load() {
		}
	}
	var wg sync.WaitGroup
	for ti, tenant := range tenants {
		for range 50 {
			wg.Go(func() {
				for range 20 {
					_, err := s.WithConn(ctx, Interactive, tenant, func(ctx context.Context, conn *pgx.Conn) error {
						raise(&maxInFlight[ti], inFlight[ti].Add(1))
						raise(&maxGlobal, global.Add(1))
						defer inFlight[ti].Add(-1)
						defer global.Add(-1)
						_, err := conn.Exec(ctx, "SELECT pg_sleep(0.001)")
						return err
					})
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, limiter.ErrLimited):
						limited.Add(1)
					default:
						t.Errorf("tenant %s: %v", tenant, err)
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	<-sampled

	t.Logf("%d calls ok, %d limited; %d samples of pg_stat_activity; max tagged per tenant %v, global %d",
		ok.Load(), limited.Load(), samples, dbMaxTenant, dbMaxGlobal)
	for ti, tenant := range tenants {
		if m := maxInFlight[ti].Load(); m > 4 {
			t.Errorf("tenant %s: %d in flight in the work, cap 4", tenant, m)
		}
		if m := dbMaxTenant["t:"+tenant]; m > 4 {
			t.Errorf("tenant %s: %d tagged backends in pg_stat_activity, cap 4", tenant, m)
		}
	}
	if m := maxGlobal.Load(); m > 10 {
		t.Errorf("%d in flight globally in the work, cap 10", m)
	}
	if dbMaxGlobal > 10 {
		t.Errorf("%d tagged backends in pg_stat_activity, global cap 10", dbMaxGlobal)
	}
	if samples < 10 || dbMaxGlobal == 0 {
		t.Errorf("%d samples, max %d tagged: the sampler saw nothing", samples, dbMaxGlobal)
	}
	st := lim.Stat().Total
	if attempts := int64(len(tenants) * 50 * 20); st.Admitted+st.Rejected()+st.Cancelled != attempts || st.Admitted != ok.Load() || st.Rejected() != limited.Load() {
		t.Errorf("limiter %+v: admitted + rejected + cancelled != %d attempts, or disagrees with callers (%d ok, %d limited)",
			st, attempts, ok.Load(), limited.Load())
	}
}

func TestPanicReturnsSlotAndConnection(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	lim, _ := limiter.New(limiter.Config{MaxPerTenant: 1, MaxQueue: 0, MaxWait: time.Second})
	cfg := onePool(dsns["app"], 2)
	cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: lim}
	s := newStack(t, cfg)

	const sleepSQL = "SELECT pg_sleep(10)"
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the call's own panic", r)
			}
		}()
		_, _ = s.WithConn(t.Context(), Interactive, "a", func(ctx context.Context, conn *pgx.Conn) error {
			// pgconn's Exec returns once the query is sent: it is running
			// on the server (and the connection busy) when the call panics.
			_ = conn.PgConn().Exec(ctx, sleepSQL)
			if !eventually(time.Second, func() bool {
				return scalar[int64](t, db.admin, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'", sleepSQL) == 1
			}) {
				t.Error("the query never started")
			}
			panic("boom")
		})
	}()
	if st := lim.TenantStat("a"); st.InFlight != 0 {
		t.Errorf("limiter slot kept after panic: %+v", st)
	}
	if st := s.Stat().Pools[0]; st.Borrowed != 0 || st.Destroyed != 1 {
		t.Errorf("pool stat %+v: want the connection destroyed", st)
	}
	waitClosed(t, s)
	if st := s.Stat().Pools[0]; st.Closing != 0 || st.AcquiredConns != 0 {
		t.Errorf("pool stat %+v: want the connection closed", st)
	}
	// The statement was cancelled on the server, not left running.
	if !eventually(2*time.Second, func() bool {
		return scalar[int64](t, db.admin, "SELECT count(*) FROM pg_stat_activity WHERE query = $1", sleepSQL) == 0
	}) {
		t.Error("the query still runs on the server after the panic")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("panic path took %s: the query was not cancelled", took)
	}
	if _, err := s.Query(t.Context(), Interactive, "a", "SELECT 1"); err != nil {
		t.Errorf("next call: %v", err)
	}
	if u := s.Ledger().Usage(); len(u) != 1 || u[0].Statements != 2 {
		t.Errorf("ledger %+v, want both calls recorded", u)
	}
}

func TestCallerCancelIsNotATimeout(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 2))

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Query(ctx, Interactive, "a", "SELECT pg_sleep(5)")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("returned after %s, want ≈ 300ms", took)
	}
	if got := s.Errors("a", Interactive); got[ErrorCancelled] != 1 || len(got) != 1 {
		t.Errorf("Errors = %v, want one cancelled", got)
	}
	if !eventually(2*time.Second, func() bool {
		return scalar[int64](t, db.admin, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(5)' AND state = 'active'") == 0
	}) {
		t.Error("pg_sleep(5) still running after the caller left")
	}
}

func TestAcquireTimeout(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	cfg := onePool(dsns["app"], 1)
	cfg.Pools[0].AcquireTimeout = 200 * time.Millisecond
	s := newStack(t, cfg)

	held := make(chan error, 1)
	go func() {
		_, err := s.Query(context.Background(), Interactive, "holder", "SELECT pg_sleep(1)")
		held <- err
	}()
	if !eventually(time.Second, func() bool { return s.Stat().Pools[0].Borrowed == 1 }) {
		t.Fatal("holder never borrowed the connection")
	}
	start := time.Now()
	_, err := s.Query(t.Context(), Interactive, "b", "SELECT 1")
	took := time.Since(start)
	var ate *AcquireTimeoutError
	if !errors.As(err, &ate) || !errors.Is(err, ErrAcquireTimeout) || ate.Timeout != 200*time.Millisecond {
		t.Fatalf("err = %v, want *AcquireTimeoutError of 200ms", err)
	}
	if took < 190*time.Millisecond || took > 600*time.Millisecond {
		t.Errorf("timed out after %s, want ≈ 200ms", took)
	}
	if got := s.Errors("b", Interactive); got[ErrorAcquireTimeout] != 1 {
		t.Errorf("Errors = %v, want one acquire_timeout", got)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

func TestActivity(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	if _, err := db.admin.Exec(t.Context(), "CREATE TABLE locked (id int)"); err != nil {
		t.Fatal(err)
	}
	r := testRole("app", 0)
	r.WriteTables = []string{"locked"}
	dsns, _ := db.roles(t, r)
	s := newStack(t, onePool(dsns["app"], 4))

	// The admin holds the table lock; tenant w blocks on it; tenant i sits
	// idle in a transaction.
	lockTx, err := db.admin.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lockTx.Rollback(context.Background())
	if _, err := lockTx.Exec(t.Context(), "LOCK TABLE locked IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() {
		if _, err := s.Query(context.Background(), Interactive, "w", "SELECT count(*) FROM locked"); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		_, err := s.WithConn(context.Background(), Interactive, "i", func(ctx context.Context, conn *pgx.Conn) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				<-release
				return nil
			})
		})
		if err != nil {
			t.Error(err)
		}
	})

	// Activity reads with a connection of its own (the admin's is in the
	// locking transaction, whose now() would stand still).
	reader := connect(t, db.primary.DSN())
	var groups map[string]ActivityGroup
	ok := eventually(3*time.Second, func() bool {
		gs, err := Activity(t.Context(), reader)
		if err != nil {
			t.Fatal(err)
		}
		groups = map[string]ActivityGroup{}
		for _, g := range gs {
			groups[g.ApplicationName] = g
		}
		return groups["t:w"].WaitingOnLock == 1 && groups["t:i"].IdleInTransaction == 1 && groups["t:w"].LongestQuery > 50*time.Millisecond
	})
	close(release)
	_ = lockTx.Rollback(context.Background())
	wg.Wait()
	if !ok {
		t.Fatalf("Activity never showed w waiting on the lock and i idle in transaction: %+v", groups)
	}
	w, i := groups["t:w"], groups["t:i"]
	if w.Tenant != "w" || w.Active != 1 || w.Connections != 1 || i.Tenant != "i" || i.LongestTransaction <= 0 || i.Active != 0 {
		t.Errorf("groups w %+v, i %+v", w, i)
	}
}

func TestCloseLeavesNothing(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	interactive, heavy := DefaultRoles()
	dsns, _ := db.roles(t, interactive, heavy)
	cfg, err := DefaultIsolated(dsns[InteractiveRoleName], dsns[HeavyRoleName])
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c := []Class{Interactive, Heavy}[i%2]
			if _, err := s.Query(t.Context(), c, fmt.Sprint(i), "SELECT pg_sleep(0.05)"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s.Close()
	s.Close() // idempotent

	if _, err := s.Query(t.Context(), Interactive, "late", "SELECT 1"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrClosed", err)
	}
	if !eventually(2*time.Second, func() bool {
		return backends(t, db.admin, InteractiveRoleName)+backends(t, db.admin, HeavyRoleName) == 0
	}) {
		t.Errorf("connections left after Close: %d interactive, %d heavy",
			backends(t, db.admin, InteractiveRoleName), backends(t, db.admin, HeavyRoleName))
	}
	// Goroutines are checked for the whole package by goleak in TestMain.
}

// A standby cancelling a heavy query for a conflict with recovery counts as
// a replica conflict.
func TestReplicaConflict(t *testing.T) {
	c := localtest.Start(t, backend.Spec{
		Topology: backend.TopologyReplica,
		Settings: map[string]string{"max_standby_streaming_delay": "100ms"},
	})
	db := &testDB{}
	db.primary, _ = backend.First(c, backend.RolePrimary)
	db.replica, db.hasReplica = backend.First(c, backend.RoleReplica)
	db.admin = connect(t, db.primary.DSN())
	db.standby = connect(t, db.replica.DSN())
	if _, err := db.admin.Exec(t.Context(), "CREATE TABLE facts AS SELECT 1 AS n"); err != nil {
		t.Fatal(err)
	}
	_, heavy := DefaultRoles()
	heavy.ReadTables = []string{"facts"}
	_, onReplica := db.roles(t, heavy)
	s := newStack(t, Config{
		Pools:   []PoolConfig{{Name: "heavy", DSN: onReplica[HeavyRoleName], Size: 1}},
		Classes: map[Class]ClassConfig{Heavy: {Pool: "heavy"}},
	})

	const reportSQL = "SELECT pg_sleep(5) FROM facts"
	done := make(chan error, 1)
	go func() {
		_, err := s.Query(context.Background(), Heavy, "analyst", reportSQL)
		done <- err
	}()
	// Sleeping, not only active: the first call on a connection prepares
	// the statement in a round trip of its own, shown active too, and a
	// drop replayed between that Parse and the Execute fails the replanning
	// with 42P01 instead of cancelling a running query.
	if !eventually(3*time.Second, func() bool {
		return scalar[int64](t, db.standby, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active' AND wait_event = 'PgSleep'", reportSQL) == 1
	}) {
		t.Fatal("the heavy query never started on the standby")
	}
	// Replaying an exclusive lock conflicts with the query's share lock.
	if _, err := db.admin.Exec(t.Context(), "DROP TABLE facts"); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(4 * time.Second):
		t.Fatal("the standby did not cancel the query within 4s")
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "40001" && pgErr.Code != "40P01") {
		t.Fatalf("err = %v, want a recovery conflict (40001)", err)
	}
	if got := s.Errors("analyst", Heavy); got[ErrorReplicaConflict] != 1 || len(got) != 1 {
		t.Errorf("Errors = %v, want one replica_conflict", got)
	}
}

// TestQueryBatchedKeepsGuarantees checks Query once its statement is
// prepared on the connection (the tag goes with the statement and the reset
// follows unawaited): the tenant shows while the statement runs, the idle
// connection shows the pool's name, settings the statement changed do not
// reach the next borrower (L6 through Query), and a statement that refuses
// a transaction block still runs, tagged.
func TestQueryBatchedKeepsGuarantees(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 2*time.Second))
	s := newStack(t, onePool(dsns["app"], 1))
	ctx := t.Context()
	const sleep = "SELECT pg_sleep($1::float8)"
	if _, err := s.Query(ctx, Interactive, "warm", sleep, 0.0); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := s.Query(context.Background(), Interactive, "tenant-7", sleep, 0.5)
		done <- err
	}()
	ok := eventually(2*time.Second, func() bool {
		groups, err := Activity(ctx, db.admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if g.ApplicationName == "t:tenant-7" && g.Active == 1 {
				return true
			}
		}
		return false
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("pg_stat_activity never showed t:tenant-7 active during its batched query")
	}
	var app, state string
	if err := queryRow(ctx, db.admin, "SELECT application_name, state FROM pg_stat_activity WHERE usename = 'app' AND backend_type = 'client backend'",
		nil, &app, &state); err != nil {
		t.Fatal(err)
	}
	if app != "noisysim-interactive" {
		t.Errorf("returned backend shows application_name %q (%s), want noisysim-interactive", app, state)
	}

	// L6 through Query: the second call is batched.
	const setTimeout = "SELECT set_config('statement_timeout', $1, false)"
	for range 2 {
		if _, err := s.Query(ctx, Interactive, "A", setTimeout, "0"); err != nil {
			t.Fatal(err)
		}
	}
	var shown string
	if _, err := s.WithConn(ctx, Interactive, "B", func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&shown)
	}); err != nil {
		t.Fatal(err)
	}
	if shown != "2s" {
		t.Errorf("B: SHOW statement_timeout = %s after A's batched SET, want the role's 2s", shown)
	}

	// An advisory lock the statement takes is gone when the call returns,
	// after success (the reset ran in its transaction) and after failure
	// (a rollback keeps it: the full reset ran on its own).
	for _, q := range []string{"SELECT pg_advisory_lock(7)", "SELECT pg_advisory_lock(7), 1 / (random() * 0)::int"} {
		for i := range 2 { // the second call is batched
			_, err := s.Query(ctx, Interactive, "A", q)
			if (err != nil) != strings.Contains(q, "random") {
				t.Fatalf("%s: err = %v", q, err)
			}
			if n := scalar[int64](t, db.admin, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"); n != 0 {
				t.Errorf("%s (call %d): %d advisory locks held after it returned, want 0", q, i+1, n)
			}
		}
	}

	// VACUUM refuses a transaction block: Query runs it on its own.
	if _, err := db.admin.Exec(ctx, "CREATE TABLE vac (id int); GRANT ALL ON vac TO app"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Query(ctx, Interactive, "A", "VACUUM vac"); err != nil {
			t.Fatalf("VACUUM through Query: %v", err)
		}
	}
	// A procedure that commits cannot run in the block either: on its own,
	// its rows kept.
	if _, err := db.admin.Exec(ctx, "CREATE PROCEDURE fill() LANGUAGE plpgsql AS $$ BEGIN INSERT INTO vac VALUES (1); COMMIT; INSERT INTO vac VALUES (2); END $$; GRANT EXECUTE ON PROCEDURE fill() TO app"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Query(ctx, Interactive, "A", "CALL fill()"); err != nil {
			t.Fatalf("CALL of a committing procedure through Query: %v", err)
		}
	}
	if n := scalar[int64](t, db.admin, "SELECT count(*) FROM vac"); n != 4 {
		t.Errorf("%d rows after two CALLs, want 4 (each once)", n)
	}
	if st := s.Stat().Pools[0]; st.Destroyed != 0 || st.TotalConns != 1 {
		t.Errorf("pool stat %+v: want one connection, none destroyed", st)
	}
}

// A role with CREATEROLE but not superuser (what an external database's
// DSN often has) creates and converges the roles; a role that gained a
// superuser-only attribute is set back by a superuser.
func TestEnsureRolesAsCreateRole(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	ctx := t.Context()
	if _, err := db.admin.Exec(ctx, `CREATE ROLE creator LOGIN CREATEROLE PASSWORD 'creator-pw'`); err != nil {
		t.Fatal(err)
	}
	creator := connect(t, db.primary.DSNFor("creator", "creator-pw"))
	interactive, heavy := DefaultRoles()
	for i := range 2 {
		if _, err := EnsureRoles(ctx, creator, db.primary.Database, interactive, heavy); err != nil {
			t.Fatalf("EnsureRoles #%d as a CREATEROLE role: %v", i+1, err)
		}
	}
	if got := scalar[int](t, db.admin, "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1", InteractiveRoleName); got != 40 {
		t.Errorf("interactive connection limit = %d, want 40", got)
	}

	if _, err := db.admin.Exec(ctx, `ALTER ROLE `+ident(HeavyRoleName)+` REPLICATION BYPASSRLS`); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureRoles(ctx, creator, db.primary.Database, heavy); err == nil {
		t.Error("a CREATEROLE role converged a REPLICATION role: want PostgreSQL's refusal")
	}
	if _, err := EnsureRoles(ctx, db.admin, db.primary.Database, heavy); err != nil {
		t.Fatalf("EnsureRoles as superuser: %v", err)
	}
	if scalar[bool](t, db.admin, "SELECT rolreplication OR rolbypassrls FROM pg_roles WHERE rolname = $1", HeavyRoleName) {
		t.Error("heavy role kept REPLICATION or BYPASSRLS after EnsureRoles")
	}
}

// TestOnWork: Config.OnWork sees each call's work as the ledger recorded
// it, with when it began: a 300 ms statement began after the call and
// ended before it returned, and its DB time is the Result's.
func TestOnWork(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, NaiveRole())
	cfg := DefaultNaive(dsns[NaiveRoleName])
	var mu sync.Mutex
	var seen []Work
	cfg.OnWork = func(w Work) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, w)
	}
	s := newStack(t, cfg)
	before := time.Now()
	res, err := s.Query(t.Context(), Interactive, "t7", "SELECT pg_sleep(0.3)")
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("OnWork called %d times, want 1: %+v", len(seen), seen)
	}
	w := seen[0]
	if w.Tenant != "t7" || w.Class != Interactive || w.Pool != res.Pool || w.DBTime != res.DBTime {
		t.Errorf("work %+v, want tenant t7, class interactive, pool %s, DB time %v", w, res.Pool, res.DBTime)
	}
	if w.DBTime < 300*time.Millisecond || w.Began.Before(before) || w.Began.Add(w.DBTime).After(after) {
		t.Errorf("work began %v after the call and took %v; the call took %v: want a 300 ms statement inside the call",
			w.Began.Sub(before), w.DBTime, after.Sub(before))
	}
}
