package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/external"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/harness/guard"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/internal/affinity"
	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
	"github.com/noisysim/noisysim/workload/pgscript"
)

// Phase names, as Progress reports them; the timeline's phases report
// their own names (scenario.PhaseSolo, scenario.PhaseRun, ...).
const (
	PhaseStart = "start"
	PhaseLoad  = "load"
	PhaseSolo  = scenario.PhaseSolo
	PhaseRun   = scenario.PhaseRun
)

// Progress is a snapshot of a running scenario, for a progress display.
type Progress struct {
	// Phase is PhaseStart, PhaseLoad or the name of the timeline phase
	// running.
	Phase string
	// Configuration is the configuration running; empty before the first.
	Configuration string
	// Elapsed and Total are the phase's time so far and its planned length
	// (drain excluded).
	Elapsed, Total time.Duration
	// Issued is the number of operations issued in the phase so far, and
	// Rate the rate over the last report interval in ops/s.
	Issued int64
	Rate   float64
}

// Options tunes Run. The zero value runs every configuration on the
// scenario's own backend, silently.
type Options struct {
	// Only runs just the named configuration and applies the assertions to
	// it (its expectation is ignored). Empty runs all.
	Only string
	// Cluster, when not nil, is used instead of starting the scenario's
	// backend; Run does not close it.
	Cluster backend.Cluster
	// OnCluster, when not nil, is called with the cluster Run started,
	// before anything else runs on it (e.g. to register it for teardown on
	// a second signal). Run still closes it.
	OnCluster func(backend.Cluster)
	// Progress, when not nil, is called about every ProgressEvery and at
	// each phase change, from one goroutine.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Logger receives the run's notes and debug records; nil is silent.
	Logger *slog.Logger
	// Now anchors the generated data's timestamps; zero means time.Now.
	Now time.Time
	// Keep leaves what the run created on the database (its schema and
	// roles) in place at the end, for a look; false removes it whatever
	// the run's outcome (see package footprint).
	Keep bool
	// MaxForeignCPU is the disturbance guard's threshold in CPUs (see
	// package guard); 0 means guard.DefaultMaxForeignCPU, negative turns
	// the guard off.
	MaxForeignCPU float64
	// Concurrent, when not empty, is put in the report: the run was
	// measured beside other measured runs.
	Concurrent string
	// Priority moves noisysim's process into a cpu group of its own with
	// cgroup.DefaultWeight times the default weight once its servers run
	// (cgroup.Priority says why), where the machine lets it; false keeps
	// the default weight. Off by default: its stalls go, but its wake-ups
	// preempt the servers (see the README).
	Priority bool
	// ServiceLogDir is where the scenario's service writes its output
	// (service-<configuration>-<instance>.log, service-migrate.log);
	// empty means a new directory under the system's temporary directory,
	// named in the report.
	ServiceLogDir string
	// OnTempDir, when not nil, is called with each temporary directory
	// the run makes for its service (its work directory; its log
	// directory without ServiceLogDir), to register it for removal on a
	// second signal. Run itself removes the work directory, and the log
	// directory when it returns no report to name it.
	OnTempDir func(dir string)
	// OnService, when not nil, is called with a func that kills a
	// started service instance's process group at once (to register it
	// for teardown on a second signal). Run still stops it.
	OnService func(kill func() error)
	// Trace, when not nil, receives the run's trace: a header line, then a
	// JSON line per operation the open loop was handed, of every
	// configuration (harness/TRACE.md). Run flushes it; the caller closes it.
	Trace io.Writer
	// Observer, when not nil, sees each request's outcome, each series
	// point and each phase as the run goes (live metrics).
	Observer Observer
	// Segment, when not whole, runs only that slice of the schedule, as one
	// of Segment.Count agents (workload.Segment): the scenario must pass
	// SegmentProblems; the data set goes in a schema of the agent's own
	// (data.schema + "_s<i>of<N>") and its roles carry the same tag. The
	// report's ScheduleHash stays the whole schedule's; Report.Segment
	// names the slice.
	Segment workload.Segment
	// StartAt, when not zero, is when the first configuration's timeline
	// starts (after the data set is loaded): agents of a segmented run
	// given the same StartAt send their slices together. A StartAt already
	// past when the data is loaded is an error (ErrRun) naming by how much.
	StartAt time.Time
	// OnWindows, when not nil, is called after each configuration's
	// timeline with what each of its phases measured (to write the
	// histograms out: agents of a segmented run).
	OnWindows func(config string, ws []WindowResult)
	// CalibrateOnly stops the run once the data set is loaded and the
	// calibrated classes (classes[].load_factor) are measured: the report
	// holds the calibrations alone, no configuration and no verdict
	// (Passed false). What the run created is removed as after any run.
	CalibrateOnly bool
}

// ErrRun marks a run that could not complete (as opposed to one whose
// assertions failed, which returns a report with Passed false).
var ErrRun = errors.New("run scenario")

