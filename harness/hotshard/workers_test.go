package hotshard

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/isolation/citus"
)

// fakeCluster is a backend.Cluster of given nodes, a PeerAddresser when
// peers is not nil.
type fakeCluster struct{ nodes []backend.Node }

func (c fakeCluster) Nodes() []backend.Node { return c.nodes }
func (c fakeCluster) Close() error          { return nil }

type peerCluster struct {
	fakeCluster
	peers map[string]string // node name → "host:port"
}

func (c peerCluster) PeerAddr(node string) (string, int, bool) {
	a, ok := c.peers[node]
	if !ok {
		return "", 0, false
	}
	host, port, _ := splitAddr(a)
	return host, port, true
}

func splitAddr(a string) (string, int, error) {
	i := len(a) - 1
	for i >= 0 && a[i] != ':' {
		i--
	}
	port, err := strconv.Atoi(a[i+1:])
	return a[:i], port, err
}

func TestMatchWorkers(t *testing.T) {
	coord := backend.Node{Name: "coordinator", Role: backend.RoleCoordinator, Host: "127.0.0.1", Port: 5000}
	w1 := backend.Node{Name: "worker1", Role: backend.RoleWorker, Host: "127.0.0.1", Port: 5001}
	w2 := backend.Node{Name: "worker2", Role: backend.RoleWorker, Host: "127.0.0.1", Port: 5002}
	local := fakeCluster{[]backend.Node{coord, w1, w2}}
	containers := peerCluster{local, map[string]string{"worker1": "worker1:5432", "worker2": "worker2:5432", "coordinator": "coordinator:5432"}}
	for _, tc := range []struct {
		name  string
		c     backend.Cluster
		names []string
		want  map[string]string // pg_dist_node name → node name; nil: no match
	}{
		{"local: host and port", local, []string{"127.0.0.1:5001", "127.0.0.1:5002"},
			map[string]string{"127.0.0.1:5001": "worker1", "127.0.0.1:5002": "worker2"}},
		{"containers: peer address", containers, []string{"worker1:5432", "worker2:5432"},
			map[string]string{"worker1:5432": "worker1", "worker2:5432": "worker2"}},
		{"aliases without PeerAddr", local, []string{"worker1:5432", "worker2:5432"}, nil},
		{"a worker the cluster lacks", local, []string{"127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"}, nil},
		{"the coordinator is no worker", containers, []string{"coordinator:5432"}, nil},
		{"coordinator only (external)", fakeCluster{[]backend.Node{coord}}, []string{"10.0.0.5:5432"}, nil},
		{"no workers", local, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := matchWorkers(tc.c, tc.names)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("matched %v, want no match", got)
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("matched %v, want %v", got, tc.want)
			}
			for name, node := range tc.want {
				if got[name].Name != node {
					t.Errorf("%s matched %q, want %s", name, got[name].Name, node)
				}
			}
		})
	}
}

// TestWorkerSampling samples a local Citus cluster both ways: directly
// (its workers are registered by host and port) and through the coordinator
// (the cluster seen as an external one: its coordinator only). Both must
// report the same workers, keyed as pg_dist_node names them, and see a
// backend kept busy on one worker.
func TestWorkerSampling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus, Nodes: 2})
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	names, err := citus.WorkerNames(ctx, conn)
	if err != nil || len(names) != 2 {
		t.Fatalf("workers %v (%v), want 2", names, err)
	}

	// One worker busy: a session sleeping there for the whole test.
	var busy backend.Node
	for _, n := range c.Nodes() {
		if n.Role == backend.RoleWorker && n.Host+":"+strconv.Itoa(n.Port) == names[0] {
			busy = n
		}
	}
	bc, err := pgx.Connect(ctx, busy.DSN())
	if err != nil {
		t.Fatal(err)
	}
	sleepCtx, stopSleep := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		bc.Exec(sleepCtx, "SELECT pg_sleep(60)")
	}()
	defer func() {
		stopSleep()
		<-done
		bc.Close(context.Background())
	}()

	for _, tc := range []struct {
		name   string
		c      backend.Cluster
		direct bool
	}{
		{"direct", c, true},
		{"through the coordinator", fakeCluster{[]backend.Node{coord}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, closeFn, err := WorkerSampling(ctx, tc.c, conn)
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			defer closeFn() // idempotent
			if direct := len(s.Workers) > 0; direct != tc.direct || (s.WorkersVia != nil) == tc.direct {
				t.Fatalf("Workers %v, WorkersVia %v: want direct %v", s.Workers, s.WorkersVia, tc.direct)
			}
			s.Interval = 10 * time.Millisecond
			const d = 600 * time.Millisecond
			// The sleeping session may take a moment to show as active.
			deadline := time.Now().Add(5 * time.Second)
			for {
				load, err := citus.Sample(ctx, s, d)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.direct && load.Samples > 1+int(d/citus.MinViaInterval) {
					t.Fatalf("%d samples through the coordinator in %v: Interval not raised to MinViaInterval", load.Samples, d)
				}
				keys := slices.Sorted(maps.Keys(load.Workers))
				if !slices.Equal(keys, names) {
					t.Fatalf("load keyed %v, want %v", keys, names)
				}
				if load.Workers[names[0]] >= 0.99 && load.Workers[names[1]] < 0.5 {
					t.Logf("%d samples in %v: %v", load.Samples, load.Duration, load.Workers)
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("load %v: want about 1 active backend on %s and none on %s", load.Workers, names[0], names[1])
				}
			}
		})
	}
}

// BenchmarkWorkerSampling is one per-worker sample of a local Citus cluster
// of 4 workers, idle: directly (one query per worker on open connections)
// and through the coordinator (citus.WorkerActivity: run_command_on_workers
// opens a connection to every worker per call).
func BenchmarkWorkerSampling(b *testing.B) {
	ctx := context.Background()
	c, err := local.Start(ctx, backend.Spec{Topology: local.TopologyCitus})
	if errors.Is(err, backend.ErrNotInstalled) {
		b.Skip("skipping: PostgreSQL or Citus is not installed for the local PostgreSQL")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	coord, _ := backend.First(c, backend.RoleCoordinator)
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	s, closeFn, err := WorkerSampling(ctx, c, conn)
	if err != nil || len(s.Workers) != 4 {
		b.Fatalf("direct sampling: %d workers (%v), want 4", len(s.Workers), err)
	}
	defer closeFn()
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			for _, db := range s.Workers {
				var n int
				if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'").Scan(&n); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("coordinator", func(b *testing.B) {
		for b.Loop() {
			if _, err := citus.WorkerActivity(ctx, conn); err != nil {
				b.Fatal(err)
			}
		}
	})
}
