package local_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

func TestSmokeSingle(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	p, _ := backend.First(c, backend.RolePrimary)
	conn, err := pgx.Connect(t.Context(), p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var one int
	if err := conn.QueryRow(t.Context(), "select 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c.Stat())
}
