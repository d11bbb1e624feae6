package local_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

func TestSmokeReplica(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyReplica})
	for _, n := range c.Nodes() {
		conn, err := pgx.Connect(t.Context(), n.DSN())
		if err != nil {
			t.Fatal(err)
		}
		var rec bool
		if err := conn.QueryRow(t.Context(), "select pg_is_in_recovery()").Scan(&rec); err != nil {
			t.Fatal(err)
		}
		t.Log(n.Name, rec)
		conn.Close(t.Context())
	}
	t.Logf("%+v", c.Stat().Steps)
}
