package local_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// Start a primary and a streaming hot standby, query the standby, and
// remove everything.
func ExampleStart() {
	ctx := context.Background()
	c, err := local.Start(ctx, backend.Spec{
		Topology: backend.TopologyReplica,
		Settings: map[string]string{"max_connections": "200"},
	})
	if errors.Is(err, backend.ErrNotInstalled) {
		log.Fatalf("install PostgreSQL's server package: %v", err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	replica, _ := backend.First(c, backend.RoleReplica)
	fmt.Println("standby at", replica.RedactedDSN()) // never print DSN(): it holds the password
	pool, err := pgxpool.New(ctx, replica.DSN())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	var inRecovery bool
	pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery)
	fmt.Println("in recovery:", inRecovery)
}

// A Backend with options, and the start-up steps it took.
func ExampleNew() {
	b := local.New(
		local.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		local.WithBaseDir("/dev/shm"), // tmpfs: copying the template is several times faster
	)
	c, err := b.StartCluster(context.Background(), backend.Spec{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, s := range c.Stat().Steps {
		fmt.Println(s.Node, s.Name, s.Duration)
	}
}
