package citus_test

import (
	"fmt"

	"github.com/noisysim/noisysim/isolation/citus"
)

// Decide plans the ladder for a measured state: tenant 1 has 60% of the
// load on worker w1, which also holds shard 2 of other tenants.
func ExampleDecide() {
	state := citus.State{
		Table: "orders",
		Workers: []citus.Worker{
			{Name: "w1", ShouldHaveShards: true, Load: 6},
			{Name: "w2", ShouldHaveShards: true, Load: 1},
			{Name: "w3", ShouldHaveShards: true, Load: 1},
		},
		Placements: map[int64]string{1: "w1", 2: "w1", 3: "w2", 4: "w3"},
		Tenants:    []citus.Tenant{{ID: "1", Share: 0.6, ShardID: 1}},
	}
	plan := citus.Decide(state, citus.Thresholds{})
	fmt.Printf("worker skew %.1f\n", plan.WorkerSkew)
	for _, s := range plan.Steps {
		fmt.Println(s)
	}
	// Output:
	// worker skew 6.0
	// isolate tenant 1 (share 60.0%) from shard 1: share 60.0% > 5.0%
	// dedicate worker w1 to tenant 1: share 60.0% > 20.0%
	// move shard 2 from w1 to w2: keep worker w1 for tenant 1 alone
	// recommend for tenant 1 (share 60.0%): share 60.0% > 50.0%: give the tenant a cluster of its own
}

// Skew is max / median.
func ExampleSkew() {
	fmt.Println(citus.Skew([]float64{4, 1, 1, 1}))
	// Output: 4
}
