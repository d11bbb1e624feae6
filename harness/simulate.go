package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/sim"
	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// SimulateOptions configures Simulate.
type SimulateOptions struct {
	// Only simulates one configuration, as Options.Only.
	Only string
	// Calibration is a real run's report whose service times the model
	// draws from (see Calibrate); required.
	Calibration *reports.Report
	// CalibrationFile names Calibration in errors and in the report.
	CalibrationFile string
	// MoreCalibrations are further real runs of Calibration's scenario at
	// other seeds (noisysim run --repeat), MoreCalibrationFiles their
	// names: the quiet tenants' service times are averaged over every run,
	// a calibrated class's rate set from the median run's (medianCalibrations)
	// and the scheduler wait is fitted to the median of their quiet p99s
	// (fitBySimulation), as one run's tail varies from seed to seed by as
	// much as the simulator's bound. Empty: Calibration alone.
	MoreCalibrations     []*reports.Report
	MoreCalibrationFiles []string
	// Cores is the cores of a node without a CPU budget
	// (backend.node_cpu); 0 means runtime.NumCPU().
	Cores float64
	// Logger receives the notes; nil is silent.
	Logger *slog.Logger
	// Progress, when not nil, is called at each phase change of each
	// configuration and about every ProgressEvery of wall time, one call
	// at a time (configurations are simulated at once, each reporting its
	// own), with Elapsed and Total in virtual
	// time and Rate the operations per virtual second of the phase so far.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Interference, when not nil, is the model's slowdown per busy core
	// beyond one (sim.Machine.Interference) instead of the one fitted from
	// Calibration; nil fits it (see Calibrate and Simulate).
	Interference *float64
	// Slice, when not nil, is the scheduler's time slice of the model's
	// nodes (sim.Node.Slice) instead of the one fitted from Calibration.
	// When either Interference or Slice is given, the other is 0 unless
	// given too: nothing is fitted.
	Slice *time.Duration
	// CalibrateOnly returns, as Options.CalibrateOnly, a report holding
	// the calibrated classes' rates alone (from Calibration's service
	// times), nothing simulated.
	CalibrateOnly bool
	// firstRates sets a calibrated class's rate from Calibration's own
	// service time alone, not the median run's: the fit of the scheduler
	// wait simulates that run's own schedule.
	firstRates bool
}

// calibrationFiles names the calibration runs: CalibrationFile, then
// MoreCalibrationFiles, comma-separated.
func (o SimulateOptions) calibrationFiles() string {
	return strings.Join(append([]string{o.CalibrationFile}, o.MoreCalibrationFiles...), ", ")
}

// calibrationSeeds are the seeds of every calibration run when there are
// several; nil for one.
func (o SimulateOptions) calibrationSeeds() []int64 {
	if len(o.MoreCalibrations) == 0 {
		return nil
	}
	seeds := []int64{o.Calibration.Seed}
	for _, r := range o.MoreCalibrations {
		seeds = append(seeds, r.Seed)
	}
	return seeds
}

