// Package workload generates multi-tenant traffic and drives it against an
// executor function. It knows nothing of databases or of the harness: the
// caller hands it an Executor that runs one Op, and a Recorder that receives
// each Op's Result.
//
// A Population is N tenants (default 50) whose traffic shares follow a power
// law (Zipf by default, or Pareto samples drawn with gonum's distuv), with
// tenant 1 pinned at a dominant share (default 60%). NewStream draws each
// class's arrivals (Poisson or constant, per sender, each sender with its own
// seeded random stream) over a duration as they are consumed, holding one
// pending arrival per sender: memory stays flat however long the run, and
// there is no cap on the number of ops. BuildSchedule draws the same ops into
// a Schedule held in memory (at most MaxOps). Both have the same Hash, which
// identifies the schedule in reports.
//
// RunOpenLoopSource (pulling from a Source such as a Stream) and RunOpenLoop
// (over a Schedule) issue each op at run start + Op.At, whatever happened to the
// ops before it, and measure its response time from that intended start
// (Result.Latency), so a stalled system shows its queueing instead of hiding
// it (coordinated omission); the service time (Result.Service) is kept
// beside it. Arrivals beyond a bound on ops in flight are dropped and
// recorded (ErrDropped), and ops still running after the drain are given up
// on and recorded (ErrIncomplete). RunClosedLoop is the second model: users
// who think between requests and retry failures with k queries at a time.
//
// Example:
//
//	pop, err := workload.NewPopulation(workload.PopulationConfig{}, seed) // 50 tenants, tenant 1 at 60%
//	if err != nil { ... }
//	classes := []workload.ClassSpec{
//		{Name: "interactive", Rate: 900, Arrival: workload.Poisson},
//		{Name: "heavy", Rate: 100, Arrival: workload.Constant},
//	}
//	sched, err := workload.NewStream(pop, classes, time.Minute, seed, nil)
//	if err != nil { ... }
//	fmt.Println("seed", seed, "schedule", sched.Hash())
//	stats, err := workload.RunOpenLoopSource(ctx, sched, exec, recorder, workload.OpenLoopConfig{})
package workload
