package pools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
)

// sessionState is one kind of session state a borrower's single statement
// can leave behind past its own transaction.
type sessionState struct {
	name string
	// leave is the statement that leaves the state behind.
	leave string
	// check runs on the next borrower's connection and describes the
	// state it finds left over, or returns "".
	check func(ctx context.Context, conn *pgx.Conn, login string) (string, error)
}

// sessionStates are what a reset must undo: a setting (RESET ALL), a
// cursor WITH HOLD (CLOSE ALL), the session authorization (SET SESSION
// AUTHORIZATION DEFAULT), the role (SET SESSION AUTHORIZATION DEFAULT or
// RESET ROLE: either makes current_user the login again, also after the
// next borrower's SET LOCAL ROLE ends), a LISTEN (UNLISTEN *), an advisory
// lock (pg_advisory_unlock_all), a temporary table (DISCARD TEMP) and a
// sequence's currval and lastval (DISCARD SEQUENCES). They need a
// superuser login (SET SESSION AUTHORIZATION), a role "other" and a
// sequence "seq".
var sessionStates = []sessionState{
	{"setting", "SELECT set_config('work_mem', '77MB', false)", func(ctx context.Context, conn *pgx.Conn, _ string) (string, error) {
		var v string
		err := conn.QueryRow(ctx, "SHOW work_mem").Scan(&v)
		return leftIf(v == "77MB", "work_mem "+v), err
	}},
	{"cursor", "DECLARE held CURSOR WITH HOLD FOR SELECT 1", func(ctx context.Context, conn *pgx.Conn, _ string) (string, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_cursors WHERE name = 'held'").Scan(&n)
		return leftIf(n > 0, fmt.Sprintf("%d open cursors", n)), err
	}},
	{"session authorization", "SET SESSION AUTHORIZATION other", func(ctx context.Context, conn *pgx.Conn, login string) (string, error) {
		var v string
		err := conn.QueryRow(ctx, "SELECT session_user").Scan(&v)
		return leftIf(v != login, "session_user "+v), err
	}},
	{"role", "SET ROLE other", func(ctx context.Context, conn *pgx.Conn, login string) (string, error) {
		var now, after string
		if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&now); err != nil {
			return "", err
		}
		// A SET LOCAL of the role ends by restoring the role setting the
		// session had: the previous borrower's, unless it was reset.
		if _, err := conn.Exec(ctx, "BEGIN; SET LOCAL ROLE NONE; ROLLBACK"); err != nil {
			return "", err
		}
		if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&after); err != nil {
			return "", err
		}
		return leftIf(now != login || after != login, "current_user "+now+", after a rolled-back SET LOCAL ROLE "+after), nil
	}},
	{"listen", "LISTEN ch", func(ctx context.Context, conn *pgx.Conn, _ string) (string, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_listening_channels()").Scan(&n)
		return leftIf(n > 0, fmt.Sprintf("listening on %d channels", n)), err
	}},
	{"advisory lock", "SELECT pg_advisory_lock(7)", func(ctx context.Context, conn *pgx.Conn, _ string) (string, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").Scan(&n)
		return leftIf(n > 0, fmt.Sprintf("%d advisory locks", n)), err
	}},
	{"temporary table", "CREATE TEMP TABLE tt AS SELECT 1 AS x", func(ctx context.Context, conn *pgx.Conn, _ string) (string, error) {
		var there bool
		err := conn.QueryRow(ctx, "SELECT to_regclass('pg_temp.tt') IS NOT NULL").Scan(&there)
		return leftIf(there, "temporary table tt"), err
	}},
	{"sequence", "SELECT nextval('seq')", func(ctx context.Context, conn *pgx.Conn, _ string) (string, error) {
		var v int64
		err := conn.QueryRow(ctx, "SELECT lastval()").Scan(&v)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55000" { // lastval is not yet defined in this session
			return "", nil
		}
		return leftIf(err == nil, fmt.Sprintf("lastval() = %d", v)), err
	}},
}

func leftIf(cond bool, what string) string {
	if cond {
		return what
	}
	return ""
}

// resetDB starts a cluster with what sessionStates need and returns the
// superuser's DSN and login.
func resetDB(t *testing.T) (dsn, login string) {
	t.Helper()
	db := startDB(t, backend.TopologySingle)
	if _, err := db.admin.Exec(t.Context(), "CREATE ROLE other NOLOGIN; CREATE SEQUENCE seq"); err != nil {
		t.Fatal(err)
	}
	return db.primary.DSN(), scalar[string](t, db.admin, "SELECT session_user")
}

