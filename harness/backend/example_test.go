package backend_test

import (
	"fmt"

	"github.com/noisysim/noisysim/harness/backend"
)

func ExampleNode_RedactedDSN() {
	n := backend.Node{Name: "primary", Role: backend.RolePrimary, Host: "127.0.0.1", Port: 5433,
		Database: "postgres", User: "postgres", Password: "secret"}
	fmt.Println(n)
	fmt.Println(n.RedactedDSN())
	// Output:
	// primary (primary) at 127.0.0.1:5433
	// postgres://postgres:xxxxx@127.0.0.1:5433/postgres?sslmode=disable
}
