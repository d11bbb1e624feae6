package external_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/external"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

func TestExternalReplica(t *testing.T) {
	lc := localtest.Start(t, backend.Spec{Topology: backend.TopologyReplica})
	p, _ := backend.First(lc, backend.RolePrimary)
	r, _ := backend.First(lc, backend.RoleReplica)

	c, err := external.New(external.Config{Primary: p.DSN(), Replica: r.DSN()}).Start(t.Context(), backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.Nodes()
	if len(nodes) != 2 || nodes[0].Role != backend.RolePrimary || nodes[1].Role != backend.RoleReplica {
		t.Fatalf("nodes = %v, want primary then replica", nodes)
	}
	if nodes[0].Port != p.Port || nodes[0].Password != p.Password || nodes[0].Params["sslmode"] != "disable" {
		t.Errorf("primary node = %+v, want port %d, its password, sslmode=disable", nodes[0], p.Port)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Close left the servers alone.
	if _, err := external.New(external.Config{Primary: p.DSN()}).Start(t.Context(), backend.Spec{}); err != nil {
		t.Fatalf("primary gone after external Close: %v", err)
	}
}

func TestExternalKeywordValueDSN(t *testing.T) {
	lc := localtest.Start(t, backend.Spec{})
	p, _ := backend.First(lc, backend.RolePrimary)
	dsn := "host=127.0.0.1 port=" + strconv.Itoa(p.Port) + " user=postgres dbname=postgres password='" + p.Password + "' sslmode=disable application_name='noisysim ext'"
	c, err := external.New(external.Config{Primary: dsn}).Start(t.Context(), backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	n := c.Nodes()[0]
	if n.Params["application_name"] != "noisysim ext" || n.Database != "postgres" || n.Port != p.Port {
		t.Errorf("node = %+v", n)
	}
}

func TestExternalErrors(t *testing.T) {
	lc := localtest.Start(t, backend.Spec{Topology: backend.TopologyReplica})
	p, _ := backend.First(lc, backend.RolePrimary)
	r, _ := backend.First(lc, backend.RoleReplica)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	down := backend.Node{Host: "127.0.0.1", Port: closedPort, Database: "postgres", User: "postgres", Password: "s3cret-never-shown"}

	cases := []struct {
		name string
		cfg  external.Config
		spec backend.Spec
		want error
	}{
		{"no primary", external.Config{}, backend.Spec{}, backend.ErrBadInput},
		{"primary is a standby", external.Config{Primary: r.DSN()}, backend.Spec{}, external.ErrRole},
		{"replica is a primary", external.Config{Primary: p.DSN(), Replica: p.DSN()}, backend.Spec{}, external.ErrRole},
		{"replica topology without replica", external.Config{Primary: p.DSN()}, backend.Spec{Topology: backend.TopologyReplica}, backend.ErrBadInput},
		{"unknown topology", external.Config{Primary: p.DSN()}, backend.Spec{Topology: "ring"}, backend.ErrBadInput},
		{"malformed DSN", external.Config{Primary: "postgres://u:pw@host:notaport/db"}, backend.Spec{}, backend.ErrBadInput},
		{"server down", external.Config{Primary: down.DSN()}, backend.Spec{}, backend.ErrUnreachable},
		{"wrong password", external.Config{Primary: wrongPassword(p)}, backend.Spec{}, backend.ErrAuthFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := external.New(tc.cfg).Start(t.Context(), tc.spec)
			if err == nil {
				t.Fatal("Start succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error on several lines: %q", err)
			}
			if tc.want == backend.ErrAuthFailed && (!strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), "unreachable")) {
				t.Errorf("wrong password: %q, want authentication failed, not unreachable", err)
			}
			for _, secret := range []string{p.Password, "s3cret-never-shown"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows a password: %v", err)
				}
			}
		})
	}
}

func wrongPassword(n backend.Node) string {
	n.Password = "s3cret-never-shown"
	return n.DSN()
}

// TestExternalCitus takes an existing Citus cluster by its coordinator's
// DSN: one node, the coordinator. A plain server, a worker, a coordinator
// without workers and a replica DSN are refused, each with ErrBadInput
// (exit 2) and one line saying what to give instead.
func TestExternalCitus(t *testing.T) {
	lc := localtest.Start(t, backend.Spec{Topology: local.TopologyCitus, Nodes: 2})
	coord, _ := backend.First(lc, backend.RoleCoordinator)
	worker, _ := backend.First(lc, backend.RoleWorker)

	c, err := external.New(external.Config{Primary: coord.DSN()}).Start(t.Context(), backend.Spec{Topology: external.TopologyCitus, Nodes: 4})
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.Nodes()
	if len(nodes) != 1 || nodes[0].Name != "coordinator" || nodes[0].Role != backend.RoleCoordinator || nodes[0].Port != coord.Port {
		t.Fatalf("nodes = %v, want the coordinator alone at port %d", nodes, coord.Port)
	}

	plain := localtest.Start(t, backend.Spec{})
	p, _ := backend.First(plain, backend.RolePrimary)
	lone := localtest.Start(t, backend.Spec{Settings: map[string]string{"shared_preload_libraries": "citus"}})
	l, _ := backend.First(lone, backend.RolePrimary)
	if err := exec(t, l, "CREATE EXTENSION citus"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  external.Config
		want string
	}{
		{"plain PostgreSQL", external.Config{Primary: p.DSN()}, "has no citus extension; give the DSN of a Citus coordinator"},
		{"a worker", external.Config{Primary: worker.DSN()}, "is a Citus worker"},
		{"no workers", external.Config{Primary: l.DSN()}, "no active worker; add workers with citus_add_node"},
		{"replica DSN", external.Config{Primary: coord.DSN(), Replica: worker.DSN()}, "not a replica DSN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := external.New(tc.cfg).Start(t.Context(), backend.Spec{Topology: external.TopologyCitus})
			t.Log(err)
			if !errors.Is(err, backend.ErrBadInput) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q (ErrBadInput)", err, tc.want)
			}
			if strings.Contains(err.Error(), coord.Password) {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}

func exec(t *testing.T, n backend.Node, sql string) error {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql)
	return err
}
