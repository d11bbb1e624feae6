package scenario

import (
	"slices"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/internal/affinity"
	"github.com/noisysim/noisysim/workload/pgscript"
)

// Defaults applied by Parse to keys a file leaves out (or sets to null).
const (
	DefaultSeed                 int64    = 1
	DefaultBackendKind                   = BackendLocal
	DefaultTopology                      = backend.TopologySingle
	DefaultTenantCount                   = 50
	DefaultDominantShare                 = 0.6
	DefaultDistribution                  = DistributionZipf
	DefaultExponent                      = 1.1
	DefaultOrders                        = 200_000
	DefaultDays                          = 365
	DefaultCustomers                     = 1000
	DefaultArrival                       = ArrivalPoisson
	DefaultSenders                       = SendersAll
	DefaultBatch                         = 1000
	DefaultLoadModel                     = ModelOpen
	DefaultUsers                         = 100
	DefaultThinkTime            Duration = Duration(time.Second)
	DefaultRetryQueries                  = 1
	DefaultMaxRetries                    = 3
	DefaultWarmup               Duration = Duration(2 * time.Second)
	DefaultSolo                 Duration = Duration(10 * time.Second)
	DefaultRun                  Duration = Duration(20 * time.Second)
	DefaultDrain                Duration = Duration(3 * time.Second)
	DefaultExpect                        = ExpectPass
	DefaultSharedPoolSize                = 40
	DefaultSharedAcquireTimeout Duration = Duration(30 * time.Second)
	DefaultQuietP99Factor                = 1.5
	DefaultQuietP99Slack        Duration = Duration(5 * time.Millisecond)
	DefaultQuietP99MinSamples            = 100
	DefaultCalibrate            Duration = Duration(2 * time.Second)
	DefaultNoisyRejections               = true
	DefaultCleanAfter                    = true
)

// DominantTenant is the id of the dominant (noisy) tenant. Tenant ids run from
// 1 to Tenants.Count.
const DominantTenant = 1

// Scenario is one scenario file: the cluster to run against, the tenant
// population and its data, the classes of traffic, the phases, the
// configurations to compare and the assertions that decide pass or fail.
//
// Parse and Load fill in defaults for left-out keys and validate; a Scenario
// built in Go gets no defaults and should be checked with Validate.
type Scenario struct {
	// Name identifies the scenario in reports. Required; letters, digits,
	// '.', '_' and '-', starting with a letter or digit.
	Name string `yaml:"name"`
	// Description is free text shown in reports. Optional.
	Description string `yaml:"description"`
	// Seed seeds every random choice (tenant shares, arrival schedule, data);
	// same seed, same run. Printed in every report. Default 1.
	Seed int64 `yaml:"seed"`
	// Backend is the PostgreSQL cluster to run against.
	Backend Backend `yaml:"backend"`
	// Tenants is the tenant population and how traffic is shared among it.
	Tenants Tenants `yaml:"tenants"`
	// Data sizes the generated data set.
	Data Data `yaml:"data"`
	// Classes are the kinds of traffic, in file order. At least one; names
	// unique.
	Classes []Class `yaml:"classes"`
	// Load is how requests arrive: open loop (default) or closed loop.
	Load LoadSpec `yaml:"load"`
	// Phases are the lengths of the default timeline's phases, and the
	// drain after each timeline.
	Phases Phases `yaml:"phases"`
	// Timeline is the ordered list of phases every configuration runs.
	// Empty means DefaultTimeline(Phases): see Steps.
	Timeline []Phase `yaml:"timeline"`
	// Configurations are the isolation set-ups to compare, run in file order.
	// At least one; names unique.
	Configurations []Configuration `yaml:"configurations"`
	// Assertions decide whether a configuration passes.
	Assertions Assertions `yaml:"assertions"`
	// Writer, when present, writes one tenant's rows at a fixed rate over
	// each configuration's whole timeline and checks, after it, that no
	// acknowledged write was lost (assertions zero_loss and write_pause).
	Writer *Writer `yaml:"writer"`
	// Promotion is the removed promotion section, kept only so that a
	// file that still has one is told what replaced it.
	Promotion any `yaml:"promotion"`
	// Faults are node faults injected during each configuration's run
	// phase; backend kind docker only. Empty means none.
	Faults []Fault `yaml:"faults"`
	// Service is the service under test the HTTP classes send to: started
	// by noisysim for each configuration against the run's database, or
	// already running (url). Optional.
	Service *Service `yaml:"service"`
	// Replay, when present, replays a recorded trace through the timeline
	// instead of the generated schedule (see Replay).
	Replay *Replay `yaml:"replay"`

	// File is the path the scenario was loaded from; empty when built in Go.
	File string `yaml:"-"`

	ix      *index // where each field is in File; nil when built in Go
	derived bool   // the file gives no timeline: Steps derives it from Phases
}

// BackendKind says where the cluster comes from.
type BackendKind string

// Backend kinds.
const (
	// BackendLocal starts throwaway PostgreSQL processes on this machine.
	BackendLocal BackendKind = "local"
	// BackendExternal uses an existing cluster given by DSN.
	BackendExternal BackendKind = "external"
	// BackendDocker starts throwaway PostgreSQL containers (a Docker daemon
	// is needed).
	BackendDocker BackendKind = "docker"
)

