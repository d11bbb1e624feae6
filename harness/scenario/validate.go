package scenario

import (
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/harness/footprint"
	"github.com/noisysim/noisysim/internal/affinity"
	"github.com/noisysim/noisysim/workload"
)

// Upper bounds of sizes. Beyond them a run would exhaust memory, overflow a
// number on its way to PostgreSQL, or not end; a typo such as an extra zero
// is an error naming the field instead. tenants.count is at most
// workload.MaxTenants, and each class's rate (times a phase's factor) at
// most workload.MaxRate.
const (
	// MaxOrders bounds data.orders: 100,000,000 rows (about 15 GB).
	MaxOrders = 100_000_000
	// MaxDays bounds data.days: 100 years.
	MaxDays = 36_500
	// MaxPhase bounds each of phases.warmup, solo, run and drain: 7 days.
	MaxPhase = Duration(7 * 24 * time.Hour)
	// MaxConnections bounds pool_size and role.connection_limit: PostgreSQL's
	// largest max_connections.
	MaxConnections = 262_143
	// MaxUsers bounds load.users: 100,000 simulated users.
	MaxUsers = 100_000
)

// Validate checks every field and returns one error per problem, all of them
// at once, sorted by line (schema order when there are no lines). Each error is a Problem (matching ErrInvalid)
// naming the field path and, for a scenario from Parse or Load, its
// file:line:col, e.g.
//
//	scenarios/x.yaml:12:3: tenants.dominant_share: must be in (0, 1), got 1.2
//
// Validate checks values as they are: defaults are applied by Parse, not here.
// It returns nil for a valid scenario.
func (s *Scenario) Validate() []error {
	ps := s.problems()
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errs
}

// Only returns a copy of s that holds only the configuration named name, for
// running one configuration. The copy shares everything else with s and
// carries no line numbers. For an unknown name it returns an *Error matching
// ErrInvalid that lists the configurations there are.
func (s *Scenario) Only(name string) (*Scenario, error) {
	c, ok := s.Configuration(name)
	if !ok {
		names := make([]string, len(s.Configurations))
		for i, c := range s.Configurations {
			names[i] = strconv.Quote(c.Name)
		}
		line, col := s.ix.pos("configurations")
		p := Problem{File: s.File, Line: line, Col: col, Field: "configurations",
			Msg: fmt.Sprintf("unknown configuration %q; the scenario has %s", name, strings.Join(names, ", "))}
		return nil, &Error{File: s.File, Problems: []Problem{p}}
	}
	cp := *s
	cp.Configurations = []Configuration{*c}
	cp.ix = nil
	return &cp, nil
}

// WithSeed returns a copy of s run at seed: the same scenario with another
// tenant population, arrival schedule and data (what noisysim run --repeat
// and sweep's trials run). The copy shares everything else with s.
func (s *Scenario) WithSeed(seed int64) *Scenario {
	cp := *s
	cp.Seed = seed
	return &cp
}

// checker collects problems with their places in the file.
type checker struct {
	s  *Scenario
	ps []Problem
}