// Simulate runs sc's timeline under each configuration in virtual time,
// through the model of package sim (limiters, pools, nodes sharing their
// cores), with service times drawn from opts.Calibration, and returns the
// same report a real run gives, marked simulated (Report.Simulated): the
// same seeded schedule (so the same ops and schedule hash), windows,
// histograms and assertions. No database is started and nothing sleeps.
//
// What is not simulated is refused or named in the report's notes:
// replayed and closed-loop load, HTTP classes, app instances, faults and the
// checked writer are refused (scenario.ErrInvalid); actions and watchers
// are not run, and the clean_after checks (nothing is left in a model) are
// left out.
//
// Errors: scenario.ErrInvalid (wrapped) for a scenario the simulator does not
// model or a calibration report that does not fit sc (a class it has no
// service times for), naming the file; ctx.Err() when cancelled.
func Simulate(ctx context.Context, sc *scenario.Scenario, opts SimulateOptions) (*reports.Report, error) {
	started := time.Now()
	if err := simulable(sc); err != nil {
		return nil, err
	}
	calPools := calibrationPools(sc)
	// Calibrated against the whole scenario: a copy made by Only has no
	// places in the file to name.
	labels := []string{"--calibrate " + opts.CalibrationFile}
	for i := range opts.MoreCalibrations {
		if i < len(opts.MoreCalibrationFiles) {
			labels = append(labels, "--calibrate "+opts.MoreCalibrationFiles[i])
		} else {
			labels = append(labels, fmt.Sprintf("calibration run %d", i+2))
		}
	}
	cal, err := calibrate(append([]*reports.Report{opts.Calibration}, opts.MoreCalibrations...), labels, sc, opts.firstRates)
	if err != nil {
		return nil, err
	}
	if opts.Interference != nil || opts.Slice != nil {
		cal.interference, cal.interferenceFrom, cal.slice, cal.sliceFrom = 0, "given", 0, "given"
		if opts.Interference != nil {
			cal.interference = *opts.Interference
		}
		if opts.Slice != nil {
			cal.slice = *opts.Slice
		}
	} else if cal.anyTargets() && !opts.CalibrateOnly {
		if err := fitBySimulation(ctx, sc, opts, cal); err != nil {
			return nil, err
		}
	}
	if opts.Only != "" {
		one, err := sc.Only(opts.Only)
		if err != nil {
			return nil, err
		}
		sc = one
	}
	r := &runner{sc: sc, log: opts.Logger, started: started, calPools: calPools}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, n := range CalibrationNotes(opts.Calibration, opts.CalibrationFile, sc) {
		r.note("%s", n)
	}
	if err := r.plan(); err != nil {
		return nil, err
	}
	rates := map[string]float64{}
	for i := range sc.Classes {
		c := &sc.Classes[i]
		if c.Calibrated() {
			if cal.wall[c.Name] <= 0 {
				if err := unusableCalibration(sc, i, append([]*reports.Report{opts.Calibration}, opts.MoreCalibrations...), labels); err != nil {
					return nil, err
				}
				// A class the calibration drew otherwise (its quiet
				// tenants' latencies, its database time): no wall time
				// alone to set the rate from.
				return nil, &scenario.Error{File: sc.File, Problems: []scenario.Problem{sc.Problem(fmt.Sprintf("classes[%d].load_factor", i),
					"class %s sets its rate from its service time alone, and --calibrate %s (scenario %q) has no calibrations entry for it (there it was not a load_factor class): calibrate on a run of a scenario where %s has a load_factor",
					c.Name, opts.CalibrationFile, opts.Calibration.Scenario, c.Name)}}
			}
			pool := calPools[c.Name]
			// The rate a real run sets: from the wall time measured alone,
			// of the dominant tenant's rows here.
			k := 1.0
			if rows, ok := r.dominantRows(); ok {
				k = cal.dominantScale(c.Name, rows)
			}
			rate := c.LoadFactor * float64(pool.size) / (k * cal.wall[c.Name].Seconds())
			rates[c.Name] = rate
			r.calibrated = append(r.calibrated, reports.Calibration{
				Class: c.Name, Query: classQuery(c), Samples: cal.samples[c.Name], ServiceMean: k * ms(cal.wall[c.Name]), ServiceP50: k * ms(cal.wallP50[c.Name]),
				LoadFactor: c.LoadFactor, Pool: pool.size, PoolName: pool.name, Rate: rate,
			})
		}
	}
	if opts.CalibrateOnly {
		return &reports.Report{Scenario: sc.Name, File: sc.File, FileAbs: absFile(sc.File), Seed: sc.Seed, StartedAt: started.UTC(), Calibrations: r.calibrated,
			Simulated: &reports.Simulation{Calibration: opts.calibrationFiles(), CalibrationScenario: opts.Calibration.Scenario, CalibrationSeed: opts.Calibration.Seed,
				CalibrationSeeds: opts.calibrationSeeds()}}, nil
	}
	if len(rates) > 0 {
		if err := r.schedule(rates); err != nil {
			return nil, err
		}
	}
	cores := opts.Cores
	if cores == 0 {
		cores = float64(runtime.NumCPU())
	}
	nodes := simNodes(sc, cores, cal.interference, cal.slice)
	if sc.Assertions.CleanAfter {
		sc.Assertions.CleanAfter = false
		r.note("clean_after: not simulated (a model leaves nothing behind), left out")
	}
	for _, p := range r.phases {
		if len(p.Actions) > 0 || p.Watch != nil {
			r.note("phase %s: actions and watchers are not simulated; the phase runs its planned length", p.Name)
		}
	}
	var desc []string
	for _, n := range nodes.nodes {
		desc = append(desc, fmt.Sprintf("%s %g", n.Name, n.Cores))
	}
	rep := &reports.Report{
		Scenario: sc.Name, File: sc.File, FileAbs: absFile(sc.File), Seed: sc.Seed, ScheduleHash: r.hash,
		StartedAt: started.UTC(), Dominant: r.key(scenario.DominantTenant),
		Backend:   fmt.Sprintf("simulated %s %s", sc.Backend.Kind, r.topology()),
		QuietPlan: r.quietPlan, Calibrations: r.calibrated,
		Simulated: &reports.Simulation{
			Calibration: opts.calibrationFiles(), CalibrationScenario: opts.Calibration.Scenario, CalibrationSeed: opts.Calibration.Seed,
			CalibrationSeeds: opts.calibrationSeeds(),
			Model:            sim.ModelName, Cores: strings.Join(desc, ", "),
			Classes: cal.summary(), Interference: cal.interference, InterferenceFrom: cal.interferenceFrom,
			SliceMs: ms(cal.slice), SliceFrom: cal.sliceFrom,
			Machines: nodes.machinesDesc(),
		},
	}
	// The configurations are simulated at once, as many as there are
	// CPUs, then reported and judged in order.
	runs := make([]*simulated, len(sc.Configurations))
	errs := make([]error, len(sc.Configurations))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var progMu sync.Mutex
	popts := opts
	if opts.Progress != nil {
		popts.Progress = func(p Progress) {
			progMu.Lock()
			defer progMu.Unlock()
			opts.Progress(p)
		}
	}
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	var wg sync.WaitGroup
	for i := range sc.Configurations {
		c := &sc.Configurations[i]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			runs[i], errs[i] = r.simulateTimeline(sctx, c, nodes, cal, newSimProgress(c.Name, popts))
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range sc.Configurations {
		if errs[i] != nil && !errors.Is(errs[i], context.Canceled) {
			return nil, errs[i]
		}
	}
	var beyond []map[string]*rowsBeyond
	for _, run := range runs {
		beyond = append(beyond, run.beyond)
	}
	for i := range sc.Configurations {
		if errs[i] != nil {
			return nil, errs[i]
		}
		res := r.judgeSimulated(&sc.Configurations[i], runs[i])
		runs[i] = nil // its histograms are in the report now
		rep.Configurations = append(rep.Configurations, res.report)
		rep.Assertions = append(rep.Assertions, res.assertions...)
	}
	r.judge(rep, sc, opts.Only)
	for _, n := range rowsBeyondNotes(cal, beyond) {
		r.note("%s", n)
	}
	rep.Notes = r.notes
	rep.Duration = time.Since(started).Seconds()
	return rep, nil
}

// CheckSimulate returns the error Simulate would return before simulating
// anything: sc is one the simulator does not model, or cal (read from
// file) has no service times for one of its classes. Errors as Simulate's.
func CheckSimulate(sc *scenario.Scenario, cal *reports.Report, file string) error {
	if err := simulable(sc); err != nil {
		return err
	}
	_, err := Calibrate(cal, file, sc)
	return err
}

// simulable refuses what the model does not have, each at its key's place
// in the file.
func simulable(sc *scenario.Scenario) error {
	var ps []scenario.Problem
	no := func(field, what string) {
		ps = append(ps, sc.Problem(field, "simulate does not model %s", what))
	}
	switch {
	case sc.Replaying():
		no("replay", "replay (a replayed trace or log)")
	case sc.Load.Model == scenario.ModelClosed:
		no("load.model", "load.model closed")
	}
	for i, c := range sc.Classes {
		if c.HTTP != nil {
			no(fmt.Sprintf("classes[%d].http", i), "HTTP classes (class "+c.Name+")")
			break
		}
	}
	for i, c := range sc.Configurations {
		if c.App != nil {
			no(fmt.Sprintf("configurations[%d].app", i), "app instances (configuration "+c.Name+")")
		}
	}
	if len(sc.Faults) > 0 {
		no("faults", "faults")
	}
	if sc.Writer != nil {
		no("writer", "the checked writer")
	}
	if len(ps) > 0 {
		return &scenario.Error{File: sc.File, Problems: ps}
	}
	return nil
}

// simTopology is the nodes of the model, the machines they run on and how
// tenants reach them.
type simTopology struct {
	nodes    []sim.Node
	machines []sim.Machine
	// primary and replica are indexes in nodes (replica -1 without one);
	// workers, with topology citus or shards, the nodes tenants are
	// placed on.
	primary, replica int
	workers          []int
	place            func(tenant int) int // index in workers
}

// simNodes lays out sc's topology; a node's cores are its role's CPU budget
// (backend.node_cpu, node_cpu_roles), else cores. The nodes share one
// machine of cores (this one, or --cores) with the calibrated interference
// when a real run would put them on one (backend local or docker) and they
// fit on it (their cores summed at most cores); otherwise (an external
// backend, or more cores than one machine has, as a 20-worker scenario)
// each node is a machine of its own, of its cores, with the same
// interference between its own busy cores.
func simNodes(sc *scenario.Scenario, cores, interference float64, slice time.Duration) simTopology {
	t := layNodes(sc, cores)
	for i := range t.nodes {
		t.nodes[i].Slice = slice
	}
	var sum float64
	for _, n := range t.nodes {
		sum += n.Cores
	}
	if (sc.Backend.Kind == scenario.BackendLocal || sc.Backend.Kind == scenario.BackendDocker) && sum <= cores+1e-9 {
		t.machines = []sim.Machine{{Name: "machine", Cores: cores, Interference: interference}}
		return t
	}
	for i := range t.nodes {
		t.nodes[i].Machine = i
		t.machines = append(t.machines, sim.Machine{Name: t.nodes[i].Name, Cores: t.nodes[i].Cores, Interference: interference})
	}
	return t
}

// machinesDesc says which nodes share a machine: "one machine of 2 cores"
// or "each node a machine of its own".
func (t simTopology) machinesDesc() string {
	if len(t.machines) == 1 && len(t.nodes) > 1 {
		return fmt.Sprintf("the nodes share one machine of %g cores", t.machines[0].Cores)
	}
	if len(t.machines) == 1 {
		return fmt.Sprintf("one machine of %g cores", t.machines[0].Cores)
	}
	return "each node a machine of its own cores"
}

// layNodes lays out sc's nodes and how tenants reach them.
func layNodes(sc *scenario.Scenario, cores float64) simTopology {
	budget := sc.Backend.CPU()
	coresOf := func(role backend.Role) float64 {
		if b := budget.For(role); b > 0 {
			return b
		}
		return cores
	}
	t := simTopology{replica: -1}
	switch sc.Backend.Topology {
	case scenario.TopologyCitus:
		t.nodes = append(t.nodes, sim.Node{Name: "coordinator", Cores: coresOf(backend.RoleCoordinator)})
		for i := range sc.Backend.Workers {
			t.workers = append(t.workers, len(t.nodes))
			t.nodes = append(t.nodes, sim.Node{Name: fmt.Sprintf("worker%d", i+1), Cores: coresOf(backend.RoleWorker)})
		}
		// Citus hashes the tenant into one of citus.shards shards, placed
		// round-robin over the workers.
		shards := max(sc.Data.Citus.Shards, 1)
		n := len(t.workers)
		t.place = func(tenant int) int { return int(mix(uint64(tenant))%uint64(shards)) % n }
	case scenario.TopologyShards:
		for i := range sc.Backend.Shards {
			t.workers = append(t.workers, len(t.nodes))
			t.nodes = append(t.nodes, sim.Node{Name: fmt.Sprintf("primary%d", i+1), Cores: coresOf(backend.RoleShard)})
		}
		// The catalog places tenants by hash over the nodes but the spare.
		n := max(len(t.workers)-sc.Backend.SpareNodes, 1)
		t.place = func(tenant int) int { return int(mix(uint64(tenant)) % uint64(n)) }
	default:
		t.nodes = append(t.nodes, sim.Node{Name: "primary", Cores: coresOf(backend.RolePrimary)})
		if sc.Backend.Topology == backend.TopologyReplica {
			t.replica = 1
			t.nodes = append(t.nodes, sim.Node{Name: "replica", Cores: coresOf(backend.RoleReplica)})
		}
	}
	return t
}

// mix is a 64-bit finaliser (SplitMix64's), a stand-in for the hash that
// places a tenant on a shard.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// simConfig builds the model of configuration c: its pools (on each node
// a tenant can be placed on), limiters and classes.
func (r *runner) simConfig(c *scenario.Configuration, t simTopology, cal *Calibration, note func(string, ...any)) sim.Config {
	cfg := sim.Config{Nodes: t.nodes, Machines: t.machines, Seed: r.sc.Seed, Drain: max(r.sc.Phases.Drain.Duration(), time.Millisecond)}
	// addPool adds a pool on node (or, placed, one per worker) and returns
	// the class's Pools and Nodes.
	addPool := func(name string, node, size int, timeout time.Duration) (ps, ns []int) {
		if t.place == nil {
			cfg.Pools = append(cfg.Pools, sim.Pool{Name: name, Size: size, AcquireTimeout: timeout})
			return []int{len(cfg.Pools) - 1}, []int{node}
		}
		if r.sc.Citus() {
			// One pool on the coordinator; the work runs on the worker.
			cfg.Pools = append(cfg.Pools, sim.Pool{Name: name, Size: size, AcquireTimeout: timeout})
			for _, w := range t.workers {
				ps, ns = append(ps, len(cfg.Pools)-1), append(ns, w)
			}
			return ps, ns
		}
		for _, w := range t.workers {
			cfg.Pools = append(cfg.Pools, sim.Pool{Name: name + "@" + t.nodes[w].Name, Size: size, AcquireTimeout: timeout})
			ps, ns = append(ps, len(cfg.Pools)-1), append(ns, w)
		}
		return ps, ns
	}
	type route struct {
		pools, nodes []int
		limiter      int
		timeout      time.Duration
	}
	routes := map[scenario.IsolationClass]route{}
	if c.Mode == scenario.ModeShared {
		ps, ns := addPool("shared", t.primary, c.Shared.PoolSize, c.Shared.AcquireTimeout.Duration())
		rt := route{pools: ps, nodes: ns, limiter: -1, timeout: c.Shared.Role.StatementTimeout.Duration()}
		routes[scenario.IsolationInteractive], routes[scenario.IsolationHeavy] = rt, rt
	} else {
		for _, ic := range []scenario.IsolationClass{scenario.IsolationInteractive, scenario.IsolationHeavy} {
			p := c.Pool(ic)
			node := t.primary
			if p.Target == scenario.TargetReplica {
				switch {
				case t.place != nil:
					note("%s: the %s class targets the replica; with topology %s the model runs it on the node holding the tenant's shard",
						c.Name, ic, r.sc.Backend.Topology)
				case t.replica >= 0:
					node = t.replica
				default:
					note("%s: the %s class targets the replica, but the topology has none: it runs on the primary", c.Name, ic)
				}
			}
			ps, ns := addPool(string(ic), node, p.PoolSize, p.AcquireTimeout.Duration())
			rt := route{pools: ps, nodes: ns, limiter: -1, timeout: p.Role.StatementTimeout.Duration()}
			if p.Limiter.Enabled {
				if p.Limiter.MaxGlobal > 0 {
					note("%s: the %s limiter's max_global is not simulated", c.Name, ic)
				}
				cfg.Limiters = append(cfg.Limiters, sim.Limiter{Name: string(ic),
					MaxPerTenant: p.Limiter.MaxPerTenant, MaxQueue: p.Limiter.MaxQueue, MaxWait: p.Limiter.MaxWait.Duration()})
				rt.limiter = len(cfg.Limiters) - 1
			}
			routes[ic] = rt
		}
	}
	cfg.Classes = map[string]sim.Class{}
	for _, cl := range r.sc.Classes {
		rt := routes[cl.IsolationClass]
		class := sim.Class{Limiter: rt.limiter, Pools: rt.pools, Nodes: rt.nodes, Place: t.place,
			Service: cal.samplers[cl.Name], Overhead: cal.overhead[cl.Name], Timeout: rt.timeout}
		if f, ok := cal.rows[cl.Name]; ok && r.sc.Data.Builtin() && r.sc.Data.Orders > 0 {
			tenants, orders := r.pop.Tenants, float64(r.sc.Data.Orders)
			class.Scale = func(tenant int) float64 {
				if tenant < 1 || tenant > len(tenants) {
					return 1
				}
				return f.scale(tenants[tenant-1].Share * orders)
			}
		}
		if rows, ok := r.dominantRows(); ok {
			if k := cal.dominantScale(cl.Name, rows); k != 1 {
				class.Scale = func(int) float64 { return k }
			}
		}
		cfg.Classes[cl.Name] = class
	}
	return cfg
}

// CalibrationNotes says what of cal, the calibration report read from
// file, carries into the figures simulated of sc: a run cut short, failed
// or disturbed by other work on its machine (each DISTURBED window and
// why), and a data volume other than sc's (read from the calibration's
// scenario file when it is readable here). Simulate puts them in the
// report's notes; a validation against real runs or a real sweep shows
// them beside its verdict. Nil for a sound calibration.
func CalibrationNotes(cal *reports.Report, file string, sc *scenario.Scenario) []string {
	var out []string
	if cal.Incomplete != "" {
		out = append(out, fmt.Sprintf("calibration %s: an incomplete run (%s): its service times are of what it measured until then", file, cal.Incomplete))
	} else if !cal.Passed {
		out = append(out, fmt.Sprintf("calibration %s: a run that failed its assertions: the model draws that run's service times", file))
	}
	if why := cal.Machine.DisturbedWhy(); why != "" {
		out = append(out, fmt.Sprintf("calibration %s: DISTURBED windows (other work on its machine) %s: the service times drawn from them are slower than the queries alone",
			file, why))
	}
	if cal.File == "" {
		return out
	}
	calSc, err := loadRunFile(cal)
	if err != nil {
		out = append(out, fmt.Sprintf("calibration %s: its scenario file %s is not readable here: its data volume is not compared with %s's", file, RunFile(cal), sc.Name))
		return out
	}
	var diff []string
	cmpKey := func(key string, was, is any) {
		if fmt.Sprint(was) != fmt.Sprint(is) {
			diff = append(diff, fmt.Sprintf("%s %v (simulated: %v)", key, was, is))
		}
	}
	cmpKey("tenants.count", calSc.Tenants.Count, sc.Tenants.Count)
	cmpKey("data.orders", calSc.Data.Orders, sc.Data.Orders)
	cmpKey("data.days", calSc.Data.Days, sc.Data.Days)
	cmpKey("data.customers", calSc.Data.Customers, sc.Data.Customers)
	cmpKey("data.setup", calSc.Data.Setup, sc.Data.Setup)
	if len(diff) > 0 {
		out = append(out, fmt.Sprintf("calibration %s: measured on other data than %s simulates: %s; service times of queries over more or fewer rows differ",
			file, sc.Name, strings.Join(diff, ", ")))
	}
	return out
}

// simProgress reports a simulation's progress in virtual time; a nil
// *simProgress reports nothing.
type simProgress struct {
	config string
	report func(Progress)
	every  time.Duration
	step   *step
	issued int64
	reach  time.Duration // the virtual time reached
	last   time.Time     // wall time of the last report
}

func newSimProgress(config string, opts SimulateOptions) *simProgress {
	if opts.Progress == nil {
		return nil
	}
	every := opts.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	return &simProgress{config: config, report: opts.Progress, every: every}
}

// at counts an operation that ended at virtual time end in step s, and
// reports at a phase change or when every has passed.
func (p *simProgress) at(s *step, end time.Duration) {
	if p == nil {
		return
	}
	changed := s != p.step
	if changed {
		p.step, p.issued = s, 0
	}
	p.issued++
	p.reach = max(p.reach, end)
	if !changed && p.issued%1024 != 0 {
		return
	}
	if now := time.Now(); changed || now.Sub(p.last) >= p.every {
		p.last = now
		elapsed := min(max(p.reach-s.start, 0), s.end-s.start)
		rate := 0.0
		if elapsed > 0 {
			rate = float64(p.issued) / elapsed.Seconds()
		}
		p.report(Progress{Phase: s.Name, Configuration: p.config, Elapsed: elapsed, Total: s.end - s.start, Issued: p.issued, Rate: rate})
	}
}

// simLimiter is a finished simulation's limiter counters, read as a real
// limiter's (limiterStats) by the assertions.
type simLimiter struct{ stat limiter.Stat }

func (l simLimiter) Stat() limiter.Stat { return l.stat }

// simulated is one configuration's simulated timeline, before its report.
type simulated struct {
	tr       *timelineRun
	cfg      sim.Config
	stats    sim.Stats
	duration time.Duration // the timeline's, virtual
	notes    []string
	// beyond counts, per class scaled by a rows fit, its calls by
	// tenants above the fit's calibrated range.
	beyond map[string]*rowsBeyond
}

// simulateTimeline runs the timeline under configuration c in the model.
// It reads r but does not change it (its notes are in the result), so
// that configurations can be simulated at once.
func (r *runner) simulateTimeline(ctx context.Context, c *scenario.Configuration, t simTopology, cal *Calibration, prog *simProgress) (*simulated, error) {
	sr := &simulated{}
	note := func(format string, args ...any) { sr.notes = append(sr.notes, fmt.Sprintf(format, args...)) }
	cfg := r.simConfig(c, t, cal, note)
	tr := &timelineRun{}
	mc := metrics.Config{Classify: simErrorClass}
	if r.pop.Len() > maxSeriesTenants {
		mc.Interval = -1
		note("per-second latency series (intervals) left out: %d tenants (a simulation keeps them up to %d)", r.pop.Len(), maxSeriesTenants)
	}
	for i := range r.steps {
		rec, err := metrics.New(mc)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRun, err)
		}
		tr.windows = append(tr.windows, &window{step: &r.steps[i], rec: rec, start: r.steps[i].start, end: r.steps[i].end})
	}
	src, err := newTimelineSource(r.pop, r.steps, r.sc.Seed, workload.Segment{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	stepAt := func(at time.Duration) int {
		i, _ := slices.BinarySearchFunc(r.steps, at, func(s step, at time.Duration) int {
			if s.end <= at {
				return -1
			}
			return 1
		})
		return min(i, len(r.steps)-1)
	}
	// The ledger: DB time per tenant × isolation class, read at each
	// phase's start as the clock passes it.
	type ukey struct {
		tenant int
		class  pools.Class
	}
	ledger := map[ukey]*pools.Usage{}
	usage := func() []pools.Usage {
		out := make([]pools.Usage, 0, len(ledger))
		for _, u := range ledger {
			out = append(out, *u)
		}
		return out
	}
	next := 0
	passTo := func(at time.Duration) {
		for next < len(tr.windows) && at >= tr.windows[next].step.start {
			tr.windows[next].usage = usage()
			next++
		}
	}
	ser := newSimSeries(r, tr)
	sr.beyond = map[string]*rowsBeyond{}
	var rowsOf []float64 // each tenant's rows, by id - 1
	if len(cal.rows) > 0 && r.sc.Data.Builtin() && r.sc.Data.Orders > 0 {
		for name := range cal.rows {
			sr.beyond[name] = &rowsBeyond{tenants: map[int]bool{}}
		}
		for _, t := range r.pop.Tenants {
			rowsOf = append(rowsOf, t.Share*float64(r.sc.Data.Orders))
		}
	}
	rec := workload.RecorderFunc(func(res workload.Result) {
		tr.windows[stepAt(res.Op.At)].rec.Record(res)
	})
	obs := func(o sim.Outcome) {
		end := o.Result.End.Sub(sim.Epoch)
		passTo(end)
		prog.at(&r.steps[stepAt(end)], end)
		ser.add(o, end)
		if b := sr.beyond[o.Result.Op.Class]; b != nil {
			b.calls++
			if t := o.Result.Op.Tenant; t >= 1 && t <= len(rowsOf) && rowsOf[t-1] > cal.rows[o.Result.Op.Class].hi {
				b.above++
				b.tenants[t] = true
				b.maxRows = max(b.maxRows, rowsOf[t-1])
				if cal.rows[o.Result.Op.Class].capped(rowsOf[t-1]) {
					b.capped++
				}
			}
		}
		if o.Node < 0 {
			return
		}
		k := ukey{o.Result.Op.Tenant, pools.Class(r.classes[o.Result.Op.Class].IsolationClass)}
		u := ledger[k]
		if u == nil {
			u = &pools.Usage{Tenant: r.key(k.tenant), Class: k.class}
			ledger[k] = u
		}
		u.DBTime += o.DBTime
		u.Statements++
	}
	passTo(0)
	stats, err := sim.Run(ctx, src, cfg, rec, obs)
	if err != nil {
		if errors.Is(err, sim.ErrInvalid) {
			return nil, fmt.Errorf("%w: configuration %s: %w", scenario.ErrInvalid, c.Name, err)
		}
		return nil, err
	}
	passTo(math.MaxInt64)
	tr.usageEnd = usage()
	tr.stats = stats.RunStats
	for i, w := range tr.windows {
		w.sent = src.sent[i]
	}
	tr.series = ser.points()
	var busy []string
	for i, b := range stats.Busy {
		busy = append(busy, fmt.Sprintf("%s %.0f%%", cfg.Nodes[i].Name, 100*b.Seconds()/max(src.Duration().Seconds(), 1e-9)))
	}
	note("%s: simulated %d calls in %d events; nodes busy (at least one call) over the timeline: %s",
		c.Name, stats.Issued, stats.Events, strings.Join(busy, ", "))
	sr.tr, sr.cfg, sr.stats, sr.duration = tr, cfg, stats, src.Duration()
	return sr, nil
}

// judgeSimulated turns a simulated timeline into its configuration's report
// and evaluates the assertions as runConfiguration does.
func (r *runner) judgeSimulated(c *scenario.Configuration, sr *simulated) configResult {
	for _, n := range sr.notes {
		r.note("%s", n)
	}
	tr, cfg, stats := sr.tr, sr.cfg, sr.stats
	// The limiters' counters, and what the clients saw: the same in a
	// model.
	tr.ex = &executor{r: r, stack: &stack{limiters: map[pools.Class]limiterStats{}}}
	tr.limitsBefore = map[string]limiter.TenantStat{}
	for li, l := range cfg.Limiters {
		st := limiter.Stat{Tenants: map[string]limiter.TenantStat{}}
		for tenant, rj := range stats.Limiters[li] {
			key := r.key(tenant)
			st.Tenants[key] = limiter.TenantStat{RejectedQueueFull: rj.QueueFull, RejectedWaitExceeded: rj.WaitExceeded}
			v, _ := tr.ex.seen.LoadOrStore(key, new([2]atomic.Int64))
			counts := v.(*[2]atomic.Int64)
			counts[0].Add(rj.QueueFull)
			counts[1].Add(rj.WaitExceeded)
		}
		tr.ex.stack.limiters[pools.Class(l.Name)] = simLimiter{st}
	}
	tr.limitsAt = tr.ex.stack.limiterStat()

	// The timeline's length in virtual time, as a run's is in wall time.
	res := configResult{report: r.configurationReport(c, tr, sr.duration)}
	res.assertions = r.assertions(c, tr, cleanState{})
	pairs := 0
	if r.quietPlan != nil {
		pairs = r.quietPlan.Pairs
	}
	res.report.QuietChecks = quietChecks(res.assertions, pairs)
	res.report.Passed, _ = verdict(res.assertions)
	return res
}

// maxSeriesTenants is the most tenants a simulation keeps per-second
// latency series for: they are kept per tenant × class and second, and
// merged at the end, which at 10,000 tenants takes longer than the
// simulation and most of its memory.
const maxSeriesTenants = 1000

// simErrorClass names a simulated call's error as errorClass names a real
// one's.
func simErrorClass(err error) string {
	switch {
	case errors.Is(err, sim.ErrQueueFull):
		return string(scenario.ErrorQueueFull)
	case errors.Is(err, sim.ErrWaitExceeded):
		return string(scenario.ErrorWaitExceeded)
	case errors.Is(err, sim.ErrAcquireTimeout):
		return string(scenario.ErrorAcquireTimeout)
	case errors.Is(err, sim.ErrStatementTimeout):
		return string(scenario.ErrorStatementTimeout)
	}
	return string(scenario.ErrorOther)
}

// simSeries builds the per-second series of a simulated timeline: the
// requests started and the top tenants' DB time in each second.
type simSeries struct {
	r      *runner
	tr     *timelineRun
	rate   []int64
	dbTime []map[int]time.Duration
}

func newSimSeries(r *runner, tr *timelineRun) *simSeries { return &simSeries{r: r, tr: tr} }

func (s *simSeries) add(o sim.Outcome, end time.Duration) {
	sec := int(o.Result.Op.At / seriesEvery)
	for len(s.rate) <= sec {
		s.rate = append(s.rate, 0)
	}
	s.rate[sec]++
	if o.DBTime > 0 {
		es := int(end / seriesEvery)
		for len(s.dbTime) <= es {
			s.dbTime = append(s.dbTime, map[int]time.Duration{})
		}
		s.dbTime[es][o.Result.Op.Tenant] += o.DBTime
	}
}

func (s *simSeries) points() []reports.Point {
	n := max(len(s.rate), len(s.dbTime))
	var out []reports.Point
	for i := range n {
		at := time.Duration(i+1) * seriesEvery
		p := reports.Point{At: at.Seconds()}
		for _, w := range s.tr.windows {
			if at > w.step.start {
				p.Window = w.step.Name
			}
		}
		if i < len(s.rate) {
			p.Rate = float64(s.rate[i])
		}
		if i < len(s.dbTime) {
			var total time.Duration
			type td struct {
				tenant int
				d      time.Duration
			}
			var all []td
			for t, d := range s.dbTime[i] {
				total += d
				all = append(all, td{t, d})
			}
			slices.SortFunc(all, func(a, b td) int {
				if a.d != b.d {
					return int(b.d - a.d)
				}
				return a.tenant - b.tenant
			})
			for _, x := range all[:min(5, len(all))] {
				p.TopDBTime = append(p.TopDBTime, reports.Share{Tenant: s.r.key(x.tenant), DBTime: ms(x.d), Share: x.d.Seconds() / total.Seconds()})
			}
		}
		out = append(out, p)
	}
	return out
}

// Calibration is what the model draws service times from: per class of
// the scenario, a distribution read from a real run's report.
type Calibration struct {
	samplers     map[string]sim.Sampler
	mean, median map[string]time.Duration
	// overhead is a class's share of its service time spent off the
	// node's cores (sim.Class.Overhead).
	overhead map[string]float64
	// wall and wallP50 are a calibrated class's service time alone as
	// the real run measured it (its rate is set from it).
	wall, wallP50 map[string]time.Duration
	// samples is the number of queries alone wall was measured over.
	samples       map[string]int64
	source        map[string]string
	classesInFile []string
	// interference is the slowdown per busy core beyond one
	// (sim.Machine.Interference) fitted from the report's run and
	// baseline windows, interferenceFrom how.
	interference     float64
	interferenceFrom string
	// slice is the scheduler's time slice of the model's nodes
	// (sim.Node.Slice), fitted by fitBySimulation; sliceFrom says how.
	slice     time.Duration
	sliceFrom string
	// runs are the calibration runs, the first the report the rest is
	// read from, each with its own quiet p99s the scheduler wait is
	// fitted to (fitBySimulation).
	runs []calibrationRun
	// rows holds, per class whose work grows with the sending tenant's
	// rows (fitRows), how: each call's draw is scaled by its tenant's.
	rows map[string]rowsFit
	// dominantRows holds, per report or export only the dominant tenant
	// sends, that tenant's rows in the calibration run: a draw is scaled
	// by the simulated dominant tenant's rows over them (dominantScale),
	// and a calibrated rate set from them, as a real run at another
	// tenants.dominant_share or data.orders measures and sets it.
	dominantRows map[string]float64
}

// calibrationRun is one real run of a calibration: its report, its label
// in errors and notes, and its quiet p99s by configuration and class
// (fitInterference's targets; none when its windows cannot be fitted to).
type calibrationRun struct {
	rep     *reports.Report
	label   string
	targets map[string]map[string]float64
}

// seedList lists reps' seeds: "42, 43, 44".
func seedList(reps []*reports.Report) string {
	var out []string
	for _, r := range reps {
		out = append(out, strconv.FormatInt(r.Seed, 10))
	}
	return strings.Join(out, ", ")
}

// anyTargets reports whether some calibration run has quiet p99s to fit
// the scheduler wait to.
func (c *Calibration) anyTargets() bool {
	for _, r := range c.runs {
		if len(r.targets) > 0 {
			return true
		}
	}
	return false
}

// rowsFit is how a class's database time per call grows with the sending
// tenant's rows of the data set: a + b × rows (ms). ref is the rows the
// class's sampler stands for: its calibration tenants' mix, by calls. lo
// and hi are the fewest and the most rows of a tenant it was fitted on
// (the calibrated range).
type rowsFit struct {
	a, b, ref, lo, hi float64
}

// maxRowsExtrapolation bounds the rows fit above its calibrated range: a
// tenant with more rows than the calibration's largest (hi) is drawn at
// most this many times hi's cost. The line was measured on a handful of
// tenants up to hi; past it a query's plan and cache behaviour change (a
// sort spilling to disk, a scan outgrowing shared_buffers) and the slope's
// error grows with the distance, so the draws of a tenant 100× hi (10,000
// tenants on other data) would be a guess no run measured. 4× covers what a
// capacity question asks of one tenant's growth (a sweep of its data or
// share to 2–4× today's) while keeping one extrapolated tenant from
// drawing service times that swamp every other figure; the report's notes
// say how many calls lay beyond hi and whether the cap applied.
const maxRowsExtrapolation = 4.0

// cost is the fitted database time per call (ms) of a tenant of rows:
// below lo the line is not followed (a query has a cost of its own the
// line, often through the origin, leaves out, so a tenant of a few rows is
// drawn as the smallest calibration tenant, not near 0); above hi it is
// followed up to maxRowsExtrapolation × hi's cost.
func (f rowsFit) cost(rows float64) float64 {
	c := f.a + f.b*max(rows, f.lo)
	if rows > f.hi {
		c = min(c, f.capCost())
	}
	return c
}

// capCost is the most a call is drawn at: maxRowsExtrapolation × the
// calibration's largest tenant's cost.
func (f rowsFit) capCost() float64 { return maxRowsExtrapolation * (f.a + f.b*f.hi) }

// capped reports whether a tenant of rows is drawn at capCost, not on the
// line.
func (f rowsFit) capped(rows float64) bool { return rows > f.hi && f.a+f.b*rows > f.capCost() }

// scale is a call's factor over the sampler's draw for a tenant of rows.
func (f rowsFit) scale(rows float64) float64 {
	return f.cost(rows) / (f.a + f.b*f.ref)
}

// rowsBeyond counts one fitted class's simulated calls by tenants with
// more rows than its fit's calibrated range (rowsFit.hi).
type rowsBeyond struct {
	// calls of the class, above of them by a tenant above hi, capped of
	// those drawn at the cap (rowsFit.capped).
	calls, above, capped int64
	// tenants above hi that sent the class; maxRows the most rows of one.
	tenants map[int]bool
	maxRows float64
}

func (b *rowsBeyond) add(o *rowsBeyond) {
	b.calls, b.above, b.capped = b.calls+o.calls, b.above+o.above, b.capped+o.capped
	for t := range o.tenants {
		b.tenants[t] = true
	}
	b.maxRows = max(b.maxRows, o.maxRows)
}

// rowsBeyondNotes says, for each class scaled by a rows fit, how many
// simulated tenants and what share of its calls lay above the calibrated
// range, how far above, and whether the cap applied; nothing for a class
// whose tenants all lay within it. counts holds each configuration's.
func rowsBeyondNotes(cal *Calibration, counts []map[string]*rowsBeyond) []string {
	var out []string
	for _, class := range slices.Sorted(maps.Keys(cal.rows)) {
		f := cal.rows[class]
		sum := &rowsBeyond{tenants: map[int]bool{}}
		for _, c := range counts {
			if b := c[class]; b != nil {
				sum.add(b)
			}
		}
		if sum.above == 0 {
			continue
		}
		capWords := fmt.Sprintf("below the cap of %g× that tenant's cost (%.3g ms per call), not reached", maxRowsExtrapolation, f.capCost())
		if sum.capped > 0 {
			capWords = fmt.Sprintf("capped at %g× that tenant's cost (%.3g ms per call; the line gives %.3g ms at %.0f rows): the cap applied to %d calls",
				maxRowsExtrapolation, f.capCost(), f.a+f.b*sum.maxRows, sum.maxRows, sum.capped)
		}
		tenants := fmt.Sprintf("%d simulated tenants", len(sum.tenants))
		if len(sum.tenants) == 1 {
			tenants = "1 simulated tenant"
		}
		out = append(out, fmt.Sprintf("%s: %s sent %d of its %d calls (%.1f%%, summed over %d configurations) with more rows than the calibration's largest tenant (%.0f rows), up to %.3g× as many: its rows fit is extrapolated there, %s",
			class, tenants, sum.above, sum.calls, 100*float64(sum.above)/float64(sum.calls), len(counts), f.hi, sum.maxRows/f.hi, capWords))
	}
	return out
}

// Rows-fit bounds: at least minRowsTenants tenants with calls of the class,
// a weighted R² of at least minRowsR2, and the work at the most rows at
// least minRowsGrowth times that at the fewest; otherwise the class's work
// is taken as the same for every tenant (lookups by key).
const (
	minRowsTenants = 3
	minRowsR2      = 0.5
	minRowsGrowth  = 2.0
)

// fitRows fits class's database time per call against the sending
// tenant's rows in rep, a real run of calSc on the built-in data set
// (tenant t holds share(t) × data.orders orders, as it sends share(t) of
// the traffic): for each tenant, its calls of the class that ended without
// error in the judged window, in the configuration where its time per call
// was least (the least shared); a weighted least-squares line over the
// tenants (weights: calls). ref is the rows of the tenants whose baseline
// calls the sampler was drawn from, weighted by those calls. ok is false
// for a data set of the user's own (data.setup), when the bounds above are
// not met, or without such calls: why then says which, and is empty
// for a fit.
func fitRows(rep *reports.Report, calSc *scenario.Scenario, class string) (f rowsFit, r2 float64, tenants int, why string) {
	if !calSc.Data.Builtin() || calSc.Data.Orders <= 0 {
		return f, 0, 0, "the calibration ran on a data set of its own (data.setup or data.existing)"
	}
	pop, err := population(calSc)
	if err != nil {
		return f, 0, 0, fmt.Sprintf("the calibration's tenants: %v", err)
	}
	rowsOf := func(tenant string) (float64, bool) {
		id, err := strconv.Atoi(tenant)
		if err != nil || id < 1 || id > pop.Len() {
			return 0, false
		}
		return pop.Tenants[id-1].Share * float64(calSc.Data.Orders), true
	}
	type point struct{ x, y, w float64 }
	best := map[string]point{}
	for _, cfg := range rep.Configurations {
		for _, row := range cfg.Tenants {
			n := row.Count - row.Errors - row.Incomplete
			x, known := rowsOf(row.Tenant)
			if row.Class != class || n <= 0 || !(row.DBTime > 0) || !known {
				continue
			}
			y := row.DBTime / float64(n)
			if p, seen := best[row.Tenant]; !seen || y < p.y {
				best[row.Tenant] = point{x, y, float64(n)}
			}
		}
	}
	if len(best) < minRowsTenants {
		return f, 0, len(best), fmt.Sprintf("%d of the calibration's tenants (fewer than %d) had %s calls that ended without error in the judged window, with database time", len(best), minRowsTenants, class)
	}
	var sw, sx, sy float64
	for _, p := range best {
		sw, sx, sy = sw+p.w, sx+p.w*p.x, sy+p.w*p.y
	}
	mx, my := sx/sw, sy/sw
	var sxx, sxy, syy float64
	for _, p := range best {
		sxx += p.w * (p.x - mx) * (p.x - mx)
		sxy += p.w * (p.x - mx) * (p.y - my)
		syy += p.w * (p.y - my) * (p.y - my)
	}
	if sxx <= 0 || syy <= 0 || sxy <= 0 {
		return f, 0, len(best), fmt.Sprintf("the database time per call of %d tenants does not grow with their rows", len(best))
	}
	f.b = sxy / sxx
	f.a = my - f.b*mx
	r2 = sxy * sxy / (sxx * syy)
	if f.a <= 0 {
		// A line through the origin: work in proportion to the rows.
		var sxx0, sxy0 float64
		for _, p := range best {
			sxx0, sxy0 = sxx0+p.w*p.x*p.x, sxy0+p.w*p.x*p.y
		}
		f.a, f.b = 0, sxy0/sxx0
	}
	lo, hi := math.Inf(1), 0.0
	for _, p := range best {
		lo, hi = min(lo, p.x), max(hi, p.x)
	}
	if r2 < minRowsR2 {
		return f, r2, len(best), fmt.Sprintf("R² %.2f on %d tenants, below %g", r2, len(best), minRowsR2)
	}
	if f.a+f.b*hi < minRowsGrowth*(f.a+f.b*lo) {
		return f, r2, len(best), fmt.Sprintf("%.3g ms per call at %.0f rows, %.3g ms at %.0f: less than %g× growth", f.a+f.b*lo, lo, f.a+f.b*hi, hi, minRowsGrowth)
	}
	var cw, cx float64
	for _, cfg := range rep.Configurations {
		for _, row := range cfg.Solo {
			if x, known := rowsOf(row.Tenant); known && row.Class == class && row.Count > 0 {
				cw, cx = cw+float64(row.Count), cx+float64(row.Count)*x
			}
		}
	}
	if cw == 0 || f.a+f.b*cx/cw <= 0 {
		return f, r2, len(best), fmt.Sprintf("no %s calls of known tenants in the calibration's solo rows, whose mix the draws stand for", class)
	}
	f.ref, f.lo, f.hi = cx/cw, lo, hi
	return f, r2, len(best), ""
}

// calibrationScenario returns the scenario rep, a calibration report, ran:
// its scenario file (Report.File) when it is readable here, of rep's
// scenario and, at rep's seed, of rep's schedule_hash (not edited since:
// the same tenants, shares, rates; a report without a hash is taken at its
// word), else sc at rep's seed when that gives rep's schedule_hash, else
// nil and why.
func calibrationScenario(rep *reports.Report, sc *scenario.Scenario) (*scenario.Scenario, string) {
	f, file := runFileAsRan(rep)
	if f != nil {
		return f, ""
	}
	c := sc.WithSeed(rep.Seed)
	if rep.ScheduleHash != "" && scheduleHash(c, runWalls(rep)) == rep.ScheduleHash {
		return c, ""
	}
	return nil, fmt.Sprintf("the calibration's scenario file %q %s and the simulated scenario at its seed %d has another schedule, so the calibration's tenants' rows are not known",
		RunFile(rep), file, rep.Seed)
}

// runFileAsRan returns rep's scenario file (RunFile) at rep's seed when it
// is of rep's scenario and not edited since (ranAsFiled), else nil and
// what it is: "is not readable here", "is now of scenario X" or "no
// longer gives the run's schedule (edited since)".
func runFileAsRan(rep *reports.Report) (*scenario.Scenario, string) {
	if rep.File == "" {
		return nil, "is not readable here"
	}
	f, err := loadRunFile(rep)
	switch {
	case err != nil:
		return nil, "is not readable here"
	case f.Name != rep.Scenario:
		return nil, fmt.Sprintf("is now of scenario %q", f.Name)
	}
	if f, edited := ranAsFiled(f, rep); !edited {
		return f, ""
	}
	return nil, "no longer gives the run's schedule (edited since)"
}

// absFile is file made absolute, "" when it cannot be (or is "").
func absFile(file string) string {
	if file == "" {
		return ""
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return ""
	}
	return abs
}

// RunFile is the path of rep's scenario file from here: the file the run
// read, Report.FileAbs, while it is there (a regular file at an absolute
// path), else Report.File as the run named it (relative to where it ran,
// so found only from there; a report written before file_abs has only
// this). Messages about the file name this path.
func RunFile(rep *reports.Report) string {
	if filepath.IsAbs(rep.FileAbs) {
		if fi, err := os.Stat(rep.FileAbs); err == nil && fi.Mode().IsRegular() {
			return rep.FileAbs
		}
	}
	return rep.File
}

// loadRunFile loads rep's scenario file (RunFile).
func loadRunFile(rep *reports.Report) (*scenario.Scenario, error) {
	return scenario.Load(RunFile(rep))
}

// ranAsFiled returns f, rep's scenario file, at rep's seed, and whether it
// was edited since rep's run: at rep's seed, with its calibrated classes'
// rates set from cal, it does not give rep's schedule_hash (a report
// without a hash is taken at its word).
func ranAsFiled(f *scenario.Scenario, rep *reports.Report) (*scenario.Scenario, bool) {
	if rep.ScheduleHash == "" {
		return f, false
	}
	f = f.WithSeed(rep.Seed)
	return f, scheduleHash(f, runWalls(rep)) != rep.ScheduleHash
}

// runWalls holds rep's own calibrated classes' service times alone, as the
// run set its rates from them: a run's schedule is checked with its own,
// not the ones a simulation over several runs draws (the median run's).
func runWalls(rep *reports.Report) *Calibration {
	cal := &Calibration{wall: map[string]time.Duration{}}
	for _, k := range rep.Calibrations {
		if _, seen := cal.wall[k.Class]; !seen && usableCalibration(k) { // its first usable entry, as medianCalibrations takes
			cal.wall[k.Class] = msDuration(k.ServiceMean)
		}
	}
	return cal
}

// RunScenario returns the scenario rep, a real run's report, ran: its
// scenario file (Report.File) read here, of rep's scenario and, at rep's
// seed, of rep's schedule_hash (not edited since: the same tenants,
// shares, rates; its calibrated classes' rates set from rep's
// calibrations, as the run set them; a report without a hash is taken at
// its word). Else an error that says which of these it is not.
func RunScenario(rep *reports.Report) (*scenario.Scenario, error) {
	if rep.File == "" {
		return nil, errors.New("the report names no scenario file")
	}
	f, err := loadRunFile(rep)
	if err != nil {
		return nil, fmt.Errorf("its scenario file %s is not readable here (%w)", RunFile(rep), err)
	}
	if f.Name != rep.Scenario {
		return nil, fmt.Errorf("its scenario file %s is now of scenario %q, not the report's %q", RunFile(rep), f.Name, rep.Scenario)
	}
	f, edited := ranAsFiled(f, rep)
	if edited {
		return nil, fmt.Errorf("its scenario file %s no longer gives the run's schedule at its seed %d (edited since the run)", RunFile(rep), rep.Seed)
	}
	return f, nil
}

// scheduleHash is the schedule_hash a run of sc would have with its
// calibrated classes' rates set from cal, as Simulate sets them; "" when
// sc cannot be planned.
func scheduleHash(sc *scenario.Scenario, cal *Calibration) string {
	r := &runner{sc: sc, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := r.plan(); err != nil {
		return ""
	}
	rates := map[string]float64{}
	for name, pool := range calibrationPools(sc) {
		c, _ := sc.Class(name)
		if w := cal.wall[name]; c != nil && w > 0 {
			rates[name] = c.LoadFactor * float64(pool.size) / w.Seconds()
		}
	}
	if len(rates) > 0 {
		if err := r.schedule(rates); err != nil {
			return ""
		}
	}
	return r.hash
}

// Calibrate reads the service-time distribution of each of sc's classes from
// a real run's report rep (file names it in errors):
//
//   - a class the quiet tenants send: the latency distribution of the quiet
//     tenants merged in the quiet_p99 baseline window (solo_quiet_all's
//     percentiles, averaged over the report's configurations at each
//     percentile), drawn by inverse transform, linear between the
//     percentiles, up to the max;
//   - a calibrated class (load_factor): the report's calibrations entry,
//     measured one query at a time: a log-normal with its median and mean.
//
// A latency measured on a machine holds waits for a core (beside the run's
// other calls and, on a busy machine, other work) that the model adds
// itself. So when the report has the machine's figures for the window
// (machine.windows: own_cpu, the CPUs noisysim and its servers used), each
// distribution is scaled by k = CPU used / wall time summed over the
// window's calls (k ≤ 1): the draws have the mean the CPU measured and the
// shape the latencies had. Of that CPU, noisysim's own process used a share
// (noisysim_cpu / own_cpu): a quiet call's client side. When the calibration
// ran noisysim on cores of its own (machine.generator_cores), that share
// (averaged over configurations, at most maxOverhead) is overhead off the
// node's cores (sim.Class.Overhead): only the servers' share of a draw
// slows down beside other calls. Without, noisysim's CPU loaded the same
// cores as the servers and is work (measured on a 2-core machine: taking it
// off the cores put the isolated quiet p99 10–30% lower, below the real one
// on a quiet machine). A calibrated class is measured alone, where
// noisysim's CPU is next to none: all of it is work.
//
// Errors: scenario.ErrInvalid (wrapped), naming file, when rep is nil or a
// class of sc has neither in rep (a report of another scenario's shape).
func Calibrate(rep *reports.Report, file string, sc *scenario.Scenario) (*Calibration, error) {
	return calibrate([]*reports.Report{rep}, []string{"--calibrate " + file}, sc, true)
}

// CheckShape returns the error Calibrate would for rep, a real run's report
// of sc's shape, naming it by label (e.g. "--against DIR: run-3/report.json")
// in place of "--calibrate FILE": scenario.ErrInvalid (wrapped) when a class
// of sc has no service times in rep.
func CheckShape(rep *reports.Report, label string, sc *scenario.Scenario) error {
	_, err := calibrate([]*reports.Report{rep}, []string{label}, sc, true)
	return err
}

// calibrate is Calibrate over one or more real runs of one scenario
// (reps[0] first, the rest at other seeds), labels naming each in errors:
// the quiet tenants' percentiles are averaged over every run's
// configurations, each run's quiet p99s kept (runTargets) for the
// scheduler wait's fit, and a calibrated class's service time alone taken
// from the median run (medianCalibrations; reps[0]'s with firstRates); the
// rest is read from reps[0].
func calibrate(reps []*reports.Report, labels []string, sc *scenario.Scenario, firstRates bool) (*Calibration, error) {
	if len(reps) == 0 || reps[0] == nil {
		return nil, fmt.Errorf("%w: simulate needs a calibration: a real run's report.json (--calibrate)", scenario.ErrInvalid)
	}
	rep, label := reps[0], labels[0]
	cal := &Calibration{samplers: map[string]sim.Sampler{}, mean: map[string]time.Duration{}, median: map[string]time.Duration{}, source: map[string]string{},
		wall: map[string]time.Duration{}, wallP50: map[string]time.Duration{}, samples: map[string]int64{}, overhead: map[string]float64{}}
	machineOf := func(r *reports.Report) map[string]reports.WindowLoad {
		m := map[string]reports.WindowLoad{}
		if r != nil && r.Machine != nil {
			for _, w := range r.Machine.Windows {
				m[w.Window] = w
			}
		}
		return m
	}
	_, baseline := sc.Assertions.QuietP99.QuietWindows()
	have := map[string]bool{}
	// The quiet tenants' baseline percentiles, per class, over
	// configurations (of every run), each configuration's scaled by its k.
	sums := map[string][]reports.Percentile{}
	n := map[string]int{}
	ks := map[string][]float64{}
	// clients are, per class, each configuration's share of the CPU the
	// window used that was noisysim's own (when the report tells it apart
	// and noisysim ran on cores of its own): overhead off the cores.
	clients := map[string][]float64{}
	for ri, rep := range reps {
		if ri > 0 && rep.Scenario != reps[0].Scenario {
			return nil, fmt.Errorf("%w: %s: a run of scenario %q, %s is of %q: calibrate on runs of one scenario", scenario.ErrInvalid, labels[ri], rep.Scenario, label, reps[0].Scenario)
		}
		machine := machineOf(rep)
		runK := map[string]float64{}
		runHas := map[string]bool{}
		for _, c := range rep.Configurations {
			k, client := 1.0, -1.0
			if w, ok := machine[fmt.Sprintf("%s (%s)", baseline, c.Name)]; ok && w.OwnCPU > 0 {
				var wall float64 // ms
				for _, row := range c.SoloQuietAll {
					if len(row.Percentiles) > 0 {
						wall += float64(row.Count) * ms(quantileMean(withMax(row.Percentiles, row.Max)))
					}
				}
				for _, row := range c.Solo {
					if row.Tenant == rep.Dominant && row.Count > 0 {
						wall = 0 // the dominant tenant's calls share the CPU: no scaling
					}
				}
				if wall > 0 {
					k = min(1, w.OwnCPU*w.Seconds*1000/wall)
				}
				if w.NoisysimCPU > 0 && rep.Machine.GeneratorCores != "" {
					client = min(1, w.NoisysimCPU/w.OwnCPU)
				}
			}
			runK[c.Name] = k
			for _, row := range c.SoloQuietAll {
				if row.Count == 0 || len(row.Percentiles) == 0 {
					continue
				}
				have[row.Class] = true
				runHas[row.Class] = true
				ps := withMax(row.Percentiles, row.Max)
				if s, ok := sums[row.Class]; !ok {
					sums[row.Class] = make([]reports.Percentile, len(ps))
					for i, p := range ps {
						sums[row.Class][i] = reports.Percentile{P: p.P, Ms: k * p.Ms}
					}
				} else if len(s) == len(ps) {
					for i := range s {
						s[i].Ms += k * ps[i].Ms
					}
				} else {
					continue
				}
				n[row.Class]++
				ks[row.Class] = append(ks[row.Class], k)
				if client >= 0 {
					clients[row.Class] = append(clients[row.Class], client)
				}
			}
		}
		if ri > 0 {
			for _, c := range sc.Classes {
				if _, quiet := sums[c.Name]; quiet && !runHas[c.Name] {
					return nil, fmt.Errorf("%w: %s: the run (seed %d) has no quiet %s calls in its %s window, which %s has: calibrate on runs of one scenario",
						scenario.ErrInvalid, labels[ri], rep.Seed, c.Name, baseline, label)
				}
			}
		}
		// The closed form's interference is reps[0]'s; every run's quiet
		// p99s are kept for the scheduler wait's fit.
		i, from, targets := fitInterference(rep, sc, machine, runK)
		if ri == 0 {
			cal.interference, cal.interferenceFrom = i, from
		}
		cal.runs = append(cal.runs, calibrationRun{rep: rep, label: labels[ri], targets: targets})
	}
	calibrated, calMachine, calFrom := medianCalibrations(reps, firstRates)
	for class := range calibrated {
		have[class] = true
	}
	overRuns := ""
	if len(reps) > 1 {
		overRuns = fmt.Sprintf(" over %d runs (seeds %s)", len(reps), seedList(reps))
	}
	var missing []string
	firstMissing := -1
	for i, c := range sc.Classes {
		switch ps, ok := sums[c.Name]; {
		case ok && c.Senders != scenario.SendersDominant:
			qs := make([]reports.Percentile, len(ps))
			for i, p := range ps {
				qs[i] = reports.Percentile{P: p.P, Ms: p.Ms / float64(n[c.Name])}
			}
			cal.samplers[c.Name] = quantileSampler(qs)
			cal.mean[c.Name] = quantileMean(qs)
			cal.median[c.Name] = msDuration(quantileAt(qs, 50))
			if cs := clients[c.Name]; len(cs) == n[c.Name] {
				var sum float64
				for _, x := range cs {
					sum += x
				}
				cal.overhead[c.Name] = min(sum/float64(len(cs)), maxOverhead)
				cal.source[c.Name] = fmt.Sprintf("%s_quiet_all percentiles of %d configurations%s, scaled to the CPU used by %s, %.0f%% of it overhead off the cores (noisysim's share: %s)",
					baseline, n[c.Name], overRuns, fmtKs(ks[c.Name]), 100*cal.overhead[c.Name], fmtKs(cs))
				break
			}
			cal.source[c.Name] = fmt.Sprintf("%s_quiet_all percentiles of %d configurations%s, scaled to the CPU used by %s",
				baseline, n[c.Name], overRuns, fmtKs(ks[c.Name]))
		case calibrated[c.Name].ServiceMean > 0:
			k := calibrated[c.Name]
			scale := 1.0
			if w, ok := machineOf(calMachine[c.Name])[fmt.Sprintf("calibrate (%s)", c.Name)]; ok && w.OwnCPU > 0 {
				// Calibration runs one unmeasured query, then Samples.
				scale = min(1, w.OwnCPU*w.Seconds*1000/(float64(k.Samples+1)*k.ServiceMean))
			}
			cal.samplers[c.Name] = logNormal(scale*k.ServiceP50, scale*k.ServiceMean)
			cal.mean[c.Name] = msDuration(scale * k.ServiceMean)
			cal.median[c.Name] = msDuration(scale * k.ServiceP50)
			cal.wall[c.Name], cal.wallP50[c.Name] = msDuration(k.ServiceMean), msDuration(k.ServiceP50)
			cal.samples[c.Name] = k.Samples
			cal.source[c.Name] = fmt.Sprintf("calibrations (%d queries alone: mean %.2f ms, p50 %.2f ms%s), log-normal, scaled to the CPU used by %.2f",
				k.Samples, k.ServiceMean, k.ServiceP50, calFrom[c.Name], scale)
		default:
			if mean, from, ok := dbTimeService(rep, sc, &c); ok {
				// Reports vary little run to run: a narrow log-normal.
				cal.samplers[c.Name] = logNormal(mean, mean)
				cal.mean[c.Name], cal.median[c.Name] = msDuration(mean), msDuration(mean)
				cal.source[c.Name] = from
				have[c.Name] = true
				break
			}
			if err := unusableCalibration(sc, i, reps, labels); err != nil {
				return nil, err
			}
			missing = append(missing, c.Name)
			if firstMissing < 0 {
				firstMissing = i
			}
		}
	}
	// Work that grows with the tenant's rows, fitted on the calibration's
	// own tenants: its scenario file when readable here, else the
	// simulated scenario at the calibration's seed when that is the
	// schedule the calibration ran (the same tenants and shares). Without
	// either the calibration's tenants' rows are not known, and another
	// scenario's shares (a sweep point's dominant_share) would put each
	// tenant's measured time at rows it did not hold.
	cal.rows = map[string]rowsFit{}
	cal.dominantRows = map[string]float64{}
	var calSc *scenario.Scenario
	var noFit string
	calScenario := func() (*scenario.Scenario, string) {
		if calSc == nil && noFit == "" {
			switch {
			case !sc.Data.Builtin():
				noFit = "the simulated data set is the scenario's own (data.setup or data.existing): its rows per tenant are not known"
			case sc.Data.Orders <= 0:
				noFit = "the simulated scenario has no data.orders"
			default:
				calSc, noFit = calibrationScenario(rep, sc)
			}
		}
		return calSc, noFit
	}
	for _, c := range sc.Classes {
		if c.Senders == scenario.SendersDominant && (c.Query == scenario.QueryReport || c.Query == scenario.QueryExport) && have[c.Name] {
			if rows, why := dominantRows(calScenario()); why != "" {
				cal.source[c.Name] += "; not rescaled to the dominant tenant's rows (" + why + ")"
			} else {
				cal.dominantRows[c.Name] = rows
				cal.source[c.Name] += fmt.Sprintf("; each call scaled by the dominant tenant's rows over the %.0f it held in the calibration (a %s reads all of its orders: in proportion, at most %g×)",
					rows, c.Query, maxRowsExtrapolation)
			}
			continue
		}
		if _, quiet := sums[c.Name]; !quiet || c.Senders == scenario.SendersDominant {
			continue
		}
		f, r2, tenants := rowsFit{}, 0.0, 0
		known, why := calScenario()
		if known != nil {
			f, r2, tenants, why = fitRows(rep, known, c.Name)
		}
		if why != "" {
			cal.source[c.Name] += "; drawn the same for every tenant (no fit to the tenant's rows: " + why + ")"
			continue
		}
		cal.rows[c.Name] = f
		cal.source[c.Name] += fmt.Sprintf("; each call scaled by its tenant's rows (taken as at least %.0f, the calibration's smallest tenant's; above %.0f, its largest's, at most %g× that tenant's cost): (%.3g ms + %.3g ms per 1,000 rows) over the same at %.0f rows (the calibration's mix), fitted on %d tenants' database time per call (R² %.2f)",
			f.lo, f.hi, maxRowsExtrapolation, f.a, 1000*f.b, f.ref, tenants, r2)
	}
	if len(missing) > 0 {
		var in []string
		for c := range have {
			in = append(in, c)
		}
		slices.Sort(in)
		return nil, &scenario.Error{File: sc.File, Problems: []scenario.Problem{sc.Problem(fmt.Sprintf("classes[%d]", firstMissing),
			"%s: the report (scenario %q) is of another scenario's shape: no service times for class %s (the report has service times for: %s)",
			label, rep.Scenario, strings.Join(missing, ", "), cmpOr(strings.Join(in, ", "), "none"))}}
	}
	return cal, nil
}

// dominantRows returns the simulated dominant tenant's rows on the
// built-in data set (its share × data.orders); ok is false for a data set
// of the scenario's own, whose rows per tenant are not known.
func (r *runner) dominantRows() (rows float64, ok bool) {
	if !r.sc.Data.Builtin() || r.sc.Data.Orders <= 0 || r.pop.Len() == 0 {
		return 0, false
	}
	return r.pop.Tenants[0].Share * float64(r.sc.Data.Orders), true
}

// dominantRows returns the dominant tenant's rows in calSc, the
// calibration's scenario (calibrationScenario: why it is not known when
// nil), on the built-in data set: its share × data.orders.
func dominantRows(calSc *scenario.Scenario, noCal string) (rows float64, why string) {
	if calSc == nil {
		return 0, noCal
	}
	if !calSc.Data.Builtin() || calSc.Data.Orders <= 0 {
		return 0, "the calibration ran on a data set of its own (data.setup or data.existing)"
	}
	pop, err := population(calSc)
	if err != nil || pop.Len() == 0 {
		return 0, fmt.Sprintf("the calibration's tenants: %v", err)
	}
	return pop.Tenants[0].Share * float64(calSc.Data.Orders), ""
}

// dominantScale is the factor over a calibrated draw of class, a report or
// export only the dominant tenant sends, for a dominant tenant of rows: its
// rows over the calibration's dominant tenant's (such a query reads all of
// the tenant's orders, so its work is in proportion), at most
// maxRowsExtrapolation (as a rows fit above its range); 1 when the
// calibration's rows are not known.
func (c *Calibration) dominantScale(class string, rows float64) float64 {
	ref, ok := c.dominantRows[class]
	if !ok || !(ref > 0) {
		return 1
	}
	return min(rows/ref, maxRowsExtrapolation)
}

// dbTimeService reads the work of a class only the dominant tenant sends
// at a fixed rate (no baseline rows, no calibrations entry: noisy-neighbor's
// report) from rep's judged window: the dominant tenant's database time for
// the class over its calls that ended without error, in the configuration
// where that is least (the one whose calls shared their node least, as an
// isolated configuration's heavy limiter of one at a time), times the CPU
// budget of the node it ran on there when below one and enforced (a call
// alone on a node of 0.5 CPU takes twice its work, in the model as on the
// machine). ok is false when no configuration has such calls.
func dbTimeService(rep *reports.Report, sc *scenario.Scenario, c *scenario.Class) (mean float64, from string, ok bool) {
	if c.Senders != scenario.SendersDominant || rep.Dominant == "" {
		return 0, "", false
	}
	enforced := rep.Machine != nil && rep.Machine.NodeCPU != nil && rep.Machine.NodeCPU.Skipped == "" && len(rep.Machine.NodeCPU.Nodes) > 0
	for _, cfg := range rep.Configurations {
		for _, row := range cfg.Tenants {
			n := row.Count - row.Errors - row.Incomplete
			if row.Tenant != rep.Dominant || row.Class != c.Name || n <= 0 || !(row.DBTime > 0) {
				continue
			}
			m := row.DBTime / float64(n)
			if ok && m >= mean {
				continue
			}
			scale, where := 1.0, ""
			if sconf, found := sc.Configuration(cfg.Name); found && enforced {
				role := backend.RolePrimary
				if sconf.Mode == scenario.ModeIsolated && sconf.Pool(c.IsolationClass).Target == scenario.TargetReplica {
					role = backend.RoleReplica
				}
				if b := sc.Backend.CPU().For(role); b > 0 && b < 1 {
					scale, where = b, fmt.Sprintf(", times the %s's CPU budget %g", role, b)
				}
			}
			mean, ok = scale*m, true
			from = fmt.Sprintf("the dominant tenant's database time in %s's %s window: %.1f ms over %d calls%s, log-normal",
				cfg.Name, cmpOr(sc.Assertions.QuietP99.Window, scenario.PhaseRun), m, n, where)
		}
	}
	return mean, from, ok
}

// Interference fit bounds: a configuration is fitted from when its run
// window kept at least minOtherBusy more CPUs busy than its baseline (the
// noise beside the quiet calls), from each quiet class with at least
// minFitSamples calls in both windows.
const (
	minOtherBusy  = 0.25
	minFitSamples = 100
)

// fitInterference fits the model's slowdown per busy core beyond one
// (sim.Machine.Interference) from rep alone: for each configuration of rep
// that sc runs isolated (the quiet classes in pools of their own, so their
// calls wait for no noise in a pool: a shared pool's queue says nothing of
// the cores), the quiet tenants' p99 in the quiet_p99 window over their p99
// in its baseline (neither window DISTURBED), the latter as the model
// draws it (scaled by the configuration's k), is 1 + I × o, o being the CPUs the window kept busy
// beyond the baseline's (machine.windows own_cpu: the noise's). I is the
// mean over those configurations and quiet classes, at least 0. Without
// machine figures, or no configuration that fits the bounds above, I is 0
// (processor sharing alone). from says what it was fitted from; targets
// are the real quiet p99s per configuration and class of every isolated
// configuration with machine figures, undisturbed windows and enough
// calls, whatever CPU its run window added (the bound above is the closed
// form's, which divides by it), which fitBySimulation fits the model to
// instead; Simulate uses the closed form only as information.
func fitInterference(rep *reports.Report, sc *scenario.Scenario, machine map[string]reports.WindowLoad, kOf map[string]float64) (i float64, from string, targets map[string]map[string]float64) {
	if len(machine) == 0 {
		return 0, "not fitted: the calibration report has no machine figures (machine.windows)", nil
	}
	window, baseline := sc.Assertions.QuietP99.QuietWindows()
	var fits, others []float64
	var used, disturbed []string
	targets = map[string]map[string]float64{}
	for _, c := range rep.Configurations {
		if cfg, ok := sc.Configuration(c.Name); !ok || cfg.Mode != scenario.ModeIsolated {
			continue
		}
		run, okR := machine[fmt.Sprintf("%s (%s)", window, c.Name)]
		solo, okS := machine[fmt.Sprintf("%s (%s)", baseline, c.Name)]
		o := run.OwnCPU - solo.OwnCPU
		if !okR || !okS {
			continue
		}
		// A stall no verdict rests on (StallMoot) may still have lengthened
		// the p99 the fit would match: left out as well.
		if run.Disturbed || solo.Disturbed || run.StallMoot || solo.StallMoot {
			// Other work on the machine slowed the quiet calls too: the
			// model is of a machine of its own.
			disturbed = append(disturbed, c.Name)
			continue
		}
		base := map[string]reports.TenantRow{}
		for _, row := range c.SoloQuietAll {
			base[row.Class] = row
		}
		n := len(fits)
		for _, w := range c.Windows {
			if w.Name != window {
				continue
			}
			for _, row := range w.QuietAll {
				b, ok := base[row.Class]
				if !ok || row.Count < minFitSamples || b.Count < minFitSamples || !(b.P99 > 0) {
					continue
				}
				if targets[c.Name] == nil {
					targets[c.Name] = map[string]float64{}
				}
				// The fit by simulation reproduces the noise's load
				// itself, however little it added; the closed form
				// divides by it.
				targets[c.Name][row.Class] = row.P99
				if o < minOtherBusy {
					continue
				}
				ratio := row.P99 / (kOf[c.Name] * b.P99)
				fits = append(fits, max(0, (ratio-1)/o))
				used = append(used, fmt.Sprintf("%s %s p99 %.3g/%.3g ms", c.Name, row.Class, row.P99, kOf[c.Name]*b.P99))
			}
		}
		if len(fits) > n {
			others = append(others, o)
		}
	}
	if len(fits) == 0 && len(disturbed) > 0 {
		return 0, fmt.Sprintf("not fitted: the %s and %s windows of %s were DISTURBED (other work on the machine): the model is of a machine of its own, so it is not fitted to them",
			window, baseline, strings.Join(disturbed, ", ")), targets
	}
	if len(fits) == 0 {
		return 0, fmt.Sprintf("not fitted: no isolated configuration of the calibration kept %.2g CPUs more busy in its %s window than in its %s window with %d quiet calls of a class in each",
			minOtherBusy, window, baseline, minFitSamples), targets
	}
	for _, f := range fits {
		i += f
	}
	i /= float64(len(fits))
	return i, fmt.Sprintf("fitted from %s over %s quiet p99 (%s) beside %s more busy CPUs (own_cpu)", window, baseline, strings.Join(used, ", "), fmtKs(others)), targets
}

// maxSlice bounds the scheduler slice fitBySimulation searches: a call
// waits at most 32 ms for a core.
const maxSlice = 32 * time.Millisecond

// fitBySimulation fits cal's scheduler slice (sim.Node.Slice) by
// simulating the calibration run itself: the calibration's scenario file
// (Report.File) when it is readable here, else sc, at the calibration's
// seed, when the simulated schedule is the one the calibration ran (the
// same schedule_hash: the same scenario, rates and seed). It simulates
// each configuration fitInterference fitted from alone, and bisects the
// slice (8 steps over 0–maxSlice) until the simulated quiet p99 of that
// configuration's run window matches the calibration's (the mean of the
// classes' log ratios is 0). The result is the mean over configurations.
//
// The slice replaces the interference, which is then 0: in real runs the
// noise lengthens only the quiet calls' tail (their p50 is the same beside
// it as alone) — a few calls wait for a core — while an interference
// fitted to the p99 slowed every call (simulated p50 2–3.6× the real one,
// README). When neither schedule is the calibration's, both are 0, not
// fitted (the closed form of fitInterference is named in from, not used:
// it ignores the model's own concurrency and overshot 5–7× where it was
// checked).
func fitBySimulation(ctx context.Context, sc *scenario.Scenario, opts SimulateOptions, cal *Calibration) error {
	zero, none := 0.0, time.Duration(0)
	// withFirst returns opts calibrated with run i first: its calibrated
	// classes' rates are the ones that run set (its schedule), the quiet
	// tenants' service times the same average over every run.
	withFirst := func(i int) SimulateOptions {
		o := opts
		reps := append([]*reports.Report{opts.Calibration}, opts.MoreCalibrations...)
		files := append([]string{opts.CalibrationFile}, opts.MoreCalibrationFiles...)
		if i > 0 && i < len(reps) {
			reps[0], reps[i] = reps[i], reps[0]
			if i < len(files) {
				files[0], files[i] = files[i], files[0]
			}
		}
		o.Calibration, o.MoreCalibrations = reps[0], reps[1:]
		o.CalibrationFile, o.MoreCalibrationFiles = files[0], files[1:]
		o.Progress, o.Logger = nil, nil
		o.firstRates = true
		return o
	}
	// A calibration run the model can simulate: its scenario at its seed
	// giving its schedule.
	type fitRun struct {
		calibrationRun
		sc   *scenario.Scenario
		opts SimulateOptions
	}
	var runs []fitRun
	var left []string
	for i, cr := range cal.runs {
		if len(cr.targets) == 0 {
			left = append(left, fmt.Sprintf("seed %d (no quiet p99 to fit to)", cr.rep.Seed))
			continue
		}
		o := withFirst(i)
		var cands []*scenario.Scenario
		if cr.rep.File != "" {
			if f, err := loadRunFile(cr.rep); err == nil && f.Name == cr.rep.Scenario {
				cands = append(cands, f.WithSeed(cr.rep.Seed))
			}
		}
		cands = append(cands, sc.WithSeed(cr.rep.Seed))
		var calSc *scenario.Scenario
		for _, c := range cands {
			ok := cr.rep.ScheduleHash != "" && simulable(c) == nil
			for config := range cr.targets {
				if _, found := c.Configuration(config); !found {
					ok = false
				}
			}
			if !ok {
				continue
			}
			h := o
			h.Only, h.Interference, h.Slice = slices.Sorted(maps.Keys(cr.targets))[0], &zero, &none
			r, err := Simulate(ctx, c, h)
			if err == nil && r.ScheduleHash == cr.rep.ScheduleHash {
				calSc = c
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if calSc == nil {
			left = append(left, fmt.Sprintf("seed %d (cannot be simulated here)", cr.rep.Seed))
			continue
		}
		runs = append(runs, fitRun{calibrationRun: cr, sc: calSc, opts: o})
	}
	if len(runs) == 0 {
		rep := opts.Calibration
		// The closed form is no fit of the model: it overshot 5–7× where
		// it was checked (README).
		if len(cal.runs) == 1 {
			why := "gives its schedule but cannot be simulated"
			if _, w := runFileAsRan(rep); w != "" {
				why = w
			}
			cal.interferenceFrom = fmt.Sprintf("not fitted: the calibration run cannot be simulated here (its scenario file %q %s and the simulated scenario at its seed %d has another schedule); the closed form would give %.3g, %s",
				RunFile(rep), why, rep.Seed, cal.interference, cal.interferenceFrom)
			cal.sliceFrom = "not fitted: the calibration run cannot be simulated here"
		} else {
			cal.interferenceFrom = fmt.Sprintf("not fitted: no calibration run can be simulated with quiet p99s to fit to (%s); the closed form would give %.3g, %s",
				strings.Join(left, ", "), cal.interference, cal.interferenceFrom)
			cal.sliceFrom = "not fitted: no calibration run can be simulated here with quiet p99s to fit to (" + strings.Join(left, ", ") + ")"
		}
		cal.interference = 0
		return nil
	}
	window, _ := runs[0].sc.Assertions.QuietP99.QuietWindows()
	configs := map[string]bool{}
	for _, r := range runs {
		for config := range r.targets {
			configs[config] = true
		}
	}
	var fits []time.Duration
	var used []string
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		var these []fitRun
		for _, r := range runs {
			if r.targets[config] != nil {
				these = append(these, r)
			}
		}
		// logRatio is the mean over classes of log(median simulated p99 /
		// median real p99), medians over the runs (one run: its own).
		logRatio := func(x time.Duration) (float64, error) {
			simP99 := make([]map[string]float64, len(these))
			errs := make([]error, len(these))
			sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
			var wg sync.WaitGroup
			for i, r := range these {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					o := r.opts
					o.Only, o.Interference, o.Slice = config, &zero, &x
					rep, err := Simulate(ctx, r.sc, o)
					if err != nil {
						errs[i] = err
						return
					}
					simP99[i] = map[string]float64{}
					for _, c := range rep.Configurations {
						for _, w := range c.Windows {
							if w.Name != window {
								continue
							}
							for _, row := range w.QuietAll {
								if row.P99 > 0 {
									simP99[i][row.Class] = row.P99
								}
							}
						}
					}
				})
			}
			wg.Wait()
			if err := ctx.Err(); err != nil {
				return 0, err // once, not once per run
			}
			if err := errors.Join(errs...); err != nil {
				return 0, err
			}
			var sum float64
			var n int
			for _, class := range slices.Sorted(maps.Keys(these[0].targets[config])) {
				var sims, reals []float64
				for i, r := range these {
					real, ok := r.targets[config][class]
					if sim, okS := simP99[i][class]; ok && okS {
						sims, reals = append(sims, sim), append(reals, real)
					}
				}
				if len(sims) > 0 {
					sum += math.Log(median(sims) / median(reals))
					n++
				}
			}
			if n == 0 {
				return 0, fmt.Errorf("fit the scheduler slice: the simulation of %s has no quiet %s rows", config, window)
			}
			return sum / float64(n), nil
		}
		f, err := logRatio(0)
		if err != nil {
			return err
		}
		if f >= 0 {
			fits = append(fits, 0)
			used = append(used, fmt.Sprintf("%s: 0, processor sharing alone is already at or above its p99", config))
			continue
		}
		lo, hi := time.Duration(0), maxSlice
		for range 8 {
			mid := (lo + hi) / 2
			f, err := logRatio(mid)
			if err != nil {
				return err
			}
			if f < 0 {
				lo = mid
			} else {
				hi = mid
			}
		}
		x := (lo + hi) / 2
		fits = append(fits, x)
		used = append(used, fmt.Sprintf("%s: %.3g ms", config, ms(x)))
	}
	var sum time.Duration
	for _, x := range fits {
		sum += x
	}
	cal.slice = sum / time.Duration(len(fits))
	if len(cal.runs) == 1 {
		cal.sliceFrom = fmt.Sprintf("fitted by simulating the calibration's own seed %d until its %s quiet p99 matched the real run's (%s)",
			opts.Calibration.Seed, window, strings.Join(used, ", "))
	} else {
		var seeds []*reports.Report
		for _, r := range runs {
			seeds = append(seeds, r.rep)
		}
		cal.sliceFrom = fmt.Sprintf("fitted by simulating %d calibration runs at their own seeds (%s) until the median of their %s quiet p99s matched the real runs' median (%s)",
			len(runs), seedList(seeds), window, strings.Join(used, ", "))
		if len(left) > 0 {
			cal.sliceFrom += "; left out: " + strings.Join(left, ", ")
		}
	}
	cal.interferenceFrom = fmt.Sprintf("0: the scheduler slice is fitted instead (the closed form gave %.3g, %s)", cal.interference, cal.interferenceFrom)
	cal.interference = 0
	return nil
}

// medianCalibrations returns, per calibrated class (load_factor), the
// calibrations entry its rate is set from, the run it is of, and how it was
// chosen ("" for one run): over several runs, the median run's by its mean
// service time alone (the lower of the two middle ones), not the first
// run's. Each real run measures that time at its start, and one run that
// measured it on a busy moment (92 ms against 60–66 ms in the other six of
// a ci-gate series) would otherwise set the rate of every simulated run,
// and with it their throughput and rejections (0.73× and 0.69× the real
// ones). With first, or one run, the first run's entries.
func medianCalibrations(reps []*reports.Report, first bool) (map[string]reports.Calibration, map[string]*reports.Report, map[string]string) {
	entries := map[string]reports.Calibration{}
	of := map[string]*reports.Report{}
	from := map[string]string{}
	if first || len(reps) == 1 {
		reps = reps[:1]
	}
	type entry struct {
		c   reports.Calibration
		rep *reports.Report
	}
	byClass := map[string][]entry{}
	for _, r := range reps {
		seen := map[string]bool{}
		for _, c := range r.Calibrations {
			if !seen[c.Class] && usableCalibration(c) { // a run's first entry of a class
				byClass[c.Class] = append(byClass[c.Class], entry{c, r})
			}
			seen[c.Class] = true
		}
	}
	for class, es := range byClass {
		slices.SortStableFunc(es, func(a, b entry) int { return cmp.Compare(a.c.ServiceMean, b.c.ServiceMean) })
		m := es[(len(es)-1)/2]
		entries[class], of[class] = m.c, m.rep
		if len(reps) == 1 {
			continue
		}
		var left []string
		for _, r := range reps {
			if !slices.ContainsFunc(es, func(e entry) bool { return e.rep == r }) {
				left = append(left, strconv.FormatInt(r.Seed, 10))
			}
		}
		if len(es) == 1 {
			from[class] = fmt.Sprintf(" of seed %d, the one run of %d with a usable entry", m.rep.Seed, len(reps))
		} else {
			from[class] = fmt.Sprintf(" of seed %d, the median of %d runs' (means %.2f–%.2f ms)", m.rep.Seed, len(es), es[0].c.ServiceMean, es[len(es)-1].c.ServiceMean)
		}
		if len(left) == 1 {
			from[class] += fmt.Sprintf("; seed %s left out: no usable entry", left[0])
		} else if len(left) > 1 {
			from[class] += fmt.Sprintf("; seeds %s left out: no usable entry", strings.Join(left, ", "))
		}
	}
	return entries, of, from
}

// unusableCalibration is the error for class sc.Classes[i], a calibrated
// class, when a calibration run (labels name them) has an entry for it that
// cannot set a rate: the first such run and its value are named. nil when
// the class is not calibrated or no run has such an entry.
func unusableCalibration(sc *scenario.Scenario, i int, reps []*reports.Report, labels []string) error {
	c := &sc.Classes[i]
	if !c.Calibrated() {
		return nil
	}
	for ri, r := range reps {
		for _, k := range r.Calibrations {
			if k.Class != c.Name || usableCalibration(k) {
				continue
			}
			label := fmt.Sprintf("calibration run %d", ri+1)
			if ri < len(labels) {
				label = labels[ri]
			}
			return &scenario.Error{File: sc.File, Problems: []scenario.Problem{sc.Problem(fmt.Sprintf("classes[%d].load_factor", i),
				"class %s sets its rate from its service time alone, and %s has no usable calibrations entry for it (service_mean_ms %g over %d queries; want 0.001–3600000 ms over at least one query)",
				c.Name, label, k.ServiceMean, k.Samples)}}
		}
	}
	return nil
}

// usableCalibration reports whether a calibrations entry can set a rate: a
// mean service time alone between 1 µs and 1 h, measured over at least one
// query (a report edited by hand may hold 0, a negative, 1e-300 or 1e308).
func usableCalibration(c reports.Calibration) bool {
	return c.ServiceMean >= 0.001 && c.ServiceMean <= 3.6e6 && c.Samples >= 1
}

// maxOverhead bounds a class's calibrated overhead: some of every call is
// work on its node.
const maxOverhead = 0.95

// withMax returns ps with the max as its 100th percentile.
func withMax(ps []reports.Percentile, maxMs float64) []reports.Percentile {
	out := slices.Clone(ps)
	if len(out) > 0 && out[len(out)-1].P < 100 {
		out = append(out, reports.Percentile{P: 100, Ms: max(maxMs, out[len(out)-1].Ms)})
	}
	return out
}

func fmtKs(ks []float64) string {
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprintf("%.2f", k))
	}
	return strings.Join(out, ", ")
}

