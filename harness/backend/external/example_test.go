package external_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/external"
)

// Use a staging primary and its standby; Close leaves them running.
func ExampleNew() {
	b := external.New(external.Config{
		Primary: os.Getenv("NOISYSIM_PRIMARY_DSN"),
		Replica: os.Getenv("NOISYSIM_REPLICA_DSN"),
	})
	c, err := b.Start(context.Background(), backend.Spec{})
	if err != nil {
		log.Fatal(err) // the error never holds a password
	}
	defer c.Close()
	for _, n := range c.Nodes() {
		fmt.Println(n.Name, n.Role, n.RedactedDSN())
	}
}