// Run runs sc end to end and returns its report: it starts the backend (or
// uses Options.Cluster), loads the data set, runs the scenario's timeline
// (by default: the quiet tenants' solo baseline, then the full mix) under
// each configuration and evaluates the assertions over its windows. A report with Passed false means an assertion failed; an
// error means the run could not complete (backend, data load, database
// errors outside the workload, ctx cancelled), and nothing is left running
// either way.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) (*reports.Report, error) {
	pools := calibrationPools(sc)
	if err := checkRedisURLs(ctx, sc, opts.Only); err != nil {
		return nil, err
	}
	seg := opts.Segment
	if err := seg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	if !seg.Whole() {
		if err := SegmentProblems(sc); err != nil {
			return nil, err
		}
		cp := *sc
		cp.Data.Schema = segmentSchema(sc.Data.SchemaName(), seg)
		sc = &cp
	}
	if opts.Only != "" {
		one, err := sc.Only(opts.Only)
		if err != nil {
			return nil, err
		}
		sc = one
	}
	r := &runner{sc: sc, opts: opts, log: opts.Logger, started: time.Now(), calPools: pools, roleTag: segmentTag(seg)}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := r.plan(); err != nil {
		return nil, err
	}
	if sv := sc.Service; sv.Started() && sv.Port != 0 {
		// A taken port is bad input: say so before starting anything.
		if _, err := r.servicePorts(sv.Instances); err != nil {
			return nil, err
		}
	}
	if opts.Trace != nil {
		if sc.Load.Model == scenario.ModelClosed {
			return nil, fmt.Errorf("%w: a trace records an open loop's operations: load.model closed has none", scenario.ErrInvalid)
		}
		r.trace = newTraceWriter(r, opts.Trace)
	}
	stopProgress := r.startProgress()
	defer stopProgress()

	r.setPhase(PhaseStart, "", 0)
	cluster := opts.Cluster
	if cluster == nil {
		c, err := StartBackend(ctx, sc, r.log)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if opts.OnCluster != nil {
			opts.OnCluster(c)
		}
		cluster = c
	}
	r.cluster = cluster
	// Pinned once the servers run: they keep their own cores.
	gen := sc.Backend.Generator()
	if err := affinity.Check(gen); err != nil && sc.Backend.NodeCPUOptional {
		r.log.Warn("running without generator_cores", "reason", err)
		r.generatorSkipped = err.Error()
		gen = nil
	}
	unpin, err := affinity.Pin(gen)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRun, err)
	}
	defer unpin()
	defer r.prioritize()()
	remove, err := r.claim(ctx)
	if err != nil {
		return nil, err
	}
	defer remove()
	defer func() {
		if r.workDir != "" {
			os.RemoveAll(r.workDir)
		}
	}()
	r.watchMachine()
	var rep *reports.Report
	rep, err = r.run(ctx)
	if rep == nil && r.logTemp {
		// Nothing names it: the error shows the service's last lines.
		os.RemoveAll(r.logDir)
	}
	r.machineReport(rep)
	if r.trace != nil {
		if ferr := r.trace.flush(); ferr != nil && err == nil {
			err = fmt.Errorf("%w: %w", ErrRun, ferr)
		}
	}
	return rep, err
}

// StartBackend starts the cluster sc's backend section names.
func StartBackend(ctx context.Context, sc *scenario.Scenario, log *slog.Logger) (backend.Cluster, error) {
	var b backend.Backend
	switch sc.Backend.Kind {
	case scenario.BackendExternal:
		primary, replica, err := sc.Backend.ResolveDSNs()
		if err != nil {
			return nil, err
		}
		b = external.New(external.Config{Primary: primary, Replica: replica, Logger: log})
	case scenario.BackendDocker:
		b = dockerBackend(sc, log)
	default:
		b = local.New(local.WithLogger(log))
	}
	c, err := b.Start(ctx, sc.Backend.Spec())
	if err != nil {
		return nil, fmt.Errorf("start %s backend: %w", sc.Backend.Kind, err)
	}
	return c, nil
}

// runner is one run's state.
type runner struct {
	// priority is noisysim's own cpu group (cgroup.Priority.String),
	// prioritySkipped why it has none; both empty without Options.Priority.
	priority, prioritySkipped string
	// generatorSkipped says why backend.generator_cores was not applied
	// (node_cpu_optional and a core this machine lacks); empty otherwise.
	generatorSkipped string
	sc               *scenario.Scenario
	opts             Options
	log              *slog.Logger
	started          time.Time
	cluster          backend.Cluster
	// runID names the run in the marks on what it creates (footprint).
	runID string

	pop        workload.Population
	classes    map[string]*scenario.Class
	specs      []workload.ClassSpec
	phases     []scenario.Phase // the timeline's phases, as check_top sized them
	steps      []step           // the timeline's phases laid out
	quietPlan  *reports.QuietPlan
	calPools   map[string]calPool // calibrated class → the pool it is set against
	calibrated []reports.Calibration
	planned    []int64 // each phase's arrivals (open loop)
	hash       string
	params     dataset.Params
	// keys are the tenants' keys (tenant n at n-1); rowCounts their row
	// counts by data.rows name (data.setup only); bind the values of the
	// script builtins (scenario.Builtins) per tenant.
	keys       []string
	rowCounts  map[string]map[int]int64
	bind       [][]pgscript.Value
	builtins   []string // scenario.Builtins, the names of bind's values
	primary    backend.Node
	replica    backend.Node
	hasReplica bool
	notes      []string
	progressMu sync.Mutex
	progress   Progress
	issued     atomic.Int64
	phaseStart time.Time
	passwords  map[string]string
	guard      *guard.Guard // nil: off
	citus      *citusRun    // topology citus only
	// routing places tenants on nodes (topology shards), each of
	// shardNodes (in the run's schema); nil otherwise.
	routing    *Routing
	shardNodes []backend.Node
	// logDir is where the service's output goes, once chosen; workDir
	// the service's scratch directory ({work}), removed at the end.
	logDir, workDir string
	// logTemp: logDir is a temporary directory the run made.
	logTemp bool
	// replay is the trace a replay scenario replays (nil: the generated
	// schedule); trace writes the run's own trace (nil: none).
	replay *replayPlan
	trace  *traceWriter
	// roleTag is put in the role names of an agent's run (segmentTag);
	// "" for a whole run.
	roleTag string
}