// Backend is the cluster a scenario runs against.
type Backend struct {
	// Kind is local (default), docker (the container backend) or external
	// (an existing cluster by DSN).
	Kind BackendKind `yaml:"kind"`
	// Topology is single (one primary, the default) or replica (a primary and
	// one streaming hot standby). For kind external it defaults to what the
	// DSNs imply: replica when ReplicaDSN is set, single otherwise.
	Topology backend.Topology `yaml:"topology"`
	// PrimaryDSN is the primary's libpq URL or key=value string; kind
	// external only, required there. "${NAME}" parts are read from the
	// environment by ResolveDSNs. The role must be able to create roles and
	// tables.
	PrimaryDSN string `yaml:"primary_dsn"`
	// ReplicaDSN is a hot standby of the primary; kind external only,
	// optional. "${NAME}" parts as for PrimaryDSN.
	ReplicaDSN string `yaml:"replica_dsn"`
	// Settings are server settings (postgresql.conf parameters) for every
	// node, e.g. {"max_connections": "200"}; kinds local and docker. Values
	// are written as PostgreSQL reads them. Empty means the backend's
	// defaults.
	Settings map[string]string `yaml:"settings"`
	// Image is the container image of every node; kind docker only. Empty
	// means the container backend's default (the official postgres image
	// at a pinned tag).
	Image string `yaml:"image"`
	// Images overrides Image per node role (primary, replica, coordinator,
	// worker, shard); kind docker only.
	Images map[backend.Role]string `yaml:"images"`
	// Shards is the node count of topology shards (kind local), 2..16.
	// Default 4.
	Shards int `yaml:"shards"`
	// SpareNodes is, for topology shards, the number of last nodes kept
	// out of the hash ring: they hold no tenant at the start (targets for
	// move_tenant). 0..Shards-1. Default 0.
	SpareNodes int `yaml:"spare_nodes"`
	// Workers is the worker count of topology citus: kind local 2..64,
	// kind docker 2..32; kind external takes the coordinator's workers.
	// Default 4.
	Workers int `yaml:"workers"`
	// NodeCPU gives every node its own CPU budget, in CPUs (0.4 = 40% of
	// one core), so that one machine behaves like several: a cgroup per
	// node for kind local, Docker's CPU quota for kind docker. 0 (the
	// default) means none; otherwise 0.01..1024.
	NodeCPU float64 `yaml:"node_cpu"`
	// NodeCPURoles overrides NodeCPU for the nodes of a role (primary,
	// replica, coordinator, worker, shard); 0 means no budget for it.
	NodeCPURoles map[backend.Role]float64 `yaml:"node_cpu_roles"`
	// NodeCores pins the nodes of a role to CPU cores of their own, as a
	// CPU list ("1", "0,2-3"): every process of the node runs on those
	// cores only, so that one node's busy backends do not delay another
	// node's wake-ups on a shared core (a node_cpu budget caps a node's CPU
	// time, not where it runs). Kind local: CPU affinity, inherited by
	// every backend; kind docker: the container's cpuset.
	NodeCores map[backend.Role]string `yaml:"node_cores"`
	// GeneratorCores pins noisysim itself (the load generator and the
	// isolation stacks) to these cores while the scenario runs, so that it
	// keeps off a node's cores as a client on another machine would.
	GeneratorCores string `yaml:"generator_cores"`
	// NodeCPUOptional runs without budgets where the machine cannot
	// enforce them (not root, no writable cgroup cpu controller), and the
	// report says so; false (the default) exits 2 there.
	NodeCPUOptional bool `yaml:"node_cpu_optional"`
}

// CPU returns the nodes' CPU budgets as the backends take them.
func (b Backend) CPU() backend.CPUBudget {
	roles := b.NodeCPURoles
	if len(roles) > 0 {
		roles = map[backend.Role]float64{}
		for r, v := range b.NodeCPURoles {
			if r == backend.RoleShard {
				// Topology shards' nodes are primaries of the local backend.
				r = backend.RolePrimary
			}
			roles[r] = v
		}
	}
	var cores map[backend.Role][]int
	for r, list := range b.NodeCores {
		if r == backend.RoleShard {
			r = backend.RolePrimary
		}
		if c, err := affinity.Parse(list); err == nil {
			if cores == nil {
				cores = map[backend.Role][]int{}
			}
			cores[r] = c
		}
	}
	return backend.CPUBudget{Node: b.NodeCPU, Roles: roles, Cores: cores, Optional: b.NodeCPUOptional}
}

// Generator returns the cores noisysim pins itself to while the scenario
// runs (GeneratorCores), nil for any.
func (b Backend) Generator() []int {
	c, _ := affinity.Parse(b.GeneratorCores)
	return c
}

// Spec returns the backend.Spec for a local backend: the topology and the
// settings.
func (b Backend) Spec() backend.Spec {
	if b.Topology == TopologyShards {
		return backend.Spec{Topology: backend.TopologyPrimaries, Nodes: b.Shards, Settings: b.Settings, CPU: b.CPU()}
	}
	if b.Topology == TopologyCitus {
		return backend.Spec{Topology: TopologyCitus, Nodes: b.Workers, Settings: b.Settings, CPU: b.CPU()}
	}
	return backend.Spec{Topology: b.Topology, Settings: b.Settings, CPU: b.CPU()}
}

