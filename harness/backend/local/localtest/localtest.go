package localtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// Start starts a cluster as spec says and registers its Close with
// t.Cleanup. It skips t with one line when PostgreSQL is not installed
// (backend.ErrNotInstalled) or, for topology citus, the citus extension
// is not (local.ErrCitusNotInstalled), and fails it on any other error.
func Start(t testing.TB, spec backend.Spec, opts ...local.Option) *local.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := local.Start(ctx, spec, opts...)
	if errors.Is(err, local.ErrCitusNotInstalled) {
		t.Skipf("skipping: Citus not available: %v", firstLine(err))
	}
	if errors.Is(err, backend.ErrNotInstalled) {
		t.Skipf("skipping: PostgreSQL not available: %v", firstLine(err))
	}
	if err != nil {
		t.Fatalf("start %s cluster: %v", topo(spec), err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	return c
}

func topo(s backend.Spec) backend.Topology {
	if s.Topology == "" {
		return backend.TopologySingle
	}
	return s.Topology
}

func firstLine(err error) string {
	s := err.Error()
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