// plan draws the population and the schedules: everything seeded. The
// quiet_p99 window and baseline are sized for check_top here; a calibrated
// class runs at provisionalRate until calibrate has measured it.
func (r *runner) plan() error {
	sc := r.sc
	pop, err := population(sc)
	if err != nil {
		return err
	}
	r.pop = pop
	r.classes = map[string]*scenario.Class{}
	for i := range sc.Classes {
		c := &sc.Classes[i]
		r.classes[c.Name] = c
	}
	r.phases = sc.Steps()
	if plansSamples(sc) {
		if r.quietPlan, r.phases, err = planSamples(pop, classSpecs(sc, nil), sc); err != nil {
			return err
		}
		for _, l := range r.quietPlan.Lengthened {
			r.note("check_top %s: phase %s lengthened from %s to %s so that the quiet tenants checked reach min_samples %d",
				r.quietPlan.CheckTop, l.Phase, fmtSeconds(l.From), fmtSeconds(l.To), r.quietPlan.MinSamples)
		}
	}
	if err := r.schedule(nil); err != nil {
		return err
	}

	shares := make([]float64, pop.Len())
	for i, t := range pop.Tenants {
		shares[i] = t.Share
	}
	r.params = dataset.Params{
		Orders:    dataset.Counts(shares, int64(sc.Data.Orders)),
		Customers: sc.Data.Customers,
	}
	r.keys = sc.Tenants.KeyList()
	if !sc.Data.Builtin() {
		r.rowCounts = map[string]map[int]int64{}
		for _, name := range sc.RowNames() {
			r.rowCounts[name] = dataset.Counts(shares, sc.Data.Rows[name])
		}
	}
	if err := r.bindTenants(); err != nil {
		return err
	}
	if sc.Replaying() {
		if err := r.planReplay(); err != nil {
			return err
		}
	}
	for i := range sc.Classes {
		c := &sc.Classes[i]
		if (c.Query != "" || c.Script != "" || c.SQL != "") && c.Program() == nil {
			// A scenario built in Go: parse its scripts now.
			if errs := sc.Validate(); len(errs) > 0 {
				return fmt.Errorf("%w: %w", scenario.ErrInvalid, errors.Join(errs...))
			}
			break
		}
	}
	return nil
}

// bindTenants sets the values of the script builtins (scenario.Builtins)
// of each tenant from its key and row counts.
func (r *runner) bindTenants() error {
	sc := r.sc
	r.builtins = sc.Builtins()
	r.bind = make([][]pgscript.Value, r.pop.Len())
	for i := range r.bind {
		n := i + 1
		key := pgscript.Text(r.key(n))
		if sc.Tenants.Keys.SQLType() == string(scenario.KeyBigint) {
			v, err := strconv.ParseInt(r.key(n), 10, 64)
			if err != nil {
				return fmt.Errorf("%w: tenants.keys: tenant %d's key %q is not a bigint", scenario.ErrInvalid, n, r.key(n))
			}
			key = pgscript.Int(v)
		}
		b := []pgscript.Value{key, pgscript.Int(int64(n)), pgscript.Int(1)}
		if sc.Data.Builtin() {
			b = append(b, pgscript.Int(r.params.Orders[n]))
		}
		for _, name := range sc.RowNames() {
			b = append(b, pgscript.Int(max(r.rowCounts[name][n], 1)))
		}
		r.bind[i] = b
	}
	return nil
}

// key returns tenant n's key, as tags, the ledger and reports show it.
func (r *runner) key(n int) string {
	if n >= 1 && n <= len(r.keys) {
		return r.keys[n-1]
	}
	return strconv.Itoa(n)
}

// schedule lays out the timeline at the classes' rates (a calibrated
// class's from rates) and hashes its arrivals.
func (r *runner) schedule(rates map[string]float64) error {
	r.specs = classSpecs(r.sc, rates)
	r.steps = buildTimeline(r.specs, r.phases)
	src, err := newTimelineSource(r.pop, r.steps, r.sc.Seed, workload.Segment{})
	if err != nil {
		return fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	r.hash = src.Hash()[:16]
	if !r.opts.Segment.Whole() {
		// The hash names the whole schedule, the same in every agent;
		// the planned arrivals are the agent's own.
		if src, err = newTimelineSource(r.pop, r.steps, r.sc.Seed, r.opts.Segment); err != nil {
			return fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
		}
	}
	r.planned = src.phaseLens()
	return nil
}

// fmtSeconds writes a length in seconds as a duration ("1m30s").
func fmtSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// note records a line for the report's notes, once.
func (r *runner) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if slices.Contains(r.notes, s) {
		return
	}
	r.notes = append(r.notes, s)
	r.log.Info(s)
}