// Distribution is the power law the tenants' shares follow.
type Distribution string

// Distributions.
const (
	// DistributionZipf gives quiet tenant k (k = 1 for the busiest) a weight
	// of 1/k^s, s = Exponent.
	DistributionZipf Distribution = "zipf"
	// DistributionPareto draws weights from a Pareto distribution with shape
	// alpha = Exponent and sorts them, busiest first.
	DistributionPareto Distribution = "pareto"
)

// Tenants is the tenant population. Tenant 1 is the dominant (noisy) tenant;
// tenants 2..Count are the quiet tenants.
type Tenants struct {
	// Count is the number of tenants, >= 2. Default 50.
	Count int `yaml:"count"`
	// DominantShare is tenant 1's share of all traffic and data, in (0, 1).
	// Default 0.6.
	DominantShare float64 `yaml:"dominant_share"`
	// Distribution is the power law over the quiet tenants: zipf (default)
	// or pareto.
	Distribution Distribution `yaml:"distribution"`
	// Exponent is the power law's parameter (zipf s, pareto alpha), > 0.
	// Default 1.1.
	Exponent float64 `yaml:"exponent"`
	// Shares pins the share of some quiet tenants by id (2..Count), each in
	// (0, 1). DominantShare plus these must not exceed 1; the other quiet
	// tenants share what is left by the power law. Optional.
	Shares map[int]float64 `yaml:"shares"`
	// Keys maps tenant n (1..Count) to the key the workload uses: tags,
	// ledger, reports and :tenant show it. Default: bigint keys 1..Count.
	// Other keys need data.setup (see TenantKeys).
	Keys TenantKeys `yaml:"keys"`
}

// Data sizes the generated data set.
type Data struct {
	// Orders is the total number of orders rows across tenants, split by the
	// same shares as the traffic; >= Tenants.Count. Default 200000.
	Orders int `yaml:"orders"`
	// Days spreads created_at over the last Days days, >= 1. Default 365.
	Days int `yaml:"days"`
	// Customers is the number of distinct customers per tenant (an upper
	// bound), >= 1. Default 1000.
	Customers int `yaml:"customers"`
	// Schema is the schema noisysim creates its tables in, and drops at the
	// end of the run; a run refuses to start when it exists and noisysim
	// did not create it. Default (and when empty) footprint.DefaultSchema
	// ("noisysim"): read it with SchemaName.
	Schema string `yaml:"schema"`
	// Citus distributes the data set on topology citus (only there):
	// tenants and orders by tenant_id, co-located. Default {shards: 32}.
	Citus CitusData `yaml:"citus"`
	// Setup lists SQL files, relative to the scenario file, run in order
	// in the run's schema after noisysim creates the table
	// noisysim_tenants (see SetupTenantsTable): the user's own schema and
	// rows instead of the built-in orders data set. Orders, Days and
	// Customers then do not apply. Empty means the built-in data set.
	Setup []string `yaml:"setup"`
	// Rows names row counts to split over the tenants by their shares
	// (as orders are): name -> total, each >= tenants.count. Each becomes
	// the column rows_<name> of noisysim_tenants and the script variable
	// :rows_<name>. Only with Setup. Names: lower-case letters, digits and
	// '_', starting with a letter.
	Rows map[string]int64 `yaml:"rows"`
	// Existing runs the workload on tables already in the database (an
	// external backend), read only: no data step. Not with Setup.
	Existing Existing `yaml:"existing"`
	// Directory names, on topology shards with Setup, the tables holding
	// tenant rows and their tenant column: every node keeps the rows of
	// the tenants placed on it, and move_tenant copies them (the tables
	// and column `noisysim tenant move` takes as flags).
	Directory DirectoryData `yaml:"directory"`
}

// DirectoryData names the tables of a user's data set that directory
// sharding places and moves by tenant.
type DirectoryData struct {
	// Tables hold tenant rows, in the order a move copies them; each has
	// Column. Required with data.setup on topology shards.
	Tables []string `yaml:"tables"`
	// Column is the tenant column of every table, holding tenants.keys.
	// Required with Tables.
	Column string `yaml:"column"`
}

// Existing names the schemas of a database's own tables a workload reads.
type Existing struct {
	// Schemas are searched after the run's schema (search_path), so that
	// scripts may name their tables unqualified; the workload roles get
	// USAGE on them and SELECT on their tables, nothing more, and every
	// workload session is read only (default_transaction_read_only).
	Schemas []string `yaml:"schemas"`
}

// Builtin reports whether the data set is noisysim's own orders data set
// (neither Setup nor Existing).
func (d Data) Builtin() bool { return len(d.Setup) == 0 && len(d.Existing.Schemas) == 0 }

// IsExisting reports whether the workload runs on existing tables.
func (d Data) IsExisting() bool { return len(d.Existing.Schemas) > 0 }

// SchemaName returns Schema, or footprint.DefaultSchema when it is empty.
func (d Data) SchemaName() string {
	if d.Schema == "" {
		return footprint.DefaultSchema
	}
	return d.Schema
}

// IsolationClass names the pool, role and limiter that run a class's queries
// in an isolated configuration.
type IsolationClass string

