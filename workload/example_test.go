package workload_test

import (
	"context"
	"fmt"
	"time"

	"github.com/noisysim/noisysim/workload"
)

func ExampleNewPopulation() {
	pop, err := workload.NewPopulation(workload.PopulationConfig{}, 1) // 50 tenants, Zipf s = 1, tenant 1 at 60%
	if err != nil {
		panic(err)
	}
	for _, id := range []int{1, 2, 3, 50} {
		fmt.Printf("tenant %d: %.2f%%\n", id, 100*pop.Share(id))
	}
	_, err = workload.NewPopulation(workload.PopulationConfig{DominantShare: 1.5}, 1)
	fmt.Println(err)
	// Output:
	// tenant 1: 60.00%
	// tenant 2: 5.72%
	// tenant 3: 3.81%
	// tenant 50: 0.23%
	// build population: DominantShare = 1.5: must be in (0, 1)
}

func ExampleBuildSchedule() {
	pop, _ := workload.NewPopulation(workload.PopulationConfig{Tenants: 5}, 7)
	classes := []workload.ClassSpec{
		{Name: "interactive", Rate: 100, Arrival: workload.Poisson},
		{Name: "report", Rate: 2, Arrival: workload.Constant, Senders: workload.DominantTenant},
	}
	full, _ := workload.BuildSchedule(pop, classes, 10*time.Second, 7, nil)
	solo, _ := workload.BuildSchedule(pop, classes, 10*time.Second, 7, func(op workload.Op) bool { return op.Tenant != 1 })
	again, _ := workload.BuildSchedule(pop, classes, 10*time.Second, 7, nil)
	fmt.Println(len(full.Ops) > len(solo.Ops), full.Hash() == again.Hash(), full.Hash() == solo.Hash())
	// Output: true true false
}

func ExampleRunOpenLoop() {
	sched := workload.Schedule{Duration: 3 * time.Millisecond, Ops: []workload.Op{
		{Seq: 0, Tenant: 1, Class: "q", At: 0},
		{Seq: 1, Tenant: 2, Class: "q", At: time.Millisecond},
		{Seq: 2, Tenant: 1, Class: "q", At: 2 * time.Millisecond},
	}}
	exec := func(ctx context.Context, op workload.Op) error { return nil } // run op.Class for op.Tenant here
	rec := workload.RecorderFunc(func(r workload.Result) {
		fmt.Println("op", r.Op.Seq, "tenant", r.Op.Tenant, "err", r.Err)
	})
	stats, err := workload.RunOpenLoop(context.Background(), sched, exec, rec, workload.OpenLoopConfig{Workers: 1})
	fmt.Println(stats.Issued, stats.Completed, stats.Dropped, err)
	// Output:
	// op 0 tenant 1 err <nil>
	// op 1 tenant 2 err <nil>
	// op 2 tenant 1 err <nil>
	// 3 3 0 <nil>
}

func ExampleRunClosedLoop() {
	pop, _ := workload.NewPopulation(workload.PopulationConfig{Tenants: 4}, 1)
	classes := []workload.ClassSpec{{Name: "q", Rate: 1}}
	exec := func(ctx context.Context, op workload.Op) error {
		time.Sleep(time.Millisecond)
		return nil
	}
	stats, err := workload.RunClosedLoop(context.Background(), workload.ClosedLoopConfig{
		Users: 10, ThinkTime: 5 * time.Millisecond, RetryQueries: 3, MaxRetries: 2, Duration: 50 * time.Millisecond,
	}, pop, classes, exec, nil, 1)
	fmt.Println(stats.UsersByTenant, stats.Requests > 0, err)
	// Output: map[1:6 2:2 3:1 4:1] true <nil>
}

func ExampleNewStream() {
	pop, _ := workload.NewPopulation(workload.PopulationConfig{Tenants: 5}, 7)
	classes := []workload.ClassSpec{{Name: "interactive", Rate: 1000}}
	// Ten hours at 1,000 ops/s: 36 million ops, drawn as they are consumed.
	stream, _ := workload.NewStream(pop, classes, 10*time.Hour, 7, nil)
	first, _ := stream.Next()
	fmt.Println(first.Seq, first.Class)
	// A run pulls the ops as they come due:
	//	stats, err := workload.RunOpenLoopSource(ctx, stream, exec, rec, workload.OpenLoopConfig{})
	short, _ := workload.NewStream(pop, classes, 10*time.Second, 7, nil)
	built, _ := workload.BuildSchedule(pop, classes, 10*time.Second, 7, nil)
	fmt.Println(short.Hash() == built.Hash(), short.Len() == int64(len(built.Ops)))
	// Output:
	// 0 interactive
	// true true
}
