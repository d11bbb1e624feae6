package container_test

import (
	"context"
	"fmt"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
)

// Start a primary and a streaming standby in containers, then read a
// node's connection string.
func Example() {
	ctx := context.Background()
	c, err := container.Start(ctx, backend.Spec{Topology: backend.TopologyReplica},
		container.WithImages(container.LocalTestImage))
	if err != nil {
		fmt.Println(err) // e.g. a *container.DockerError: no Docker daemon
		return
	}
	defer c.Close()
	replica, _ := backend.First(c, backend.RoleReplica)
	fmt.Println(replica.Name, replica.Role)
}

// NodeNames tells which nodes a topology gets, without Docker.
func ExampleNodeNames() {
	names, _ := container.NodeNames(backend.Spec{Topology: container.TopologyCitus, Nodes: 2})
	fmt.Println(names)
	// Output: [coordinator worker1 worker2]
}

// Remove the clusters left running by `noisysim cluster up --backend docker
// --keep`; clusters other processes started without WithKeep are left alone.
func ExampleRemoveKept() {
	runs, err := container.RemoveKept(context.Background())
	if err != nil {
		fmt.Println(err) // e.g. a *container.DockerError: no Docker daemon
		return
	}
	fmt.Println("removed runs:", runs)
}