// Isolation classes.
const (
	IsolationInteractive IsolationClass = "interactive"
	IsolationHeavy       IsolationClass = "heavy"
)

// Query is the SQL a class runs for one tenant.
type Query string

// Queries.
const (
	// QueryLookup is an indexed lookup of one order.
	QueryLookup Query = "lookup"
	// QueryPage is a small page of a tenant's recent orders.
	QueryPage Query = "page"
	// QueryReport aggregates a year of one tenant's orders.
	QueryReport Query = "report"
	// QueryExport reads all of one tenant's orders in key-ordered batches of
	// Class.Batch rows.
	QueryExport Query = "export"
	// QuerySleep is pg_sleep(Class.Sleep): a known duration for precise
	// checks.
	QuerySleep Query = "sleep"
)

// Arrival is how a class's arrivals are spaced.
type Arrival string

// Arrivals.
const (
	// ArrivalPoisson spaces arrivals by exponential gaps with mean 1/Rate.
	ArrivalPoisson Arrival = "poisson"
	// ArrivalConstant spaces arrivals exactly 1/Rate apart.
	ArrivalConstant Arrival = "constant"
)

// Senders says which tenants send a class's traffic.
type Senders string

// Senders.
const (
	// SendersAll: every tenant, by its share.
	SendersAll Senders = "all"
	// SendersDominant: tenant 1 alone.
	SendersDominant Senders = "dominant"
	// SendersQuiet: tenants 2..Count, by their shares.
	SendersQuiet Senders = "quiet"
)

// Class is one kind of traffic: what query, how often, from whom.
type Class struct {
	// Name identifies the class in reports; required, unique. Letters,
	// digits, '.', '_' and '-'.
	Name string `yaml:"name"`
	// IsolationClass is interactive or heavy. Default: Name, when Name is one
	// of the two; required otherwise.
	IsolationClass IsolationClass `yaml:"isolation_class"`
	// Query is lookup, page, report, export or sleep: a canned query on
	// the built-in orders data set. Exactly one of Query, Script, SQL and
	// HTTP.
	Query Query `yaml:"query"`
	// Script is a pgbench custom script, relative to the scenario file,
	// run once per arrival (package workload/pgscript): its statements,
	// \set, \sleep and \gset, with :tenant, :tenant_n, :scale and
	// :rows_<name> bound by noisysim.
	Script string `yaml:"script"`
	// SQL is one statement with $1..$n placeholders; Args gives one
	// pgbench expression per placeholder (":tenant",
	// "random(1, :rows_invoices)").
	SQL  string   `yaml:"sql"`
	Args []string `yaml:"args"`
	// HTTP sends an HTTP request per arrival instead of SQL: the service
	// under test (Scenario.Service, or any URL) runs the queries.
	HTTP *HTTPTarget `yaml:"http"`
	// Rate is arrivals per second across all of the class's senders, > 0.
	// Required. Open loop: arrivals do not wait for earlier ones to finish.
	Rate float64 `yaml:"rate"`
	// Arrival is poisson (default) or constant.
	Arrival Arrival `yaml:"arrival"`
	// Senders is all (default), dominant or quiet.
	Senders Senders `yaml:"senders"`
	// Sleep is pg_sleep's duration, > 0; query sleep only, required there.
	Sleep Duration `yaml:"sleep"`
	// Batch is rows per key-ordered batch, >= 1; query export only. Default
	// 1000.
	Batch int `yaml:"batch"`
	// LoadFactor, when > 0, sets Rate by calibration instead of the file:
	// the run first measures the class's mean service time alone (for
	// Calibrate) and sets Rate so that Rate × service time, the class's
	// offered concurrency, is LoadFactor × the pool it would share (see
	// Scenario.CalibrationPool). Only for a class the dominant tenant alone
	// sends (senders: dominant), open model; excludes rate.
	LoadFactor float64 `yaml:"load_factor"`
	// Calibrate is how long the calibration measures; load_factor only.
	// Default DefaultCalibrate.
	Calibrate Duration `yaml:"calibrate"`

	// program is Script or SQL parsed, set by validation.
	program *pgscript.Script
}

// Program returns the class's parsed script or inline statement; nil for a
// canned Query, or before the scenario was validated (Parse, Load and
// Validate parse it).
func (c *Class) Program() *pgscript.Script { return c.program }

// Calibrated reports whether the class's rate is set by calibration
// (LoadFactor > 0).
func (c *Class) Calibrated() bool { return c.LoadFactor > 0 }

// LoadModel is how requests arrive.
type LoadModel string

// Load models.
const (
	// ModelOpen issues each class's requests on a seeded arrival schedule
	// (Class.Rate, Class.Arrival), whether or not earlier ones have
	// finished, and measures latency from each request's intended start:
	// the way to measure.
	ModelOpen LoadModel = "open"
	// ModelClosed simulates Load.Users users who each send a request, wait
	// for its response, think, and send the next; class rates are then only
	// weights. On an error a user retries, each retry re-issuing
	// Load.RetryQueries queries, as a user hammering "try again" does. A
	// closed loop slows down with the system, so its latencies hide queueing
	// (coordinated omission): use it to model users, the open loop to
	// measure.
	ModelClosed LoadModel = "closed"
)