func (r *runner) run(ctx context.Context) (*reports.Report, error) {
	var ok bool
	if r.sc.Citus() {
		// The stacks run against the coordinator, which routes each
		// tenant's queries to the worker holding its shard.
		if r.primary, ok = backend.First(r.cluster, backend.RoleCoordinator); !ok {
			return nil, fmt.Errorf("%w: the Citus cluster has no coordinator", ErrRun)
		}
	} else if r.primary, ok = backend.First(r.cluster, backend.RolePrimary); !ok {
		return nil, fmt.Errorf("%w: the cluster has no primary node", ErrRun)
	}
	r.replica, r.hasReplica = backend.First(r.cluster, backend.RoleReplica)
	// Every session of the run finds the data set in the run's schema
	// alone.
	r.primary = footprint.InSchema(r.primary, r.searchPath())
	r.replica = footprint.InSchema(r.replica, r.searchPath())

	r.setPhase(PhaseLoad, "", 0)
	if r.sharded() {
		err := r.loadShards(ctx, false)
		defer func() {
			if r.routing != nil {
				r.routing.close()
			}
		}()
		if err != nil {
			return nil, err
		}
	} else if err := r.load(ctx); err != nil {
		return nil, err
	}
	defer r.citus.close()
	if err := r.calibrate(ctx); err != nil {
		return nil, err
	}
	if r.opts.CalibrateOnly {
		return &reports.Report{Scenario: r.sc.Name, File: r.sc.File, FileAbs: absFile(r.sc.File), Seed: r.sc.Seed, StartedAt: r.started.UTC(),
			Calibrations: r.calibrated, Duration: time.Since(r.started).Seconds()}, nil
	}
	if r.sc.Service != nil {
		if err := r.migrate(ctx); err != nil {
			return nil, err
		}
	}
	version, _ := r.serverVersion(ctx)

	rep := &reports.Report{
		Scenario: r.sc.Name, File: r.sc.File, FileAbs: absFile(r.sc.File), Seed: r.sc.Seed, ScheduleHash: r.hash,
		StartedAt: r.started.UTC(), Dominant: r.key(scenario.DominantTenant),
		Backend:   fmt.Sprintf("%s %s (PostgreSQL %s)", r.sc.Backend.Kind, r.topology(), version),
		QuietPlan: r.quietPlan, Calibrations: r.calibrated, Replay: r.replayReport(),
		Segment: r.opts.Segment.String(),
	}
	if err := r.waitStart(ctx); err != nil {
		return nil, err
	}

	for i := range r.sc.Configurations {
		if i > 0 {
			if err := r.settle(ctx, r.sc.Configurations[i-1].Name); err != nil {
				return r.interrupted(ctx, rep, err)
			}
			if r.sharded() {
				// Each configuration starts from the hash placement.
				r.setPhase(PhaseLoad, r.sc.Configurations[i].Name, 0)
				if err := r.loadShards(ctx, true); err != nil {
					return r.interrupted(ctx, rep, err)
				}
			}
		}
		cr, err := r.runConfiguration(ctx, &r.sc.Configurations[i])
		if err != nil {
			if cr.report.Name != "" {
				rep.Configurations = append(rep.Configurations, cr.report)
			}
			return r.interrupted(ctx, rep, err)
		}
		rep.Configurations = append(rep.Configurations, cr.report)
		rep.Assertions = append(rep.Assertions, cr.assertions...)
	}
	r.judge(rep, r.sc, r.opts.Only)
	rep.Notes = r.notes
	rep.Duration = time.Since(r.started).Seconds()
	return rep, nil
}

// judge adds the configurations' expectations to rep's assertions and sets
// the marginal verdicts and rep.Passed: every assertion holds, except a
// control's own failures (expect: fail), whose expectation assertion carries
// the verdict — unless only one configuration ran (--only).
func (r *runner) judge(rep *reports.Report, sc *scenario.Scenario, only string) {
	rep.Assertions = append(rep.Assertions, r.expectations(rep)...)
	rep.Marginal = marginal(rep.Assertions)
	rep.Passed = true
	for _, a := range rep.Assertions {
		c, ok := sc.Configuration(a.Configuration)
		if failsVerdict(a, ok && c.Expect == scenario.ExpectFail, only) {
			rep.Passed = false
		}
	}
}

// failsVerdict reports whether a, an assertion of a configuration that is
// a control (expect: fail) or not, fails the run's verdict: it failed, and
// it is not one of a control's own failures (which its control_fails
// expects), unless only one configuration ran (only, as Options.Only).
func failsVerdict(a reports.Assertion, control bool, only string) bool {
	return !a.Passed && !(control && only == "" && a.Name != AssertControlFails)
}

// interrupted returns, for a run whose ctx ended (the first Ctrl-C), rep
// with what was measured until then, marked incomplete, beside err; for any
// other error, err alone.
func (r *runner) interrupted(ctx context.Context, rep *reports.Report, err error) (*reports.Report, error) {
	if ctx.Err() == nil {
		return nil, err
	}
	r.progressMu.Lock()
	p := r.progress
	r.progressMu.Unlock()
	rep.Incomplete = "interrupted during " + p.Phase
	if p.Configuration != "" {
		rep.Incomplete += " of " + p.Configuration
	}
	rep.Passed = false
	rep.Notes = r.notes
	rep.Duration = time.Since(r.started).Seconds()
	return rep, err
}

func (r *runner) topology() backend.Topology {
	if r.sc.Citus() {
		return scenario.TopologyCitus
	}
	if r.sharded() {
		return backend.Topology(fmt.Sprintf("%s (%d nodes)", scenario.TopologyShards, len(r.shardNodes)))
	}
	if r.hasReplica {
		return backend.TopologyReplica
	}
	return backend.TopologySingle
}

func (r *runner) serverVersion(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, r.primary.DSN())
	if err != nil {
		return "?", err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return v, err
}

