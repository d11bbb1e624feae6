package container_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/citus"
)

func connect(t *testing.T, n backend.Node) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		t.Fatalf("connect to %s: %v", n, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestSingle(t *testing.T) {
	c := start(t, backend.Spec{Settings: map[string]string{"work_mem": "8MB"}})
	nodes := c.Nodes()
	if len(nodes) != 1 || nodes[0].Name != "primary" || nodes[0].Role != backend.RolePrimary || nodes[0].Host != "127.0.0.1" {
		t.Fatalf("nodes = %v, want one primary on 127.0.0.1", nodes)
	}
	conn := connect(t, nodes[0])
	var workMem, version string
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('work_mem'), current_setting('server_version_num')").Scan(&workMem, &version); err != nil {
		t.Fatal(err)
	}
	if workMem != "8MB" {
		t.Errorf("work_mem = %s, want 8MB from Spec.Settings", workMem)
	}
	if strings.Contains(nodes[0].RedactedDSN(), nodes[0].Password) {
		t.Errorf("redacted DSN shows the password")
	}
	if c.Ready() <= 0 {
		t.Errorf("Ready() = %v", c.Ready())
	}
	run := c.RunID()
	if n := runLeft(t, run); n != 2 {
		t.Errorf("run %s has %d containers+networks, want 2", run, n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := runLeft(t, run); n != 0 {
		t.Errorf("after Close run %s left %d containers+networks", run, n)
	}
}

func TestReplicaStreams(t *testing.T) {
	c := start(t, backend.Spec{Topology: backend.TopologyReplica})
	primary, ok1 := backend.First(c, backend.RolePrimary)
	replica, ok2 := backend.First(c, backend.RoleReplica)
	if !ok1 || !ok2 || replica.Name != "replica1" {
		t.Fatalf("nodes = %v", c.Nodes())
	}
	ctx := context.Background()
	pc, rc := connect(t, primary), connect(t, replica)
	if _, err := pc.Exec(ctx, "CREATE TABLE t (v text); INSERT INTO t VALUES ('streamed')"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var v string
		err := rc.QueryRow(ctx, "SELECT v FROM t").Scan(&v)
		if err == nil && v == "streamed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("row not visible on the standby within 5 s (last: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err := rc.Exec(ctx, "INSERT INTO t VALUES ('no')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("write on the standby: %v, want SQLSTATE 25006", err)
	}
	var feedback, slot string
	if err := rc.QueryRow(ctx, "SELECT current_setting('hot_standby_feedback')").Scan(&feedback); err != nil || feedback != "off" {
		t.Errorf("hot_standby_feedback = %q (%v), want off", feedback, err)
	}
	if err := pc.QueryRow(ctx, "SELECT slot_name FROM pg_replication_slots WHERE active").Scan(&slot); err != nil || slot != "replica1" {
		t.Errorf("active slot = %q (%v), want replica1", slot, err)
	}
}

// TestFiveNodeNetwork starts 5 plain primaries on one network, checks that
// each answers and that they reach one another by alias, then that Close
// removes the containers and the network.
func TestFiveNodeNetwork(t *testing.T) {
	c := start(t, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 5})
	nodes := c.Nodes()
	if len(nodes) != 5 {
		t.Fatalf("%d nodes, want 5", len(nodes))
	}
	run := c.RunID()
	if n := runLeft(t, run); n != 6 {
		t.Errorf("run %s has %d containers+networks, want 6", run, n)
	}
	ctx := context.Background()
	for i, n := range nodes {
		// Each node reaches the next over the cluster network by its alias
		// (pg_isready run by the server, as superusers may).
		next := nodes[(i+1)%len(nodes)].Name
		conn := connect(t, n)
		var line string
		_, err := conn.Exec(ctx, "CREATE TEMP TABLE r (line text); COPY r FROM PROGRAM 'pg_isready -h "+next+" -p 5432'", pgx.QueryExecModeSimpleProtocol)
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT line FROM r").Scan(&line)
		}
		if err != nil || !strings.Contains(line, "accepting connections") {
			t.Errorf("%s reaching %s: %q, %v", n.Name, next, line, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := runLeft(t, run); n != 0 {
		t.Errorf("after Close run %s left %d containers+networks", run, n)
	}
}

func TestFaults(t *testing.T) {
	c := start(t, backend.Spec{})
	primary := c.Nodes()[0]
	ctx := context.Background()
	for _, f := range container.Faults {
		t.Run(string(f), func(t *testing.T) {
			restore, err := c.Inject(ctx, "primary", f)
			if err != nil {
				t.Fatal(err)
			}
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = pingOnce(qctx, primary)
			cancel()
			if err == nil {
				t.Errorf("query succeeded during %s", f)
			}
			if err := restore(ctx); err != nil {
				t.Fatal(err)
			}
			qctx, cancel = context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for err := pingOnce(qctx, primary); err != nil; err = pingOnce(qctx, primary) {
				if qctx.Err() != nil {
					t.Fatalf("no query succeeded after restoring %s: %v", f, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	if _, err := c.Inject(ctx, "nope", container.FaultStop); !errors.Is(err, container.ErrUnknownNode) || !errors.Is(err, backend.ErrBadInput) {
		t.Errorf("unknown node: %v", err)
	}
}

func pingOnce(ctx context.Context, n backend.Node) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// citusImage returns the image of the Citus tests: $NOISYSIM_CITUS_IMAGE,
// else DefaultCitusImage when it is present; otherwise it skips tb with one
// line.
func citusImage(tb testing.TB) string {
	tb.Helper()
	if img := os.Getenv("NOISYSIM_CITUS_IMAGE"); img != "" {
		needImage(tb, img, "NOISYSIM_CITUS_IMAGE names it: build or pull it")
		return img
	}
	needImage(tb, container.DefaultCitusImage, "pull it, or set NOISYSIM_CITUS_IMAGE to a local image with Citus installed")
	return container.DefaultCitusImage
}

// TestCitus starts a coordinator and 2 workers: the workers must be in
// pg_dist_node by network alias (what PeerAddr says), with CitusSettings;
// a distributed table must take rows, move a shard and isolate a tenant
// with force_logical;
// sampling through the coordinator must give one entry per worker.
func TestCitus(t *testing.T) {
	image := citusImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := container.Start(ctx, backend.Spec{Topology: container.TopologyCitus, Nodes: 2},
		container.WithImage(backend.RoleCoordinator, image), container.WithImage(backend.RoleWorker, image), testLabel)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn := connect(t, coord)
	names, err := citus.WorkerNames(ctx, conn)
	if want := []string{"worker1:5432", "worker2:5432"}; err != nil || !slices.Equal(names, want) {
		t.Fatalf("pg_dist_node workers %v (%v), want %v", names, err, want)
	}
	if host, port, ok := c.PeerAddr("worker2"); !ok || host != "worker2" || port != 5432 {
		t.Errorf("PeerAddr(worker2) = %s, %d, %v; want worker2, 5432, true", host, port, ok)
	}
	if _, _, ok := c.PeerAddr("worker9"); ok {
		t.Errorf("PeerAddr(worker9) found a node the cluster lacks")
	}
	var wal, track string
	w1 := c.Nodes()[1]
	if err := connect(t, w1).QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('citus.stat_tenants_track')").Scan(&wal, &track); err != nil {
		t.Fatal(err)
	}
	if wal != "logical" || track != "all" {
		t.Errorf("%s: wal_level %s, citus.stat_tenants_track %s; want logical, all (CitusSettings)", w1.Name, wal, track)
	}

	// Rows in a distributed table, and a shard moved between workers.
	var rows, shard int64
	var from string
	_, err = conn.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)")
	if err == nil {
		_, err = conn.Exec(ctx, "SELECT create_distributed_table('t', 'id', shard_count => 4)")
	}
	if err == nil {
		_, err = conn.Exec(ctx, "INSERT INTO t SELECT generate_series(1, 1000)")
	}
	if err == nil {
		err = conn.QueryRow(ctx, "SELECT shardid, nodename FROM citus_shards WHERE table_name = 't'::regclass ORDER BY shardid LIMIT 1").Scan(&shard, &from)
	}
	to := "worker1"
	if from == to {
		to = "worker2"
	}
	if err == nil {
		_, err = conn.Exec(ctx, "SELECT citus_move_shard_placement($1, $2, 5432, $3, 5432, shard_transfer_mode => 'force_logical')", shard, from, to)
	}
	if err == nil {
		// A split decodes with citus's own output plugin.
		_, err = conn.Exec(ctx, "SELECT isolate_tenant_to_new_shard('t', 7, shard_transfer_mode => 'force_logical')")
	}
	if err == nil {
		err = conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&rows)
	}
	if err != nil || rows != 1000 {
		t.Fatalf("distributed table: %d rows after moving shard %d from %s to %s and isolating tenant 7 (%v), want 1000", rows, shard, from, to, err)
	}

	t0 := time.Now()
	counts, err := citus.WorkerActivity(ctx, conn)
	t.Logf("WorkerActivity through the coordinator: %v in %v", counts, time.Since(t0).Round(time.Millisecond))
	if err != nil || len(counts) != 2 {
		t.Fatalf("WorkerActivity = %v (%v), want one entry per worker", counts, err)
	}
	for _, n := range names {
		if _, ok := counts[n]; !ok {
			t.Errorf("WorkerActivity has no entry for %s: %v", n, counts)
		}
	}
}

// TestCitusWithoutCitus gives the Citus nodes an image without Citus: Start
// must say so in one line (backend.ErrNotInstalled: the CLI exits 2).
func TestCitusWithoutCitus(t *testing.T) {
	needImage(t, testImage(), buildHint)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := container.Start(ctx, backend.Spec{Topology: container.TopologyCitus, Nodes: 2}, container.WithImages(testImage()), testLabel)
	var ce *container.CitusImageError
	if !errors.As(err, &ce) || !errors.Is(err, backend.ErrNotInstalled) || ce.Image != testImage() || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v, want one-line *CitusImageError for %s", err, testImage())
	}
}

// The scenario's worker bound for kind docker is the backend's.
func TestScenarioDockerWorkers(t *testing.T) {
	if scenario.MaxDockerWorkers != container.MaxNodes {
		t.Errorf("scenario.MaxDockerWorkers = %d, container.MaxNodes = %d", scenario.MaxDockerWorkers, container.MaxNodes)
	}
}

func TestBadInput(t *testing.T) {
	for name, spec := range map[string]backend.Spec{
		"unknown topology": {Topology: "ring"},
		"too many nodes":   {Topology: backend.TopologyPrimaries, Nodes: container.MaxNodes + 1},
		"negative nodes":   {Topology: container.TopologyCitus, Nodes: -1},
		"reserved setting": {Settings: map[string]string{"port": "1"}},
		"bad setting name": {Settings: map[string]string{"a b": "1"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := container.Start(context.Background(), spec, testLabel)
			if !errors.Is(err, backend.ErrBadInput) {
				t.Errorf("err = %v, want ErrBadInput", err)
			}
		})
	}
}

func TestMissingImage(t *testing.T) {
	needImage(t, testImage(), buildHint)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := container.Start(ctx, backend.Spec{}, container.WithImages("noisysim-local/absent:0"), testLabel)
	var ie *container.ImageError
	if !errors.As(err, &ie) || !errors.Is(err, backend.ErrNotInstalled) || ie.Image != "noisysim-local/absent:0" {
		t.Fatalf("err = %v, want *ImageError for the absent image", err)
	}
}