// LoadSpec is how requests arrive.
type LoadSpec struct {
	// Model is open (default; "" also means open) or closed.
	Model LoadModel `yaml:"model"`
	// Users is the number of simulated users, >= 1, assigned to tenants by
	// share; closed only. Default 100.
	Users int `yaml:"users"`
	// ThinkTime is the mean of a user's exponential pause between requests,
	// >= 0; closed only. Default 1s.
	ThinkTime Duration `yaml:"think_time"`
	// RetryQueries is k, the queries a retry re-issues at once, >= 1;
	// closed only. Default 1.
	RetryQueries int `yaml:"retry_queries"`
	// MaxRetries is how many times a user retries a failed request before
	// giving up, >= 0; closed only. Default 3.
	MaxRetries int `yaml:"max_retries"`
}

// Phases are the lengths of a run's phases. The solo phase runs the schedule
// without the dominant tenant to measure the quiet tenants' own query time;
// each configuration then runs the full mix for Run.
type Phases struct {
	// Warmup runs before each measured phase and is discarded, >= 0.
	// Default 2s.
	Warmup Duration `yaml:"warmup"`
	// Solo is the quiet tenants' baseline, > 0. Default 10s.
	Solo Duration `yaml:"solo"`
	// Run is the full mix per configuration, > 0. Default 20s.
	Run Duration `yaml:"run"`
	// Drain is how long to wait for in-flight operations after each phase
	// before cancelling them, >= 0. Default 3s.
	Drain Duration `yaml:"drain"`
}

// Mode is how a configuration runs queries.
type Mode string

// Modes.
const (
	// ModeShared runs every class through one pool and one role, without a
	// limiter: the "before" picture.
	ModeShared Mode = "shared"
	// ModeIsolated runs each isolation class through its own pool, role and
	// limiter.
	ModeIsolated Mode = "isolated"
)

// Expect is the outcome a configuration must have for the scenario to pass.
type Expect string

// Expectations.
const (
	// ExpectPass: every assertion must pass.
	ExpectPass Expect = "pass"
	// ExpectFail: a control; at least one assertion must fail, proving the
	// scenario can see the problem.
	ExpectFail Expect = "fail"
)

// Configuration is one isolation set-up to run the full mix under.
type Configuration struct {
	// Name identifies the configuration in reports and for --only; required,
	// unique. Letters, digits, '.', '_' and '-'.
	Name string `yaml:"name"`
	// Mode is shared or isolated. Required.
	Mode Mode `yaml:"mode"`
	// Expect is pass (default) or fail.
	Expect Expect `yaml:"expect"`
	// Shared is the one pool of mode shared; mode shared only. Each field
	// left out takes DefaultSharedPool's value.
	Shared SharedPool `yaml:"shared"`
	// Interactive is the interactive class's pool, role and limiter; mode
	// isolated only. Each field left out takes DefaultInteractivePool's
	// value.
	Interactive Pool `yaml:"interactive"`
	// Heavy is the heavy class's pool, role and limiter; mode isolated only.
	// Each field left out takes DefaultHeavyPool's value.
	Heavy Pool `yaml:"heavy"`
	// App, when present, runs the configuration as several application
	// instances, each its own isolation stack; mode isolated only.
	App *App `yaml:"app"`
}

// AppLimiter says how N application instances apply a class's per-tenant
// limiter.
type AppLimiter string

// App limiter modes.
const (
	// AppPerInstance gives every instance the configured limiter: a
	// tenant may run up to N × max_per_tenant calls at once.
	AppPerInstance AppLimiter = "per_instance"
	// AppDivided gives every instance ceil(max_per_tenant / N) (and
	// ceil(max_global / N)).
	AppDivided AppLimiter = "divided"
	// AppGlobal shares one cap per tenant across the instances through a
	// Redis limiter (isolation/limiter/redislimiter).
	AppGlobal AppLimiter = "global"
)

// MaxAppInstances bounds App.Instances.
const MaxAppInstances = 64

// App is a configuration run as several application instances: each its
// own pools and limiters (as N processes of an app would have), traffic
// spread over them round-robin.
type App struct {
	// Instances is the number of instances, 1..64. Default 1.
	Instances int `yaml:"instances"`
	// Limiter is per_instance (default), divided or global.
	Limiter AppLimiter `yaml:"limiter"`
	// RedisURL is the Redis of limiter global (redis://host:port/db); empty
	// means a throwaway redis-server started by noisysim for the run.
	RedisURL string `yaml:"redis_url"`
	// FailOpen admits calls without a slot when Redis cannot be reached;
	// false (default) rejects them (reason unavailable). Limiter global
	// only.
	FailOpen bool `yaml:"fail_open"`
}

// Share returns an instance's share of a cap under a: ceil(cap / N) for
// divided, cap otherwise.
func (a *App) Share(cap int) int {
	if a == nil || a.Limiter != AppDivided || a.Instances <= 1 {
		return cap
	}
	return (cap + a.Instances - 1) / a.Instances
}

// Pool returns the pool of isolation class ic in an isolated configuration:
// &c.Interactive or &c.Heavy; nil for another class.
func (c *Configuration) Pool(ic IsolationClass) *Pool {
	switch ic {
	case IsolationInteractive:
		return &c.Interactive
	case IsolationHeavy:
		return &c.Heavy
	}
	return nil
}