// load creates the data set and the roles, then waits until a replica has
// replayed it.
func (r *runner) load(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, r.primary.DSN())
	if err != nil {
		return fmt.Errorf("%w: connect to primary %s: %w", ErrRun, r.primary.RedactedDSN(), err)
	}
	defer conn.Close(context.Background())
	now := r.opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	t0 := time.Now()
	schema := r.sc.Data.SchemaName()
	var access tableAccess
	if r.sc.Data.Builtin() {
		if err := dataset.Load(ctx, conn, dataset.Spec{
			Schema: schema, Orders: r.params.Orders, Days: r.sc.Data.Days, Customers: r.sc.Data.Customers,
		}, now); err != nil {
			return fmt.Errorf("%w: load data set: %w", ErrRun, err)
		}
		r.log.Info("data set loaded", "orders", r.sc.Data.Orders, "tenants", r.pop.Len(), "took", time.Since(t0).Round(time.Millisecond))
		for _, t := range dataset.Tables {
			access.read = append(access.read, schema+"."+t)
		}
	} else if r.sc.Data.IsExisting() {
		if err := r.loadExisting(ctx, conn); err != nil {
			return err
		}
		access.schemas = r.sc.Data.Existing.Schemas
		access.read = []string{schema + "." + dataset.TenantsTable}
		for _, sch := range r.sc.Data.Existing.Schemas {
			tables, _, err := dataset.SchemaObjects(ctx, conn, sch)
			if err != nil {
				return fmt.Errorf("%w: list the tables of schema %s: %w", ErrRun, sch, err)
			}
			access.read = append(access.read, tables...)
		}
		r.log.Info("existing tables", "schemas", r.sc.Data.Existing.Schemas, "tables", len(access.read)-1, "tenants", r.pop.Len())
	} else {
		if err := r.loadSetup(ctx, conn); err != nil {
			return err
		}
		tables, seqs, err := dataset.SchemaObjects(ctx, conn, schema)
		if err != nil {
			return fmt.Errorf("%w: list the data set's tables: %w", ErrRun, err)
		}
		access.write, access.sequences = tables, seqs
		r.log.Info("setup SQL run", "files", len(r.sc.Data.Setup), "tables", len(tables), "tenants", r.pop.Len(), "took", time.Since(t0).Round(time.Millisecond))
	}
	if r.sc.Citus() {
		// Distributed on the tenant column, before the roles are made:
		// Citus propagates their grants on the distributed tables to the
		// shards.
		t0 = time.Now()
		if err := r.distribute(ctx, conn); err != nil {
			return err
		}
		r.log.Info("data set distributed", "shards", r.sc.Data.Citus.Shards, "took", time.Since(t0).Round(time.Millisecond))
	}

	var roles []pools.RoleConfig
	for i := range r.sc.Configurations {
		roles = append(roles, r.rolesOf(&r.sc.Configurations[i], access)...)
	}
	where := fmt.Sprintf("database %q on %s", r.primary.Database, r.primary.Name)
	if r.passwords, err = footprint.EnsureRoles(ctx, conn, where, r.primary.Database, r.runID, roles...); err != nil {
		return fmt.Errorf("%w: create roles: %w", ErrRun, err)
	}
	if r.sc.Citus() {
		// Citus propagates the roles, their settings and grants to the
		// workers; the coordinator reaches the workers as each role with
		// its password.
		if err := footprint.CitusAuthinfo(ctx, conn, where, r.runID, r.passwords); err != nil {
			return fmt.Errorf("%w: %w (the coordinator needs the roles' passwords to reach the workers as them)", ErrRun, err)
		}
		cd := r.sc.Data.Citus
		what := "tenants and orders distributed on tenant_id"
		if !r.sc.Data.Builtin() {
			what = fmt.Sprintf("%s distributed on %s", strings.Join(cd.Tables, ", "), cd.Column)
			if len(cd.Reference) > 0 {
				what += fmt.Sprintf(" (reference: %s)", strings.Join(cd.Reference, ", "))
			}
		}
		r.note("citus: %s in %d co-located shards; the configurations log in as their own roles, whose settings apply on the coordinator and the workers", what, cd.Shards)
		return r.openCitus(ctx)
	}
	if r.hasReplica {
		if err := waitReplay(ctx, conn, r.replica, 30*time.Second); err != nil {
			return fmt.Errorf("%w: %w", ErrRun, err)
		}
	}
	return nil
}

