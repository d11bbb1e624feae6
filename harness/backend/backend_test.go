package backend_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
)

func TestDSN(t *testing.T) {
	n := backend.Node{Name: "primary", Role: backend.RolePrimary, Host: "127.0.0.1", Port: 5433, Database: "postgres", User: "postgres", Password: "p@ss:w/rd"}
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"DSN", n.DSN(), "postgres://postgres:p%40ss%3Aw%2Frd@127.0.0.1:5433/postgres?sslmode=disable"},
		{"redacted", n.RedactedDSN(), "postgres://postgres:xxxxx@127.0.0.1:5433/postgres?sslmode=disable"},
		{"no password", n.DSNFor("app", ""), "postgres://app@127.0.0.1:5433/postgres?sslmode=disable"},
		{"params", withParams(n, map[string]string{"sslmode": "require", "application_name": "x"}).DSN(), "postgres://postgres:p%40ss%3Aw%2Frd@127.0.0.1:5433/postgres?application_name=x&sslmode=require"},
		{"ipv6", backend.Node{Host: "::1", Port: 5432, Database: "d", User: "u"}.DSN(), "postgres://u@[::1]:5432/d?sslmode=disable"},
		{"unparseable", backend.Redact("postgres://u:pw@host:port:bad/db"), "<unparseable DSN>"},
		{"string", n.String(), "primary (primary) at 127.0.0.1:5433"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %s, want %s", tc.got, tc.want)
			}
			if strings.Contains(tc.got, "xxxxx") && strings.Contains(tc.got, "rd@") {
				t.Errorf("redacted DSN leaks the password: %s", tc.got)
			}
		})
	}
}

func withParams(n backend.Node, p map[string]string) backend.Node { n.Params = p; return n }

func TestTopologyError(t *testing.T) {
	err := fmt.Errorf("start: %w", &backend.TopologyError{Topology: "ring", Supported: []backend.Topology{backend.TopologySingle}})
	if !errors.Is(err, backend.ErrBadInput) || !strings.Contains(err.Error(), `"ring"`) {
		t.Fatalf("err = %v", err)
	}
}

type fakeCluster []backend.Node

func (f fakeCluster) Nodes() []backend.Node { return f }
func (f fakeCluster) Close() error          { return nil }

func TestFirst(t *testing.T) {
	c := fakeCluster{{Name: "a", Role: backend.RolePrimary}, {Name: "b", Role: backend.RoleReplica}, {Name: "c", Role: backend.RoleReplica}}
	if n, ok := backend.First(c, backend.RoleReplica); !ok || n.Name != "b" {
		t.Errorf("First(replica) = %v, %v; want b", n.Name, ok)
	}
	if _, ok := backend.First(c, backend.RoleWorker); ok {
		t.Error("First(worker) found a node")
	}
}