// SharedPool is the single pool of a shared configuration. It always runs on
// the primary.
type SharedPool struct {
	// PoolSize is the most connections the pool opens, >= 1. Default 40.
	PoolSize int `yaml:"pool_size"`
	// AcquireTimeout bounds the wait for a connection, > 0. Default 30s.
	AcquireTimeout Duration `yaml:"acquire_timeout"`
	// Role is the database role's settings. Default: all PostgreSQL defaults.
	Role Role `yaml:"role"`
}

// Target is the node a pool connects to.
type Target string

// Targets.
const (
	TargetPrimary Target = "primary"
	// TargetReplica falls back to the primary when the topology has no
	// replica; the run says so.
	TargetReplica Target = "replica"
)

// Pool is one isolation class's pool, role and limiter.
type Pool struct {
	// PoolSize is the most connections the pool opens, >= 1.
	PoolSize int `yaml:"pool_size"`
	// AcquireTimeout bounds the wait for a connection, > 0.
	AcquireTimeout Duration `yaml:"acquire_timeout"`
	// Target is primary or replica.
	Target Target `yaml:"target"`
	// Role is the class's database role's settings.
	Role Role `yaml:"role"`
	// Limiter is the class's per-tenant concurrency limiter.
	Limiter Limiter `yaml:"limiter"`
}

// Role is a database role's settings, applied with ALTER ROLE. A zero field
// leaves PostgreSQL's default.
type Role struct {
	// StatementTimeout cancels a statement running longer, >= 0; 0 means no
	// timeout.
	StatementTimeout Duration `yaml:"statement_timeout"`
	// IdleInTransactionSessionTimeout ends a session idle inside a
	// transaction longer, >= 0; 0 means no timeout.
	IdleInTransactionSessionTimeout Duration `yaml:"idle_in_transaction_session_timeout"`
	// WorkMem is work_mem, e.g. "64MB"; empty means the server's value.
	WorkMem Size `yaml:"work_mem"`
	// ConnectionLimit is the role's CONNECTION LIMIT, >= 0; 0 means no limit.
	// When set, at least the pool's PoolSize.
	ConnectionLimit int `yaml:"connection_limit"`
}

// Limiter is a per-tenant concurrency limiter. Write `limiter: {enabled:
// false}` to run a class without one; fields left out take the class's
// reference values.
type Limiter struct {
	// Enabled turns the limiter on. Default true.
	Enabled bool `yaml:"enabled"`
	// MaxPerTenant is the most calls of one tenant running at once, >= 1.
	MaxPerTenant int `yaml:"max_per_tenant"`
	// MaxQueue is the most calls of one tenant waiting (FIFO), >= 0; a call
	// finding the queue full is rejected with queue_full.
	MaxQueue int `yaml:"max_queue"`
	// MaxWait is the longest a call waits in the queue before it is rejected
	// with wait_exceeded; > 0 when MaxQueue > 0, >= 0 otherwise.
	MaxWait Duration `yaml:"max_wait"`
	// MaxGlobal caps calls running at once across all tenants, >= 0; 0 means
	// no global cap.
	MaxGlobal int `yaml:"max_global"`
}

// ErrorClass names a kind of failed operation, as counted per tenant.
type ErrorClass string

// Error classes.
const (
	ErrorQueueFull        ErrorClass = "queue_full"        // limiter: tenant queue full
	ErrorWaitExceeded     ErrorClass = "wait_exceeded"     // limiter: max wait passed
	ErrorAcquireTimeout   ErrorClass = "acquire_timeout"   // pool: no connection in time
	ErrorStatementTimeout ErrorClass = "statement_timeout" // SQLSTATE 57014
	ErrorReplicaConflict  ErrorClass = "replica_conflict"  // SQLSTATE 40001 on a standby
	ErrorConnectionLost   ErrorClass = "connection_lost"   // the connection broke
	ErrorOther            ErrorClass = "other"             // anything else
	ErrorHTTP429          ErrorClass = "http_429"          // HTTP: the service rejected (429 Too Many Requests)
	ErrorHTTP4xx          ErrorClass = "http_4xx"          // HTTP: another 4xx answer
	ErrorHTTP5xx          ErrorClass = "http_5xx"          // HTTP: a 5xx answer
	ErrorHTTPTimeout      ErrorClass = "http_timeout"      // HTTP: no full answer within http.timeout
	ErrorHTTPTransport    ErrorClass = "http_transport"    // HTTP: refused, reset or broken connection
	// Not failures of a call but of the run's service: an arrival the open
	// loop dropped (too many in flight), an op still running when the
	// drain ended.
	ErrorDropped    ErrorClass = "dropped"
	ErrorIncomplete ErrorClass = "incomplete"
)

// ErrorClasses lists every error class, in the order above.
func ErrorClasses() []ErrorClass {
	return []ErrorClass{ErrorQueueFull, ErrorWaitExceeded, ErrorAcquireTimeout, ErrorStatementTimeout,
		ErrorReplicaConflict, ErrorConnectionLost, ErrorOther, ErrorDropped, ErrorIncomplete, ErrorHTTP429, ErrorHTTP4xx,
		ErrorHTTP5xx, ErrorHTTPTimeout, ErrorHTTPTransport}
}

