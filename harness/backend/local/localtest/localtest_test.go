package localtest_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

func TestStartCleansUpWithTheTest(t *testing.T) {
	var dir string
	t.Run("inner", func(t *testing.T) {
		c := localtest.Start(t, backend.Spec{})
		dir = c.Dir()
		p, _ := backend.First(c, backend.RolePrimary)
		conn, err := pgx.Connect(t.Context(), p.DSN())
		if err != nil {
			t.Fatal(err)
		}
		conn.Close(t.Context())
	})
	if dir == "" {
		t.Skip("skipping: the inner test was skipped")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cluster dir %s still exists after the test: %v", dir, err)
	}
}