func (c *Calibration) summary() []reports.SimulatedClass {
	var out []reports.SimulatedClass
	for name := range c.samplers {
		out = append(out, reports.SimulatedClass{Class: name, From: c.source[name], MeanMs: ms(c.mean[name]), P50Ms: ms(c.median[name])})
	}
	slices.SortFunc(out, func(a, b reports.SimulatedClass) int { return strings.Compare(a.Class, b.Class) })
	return out
}

// Rounded, not truncated: a report's mean of 66.899363 ms (a whole number of
// ns written in ms) times 1e6 is 66899362.99999999, and a nanosecond lost
// changed a calibrated rate in its last digit, so the run's own schedule no
// longer matched its schedule_hash ("edited since" for a file never edited).
func msDuration(v float64) time.Duration {
	return time.Duration(math.Round(v * float64(time.Millisecond)))
}

// quantileAt returns the value at percentile p of qs (sorted by P), linear
// between points.
func quantileAt(qs []reports.Percentile, p float64) float64 {
	if p <= qs[0].P {
		return qs[0].Ms
	}
	for i := 1; i < len(qs); i++ {
		if p <= qs[i].P {
			a, b := qs[i-1], qs[i]
			if b.P == a.P {
				return b.Ms
			}
			return a.Ms + (b.Ms-a.Ms)*(p-a.P)/(b.P-a.P)
		}
	}
	return qs[len(qs)-1].Ms
}

// quantileMean is the mean of the piecewise-linear quantile function.
func quantileMean(qs []reports.Percentile) time.Duration {
	var m float64
	for i := 1; i < len(qs); i++ {
		m += (qs[i].P - qs[i-1].P) / 100 * (qs[i].Ms + qs[i-1].Ms) / 2
	}
	return msDuration(m)
}

// quantileSampler draws by inverse transform from qs.
func quantileSampler(qs []reports.Percentile) sim.Sampler {
	return func(r *rand.Rand) time.Duration { return msDuration(quantileAt(qs, 100*r.Float64())) }
}

// logNormal returns a log-normal sampler with the given median and mean
// (ms); a mean not above the median gives a narrow one (σ 0.1).
func logNormal(median, mean float64) sim.Sampler {
	sigma := 0.1
	if mean > median && median > 0 {
		sigma = math.Sqrt(2 * math.Log(mean/median))
	}
	mu := math.Log(max(median, 1e-6))
	return func(r *rand.Rand) time.Duration { return msDuration(math.Exp(mu + sigma*r.NormFloat64())) }
}