// Assertions decide whether a configuration passes.
type Assertions struct {
	// QuietP99 bounds the quiet tenants' p99 response time.
	QuietP99 QuietP99 `yaml:"quiet_p99"`
	// QuietP99AB compares the quiet tenants' p99 in matched A/B blocks
	// appended to the timeline; off by default.
	QuietP99AB QuietP99AB `yaml:"quiet_p99_ab"`
	// NoisyRejections requires, in configurations with a limiter, that the
	// dominant tenant has rejections > 0 and that they equal, by reason, the
	// rejections its clients saw. Default true.
	NoisyRejections bool `yaml:"noisy_rejections"`
	// AllowedErrors are the error classes that do not fail "no unexpected
	// errors". Default: DefaultAllowedErrors.
	AllowedErrors []ErrorClass `yaml:"allowed_errors"`
	// ZeroLoss requires, with a writer, that every acknowledged write is
	// stored exactly once with its last acknowledged value. Default false.
	ZeroLoss bool `yaml:"zero_loss"`
	// WritePause bounds the writer's longest write, from its intended
	// start to its answer (a move's fenced pause shows there). Needs a
	// writer.
	WritePause WritePause `yaml:"write_pause"`
	// CleanAfter requires, after each configuration: limiter in_flight 0, no
	// borrowed pool connection, no t:* session left. Default true.
	CleanAfter bool `yaml:"clean_after"`
	// TaggedOnly requires that every active backend of the configuration's
	// roles that pg_stat_activity showed (sampled every 100 ms over the
	// timeline) carried a tenant tag (application_name t:<tenant>): work
	// that bypassed the isolation stack shows untagged. Default false.
	TaggedOnly bool `yaml:"tagged_only"`
	// Skew bounds the per-worker load skew in a window (topology citus).
	// Optional.
	Skew SkewBound `yaml:"skew"`
	// DetectWithin bounds the time from the start of the first phase a
	// detecting policy watches to its first alert (a watch's every is
	// added: detection is sampled). Optional; 0 means not asserted.
	DetectWithin Duration `yaml:"detect_within"`
	// HarmBefore requires the quiet tenants' p99 in a window to FAIL
	// quiet_p99's bound (factor × baseline + slack): proof that the
	// scenario shows the harm its remedy is judged on. Optional.
	HarmBefore HarmBefore `yaml:"harm_before"`
	// Headroom is checked by noisysim sweep --search knee of its Key: each
	// configuration it names (default: every one expected to pass) holds
	// its assertions up to at least Min × the file's value of Key.
	// noisysim run ignores it. Optional.
	Headroom Headroom `yaml:"headroom"`
}

// Headroom is the capacity assertion of a knee search (noisysim sweep).
type Headroom struct {
	// Key is a numeric key of the scenario file by its path, as sweep's
	// --vary takes it, e.g. "classes.report.rate". Required with headroom.
	Key string `yaml:"key"`
	// Min is the headroom wanted, > 0: the knee over the file's value.
	Min float64 `yaml:"min"`
	// Configurations are the configurations that must have the headroom,
	// by name; empty means every configuration with expect: pass.
	Configurations []string `yaml:"configurations"`
}

// Of reports whether configuration c must have the headroom.
func (h Headroom) Of(c *Configuration) bool {
	if len(h.Configurations) == 0 {
		return c.Expect != ExpectFail
	}
	return slices.Contains(h.Configurations, c.Name)
}

// SkewBound is the assertion: in window Window, the per-worker load (each
// tenant's DB time from the ledger counted on the worker holding its
// shard) has max / median <= Max over the workers that take shards.
type SkewBound struct {
	// Window is a measured phase. Required when the key is given.
	Window string `yaml:"window"`
	// Max is the bound, > 1. Default 1.5.
	Max float64 `yaml:"max"`
}

// HarmBefore is the assertion: the quiet tenants' merged p99 (each class)
// in Window is above quiet_p99's limit over its baseline.
type HarmBefore struct {
	// Window is a measured phase other than quiet_p99's baseline.
	// Required when the key is given.
	Window string `yaml:"window"`
	// Tenants names the quiet tenants judged: HarmAll (default) merges
	// every quiet tenant; HarmHotWorker (topology citus) those whose shard
	// is on the dominant tenant's worker, where a hot shard does its harm.
	Tenants string `yaml:"tenants"`
	// Factor, when > 0, sets the harm bar to Factor × the baseline's p99
	// (no slack): the harm must be at least that many times the baseline.
	// 0 (default) uses quiet_p99's bound, factor × baseline + slack.
	Factor float64 `yaml:"factor"`
}

// Quiet tenant sets harm_before judges.
const (
	HarmAll       = "all"
	HarmHotWorker = "hot_worker"
)

