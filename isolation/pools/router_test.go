package pools

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

// mapRouter routes by a fixed map and counts the calls still routed.
type mapRouter struct {
	mu       sync.Mutex
	nodes    map[string]string
	inFlight int
	routed   int
}

func (r *mapRouter) Route(_ context.Context, tenant string) (string, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.nodes[tenant]
	if !ok {
		return "", nil, errors.New("tenant unknown to the catalog")
	}
	r.inFlight++
	r.routed++
	return n, func() { r.mu.Lock(); r.inFlight--; r.mu.Unlock() }, nil
}

var _ Router = (*mapRouter)(nil)

func TestConfigRouterValidation(t *testing.T) {
	r := &mapRouter{}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"node without router", Config{Pools: []PoolConfig{{Name: "p", DSN: "postgres://x/y", Size: 1, Node: "a"}},
			Classes: map[Class]ClassConfig{Interactive: {Pool: "p"}}}},
		{"router without node", Config{Router: r, Pools: []PoolConfig{{Name: "p", DSN: "postgres://x/y", Size: 1}},
			Classes: map[Class]ClassConfig{Interactive: {Pool: "p"}}}},
		{"same pool twice on a node", Config{Router: r, Pools: []PoolConfig{
			{Name: "p", DSN: "postgres://x/y", Size: 1, Node: "a"}, {Name: "p", DSN: "postgres://x/y", Size: 1, Node: "a"}},
			Classes: map[Class]ClassConfig{Interactive: {Pool: "p"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(t.Context(), tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestStackRoutesTenants runs each tenant's calls on the node its Router
// names, through one pool name per class spread over two nodes.
func TestStackRoutesTenants(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 2})
	nodes := c.Nodes()
	r := &mapRouter{nodes: map[string]string{"a": nodes[0].Name, "b": nodes[1].Name, "lost": "nowhere"}}
	cfg := Config{Router: r, Classes: map[Class]ClassConfig{Interactive: {Pool: "interactive"}}}
	port := map[string]int{}
	for _, n := range nodes {
		cfg.Pools = append(cfg.Pools, PoolConfig{Name: "interactive", Node: n.Name, DSN: n.DSN(), Size: 2})
		port[n.Name] = n.Port
	}
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tenant := range []string{"a", "b", "a", "b"} {
		var got int
		res, err := s.WithConn(t.Context(), Interactive, tenant, func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, "SELECT inet_server_port()").Scan(&got)
		})
		if err != nil {
			t.Fatal(err)
		}
		want := r.nodes[tenant]
		if res.Node != want || got != port[want] {
			t.Errorf("tenant %s ran on port %d (node %q), want node %s at port %d", tenant, got, res.Node, want, port[want])
		}
	}
	if r.inFlight != 0 || r.routed != 4 {
		t.Errorf("router: %d in flight, %d routed; want 0 and 4 (done called once per call)", r.inFlight, r.routed)
	}
	_, err = s.Query(t.Context(), Interactive, "lost", "SELECT 1")
	var re *RouteError
	if !errors.As(err, &re) || !errors.Is(err, ErrUnknownNode) || re.Node != "nowhere" {
		t.Errorf("tenant on a node without a pool: %v, want a RouteError wrapping ErrUnknownNode", err)
	}
	if _, err = s.Query(t.Context(), Interactive, "stranger", "SELECT 1"); !errors.As(err, &re) || re.Node != "" {
		t.Errorf("router failure: %v, want a RouteError without a node", err)
	}
	st := s.Stat()
	if len(st.Pools) != 2 || st.Pools[0].Node != nodes[0].Name || st.Pools[0].Borrowed != 0 {
		t.Errorf("pool stats %+v, want one per node, nothing borrowed", st.Pools)
	}
}
