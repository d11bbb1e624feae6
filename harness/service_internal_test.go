package harness

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
)

// TestLibpqNode: a service's DSN carries server settings in options, as
// libpq reads them, and pgx still parses it.
func TestLibpqNode(t *testing.T) {
	n := backend.Node{Host: "127.0.0.1", Port: 5432, Database: "app",
		Params: map[string]string{"search_path": "noisysim", "default_transaction_read_only": "on", "sslmode": "disable"}}
	dsn := libpqNode(n).DSNFor("u", "p w")
	want := "postgres://u:p%20w@127.0.0.1:5432/app?options=-c%20default_transaction_read_only%3Don%20-c%20search_path%3Dnoisysim&sslmode=disable"
	if dsn != want {
		t.Errorf("dsn %s\nwant %s", dsn, want)
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.RuntimeParams["options"]; got != "-c default_transaction_read_only=on -c search_path=noisysim" {
		t.Errorf("options %q", got)
	}
}
