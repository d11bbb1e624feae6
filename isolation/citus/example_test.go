package citus_test

import (
	"fmt"

	"github.com/noisysim/noisysim/isolation/citus"
)

// Decide plans the ladder for a measured state: tenant 1 has 60% of the
// load on worker w1, whose other shard (2, of other tenants) is 40 MB.
// Emptying w2 and moving tenant 1's 8 MB shard there moves 10 MB, less
// than the 40 MB that would leave w1: w2 is dedicated to tenant 1. (The
// 8 MB are the shard's before the isolation; Ladder.Run decides again
// after each step.)
func ExampleDecide() {
	const mb = 1 << 20
	state := citus.State{
		Table: "orders",
		Workers: []citus.Worker{
			{Name: "w1", ShouldHaveShards: true, Load: 6},
			{Name: "w2", ShouldHaveShards: true, Load: 1},
			{Name: "w3", ShouldHaveShards: true, Load: 1},
		},
		Placements: map[int64]string{1: "w1", 2: "w1", 3: "w2", 4: "w3"},
		ShardBytes: map[int64]int64{1: 8 * mb, 2: 40 * mb, 3: 2 * mb, 4: 5 * mb},
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
	// dedicate worker w2 to tenant 1: share 60.0% > 20.0%; dedicating w2 moves 10.0 MB vs 40.0 MB to dedicate its current worker w1
	// move shard 3 from w2 to w3: keep worker w2 for tenant 1 alone; dedicating w2 moves 10.0 MB vs 40.0 MB to dedicate its current worker w1
	// move shard 1 from w1 to w2: give tenant 1 its dedicated worker w2; dedicating w2 moves 10.0 MB vs 40.0 MB to dedicate its current worker w1
	// recommend for tenant 1 (share 60.0%): share 60.0% > 50.0%: give the tenant a cluster of its own
}

// Skew is max / median.
func ExampleSkew() {
	fmt.Println(citus.Skew([]float64{4, 1, 1, 1}))
	// Output: 4
}
