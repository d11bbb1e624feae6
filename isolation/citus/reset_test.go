package citus

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

// TestWithOpenDB: the reset after a move onto a dedicated worker runs on
// the ladder's connection while it is open, and on a new one once a
// cancelled query made pgx close it (a Ctrl-C during the move).
func TestWithOpenDB(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	node, _ := backend.First(c, backend.RolePrimary)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, node.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	var got DB
	if err := withOpenDB(ctx, conn, func(db DB) error { got = db; return nil }); err != nil || got != DB(conn) {
		t.Fatalf("open connection: ran on %v (%v), want the connection itself", got, err)
	}
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = conn.Exec(qctx, "SELECT pg_sleep(5)")
	cancel()
	if err == nil || !conn.IsClosed() {
		t.Fatalf("cancelled query: err %v, closed %v; want an error and a closed connection", err, conn.IsClosed())
	}
	var one int
	err = withOpenDB(ctx, conn, func(db DB) error {
		got = db
		return db.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
	if err != nil || one != 1 || got == DB(conn) {
		t.Fatalf("closed connection: err %v, got %d on the old connection %v; want SELECT 1 on a new one", err, one, got == DB(conn))
	}
}