func (c *checker) add(field, format string, args ...any) {
	line, col := c.s.ix.pos(field)
	c.ps = append(c.ps, Problem{File: c.s.File, Line: line, Col: col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// where names field for a message: "line 12" when the file says, else the
// field path.
func (c *checker) where(field string) string {
	if line, _ := c.s.ix.pos(field); line > 0 {
		return fmt.Sprintf("line %d", line)
	}
	return field
}

// present reports whether field is in the file with a value.
func (c *checker) present(field string) bool { return c.s.ix.has(field) }

// oneOf checks that v is one of want; noun names the kind of value in the
// message ("backend kind").
// topologyRoles are the roles of the nodes each topology starts
// (shard is another name for the primaries of topology shards).
var topologyRoles = map[backend.Topology][]backend.Role{
	backend.TopologySingle:  {backend.RolePrimary},
	backend.TopologyReplica: {backend.RolePrimary, backend.RoleReplica},
	TopologyShards:          {backend.RolePrimary, backend.RoleShard},
	TopologyCitus:           {backend.RoleCoordinator, backend.RoleWorker},
}

// roleInTopology adds a problem at field when topology starts no node of
// role r: a budget or cores given to no node would be ignored silently.
func roleInTopology(c *checker, field string, topology backend.Topology, r backend.Role) {
	roles, ok := topologyRoles[topology]
	if !ok || slices.Contains(roles, r) {
		return
	}
	names := make([]string, len(roles))
	for i, x := range roles {
		names[i] = string(x)
	}
	c.add(field, "topology %s has no %s node (its nodes' roles: %s): it would apply to nothing", topology, r, strings.Join(names, ", "))
}

func oneOf[T ~string](c *checker, field, noun string, v T, want ...T) bool {
	if slices.Contains(want, v) {
		return true
	}
	list := make([]string, len(want))
	for i, w := range want {
		list[i] = string(w)
	}
	alts := list[0]
	if len(list) > 1 {
		alts = strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
	}
	if v == "" {
		c.add(field, "required: %s %s", noun, alts)
	} else {
		c.add(field, "unknown %s %q; want %s", noun, string(v), alts)
	}
	return false
}

func (c *checker) positive(field string, d Duration) {
	if d <= 0 {
		c.add(field, "must be a duration > 0, got %s", d)
	}
}

func (c *checker) nonNegative(field string, d Duration) {
	if d < 0 {
		c.add(field, "must be a duration >= 0, got %s", d)
	}
}

func (c *checker) atLeast(field string, v, min int) {
	if v < min {
		c.add(field, "must be >= %d, got %d", min, v)
	}
}

func (c *checker) atMost(field string, v, max int) {
	if v > max {
		c.add(field, "must be <= %d, got %d", max, v)
	}
}

func (c *checker) between(field string, v, min, max int) {
	c.atLeast(field, v, min)
	c.atMost(field, v, max)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// MaxConfigurationName is the longest configuration name: the longest role
// noisysim makes of it, noisysim_<name>_interactive, must fit PostgreSQL's
// 63-byte names (a longer one would be cut, and two roles could meet).
const MaxConfigurationName = 63 - len("noisysim_") - len("_interactive")

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (c *checker) name(field, v string) bool {
	switch {
	case v == "":
		c.add(field, "required")
	case !namePattern.MatchString(v):
		c.add(field, "must be letters, digits, '.', '_' or '-', starting with a letter or digit; got %q", v)
	default:
		return true
	}
	return false
}

// problems returns every problem with s, sorted.
func (s *Scenario) problems() []Problem {
	c := &checker{s: s}
	c.name("name", s.Name)
	c.backend(&s.Backend)
	c.tenants(&s.Tenants)
	c.keys(&s.Tenants, &s.Data)
	c.data(&s.Data, s.Tenants.Count)
	c.setup(s)
	c.classes(s.Classes)
	c.load(&s.Load)
	c.phases(&s.Phases)
	c.timeline(s)
	c.arrivals(s)
	c.configurations(s.Configurations)
	c.assertions(&s.Assertions)
	c.shards(s)
	c.writer(s)
	c.replay(s)
	c.citus(s)
	c.verdicts(s)
	c.faults(s)
	c.service(s)
	return sortProblems(c.ps)
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

func (c *checker) backend(b *Backend) {
	kindOK := oneOf(c, "backend.kind", "backend kind", b.Kind, BackendLocal, BackendExternal, BackendDocker)
	topoOK := oneOf(c, "backend.topology", "topology", b.Topology, backend.TopologySingle, backend.TopologyReplica, TopologyShards, TopologyCitus)
	if b.Topology == TopologyShards && b.Kind != BackendLocal {
		c.add("backend.topology", "shards needs kind local")
	}
	if !kindOK {
		return
	}
	if b.Kind != BackendDocker {
		if b.Image != "" {
			c.add("backend.image", "only for kind docker")
		}
		if len(b.Images) > 0 {
			c.add("backend.images", "only for kind docker")
		}
	}
	roles := make([]backend.Role, 0, len(b.Images))
	for r := range b.Images {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	for _, r := range roles {
		oneOf(c, "backend.images."+string(r), "node role", r, backend.RolePrimary, backend.RoleReplica,
			backend.RoleCoordinator, backend.RoleWorker, backend.RoleShard)
		if b.Images[r] == "" {
			c.add("backend.images."+string(r), "empty image: leave the role out to keep backend.image")
		}
	}
	if err := cgroup.CheckCPU(b.NodeCPU); err != nil {
		c.add("backend.node_cpu", "%v", err)
	}
	cpuRoles := slices.Sorted(maps.Keys(b.NodeCPURoles))
	for _, r := range cpuRoles {
		f := "backend.node_cpu_roles." + string(r)
		if oneOf(c, f, "node role", r, backend.RolePrimary, backend.RoleReplica,
			backend.RoleCoordinator, backend.RoleWorker, backend.RoleShard) && b.Kind != BackendExternal {
			roleInTopology(c, f, b.Topology, r)
		}
		if err := cgroup.CheckCPU(b.NodeCPURoles[r]); err != nil {
			c.add(f, "%v", err)
		}
	}
	for _, r := range slices.Sorted(maps.Keys(b.NodeCores)) {
		f := "backend.node_cores." + string(r)
		if oneOf(c, f, "node role", r, backend.RolePrimary, backend.RoleReplica,
			backend.RoleCoordinator, backend.RoleWorker, backend.RoleShard) && b.Kind != BackendExternal {
			roleInTopology(c, f, b.Topology, r)
		}
		checkCores(c, f, b.NodeCores[r], b.NodeCPUOptional)
	}
	if b.GeneratorCores != "" {
		checkCores(c, "backend.generator_cores", b.GeneratorCores, b.NodeCPUOptional)
	}
	if b.Kind == BackendExternal && len(b.NodeCores) > 0 {
		c.add("backend.node_cores", "only for kind local or docker: noisysim cannot pin a server it did not start")
	}
	if b.Kind == BackendExternal {
		if b.NodeCPU != 0 {
			c.add("backend.node_cpu", "only for kind local or docker: noisysim cannot budget the CPU of a server it did not start")
		}
		if len(b.NodeCPURoles) > 0 {
			c.add("backend.node_cpu_roles", "only for kind local or docker: noisysim cannot budget the CPU of a server it did not start")
		}
	}
	if b.NodeCPUOptional && b.NodeCPU == 0 && len(b.NodeCPURoles) == 0 && len(b.NodeCores) == 0 && b.GeneratorCores == "" {
		c.add("backend.node_cpu_optional", "set, but no node_cpu, node_cpu_roles, node_cores or generator_cores asks for anything")
	}
	switch b.Kind {
	case BackendLocal, BackendDocker:
		if b.PrimaryDSN != "" {
			c.add("backend.primary_dsn", "only for kind external; kind %s starts its own cluster", b.Kind)
		}
		if b.ReplicaDSN != "" {
			c.add("backend.replica_dsn", "only for kind external; kind %s starts its own cluster", b.Kind)
		}
		for _, k := range sortedKeys(b.Settings) {
			f := "backend.settings." + k
			if !settingName.MatchString(k) {
				c.add(f, "not a PostgreSQL setting name")
			}
			if b.Settings[k] == "" {
				c.add(f, "empty value: leave the setting out to keep the server's default")
			}
		}
	case BackendExternal:
		if b.PrimaryDSN == "" {
			c.add("backend.primary_dsn", "required for kind external: a libpq URL or \"${ENV_VAR}\"")
		} else if _, err := checkEnvRefs(b.PrimaryDSN); err != nil {
			c.add("backend.primary_dsn", "%v", err)
		}
		if b.ReplicaDSN != "" {
			if _, err := checkEnvRefs(b.ReplicaDSN); err != nil {
				c.add("backend.replica_dsn", "%v", err)
			}
		}
		if len(b.Settings) > 0 {
			c.add("backend.settings", "only for kind local or docker: noisysim does not change an external server's settings")
		}
		if topoOK {
			if b.Topology == backend.TopologyReplica && b.ReplicaDSN == "" {
				c.add("backend.topology", "replica needs backend.replica_dsn with kind external")
			}
			if b.Topology == backend.TopologySingle && b.ReplicaDSN != "" {
				c.add("backend.topology", "single, but backend.replica_dsn is set: use topology replica or drop replica_dsn")
			}
		}
	}
}

func (c *checker) tenants(t *Tenants) {
	c.between("tenants.count", t.Count, 2, workload.MaxTenants)
	domOK := t.DominantShare > 0 && t.DominantShare < 1
	if !domOK {
		c.add("tenants.dominant_share", "must be in (0, 1), got %s", fmtFloat(t.DominantShare))
	}
	oneOf(c, "tenants.distribution", "distribution", t.Distribution, DistributionZipf, DistributionPareto)
	if !(t.Exponent > 0) || math.IsInf(t.Exponent, 1) {
		c.add("tenants.exponent", "must be > 0, got %s", fmtFloat(t.Exponent))
	}
	sum, sharesOK := 0.0, true
	for _, id := range sortedKeys(t.Shares) {
		f := fmt.Sprintf("tenants.shares.%d", id)
		v := t.Shares[id]
		switch {
		case id == DominantTenant:
			c.add(f, "tenant 1 is the dominant tenant: set its share with tenants.dominant_share")
			sharesOK = false
		case id < 1 || (t.Count >= 2 && id > t.Count):
			c.add(f, "no such tenant: ids run from 2 to tenants.count (%d)", t.Count)
			sharesOK = false
		}
		if !(v > 0 && v < 1) {
			c.add(f, "must be in (0, 1), got %s", fmtFloat(v))
			sharesOK = false
		}
		sum += v
	}
	free := t.Count - 1 - len(t.Shares)
	total := t.DominantShare + sum
	sum = math.Round(sum*1e9) / 1e9 // as written, not 0.30000000000000004
	switch {
	case !domOK || !sharesOK || len(t.Shares) == 0:
	case total > 1+1e-9:
		c.add("tenants.shares", "dominant_share %s plus shares %s sum to %s; must be <= 1",
			fmtFloat(t.DominantShare), fmtFloat(sum), fmtFloat(math.Round(total*1e9)/1e9))
	case free > 0 && total > 1-1e-9:
		c.add("tenants.shares", "dominant_share %s plus shares %s sum to 1, leaving nothing for the %d tenants without a share; must be < 1",
			fmtFloat(t.DominantShare), fmtFloat(sum), free)
	case free == 0 && t.Count >= 2 && total < 1-1e-9:
		c.add("tenants.shares", "every tenant has a share but dominant_share %s plus shares %s sum to %s; must be 1",
			fmtFloat(t.DominantShare), fmtFloat(sum), fmtFloat(math.Round(total*1e9)/1e9))
	}
}

func (c *checker) data(d *Data, tenants int) {
	if err := footprint.ValidSchema(d.SchemaName()); err != nil {
		c.add("data.schema", "%v", err)
	}
	if !d.Builtin() {
		return
	}
	switch {
	case d.Orders < 1:
		c.add("data.orders", "must be >= 1, got %d", d.Orders)
	case tenants >= 2 && d.Orders < tenants:
		c.add("data.orders", "must be >= tenants.count (%d) so that every tenant has orders, got %d", tenants, d.Orders)
	case d.Orders > MaxOrders:
		c.add("data.orders", "must be <= %d, got %d", MaxOrders, d.Orders)
	}
	c.between("data.days", d.Days, 1, MaxDays)
	c.atLeast("data.customers", d.Customers, 1)
}

func (c *checker) classes(cs []Class) {
	if len(cs) == 0 {
		c.add("classes", "required: at least one class")
		return
	}
	first := map[string]string{}
	for i := range cs {
		cl := &cs[i]
		p := fmt.Sprintf("classes[%d]", i)
		if c.name(p+".name", cl.Name) {
			if prev, dup := first[cl.Name]; dup {
				c.add(p+".name", "duplicate class name %q (first at %s)", cl.Name, c.where(prev))
			} else {
				first[cl.Name] = p
			}
		}
		if cl.IsolationClass == "" && !c.present(p+".isolation_class") {
			c.add(p+".isolation_class", "required when the class name is not interactive or heavy; want interactive or heavy")
		} else {
			oneOf(c, p+".isolation_class", "isolation class", cl.IsolationClass, IsolationInteractive, IsolationHeavy)
		}
		c.program(i, cl)
		switch {
		case c.present(p + ".load_factor"):
			c.loadFactor(p, cl)
		case c.present(p + ".calibrate"):
			c.add(p+".calibrate", "only with load_factor")
		case cl.Rate == 0 && !c.present(p+".rate"):
			c.add(p+".rate", "required: arrivals per second, > 0 (or load_factor)")
		case !(cl.Rate > 0) || math.IsInf(cl.Rate, 1):
			c.add(p+".rate", "must be > 0 arrivals per second, got %s", fmtFloat(cl.Rate))
		}
		oneOf(c, p+".arrival", "arrival", cl.Arrival, ArrivalPoisson, ArrivalConstant)
		oneOf(c, p+".senders", "senders", cl.Senders, SendersAll, SendersDominant, SendersQuiet)
		switch {
		case cl.Query == QuerySleep && cl.Sleep == 0 && !c.present(p+".sleep"):
			c.add(p+".sleep", "required with query sleep: the pg_sleep duration, e.g. 10ms")
		case cl.Query == QuerySleep:
			c.positive(p+".sleep", cl.Sleep)
		case cl.Sleep != 0 || c.present(p+".sleep"):
			c.add(p+".sleep", "only for query sleep")
		}
		switch {
		case cl.Query == QueryExport:
			c.atLeast(p+".batch", cl.Batch, 1)
		case cl.Batch != 0 || c.present(p+".batch"):
			c.add(p+".batch", "only for query export")
		}
	}
}

// MaxCalibrate bounds classes[].calibrate.
const MaxCalibrate = Duration(time.Minute)

// loadFactor checks a class whose rate calibration sets.
func (c *checker) loadFactor(p string, cl *Class) {
	if !(cl.LoadFactor > 0) || math.IsInf(cl.LoadFactor, 1) {
		c.add(p+".load_factor", "must be > 0 (the offered concurrency as a multiple of the pool), got %s", fmtFloat(cl.LoadFactor))
	}
	if c.present(p + ".rate") {
		c.add(p+".rate", "excludes load_factor: calibration sets the rate; give one of the two")
	}
	if c.s.Load.Model == ModelClosed {
		c.add(p+".load_factor", "needs the open model: with load.model closed class rates are only weights")
	}
	if cl.Senders != SendersDominant {
		c.add(p+".load_factor", "only for a class the dominant tenant alone sends (senders: dominant): the quiet tenants' rates must be known before the run")
	}
	switch {
	case cl.Calibrate <= 0:
		c.add(p+".calibrate", "must be a duration > 0, got %s", cl.Calibrate)
	case cl.Calibrate > MaxCalibrate:
		c.add(p+".calibrate", "must be at most %s, got %s", MaxCalibrate, cl.Calibrate)
	}
}

func (c *checker) load(l *LoadSpec) {
	// The zero value is the open model, for scenarios built in Go.
	if l.Model != "" && !oneOf(c, "load.model", "load model", l.Model, ModelOpen, ModelClosed) {
		return
	}
	if l.Model != ModelClosed {
		for _, f := range []string{"users", "think_time", "retry_queries", "max_retries"} {
			if c.present("load." + f) {
				c.add("load."+f, "applies to the closed model only (load.model: closed)")
			}
		}
		return
	}
	c.between("load.users", l.Users, 1, MaxUsers)
	c.nonNegative("load.think_time", l.ThinkTime)
	c.atLeast("load.retry_queries", l.RetryQueries, 1)
	c.atLeast("load.max_retries", l.MaxRetries, 0)
}

func (c *checker) phases(p *Phases) {
	c.nonNegative("phases.warmup", p.Warmup)
	c.positive("phases.solo", p.Solo)
	c.positive("phases.run", p.Run)
	c.nonNegative("phases.drain", p.Drain)
	for _, f := range []struct {
		name string
		d    Duration
	}{{"warmup", p.Warmup}, {"solo", p.Solo}, {"run", p.Run}, {"drain", p.Drain}} {
		if f.d > MaxPhase {
			c.add("phases."+f.name, "must be at most %s, got %s", MaxPhase, f.d)
		}
	}
}

// arrivals checks what the classes send, once classes and phases are valid:
// some class reaches the quiet tenants (or the solo baseline and quiet_p99
// measure nothing and pass vacuously), and no rate is above what a schedule
// can draw.
func (c *checker) arrivals(s *Scenario) {
	cs := s.Classes
	total, top, quiet := 0.0, -1, false
	for i, cl := range cs {
		if cl.Calibrated() {
			quiet = quiet || cl.Senders != SendersDominant
			continue
		}
		if !(cl.Rate > 0) || math.IsInf(cl.Rate, 1) {
			return
		}
		total += cl.Rate
		if top < 0 || cl.Rate > cs[top].Rate {
			top = i
		}
		quiet = quiet || cl.Senders != SendersDominant
	}
	if top < 0 {
		return
	}
	if !quiet {
		c.add("classes", "no class is sent by the quiet tenants (senders all or quiet): the solo baseline and quiet_p99 would measure nothing")
	}
	// The schedule is drawn as it is consumed: no bound on its length, but
	// each class's rate in each phase is at most one arrival per ns.
	for i, cl := range cs {
		for j, p := range s.Timeline {
			if f := p.Rate(cl.Name); f >= 0 && cl.Rate*f > workload.MaxRate {
				c.add(fmt.Sprintf("timeline[%d].rates.%s", j, cl.Name), "rate %s × factor %s is above %.0g arrivals per second",
					fmtFloat(cl.Rate), fmtFloat(f), workload.MaxRate)
			}
		}
		if cl.Rate > workload.MaxRate {
			c.add(fmt.Sprintf("classes[%d].rate", i), "must be at most %.0g arrivals per second (one per ns), got %s", workload.MaxRate, fmtFloat(cl.Rate))
		}
	}
}

// timelineLength is the sum of Steps' lengths.
func (s *Scenario) timelineLength() Duration {
	var d Duration
	for _, p := range s.Steps() {
		d += p.Span()
	}
	return d
}

func (c *checker) configurations(cs []Configuration) {
	if len(cs) == 0 {
		c.add("configurations", "required: at least one configuration; the smallest comparison is "+
			"[{name: naive, mode: shared, expect: fail}, {name: isolated, mode: isolated, expect: pass}] (defaults for the pools, roles and limiters: REFERENCE.md)")
		return
	}
	first := map[string]string{}
	for i := range cs {
		cf := &cs[i]
		p := fmt.Sprintf("configurations[%d]", i)
		if c.name(p+".name", cf.Name) {
			if len(cf.Name) > MaxConfigurationName {
				c.add(p+".name", "at most %d characters (noisysim names its roles noisysim_<name>_interactive, and PostgreSQL's names are at most 63), got %d", MaxConfigurationName, len(cf.Name))
			} else if prev, dup := first[cf.Name]; dup {
				c.add(p+".name", "duplicate configuration name %q (first at %s)", cf.Name, c.where(prev))
			} else {
				first[cf.Name] = p
			}
		}
		oneOf(c, p+".expect", "expectation", cf.Expect, ExpectPass, ExpectFail)
		if !oneOf(c, p+".mode", "mode", cf.Mode, ModeShared, ModeIsolated) {
			continue
		}
		given := func(key string, zero bool) bool { return !zero || c.present(p+"."+key) }
		switch cf.Mode {
		case ModeShared:
			c.sharedPool(p+".shared", &cf.Shared)
			for _, k := range []string{"interactive", "heavy"} {
				if given(k, cf.Pool(IsolationClass(k)).isZero()) {
					c.add(p+"."+k, "only for mode isolated; mode shared uses shared")
				}
			}
		case ModeIsolated:
			c.pool(p+".interactive", &cf.Interactive)
			c.pool(p+".heavy", &cf.Heavy)
			if given("shared", cf.Shared == SharedPool{}) {
				c.add(p+".shared", "only for mode shared; mode isolated uses interactive and heavy")
			}
		}
		c.app(p, cf)
	}
}

func (p *Pool) isZero() bool { return *p == Pool{} }

func (c *checker) sharedPool(p string, sp *SharedPool) {
	c.between(p+".pool_size", sp.PoolSize, 1, MaxConnections)
	c.positive(p+".acquire_timeout", sp.AcquireTimeout)
	c.role(p+".role", &sp.Role, sp.PoolSize)
}

func (c *checker) pool(p string, pl *Pool) {
	c.between(p+".pool_size", pl.PoolSize, 1, MaxConnections)
	c.positive(p+".acquire_timeout", pl.AcquireTimeout)
	oneOf(c, p+".target", "target", pl.Target, TargetPrimary, TargetReplica)
	c.role(p+".role", &pl.Role, pl.PoolSize)
	l := &pl.Limiter
	if !l.Enabled {
		return
	}
	lp := p + ".limiter"
	c.atLeast(lp+".max_per_tenant", l.MaxPerTenant, 1)
	c.atLeast(lp+".max_queue", l.MaxQueue, 0)
	if l.MaxQueue > 0 {
		c.positive(lp+".max_wait", l.MaxWait)
	} else {
		c.nonNegative(lp+".max_wait", l.MaxWait)
	}
	c.atLeast(lp+".max_global", l.MaxGlobal, 0)
}

// PostgreSQL's ranges for the role settings a run sets (guc_tables.c,
// 64-bit builds): a value outside them is refused by ALTER ROLE ... SET
// with SQLSTATE 22023, so validate refuses it first.
const (
	// MinWorkMemKB and MaxWorkMemKB bound work_mem, in kB.
	MinWorkMemKB = 64
	MaxWorkMemKB = math.MaxInt32
	// MaxRoleTimeout bounds statement_timeout and
	// idle_in_transaction_session_timeout: INT_MAX ms.
	MaxRoleTimeout = Duration(math.MaxInt32 * time.Millisecond)
)

func (c *checker) role(p string, r *Role, poolSize int) {
	for _, t := range []struct {
		field string
		d     Duration
	}{{"statement_timeout", r.StatementTimeout}, {"idle_in_transaction_session_timeout", r.IdleInTransactionSessionTimeout}} {
		c.nonNegative(p+"."+t.field, t.d)
		if t.d > MaxRoleTimeout {
			c.add(p+"."+t.field, "%s is above PostgreSQL's maximum %s", t.d, MaxRoleTimeout)
		}
	}
	if b, err := r.WorkMem.Bytes(); err != nil {
		c.add(p+".work_mem", "must be a PostgreSQL size such as \"64MB\" or \"512kB\" (units B, kB, MB, GB, TB), got %q", string(r.WorkMem))
	} else if kb := math.Round(float64(b) / 1024); r.WorkMem != "" && (kb < MinWorkMemKB || kb > MaxWorkMemKB) {
		// PostgreSQL rounds a value in another unit to the nearest kB.
		c.add(p+".work_mem", "%s is outside PostgreSQL's range for work_mem, %dkB to %dkB", string(r.WorkMem), MinWorkMemKB, MaxWorkMemKB)
	}
	switch {
	case r.ConnectionLimit < 0:
		c.add(p+".connection_limit", "must be >= 0 (0 means no limit), got %d", r.ConnectionLimit)
	case r.ConnectionLimit > MaxConnections:
		c.add(p+".connection_limit", "must be <= %d, got %d", MaxConnections, r.ConnectionLimit)
	case r.ConnectionLimit > 0 && poolSize > r.ConnectionLimit && !c.s.OnlyHTTP(): // the service's pools are its own
		c.add(p+".connection_limit", "%d is below the pool_size %d: the pool could not open all its connections", r.ConnectionLimit, poolSize)
	}
}

func (c *checker) assertions(a *Assertions) {
	c.checkAB(c.s)
	q := &a.QuietP99
	if !(q.Factor > 0) || math.IsInf(q.Factor, 1) {
		c.add("assertions.quiet_p99.factor", "must be > 0, got %s", fmtFloat(q.Factor))
	}
	c.nonNegative("assertions.quiet_p99.slack", q.Slack)
	c.atLeast("assertions.quiet_p99.min_samples", q.MinSamples, 1)
	if q.CheckTop != 0 && c.present("assertions.quiet_p99.check_top") && c.s.Load.Model == ModelClosed {
		c.add("assertions.quiet_p99.check_top", "needs the open model: with load.model closed the users set the pace, so no arrival is planned")
	}
	if c.present("assertions.headroom") {
		if a.Headroom.Key == "" {
			c.add("assertions.headroom.key", "required with headroom: a numeric key's path, e.g. classes.report.rate")
		}
		if !(a.Headroom.Min > 0) || math.IsInf(a.Headroom.Min, 1) {
			c.add("assertions.headroom.min", "must be > 0, got %s", fmtFloat(a.Headroom.Min))
		}
		if c.present("assertions.headroom.configurations") && len(a.Headroom.Configurations) == 0 {
			c.add("assertions.headroom.configurations", "names no configuration (an empty list, or only nulls); leave the key out to hold every configuration with expect: pass")
		}
		seen := map[string]bool{}
		for j, name := range a.Headroom.Configurations {
			f := fmt.Sprintf("assertions.headroom.configurations[%d]", j)
			if name == "" {
				c.add(f, "must be a configuration's name, got an empty one")
				continue
			}
			if _, ok := c.s.Configuration(name); !ok {
				var names []string
				for _, cf := range c.s.Configurations {
					names = append(names, cf.Name)
				}
				c.add(f, "unknown configuration %q; the scenario has %s", name, strings.Join(names, ", "))
			} else if seen[name] {
				c.add(f, "configuration %q named twice", name)
			}
			seen[name] = true
		}
	}
	known := ErrorClasses()
	seen := map[ErrorClass]bool{}
	for i, e := range a.AllowedErrors {
		f := fmt.Sprintf("assertions.allowed_errors[%d]", i)
		if seen[e] {
			c.add(f, "duplicate error class %q", string(e))
			continue
		}
		seen[e] = true
		noun := "error class"
		oneOf(c, f, noun, e, known...)
	}
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var envRef = regexp.MustCompile(`\$\{([^}]*)\}`)
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkEnvRefs returns the names of the environment variables s refers to as
// "${NAME}", or an error for a malformed reference.
func checkEnvRefs(s string) ([]string, error) {
	var names []string
	for _, m := range envRef.FindAllStringSubmatch(s, -1) {
		if !envName.MatchString(m[1]) {
			return nil, fmt.Errorf("bad environment reference %q: want ${NAME}, NAME letters, digits and _", m[0])
		}
		names = append(names, m[1])
	}
	if strings.Contains(envRef.ReplaceAllString(s, ""), "${") {
		return nil, fmt.Errorf("unclosed environment reference: want ${NAME}")
	}
	return names, nil
}

// ResolveDSNs returns PrimaryDSN and ReplicaDSN with every "${NAME}" replaced
// by the environment variable NAME. A '$' not followed by '{' is kept as is.
// A reference that is the whole DSN is replaced verbatim. Otherwise the value
// is substituted as a value, so that a password with spaces or quotes keeps
// the DSN around it intact: in a URL's user info it is percent-encoded; in a
// keyword/value DSN a value holding a space, quote or backslash is quoted
// when the reference is the whole value.
// It returns an error matching ErrInvalid naming the field when a variable is
// unset or empty, a reference is malformed, or such a value stands inside a
// longer keyword/value value, where it cannot be quoted.
func (b Backend) ResolveDSNs() (primary, replica string, err error) {
	resolve := func(field, s string) (string, error) {
		names, err := checkEnvRefs(s)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w: %v", field, ErrInvalid, err)
		}
		for _, n := range names {
			if os.Getenv(n) == "" {
				return "", fmt.Errorf("resolve %s: %w: environment variable %s is not set", field, ErrInvalid, n)
			}
		}
		out, err := substituteEnv(s)
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w: %v", field, ErrInvalid, err)
		}
		return out, nil
	}
	if primary, err = resolve("backend.primary_dsn", b.PrimaryDSN); err != nil {
		return "", "", err
	}
	if replica, err = resolve("backend.replica_dsn", b.ReplicaDSN); err != nil {
		return "", "", err
	}
	return primary, replica, nil
}

// substituteEnv replaces the ${NAME} references of dsn (checked by
// checkEnvRefs, every variable set) as ResolveDSNs describes.
func substituteEnv(dsn string) (string, error) {
	locs := envRef.FindAllStringSubmatchIndex(dsn, -1)
	if len(locs) == 1 && locs[0][0] == 0 && locs[0][1] == len(dsn) {
		return os.Getenv(dsn[locs[0][2]:locs[0][3]]), nil
	}
	// In a URL, user info runs from after "scheme://" to the last '@'
	// before the host's first '/'.
	infoFrom, infoTo := -1, -1
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if strings.HasPrefix(dsn, scheme) {
			rest := dsn[len(scheme):]
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[:i]
			}
			infoFrom, infoTo = len(scheme), len(scheme)+strings.LastIndexByte(rest, '@')
		}
	}
	url := infoFrom >= 0
	var b strings.Builder
	last := 0
	for _, l := range locs {
		name := dsn[l[2]:l[3]]
		v := os.Getenv(name)
		switch {
		case url && l[0] >= infoFrom && l[1] <= infoTo:
			v = percentEncode(v)
		case !url && strings.ContainsAny(v, " \t\n\r\f\v'\\"):
			before := strings.TrimRight(dsn[:l[0]], " ")
			if !strings.HasSuffix(before, "=") || (l[1] < len(dsn) && !strings.ContainsRune(" \t\n\r\f\v", rune(dsn[l[1]]))) {
				return "", fmt.Errorf("environment variable %s holds a space, quote or backslash, which cannot stand inside a longer value: make ${%s} the whole value (key=${%s})", name, name, name)
			}
			v = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
		}
		b.WriteString(dsn[last:l[0]])
		b.WriteString(v)
		last = l[1]
	}
	b.WriteString(dsn[last:])
	return b.String(), nil
}

// percentEncode encodes every byte of s but RFC 3986's unreserved ones.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// faults checks the fault steps against the backend, topology, phases and
// configurations.
func (c *checker) faults(s *Scenario) {
	if len(s.Faults) == 0 {
		return
	}
	if s.Backend.Kind != BackendDocker {
		c.add("faults", "need backend kind docker (faults stop, pause or disconnect a container); got kind %q", s.Backend.Kind)
	}
	nodes := []string{"primary"}
	if s.Backend.Topology == backend.TopologyReplica {
		nodes = append(nodes, "replica1")
	}
	for i, f := range s.Faults {
		var window time.Duration
		from := s.FaultPhase(f)
		if k := s.PhaseIndex(from); k >= 0 {
			window = (s.timelineLength() - s.PhaseStart(k)).Duration()
		}
		span := fmt.Sprintf("the rest of the timeline from phase %s", from)
		if s.TimelineDerived() && from == PhaseRunWarmup {
			span = "phases.warmup + phases.run"
		}
		p := fmt.Sprintf("faults[%d]", i)
		switch {
		case f.Node == "":
			c.add(p+".node", "required: one of %s", strings.Join(nodes, ", "))
		case !slices.Contains(nodes, f.Node):
			c.add(p+".node", "unknown node %q; topology %s has %s", f.Node, s.Backend.Topology, strings.Join(nodes, ", "))
		}
		oneOf(c, p+".action", "fault action", f.Action, FaultStop, FaultPause, FaultDisconnect)
		c.nonNegative(p+".at", f.At)
		c.positive(p+".for", f.For)
		if f.At >= 0 && f.For > 0 && window > 0 {
			if f.At.Duration() >= window {
				c.add(p+".at", "must be < %s (%s), got %s", span, window, f.At)
			} else if f.At.Duration()+f.For.Duration() > window {
				c.add(p+".for", "at + for (%s) must be <= %s (%s)", f.At.Duration()+f.For.Duration(), span, window)
			}
		}
		for j, name := range f.Configurations {
			if _, ok := s.Configuration(name); !ok {
				c.add(fmt.Sprintf("%s.configurations[%d]", p, j), "unknown configuration %q", name)
			}
		}
		c.faultOverlap(s, i)
	}
}

// faultOverlap reports fault i when its window [at, at+for) meets the
// window of an earlier fault on the same node in a configuration both
// apply to: a node cannot be stopped, paused or disconnected twice at once,
// and the run would fail when the second one starts. Only the first such
// fault is named.
func (c *checker) faultOverlap(s *Scenario, i int) {
	f := s.Faults[i]
	if f.Node == "" || f.For <= 0 || f.At < 0 {
		return
	}
	fAt, ok := s.faultStart(f)
	if !ok {
		return
	}
	for j, g := range s.Faults[:i] {
		if g.Node != f.Node || g.For <= 0 || g.At < 0 {
			continue
		}
		gAt, ok := s.faultStart(g)
		if !ok || fAt >= gAt+g.For || gAt >= fAt+f.For {
			continue
		}
		name, ok := sharedConfiguration(s, f, g)
		if !ok {
			continue
		}
		when := fmt.Sprintf("from %s to %s of the timeline", gAt, gAt+g.For)
		if s.FaultPhase(f) == s.FaultPhase(g) {
			when = fmt.Sprintf("from %s to %s", g.At, g.At+g.For)
		}
		c.add(fmt.Sprintf("faults[%d].at", i), "overlaps faults[%d] (%s %s %s) in configuration %s: "+
			"faults on one node must not overlap; move one, shorten it or give them distinct configurations",
			j, g.Action, g.Node, when, name)
		return
	}
}

// faultStart returns when fault f starts, from the start of the timeline;
// false when its phase is unknown.
func (s *Scenario) faultStart(f Fault) (Duration, bool) {
	k := s.PhaseIndex(s.FaultPhase(f))
	if k < 0 {
		return 0, false
	}
	return s.PhaseStart(k) + f.At, true
}

// sharedConfiguration returns the first configuration of s that both f and
// g apply to.
func sharedConfiguration(s *Scenario, f, g Fault) (string, bool) {
	for _, cf := range s.Configurations {
		if f.Applies(cf.Name) && g.Applies(cf.Name) {
			return cf.Name, true
		}
	}
	return "", false
}

// app checks a configuration's app section.
func (c *checker) app(p string, cf *Configuration) {
	a := cf.App
	if a == nil {
		return
	}
	ap := p + ".app"
	switch {
	case c.s.HasHTTP():
		c.add(ap, "not with HTTP classes: their requests meet the service's limiter, not noisysim's instances")
		return
	case c.s.Backend.Topology == TopologyShards || c.s.Citus():
		c.add(ap, "not with topology %s: instances run on one primary (and replica)", c.s.Backend.Topology)
		return
	}
	if cf.Mode != ModeIsolated {
		c.add(ap, "only for mode isolated: the instances differ by their limiters")
		return
	}
	c.between(ap+".instances", a.Instances, 1, MaxAppInstances)
	for _, k := range []string{"interactive", "heavy"} {
		pl := cf.Pool(IsolationClass(k))
		if n := a.Instances * pl.PoolSize; a.Instances > 1 && pl.Role.ConnectionLimit > 0 && pl.Role.ConnectionLimit < n {
			c.add(p+"."+k+".role.connection_limit", "must be at least app.instances × pool_size = %d (each instance opens its own pool), got %d",
				n, pl.Role.ConnectionLimit)
		}
	}
	if !oneOf(c, ap+".limiter", "app limiter", a.Limiter, AppPerInstance, AppDivided, AppGlobal) {
		return
	}
	if a.Limiter != AppGlobal {
		if a.RedisURL != "" {
			c.add(ap+".redis_url", "only for limiter global")
		}
		if a.FailOpen {
			c.add(ap+".fail_open", "only for limiter global")
		}
		return
	}
	if a.RedisURL != "" {
		if _, err := redis.ParseURL(a.RedisURL); err != nil {
			c.add(ap+".redis_url", "not a Redis URL (redis://host:port/db): %v", err)
		}
	}
	for _, k := range []string{"interactive", "heavy"} {
		if l := cf.Pool(IsolationClass(k)).Limiter; l.Enabled && l.MaxGlobal > 0 {
			c.add(p+"."+k+".limiter.max_global", "not with app.limiter global: the Redis limiter caps tenants only")
		}
	}
}

// checkCores checks a CPU list: its syntax, and unless optional (the run
// then goes on without pinning where a core is missing) that this machine
// lets noisysim use each core.
func checkCores(c *checker, field, list string, optional bool) {
	cores, err := affinity.Parse(list)
	if err == nil && !optional {
		err = affinity.Check(cores)
	}
	if err != nil {
		c.add(field, "%v", err)
	}
}