// leftByQuery runs st's statement through s.Query twice (the first call
// prepares it and is reset as WithConn is; the second is one flight with
// s.queryReset) and returns what the next borrower finds after each.
func leftByQuery(t *testing.T, s *Stack, st sessionState, login string) [2]string {
	t.Helper()
	var left [2]string
	for i := range left {
		if _, err := s.Query(t.Context(), Interactive, "A", st.leave); err != nil {
			t.Fatalf("%s: Query %q (call %d): %v", st.name, st.leave, i+1, err)
		}
		left[i] = leftFor(t, s, st, login)
	}
	return left
}

// leftFor runs st's check as the next borrower.
func leftFor(t *testing.T, s *Stack, st sessionState, login string) string {
	t.Helper()
	var left string
	if _, err := s.WithConn(t.Context(), Interactive, "B", func(ctx context.Context, conn *pgx.Conn) (err error) {
		left, err = st.check(ctx, conn, login)
		return err
	}); err != nil {
		t.Fatalf("%s: check: %v", st.name, err)
	}
	return left
}

// The reset undoes every kind of session state a borrower can leave, after
// Query (its first call and its one-flight call) and after WithConn, and
// the connection is reused, not replaced.
func TestResetClearsSessionState(t *testing.T) {
	dsn, login := resetDB(t)
	s := newStack(t, onePool(dsn, 1))
	for _, st := range sessionStates {
		for i, left := range leftByQuery(t, s, st, login) {
			if left != "" {
				t.Errorf("%s: after Query call %d the next borrower found %s", st.name, i+1, left)
			}
		}
		if _, err := s.WithConn(t.Context(), Interactive, "A", func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, st.leave)
			return err
		}); err != nil {
			t.Fatalf("%s: WithConn: %v", st.name, err)
		}
		if left := leftFor(t, s, st, login); left != "" {
			t.Errorf("%s: after WithConn the next borrower found %s", st.name, left)
		}
	}
	if st := s.Stat().Pools[0]; st.Destroyed != 0 || st.TotalConns != 1 {
		t.Errorf("pool stat %+v: want one connection, none destroyed", st)
	}
}

// No command of the reset is redundant: without any one of them, some
// session state reaches the next borrower. Checked for the eight commands
// of resetCommands one by one and for queryReset's, but RESET ROLE, which
// SET SESSION AUTHORIZATION DEFAULT covers (TestResetRestoresLoginRole).
func TestResetEachCommandNeeded(t *testing.T) {
	dsn, login := resetDB(t)
	for _, reset := range [][]string{resetCommands, queryReset} {
		for i, cmd := range reset {
			if cmd == "RESET ROLE" {
				continue
			}
			s := newStack(t, onePool(dsn, 1))
			s.queryReset = slices.Delete(slices.Clone(reset), i, i+1)
			var leaks []string
			for _, st := range sessionStates {
				if left := leftByQuery(t, s, st, login)[1]; left != "" {
					leaks = append(leaks, st.name+": "+left)
				}
			}
			if len(leaks) == 0 {
				t.Errorf("reset without %q: no session state reached the next borrower; want one", cmd)
			} else {
				t.Logf("reset without %q: %v", cmd, leaks)
			}
			s.Close()
		}
	}
}

// A login role whose ALTER ROLE ... SET role makes its sessions start as
// another role gets that role back from the reset, whatever role a
// borrower set, through Query's reset and WithConn's. On PostgreSQL 15 SET
// SESSION AUTHORIZATION DEFAULT alone does it as well (the third case): RESET
// ROLE is redundant there, kept as PostgreSQL documents it (and free in
// queryReset's SELECT).
func TestResetRestoresLoginRole(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 10*time.Second))
	if _, err := db.admin.Exec(t.Context(), "CREATE ROLE other NOLOGIN; CREATE ROLE third NOLOGIN; GRANT other, third TO app; ALTER ROLE app SET role = 'other'"); err != nil {
		t.Fatal(err)
	}
	st := sessionState{"role at login", "SET ROLE third", func(ctx context.Context, conn *pgx.Conn, _ string) (string, error) {
		var v string
		err := conn.QueryRow(ctx, "SELECT current_user").Scan(&v)
		return leftIf(v != "other", "current_user "+v+", want other as at login"), err
	}}
	withoutResetRole := slices.DeleteFunc(slices.Clone(resetCommands), func(c string) bool { return c == "RESET ROLE" })
	for _, tc := range []struct {
		name  string
		reset []string
	}{
		{"queryReset", queryReset},
		{"resetCommands", resetCommands},
		{"resetCommands without RESET ROLE", withoutResetRole},
	} {
		s := newStack(t, onePool(dsns["app"], 1))
		s.queryReset = tc.reset
		if left := leftFor(t, s, st, "app"); left != "" {
			t.Fatalf("%s: before any call: %s", tc.name, left)
		}
		for i, left := range leftByQuery(t, s, st, "app") {
			if left != "" {
				t.Errorf("%s: after Query call %d the next borrower found %s", tc.name, i+1, left)
			}
		}
		s.Close()
	}
}