// waitReplay waits until replica has replayed the primary's current WAL
// position.
func waitReplay(ctx context.Context, primary *pgx.Conn, replica backend.Node, limit time.Duration) error {
	var lsn string
	if err := primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return fmt.Errorf("read primary WAL position: %w", err)
	}
	rc, err := pgx.Connect(ctx, replica.DSN())
	if err != nil {
		return fmt.Errorf("connect to replica %s: %w", replica.RedactedDSN(), err)
	}
	defer rc.Close(context.Background())
	deadline := time.Now().Add(limit)
	for {
		var done bool
		if err := rc.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done); err != nil {
			return fmt.Errorf("read replica replay position: %w", err)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s has not replayed WAL %s after %s", replica.Name, lsn, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rolesOf returns the roles configuration c logs in as, with access:
// and writing orders when the scenario has a checked writer.
func (r *runner) rolesOf(c *scenario.Configuration, access tableAccess) []pools.RoleConfig {
	if r.sc.Writer != nil {
		orders := r.sc.Data.SchemaName() + ".orders"
		if !slices.Contains(access.write, orders) {
			access.write = append(slices.Clone(access.write), orders)
		}
	}
	return rolesOf(c, r.sc.Data.SchemaName(), r.roleTag, access)
}

// tableAccess is what the workload roles may touch in the run's schema:
// the built-in data set is read only; a data set of the user's own
// (data.setup) is read and written by the user's scripts.
type tableAccess struct {
	read, write, sequences []string
	// schemas are schemas beside the run's the roles get USAGE on.
	schemas []string
}

// loadSetup loads a data set of the user's own: noisysim's tenants table,
// then the setup files. A statement the server refuses is bad input (exit
// 2), named by its file:line:col with the server's message.
func (r *runner) loadSetup(ctx context.Context, conn *pgx.Conn) error {
	spec := dataset.SetupSpec{
		Schema: r.sc.Data.SchemaName(), KeyType: r.sc.Tenants.Keys.SQLType(), Keys: r.keys,
		RowNames: r.sc.RowNames(), Rows: r.rowCounts,
	}
	for _, t := range r.pop.Tenants {
		spec.Shares = append(spec.Shares, t.Share)
	}
	for _, f := range r.sc.Data.Setup {
		spec.Files = append(spec.Files, r.sc.Path(f))
	}
	err := dataset.LoadSetup(ctx, conn, spec)
	var se *dataset.SetupError
	var pe *pgscript.Error
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%w: data.setup: %w", ErrRun, err)
	case errors.As(err, &se), errors.As(err, &pe):
		return fmt.Errorf("%w: data.setup: %w", scenario.ErrInvalid, err)
	}
	return fmt.Errorf("%w: data.setup: %w", ErrRun, err)
}

// rolesOf returns the least-privilege roles configuration c logs in as,
// with access to the data set's tables.
func rolesOf(c *scenario.Configuration, schema, tag string, access tableAccess) []pools.RoleConfig {
	mk := func(pool string, r scenario.Role) pools.RoleConfig {
		return pools.RoleConfig{
			Name:                            roleName(tag, c.Name, pool),
			StatementTimeout:                r.StatementTimeout.Duration(),
			IdleInTransactionSessionTimeout: r.IdleInTransactionSessionTimeout.Duration(),
			WorkMem:                         string(r.WorkMem),
			ConnectionLimit:                 r.ConnectionLimit,
			Schemas:                         append([]string{schema}, access.schemas...),
			ReadTables:                      access.read,
			WriteTables:                     access.write,
			Sequences:                       access.sequences,
		}
	}
	if c.Mode == scenario.ModeShared {
		return []pools.RoleConfig{mk("shared", c.Shared.Role)}
	}
	return []pools.RoleConfig{
		mk(string(pools.Interactive), c.Interactive.Role),
		mk(string(pools.Heavy), c.Heavy.Role),
	}
}

// stack is one configuration's isolation stack and its limiters: with
// app.instances N, N stacks (the embedded one is the first) taking calls
// round-robin.
type stack struct {
	*pools.Stack
	limiters map[pools.Class]limiterStats
	// http runs the HTTP classes; nil without one.
	http *httpTarget
	// app holds the instances beyond the first and their shared state; nil
	// without app.
	app *appStack
	// spread books every instance's calls' DB time over the seconds they
	// ran, for the series (respread).
	spread *dbSpread
}

// poolKeys names the pools of Stat().Pools, in its order.
func (s *stack) poolKeys() []poolKey {
	insts := []*pools.Stack{s.Stack}
	if s.app != nil {
		insts = s.app.instances
	}
	var out []poolKey
	for i, in := range insts {
		for _, ps := range in.Stat().Pools {
			out = append(out, poolKey{i, ps.Name, ps.Node})
		}
	}
	return out
}

// limiterStats is what the run reads of a class's limiter (or limiters).
type limiterStats interface{ Stat() limiter.Stat }

// newStack builds configuration c's isolation stack on the cluster: one,
// or with app one per instance.
func (r *runner) newStack(ctx context.Context, c *scenario.Configuration) (*stack, error) {
	st := &stack{limiters: map[pools.Class]limiterStats{}, spread: newDBSpread(seriesEvery)}
	if c.App == nil {
		s, err := r.newInstance(ctx, c, nil, 0, st.spread, func(class pools.Class, l limiterStats) { st.limiters[class] = l })
		if err != nil {
			return nil, err
		}
		st.Stack = s
		return st, nil
	}
	app, err := r.newAppStack(ctx, c, st.spread)
	if err != nil {
		return nil, err
	}
	st.app = app
	st.Stack = app.instances[0]
	for class, ls := range app.limiters {
		st.limiters[class] = ls
	}
	return st, nil
}