// QuietP99 is the assertion: each quiet tenant's p99 response time in
// window Window ≤ Factor × its p99 in window Baseline + Slack, plus one
// aggregate over all quiet tenants. Tenants with fewer than MinSamples
// samples in either window are reported as skipped.
type QuietP99 struct {
	// Window is the measured phase judged. Default run.
	Window string `yaml:"window"`
	// Baseline is the measured phase it is compared with. Default solo.
	Baseline string `yaml:"baseline"`
	// Factor, > 0. Default 1.5.
	Factor float64 `yaml:"factor"`
	// Slack, >= 0. Default 5ms.
	Slack Duration `yaml:"slack"`
	// MinSamples per tenant and phase, >= 1. Default 100: below 100
	// samples a p99 is the maximum.
	MinSamples int `yaml:"min_samples"`
	// CheckTop, when set, lengthens Window and Baseline (each on its own)
	// until every quiet tenant × class pair of the CheckTop busiest quiet
	// tenants (CheckAll: every quiet tenant) has at least MinSamples
	// arrivals planned in both. 0 (default) leaves the phases as given.
	CheckTop TopK `yaml:"check_top"`
}

// DefaultAllowedErrors returns the default Assertions.AllowedErrors:
// queue_full, wait_exceeded, statement_timeout, replica_conflict.
func DefaultAllowedErrors() []ErrorClass {
	return []ErrorClass{ErrorQueueFull, ErrorWaitExceeded, ErrorStatementTimeout, ErrorReplicaConflict, ErrorHTTP429}
}

// DefaultSharedPool returns the shared configuration's defaults: pool of 40,
// acquire timeout 30s, role with PostgreSQL's defaults.
func DefaultSharedPool() SharedPool {
	return SharedPool{PoolSize: DefaultSharedPoolSize, AcquireTimeout: DefaultSharedAcquireTimeout}
}

// DefaultInteractivePool returns the reference design's interactive class:
// pool 30 on the primary, acquire timeout 1.5s; role statement_timeout 3s,
// idle_in_transaction_session_timeout 10s, connection limit 40; limiter 4 per
// tenant, queue 20, max wait 1.5s, no global cap.
func DefaultInteractivePool() Pool {
	return Pool{
		PoolSize:       30,
		AcquireTimeout: Duration(1500 * time.Millisecond),
		Target:         TargetPrimary,
		Role: Role{
			StatementTimeout:                Duration(3 * time.Second),
			IdleInTransactionSessionTimeout: Duration(10 * time.Second),
			ConnectionLimit:                 40,
		},
		Limiter: Limiter{Enabled: true, MaxPerTenant: 4, MaxQueue: 20, MaxWait: Duration(1500 * time.Millisecond)},
	}
}

// DefaultHeavyPool returns the reference design's heavy class: pool 4 on the
// replica, acquire timeout 5s; role statement_timeout 120s,
// idle_in_transaction_session_timeout 30s, work_mem 64MB, connection limit 6;
// limiter 1 per tenant, queue 5, max wait 10s, no global cap.
func DefaultHeavyPool() Pool {
	return Pool{
		PoolSize:       4,
		AcquireTimeout: Duration(5 * time.Second),
		Target:         TargetReplica,
		Role: Role{
			StatementTimeout:                Duration(120 * time.Second),
			IdleInTransactionSessionTimeout: Duration(30 * time.Second),
			WorkMem:                         "64MB",
			ConnectionLimit:                 6,
		},
		Limiter: Limiter{Enabled: true, MaxPerTenant: 1, MaxQueue: 5, MaxWait: Duration(10 * time.Second)},
	}
}

// Configuration returns the configuration named name and true, or nil and
// false.
func (s *Scenario) Configuration(name string) (*Configuration, bool) {
	for i := range s.Configurations {
		if s.Configurations[i].Name == name {
			return &s.Configurations[i], true
		}
	}
	return nil, false
}

// Class returns the class named name and true, or nil and false.
func (s *Scenario) Class(name string) (*Class, bool) {
	for i := range s.Classes {
		if s.Classes[i].Name == name {
			return &s.Classes[i], true
		}
	}
	return nil, false
}

// FaultAction is what a fault does to its node.
type FaultAction string

// Fault actions.
const (
	// FaultStop stops the node's container (a fast shutdown: sessions
	// fail) and starts it again after For.
	FaultStop FaultAction = "stop"
	// FaultPause freezes the node's container (sessions hang) and unpauses
	// it after For.
	FaultPause FaultAction = "pause"
	// FaultDisconnect detaches the node from the cluster network and
	// reattaches it after For.
	FaultDisconnect FaultAction = "disconnect"
)

// Fault is one node fault in the run phase of each configuration it names.
type Fault struct {
	// Node is the node's name: primary, or replica1 with topology replica.
	// Required.
	Node string `yaml:"node"`
	// Action is stop, pause or disconnect. Required.
	Action FaultAction `yaml:"action"`
	// Phase is the timeline phase At counts from. Default: the first phase
	// the dominant tenant sends in (with the default timeline, the run's
	// warm-up).
	Phase string `yaml:"phase"`
	// At is when the fault starts, from the start of Phase; >= 0, and the
	// fault must end by the end of the timeline. Default 0s.
	At Duration `yaml:"at"`
	// For is how long the fault lasts before the node is restored; > 0.
	// Required.
	For Duration `yaml:"for"`
	// Configurations names the configurations whose run gets the fault.
	// Empty means every configuration.
	Configurations []string `yaml:"configurations"`
}

// Applies reports whether f is injected in the run of configuration name.
func (f Fault) Applies(name string) bool {
	if len(f.Configurations) == 0 {
		return true
	}
	for _, c := range f.Configurations {
		if c == name {
			return true
		}
	}
	return false
}
