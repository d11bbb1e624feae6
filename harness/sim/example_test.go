package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/noisysim/noisysim/harness/sim"
	"github.com/noisysim/noisysim/workload"
)

// Three calls of 10 ms arrive at once on a node of 2 cores through a pool
// of 2 connections: two run side by side, the third waits for a
// connection, and its latency counts from its intended start.
func ExampleRun() {
	src := workload.Schedule{Duration: time.Second, Ops: []workload.Op{
		{Seq: 0, Tenant: 1, Class: "q"}, {Seq: 1, Tenant: 2, Class: "q"}, {Seq: 2, Tenant: 3, Class: "q"},
	}}
	cfg := sim.Config{
		Nodes:   []sim.Node{{Name: "primary", Cores: 2}},
		Pools:   []sim.Pool{{Name: "shared", Size: 2}},
		Classes: map[string]sim.Class{"q": {Limiter: -1, Pools: []int{0}, Nodes: []int{0}, Service: sim.Constant(10 * time.Millisecond)}},
	}
	rec := workload.RecorderFunc(func(r workload.Result) {
		fmt.Printf("tenant %d: latency %v\n", r.Op.Tenant, r.Latency())
	})
	if _, err := sim.Run(context.Background(), src.Source(), cfg, rec, nil); err != nil {
		fmt.Println(err)
	}
	// Output:
	// tenant 1: latency 10ms
	// tenant 2: latency 10ms
	// tenant 3: latency 20ms
}