// newInstance builds one isolation stack of configuration c: its pools and
// its limiters, made by app (nil: the configured local limiter) for
// instance inst, its calls' DB time booked into spread too; each class's
// limiter is handed to keep.
func (r *runner) newInstance(ctx context.Context, c *scenario.Configuration, app *appStack, inst int, spread *dbSpread,
	keep func(pools.Class, limiterStats)) (*pools.Stack, error) {
	dsn := func(node backend.Node, pool string) string {
		role := roleName(r.roleTag, c.Name, pool)
		if r.sc.Data.IsExisting() {
			node = readOnly(node)
		}
		return node.DSNFor(role, r.passwords[role])
	}
	cfg := pools.Config{Classes: map[pools.Class]pools.ClassConfig{}, Logger: r.log, OnWork: spread.hook(inst)}
	if app != nil {
		cfg.SharedLedger = app.ledger
	}
	// addPool adds pool name on node, or with topology shards on every
	// node, the router choosing each call's.
	addPool := func(name string, node backend.Node, role string, size int, timeout time.Duration) {
		if r.routing == nil {
			cfg.Pools = append(cfg.Pools, pools.PoolConfig{Name: name, DSN: dsn(node, role), Size: int32(size), AcquireTimeout: timeout})
			return
		}
		cfg.Router = r.routing.Router
		for _, n := range r.shardNodes {
			cfg.Pools = append(cfg.Pools, pools.PoolConfig{Name: name, Node: n.Name, DSN: dsn(n, role), Size: int32(size), AcquireTimeout: timeout})
		}
	}
	var closers []func()
	if c.Mode == scenario.ModeShared {
		addPool("shared", r.primary, "shared", c.Shared.PoolSize, c.Shared.AcquireTimeout.Duration())
		cfg.Classes[pools.Interactive] = pools.ClassConfig{Pool: "shared"}
		cfg.Classes[pools.Heavy] = pools.ClassConfig{Pool: "shared"}
	} else {
		for _, class := range []pools.Class{pools.Interactive, pools.Heavy} {
			p := c.Pool(scenario.IsolationClass(class))
			node := r.primary
			if p.Target == scenario.TargetReplica {
				if r.hasReplica {
					node = r.replica
				} else if inst == 0 {
					r.note("%s: the %s class targets the replica, but the topology has none: it runs on the primary", c.Name, class)
				}
			}
			addPool(string(class), node, string(class), p.PoolSize, p.AcquireTimeout.Duration())
			cc := pools.ClassConfig{Pool: string(class)}
			if p.Limiter.Enabled {
				var l isolation.Limiter
				var ls limiterStats
				if app != nil {
					var err error
					if l, ls, err = app.limiter(c, class, p); err != nil {
						for _, f := range closers {
							f()
						}
						return nil, err
					}
					if cl, ok := ls.(interface{ Close() }); ok {
						closers = append(closers, cl.Close)
					}
				} else {
					ll, err := limiter.New(limiter.Config{
						MaxPerTenant: p.Limiter.MaxPerTenant, MaxQueue: p.Limiter.MaxQueue,
						MaxWait: p.Limiter.MaxWait.Duration(), MaxGlobal: p.Limiter.MaxGlobal,
					})
					if err != nil {
						return nil, fmt.Errorf("%w: configuration %s: %s limiter: %w", scenario.ErrInvalid, c.Name, class, err)
					}
					l, ls = ll, ll
				}
				keep(class, ls)
				cc.Limiter = l
			}
			cfg.Classes[class] = cc
		}
	}
	s, err := pools.New(ctx, cfg)
	if err != nil {
		for _, f := range closers {
			f()
		}
		return nil, fmt.Errorf("%w: configuration %s: open pools: %w", ErrRun, c.Name, err)
	}
	// Every pool opened to its size before the timeline, as a service in
	// steady state holds its pools: a window does not pay for connections
	// opened under the noisy tenant's sudden load (series[].pools[].opened
	// shows any later growth). A limit that stops it is logged, not fatal;
	// an interruption is not a limit and says nothing here.
	if opened, err := s.Warm(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("pools not opened to their size before the timeline", "configuration", c.Name, "instance", inst, "opened", opened, "err", err)
	}
	return s, nil
}

// limiterStat sums the limiters' per-tenant counters.
func (s *stack) limiterStat() map[string]limiter.TenantStat {
	out := map[string]limiter.TenantStat{}
	for _, l := range s.limiters {
		for t, ts := range l.Stat().Tenants {
			o := out[t]
			o.Add(ts)
			out[t] = o
		}
	}
	return out
}

// executor turns a schedule's ops into calls on the stack, counting the
// limiter rejections each tenant's clients saw.
type executor struct {
	r     *runner
	stack *stack
	seen  sync.Map // tenant string → *[2]atomic.Int64 (queue_full, wait_exceeded)
	calls atomic.Int64
	// txs are a replayed log's open transaction blocks, each on a
	// connection of its own until its end (txCtx, cancelled by endTxs).
	txMu     sync.Mutex
	txs      []*txHolder
	txCtx    context.Context
	txCancel context.CancelFunc
}

func (e *executor) do(ctx context.Context, op workload.Op) error {
	e.r.issued.Add(1)
	e.calls.Add(1)
	c := e.r.classes[op.Class]
	tenant := e.r.key(op.Tenant)
	class := pools.Class(c.IsolationClass)
	var err error
	rec, replayed := op.Payload.(*recorded)
	switch prog := c.Program(); {
	case c.HTTP != nil:
		err = e.stack.http.do(ctx, c, op)
	case replayed && rec.turn != nil:
		err = e.runLogged(ctx, class, tenant, rec)
	case replayed:
		_, err = e.stack.Query(ctx, class, tenant, rec.SQL, rec.Args...)
	case prog != nil:
		err = e.script(ctx, prog, class, tenant, op)
	default:
		err = fmt.Errorf("%w: class %s has no script (validate the scenario first)", ErrRun, c.Name)
	}
	var le *limiter.LimitError
	if errors.As(err, &le) {
		v, _ := e.seen.LoadOrStore(tenant, new([2]atomic.Int64))
		counts := v.(*[2]atomic.Int64)
		if le.Reason == limiter.ReasonWaitExceeded {
			counts[1].Add(1)
		} else {
			counts[0].Add(1)
		}
	}
	return err
}

func (e *executor) seenBy(tenant string) (queueFull, waitExceeded int64) {
	v, ok := e.seen.Load(tenant)
	if !ok {
		return 0, 0
	}
	c := v.(*[2]atomic.Int64)
	return c[0].Load(), c[1].Load()
}

