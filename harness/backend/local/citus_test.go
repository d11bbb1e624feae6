package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// needCitus skips t when PostgreSQL or its citus extension is missing.
func needCitus(t testing.TB) {
	t.Helper()
	bin, err := local.FindBinaries(context.Background(), "")
	if err != nil {
		t.Skipf("skipping: PostgreSQL server binaries not found")
	}
	if err := local.CheckCitus(context.Background(), bin); err != nil {
		t.Skipf("skipping: Citus is not installed for PostgreSQL %d", bin.Major)
	}
}

// TestCitusCluster starts a coordinator and two workers and moves a shard
// between the workers with logical replication: node-to-node
// authentication and logical decoding work.
func TestCitusCluster(t *testing.T) {
	needCitus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := local.Start(ctx, backend.Spec{Topology: local.TopologyCitus, Nodes: 2}, local.WithBaseDir(privateBase(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	coord, ok := backend.First(c, backend.RoleCoordinator)
	if !ok {
		t.Fatal("no coordinator")
	}
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var workers int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM citus_get_active_worker_nodes()").Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if workers != 2 {
		t.Fatalf("active workers = %d, want 2", workers)
	}
	for _, q := range []string{
		"CREATE TABLE t (tenant_id bigint, id bigint, PRIMARY KEY (tenant_id, id))",
		"SELECT create_distributed_table('t', 'tenant_id', shard_count => 4)",
		"INSERT INTO t SELECT g % 10, g FROM generate_series(1, 1000) g",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var shard int64
	var from, to int
	err = conn.QueryRow(ctx, `SELECT s.shardid, s.nodeport, (SELECT nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0 AND nodeport <> s.nodeport LIMIT 1)
		FROM citus_shards s WHERE table_name = 't'::regclass ORDER BY shardid LIMIT 1`).Scan(&shard, &from, &to)
	if err != nil {
		t.Fatal(err)
	}
	move := fmt.Sprintf("SELECT citus_move_shard_placement(%d, '127.0.0.1', %d, '127.0.0.1', %d, shard_transfer_mode => 'force_logical')", shard, from, to)
	if _, err := conn.Exec(ctx, move); err != nil {
		t.Fatalf("move shard: %v", err)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1000 {
		t.Fatalf("rows after move = %d (%v), want 1000", n, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
