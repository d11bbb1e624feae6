// Package sim runs an open-loop schedule through a model of noisysim's
// isolation stack and database in virtual time: no database, no sleeping.
// It is the engine of noisysim simulate; the harness wires a scenario's
// configurations into a Config and records the Results into the same
// histograms and windows as a real run.
//
// The model, step by step, for each op of the source (workload.Source, the
// same seeded schedule a real run draws):
//
//  1. The op arrives at its intended start (Op.At). With more than
//     workload.DefaultMaxInFlight ops in flight it is dropped, as the real
//     open loop drops it.
//  2. Limiter (a class with one): at most MaxPerTenant of a tenant's calls
//     run at once; up to MaxQueue more wait in the tenant's FIFO queue; a
//     call that finds the queue full is rejected at once (queue_full), one
//     that waits MaxWait without a slot is rejected then (wait_exceeded).
//     A freed slot passes to the tenant's next waiter, as
//     isolation/limiter does.
//  3. Pool: the class's pool (chosen by the tenant with Class.Place) has
//     Size connections; a call waits for one in FIFO order for at most
//     AcquireTimeout (0: no bound), then fails with acquire_timeout.
//  4. Database: the call's work W is drawn from the class's Service
//     sampler (a real run's service times, see the harness's calibration).
//     The node runs its calls by processor sharing over Cores: with n calls
//     on a node each advances at min(1, Cores / n) of its speed alone, so a
//     call alone (or with fewer calls than cores) takes exactly W and n > Cores
//     calls share the cores equally (M/G/c-PS). A call still running after
//     the class's Timeout (statement_timeout) ends with statement_timeout.
//     With Class.Overhead, that share of each draw is not work but a delay
//     after it, off the cores, holding the connection (a real call's round
//     trip, driver and client CPU): a call alone still takes its whole draw,
//     and only the work part slows down when the node is busy.
//     Beyond processor sharing, calls on one machine slow each other down
//     (shared caches, memory bandwidth, SMT siblings, the scheduler): with
//     B cores busy over the nodes of the node's Machine (a node with n
//     calls keeps min(n, Cores) busy), every call there runs at
//     1 / (1 + Interference × (min(B, Machine.Cores) − 1)) of that speed.
//     A call alone on its machine is not slowed; beside one other busy
//     core, a call takes (1 + Interference) × its work. With Node.Slice,
//     a call that starts while its node runs as many calls as it has cores
//     first waits for one, uniformly 0–Slice (the scheduler's slice),
//     holding its connection. The harness fits Slice (Interference then 0)
//     from the calibration report alone (simulating the calibration run
//     until its quiet p99 with the noise running is the real one's) and
//     puts a local backend's nodes on one machine.
//  5. The call ends: its connection passes to the pool's next waiter, its
//     limiter slot to the tenant's next waiter, and its Result (latency
//     from the intended start, service time from the call's start) goes
//     to the Recorder. Calls still running Drain after the schedule's end
//     are incomplete, as in a real run.
//
// Where the model is knowingly wrong: no locks or I/O, and cache and
// memory effects only as one calibrated factor per busy core (Machine);
// other work on the machine is not in it; the load generator's own
// CPU is not on the nodes but in the calibrated work (or, with Overhead, a delay beside it); a Citus query's coordinator work is not
// modelled (its work runs on the worker holding the tenant's shard); a
// limiter's MaxGlobal is not modelled.
//
// The event queue is container/heap of (time, sequence) events: the Go
// discrete-event libraries looked at (github.com/iti/evt, for one) are
// young, small and lock on every call, for more than this model needs.
// One goroutine runs a simulation; it is deterministic for a Config.Seed.
//
// Example:
//
//	cfg := sim.Config{
//		Nodes:   []sim.Node{{Name: "primary", Cores: 2}},
//		Pools:   []sim.Pool{{Name: "shared", Size: 40}},
//		Classes: map[string]sim.Class{"lookup": {Pools: []int{0}, Nodes: []int{0}, Limiter: -1,
//			Service: sim.Constant(time.Millisecond)}},
//	}
//	stats, err := sim.Run(ctx, src, cfg, rec, nil)
package sim