// errorClass names an op's error for the report and allowed_errors.
func errorClass(err error) string {
	if c, ok := httpErrorClass(err); ok {
		return c
	}
	switch c := pools.Classify(err); c {
	case pools.ErrorLimitedQueueFull:
		return string(scenario.ErrorQueueFull)
	case pools.ErrorLimitedWaitExceeded:
		return string(scenario.ErrorWaitExceeded)
	case "":
		return string(scenario.ErrorOther)
	default:
		return string(c)
	}
}

// configResult is what one configuration's run contributes to the report.
type configResult struct {
	report     reports.Configuration
	assertions []reports.Assertion
}

// runConfiguration runs the timeline under configuration c and evaluates
// the assertions over its windows.
func (r *runner) runConfiguration(ctx context.Context, c *scenario.Configuration) (configResult, error) {
	st, err := r.newStack(ctx, c)
	if err != nil {
		return configResult{}, err
	}
	defer st.Close()
	if r.citus != nil {
		if err := r.warmCitus(ctx, c, st); err != nil {
			return configResult{}, err
		}
	}
	if r.routing != nil {
		r.note("%s: every class's calls routed by the tenant catalog to the node holding the tenant (%d nodes, %d spare)",
			c.Name, len(r.shardNodes), r.sc.Backend.SpareNodes)
	} else {
		for _, class := range []pools.Class{pools.Interactive, pools.Heavy} {
			if p, ok := st.Placement(class); ok {
				r.note("%s: %s", c.Name, p)
			}
		}
	}
	var svc *serviceRun
	if r.sc.HasHTTP() {
		if r.sc.Service != nil {
			if svc, err = r.startService(ctx, c); err != nil {
				return configResult{}, err
			}
			defer svc.stop()
		}
		st.http = newHTTPTarget(r.sc, svc.basesOrNil(), r.httpVar)
		defer st.http.close()
	}
	var act *activitySampler
	if r.sc.Service.Started() || r.sc.Assertions.TaggedOnly || c.App != nil {
		phase := func() string {
			r.progressMu.Lock()
			defer r.progressMu.Unlock()
			return r.progress.Phase
		}
		rule := shareAlertRule{threshold: scenario.DefaultShareAlertThreshold, window: int(scenario.DefaultShareAlertWindow.Duration() / time.Second)}
		if sv := r.sc.Service; sv != nil {
			rule = shareAlertRule{threshold: sv.ShareAlert.Threshold, window: int(sv.ShareAlert.Window.Duration() / time.Second)}
		}
		if act, err = startActivity(ctx, r.primary.DSN(), r.rolesOfConfig(c), phase, rule); err != nil {
			return configResult{}, err
		}
		defer act.stop()
	}
	t0 := time.Now()
	faults, err := r.startFaults(ctx, c)
	if err != nil {
		return configResult{}, err
	}
	var w *checkedWriter
	if r.sc.Writer != nil {
		if w, err = r.newWriter(ctx, c); err != nil {
			return configResult{}, err
		}
		defer w.finish()
	}
	tr, err := r.runTimeline(ctx, c, st, faults, w)
	if w != nil {
		w.finish()
	}
	faultReports := faults.finish()
	// The service's part: what the database showed of it, then the
	// service stopped before the clean-after checks.
	var extra configExtra
	if act != nil {
		act.stop()
		extra.activity = act.report()
	}
	if st.http != nil {
		extra.http = st.http.stats()
	}
	if svc != nil {
		if early := svc.exitedEarly(); early != nil {
			r.note("%s: %v", c.Name, early)
		}
		svc.stop()
		extra.service = svc.report()
	}
	if err != nil && ctx.Err() != nil && tr != nil {
		// Interrupted: the windows as measured until then, no assertions.
		res := configResult{report: r.configurationReport(c, tr, time.Since(t0))}
		res.report.Faults = faultReports
		res.report.Incomplete = true
		extra.set(&res.report)
		return res, err
	}
	if err != nil {
		return configResult{}, err
	}
	clean, err := r.cleanAfter(ctx, st)
	if err != nil {
		return configResult{}, err
	}
	res := configResult{report: r.configurationReport(c, tr, time.Since(t0))}
	res.report.Faults = faultReports
	extra.set(&res.report)
	if r.opts.OnWindows != nil {
		r.opts.OnWindows(c.Name, windowResults(tr))
	}
	res.assertions = r.assertions(c, tr, clean)
	if r.sc.Assertions.TaggedOnly && extra.activity != nil {
		res.assertions = append(res.assertions, taggedOnly(c.Name, extra.activity))
	}
	res.assertions = append(res.assertions, r.appAssertions(c, st, extra.activity)...)
	if w != nil {
		v, err := r.checkWriter(ctx, w)
		if err != nil {
			return configResult{}, err
		}
		res.report.Writer = w.report(v, tr)
		var judged *reports.WriterCheck
		if f := r.sc.Assertions.WritePause.From; f != "" {
			if win, ok := tr.window(f); ok {
				judged = w.from(res.report.Writer, win.start, tr)
			}
		}
		res.assertions = append(res.assertions, r.writerAssertions(c.Name, res.report.Writer, judged)...)
	}
	pairs := 0
	if r.quietPlan != nil {
		pairs = r.quietPlan.Pairs
	}
	res.report.QuietChecks = quietChecks(res.assertions, pairs)
	res.report.Passed, _ = verdict(res.assertions)
	return res, nil
}
