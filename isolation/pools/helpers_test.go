package pools

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/internal/suitelock"
)

func TestMain(m *testing.M) {
	suitelock.Hold("isolation/pools") // the tests start PostgreSQL and measure: they take their turn
	goleak.VerifyTestMain(m)
}

// testDB is a throwaway cluster with a superuser connection to each node.
type testDB struct {
	primary    backend.Node
	replica    backend.Node
	hasReplica bool
	admin      *pgx.Conn // superuser, on the primary
	standby    *pgx.Conn // superuser, on the replica (nil without one)
}

// startDB starts a cluster of topology with the project's local backend; it
// skips the test when PostgreSQL is not installed.
func startDB(t *testing.T, topology backend.Topology) *testDB {
	t.Helper()
	c := localtest.Start(t, backend.Spec{Topology: topology})
	db := &testDB{}
	db.primary, _ = backend.First(c, backend.RolePrimary)
	db.replica, db.hasReplica = backend.First(c, backend.RoleReplica)
	db.admin = connect(t, db.primary.DSN())
	if db.hasReplica {
		db.standby = connect(t, db.replica.DSN())
	}
	return db
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// roles creates the roles on the primary (waiting for the replica to replay
// them) and returns each one's DSN on the primary, and on the replica if
// there is one.
func (db *testDB) roles(t *testing.T, roles ...RoleConfig) (onPrimary, onReplica map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pw, err := EnsureRoles(ctx, db.admin, db.primary.Database, roles...)
	if err != nil {
		t.Fatalf("EnsureRoles: %v", err)
	}
	if db.hasReplica {
		if err := WaitForStandby(ctx, db.admin, db.standby); err != nil {
			t.Fatalf("WaitForStandby: %v", err)
		}
	}
	onPrimary, onReplica = map[string]string{}, map[string]string{}
	for _, r := range roles {
		onPrimary[r.Name] = db.primary.DSNFor(r.Name, pw[r.Name])
		if db.hasReplica {
			onReplica[r.Name] = db.replica.DSNFor(r.Name, pw[r.Name])
		}
	}
	return onPrimary, onReplica
}

// newStack starts a Stack closed at the end of the test.
func newStack(t *testing.T, cfg Config) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// onePool is a config with one pool of size serving the interactive class.
func onePool(dsn string, size int32) Config {
	return Config{
		Pools:   []PoolConfig{{Name: string(Interactive), DSN: dsn, Size: size}},
		Classes: map[Class]ClassConfig{Interactive: {Pool: string(Interactive)}},
	}
}

// testRole is an interactive-like role with a short statement timeout.
func testRole(name string, timeout time.Duration) RoleConfig {
	return RoleConfig{Name: name, StatementTimeout: timeout, IdleInTransactionSessionTimeout: 10 * time.Second, ConnectionLimit: 40}
}

// scalar runs sql on q and returns its single value.
func scalar[T any](t *testing.T, q Querier, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := queryRow(context.Background(), q, sql, args, &v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// backends returns how many client backends of role are connected.
func backends(t *testing.T, admin *pgx.Conn, role string) int64 {
	t.Helper()
	return scalar[int64](t, admin,
		"SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND backend_type = 'client backend'", role)
}

// eventually polls cond every 10 ms for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
