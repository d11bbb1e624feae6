package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

// TestStartedBy: a running node of a cluster noisysim started is found by
// what the server says of itself; a data directory noisysim never recorded,
// another port or another cluster_name is not one, and after Close the
// node is not either.
func TestStartedBy(t *testing.T) {
	needPostgres(t)
	c := localtest.Start(t, backend.Spec{})
	st := c.Stat()
	n := st.Nodes[0]
	name := filepath.Base(st.Dir) + "/" + n.Name
	got, err := local.StartedBy(n.DataDir, n.Port, name)
	if err != nil || got.Dir != st.Dir || got.Name != n.Name || got.DataDir != n.DataDir {
		t.Fatalf("StartedBy(%s, %d, %s) = %+v, %v; want node %s of %s", n.DataDir, n.Port, name, got, err, n.Name, st.Dir)
	}
	foreign := filepath.Join(t.TempDir(), "pg", "data")
	if err := os.MkdirAll(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dataDir, clusterName string
		port                       int
	}{
		{"a data directory noisysim never recorded", foreign, name, n.Port},
		{"another port", n.DataDir, name, n.Port + 1},
		{"another cluster_name", n.DataDir, "prod/primary", n.Port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := local.StartedBy(tc.dataDir, tc.port, tc.clusterName)
			if nse := (*local.NotStartedError)(nil); !errors.As(err, &nse) {
				t.Errorf("StartedBy = %v, want a *NotStartedError", err)
			} else {
				t.Log(err)
			}
		})
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := local.StartedBy(n.DataDir, n.Port, name); err == nil {
		t.Errorf("StartedBy after Close = nil, want a *NotStartedError")
	}
}
