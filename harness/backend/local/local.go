package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/internal/affinity"
)

// Defaults of Backend options.
const (
	// DefaultStartTimeout bounds one Start call.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout is how long Close waits for a fast shutdown
	// (SIGINT) of a node before an immediate one (SIGQUIT), then SIGKILL.
	DefaultStopTimeout = 10 * time.Second
)

// superuser is the bootstrap superuser of every cluster, and Database the
// database Nodes point at.
const (
	superuser = "postgres"
	database  = "postgres"
)

// Backend starts throwaway PostgreSQL clusters as local processes. It
// implements backend.Backend. A Backend holds no cluster state: it may start
// several clusters, concurrently.
type Backend struct {
	log         *slog.Logger
	binDir      string
	baseDir     string
	cacheDir    string
	runAs       string
	keep        bool
	port        int
	stopTimeout time.Duration
	startLimit  time.Duration

	mu   sync.Mutex
	bin  *Binaries
	live map[*Cluster]bool // started (or starting), not closed nor detached
}

var _ backend.Backend = (*Backend)(nil)

// Option configures a Backend.
type Option func(*Backend)

// WithLogger sets the logger; nil (the default) is silent. Start logs each
// step's duration at debug level.
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// WithBinDir sets the directory of PostgreSQL's server binaries; it is then
// the only place searched (see FindBinaries). "" (the default) searches.
func WithBinDir(dir string) Option { return func(b *Backend) { b.binDir = dir } }

// WithBaseDir sets where cluster directories (noisysim-*) are created. ""
// (the default) means os.TempDir(), usually /tmp.
func WithBaseDir(dir string) Option { return func(b *Backend) { b.baseDir = dir } }

// WithCacheDir sets where initdb templates are cached. "" (the default) means
// $XDG_CACHE_HOME/noisysim (~/.cache/noisysim), or /var/tmp/noisysim-cache
// when running as root.
func WithCacheDir(dir string) Option { return func(b *Backend) { b.cacheDir = dir } }

// WithServerUser sets the system user PostgreSQL runs as when noisysim runs
// as root; "" (the default) means DefaultServerUser. Ignored when not root.
func WithServerUser(name string) Option { return func(b *Backend) { b.runAs = name } }

// WithKeep starts clusters that can outlive the process: their servers run
// in their own session, without the parent-death signal, so Cluster.Detach
// can leave them running (see StopKept). Close still stops them.
func WithKeep(keep bool) Option { return func(b *Backend) { b.keep = keep } }

// WithPort sets the TCP port of the first node; the others get free ports.
// 0 (the default) picks a free port for every node. An explicit port that is
// taken fails Start with *PortInUseError rather than being retried.
func WithPort(port int) Option { return func(b *Backend) { b.port = port } }

// WithStopTimeout sets how long Close waits for a node's fast shutdown before
// escalating; 0 means DefaultStopTimeout.
func WithStopTimeout(d time.Duration) Option { return func(b *Backend) { b.stopTimeout = d } }

// WithStartTimeout bounds each Start call; 0 means DefaultStartTimeout.
func WithStartTimeout(d time.Duration) Option { return func(b *Backend) { b.startLimit = d } }

// New returns a Backend configured by opts.
func New(opts ...Option) *Backend {
	b := &Backend{}
	for _, o := range opts {
		o(b)
	}
	if b.log == nil {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if b.baseDir == "" {
		b.baseDir = os.TempDir()
	}
	if b.cacheDir == "" {
		b.cacheDir = defaultCacheDir()
	}
	// Servers and initdb run in other working directories: every path
	// handed to them must be absolute.
	if abs, err := filepath.Abs(b.baseDir); err == nil {
		b.baseDir = abs
	}
	if abs, err := filepath.Abs(b.cacheDir); err == nil {
		b.cacheDir = abs
	}
	if b.stopTimeout <= 0 {
		b.stopTimeout = DefaultStopTimeout
	}
	if b.startLimit <= 0 {
		b.startLimit = DefaultStartTimeout
	}
	return b
}

// Start is New(opts...).StartCluster(ctx, spec).
func Start(ctx context.Context, spec backend.Spec, opts ...Option) (*Cluster, error) {
	return New(opts...).StartCluster(ctx, spec)
}

// Start implements backend.Backend; see StartCluster.
func (b *Backend) Start(ctx context.Context, spec backend.Spec) (backend.Cluster, error) {
	c, err := b.StartCluster(ctx, spec)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Binaries returns the server binaries b uses, searching for them on first
// use (see FindBinaries).
func (b *Backend) Binaries(ctx context.Context) (Binaries, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bin != nil {
		return *b.bin, nil
	}
	bin, err := FindBinaries(ctx, b.binDir)
	if err != nil {
		return Binaries{}, err
	}
	b.bin = &bin
	return bin, nil
}

// StartCluster starts a cluster as spec says and returns once every node
// accepts queries and every replica has replayed the primary's WAL position
// (pg_current_wal_lsn()) taken after the primary came up.
//
// Topologies: backend.TopologySingle (node "primary"), backend.TopologyReplica
// ("primary" and "replica1", a hot standby made by pg_basebackup streaming
// through a physical replication slot, hot_standby_feedback=off) and
// backend.TopologyPrimaries (spec.Nodes independent primaries, default 2) and
// TopologyCitus ("coordinator" and spec.Nodes workers, default
// DefaultCitusWorkers; see citusSettings for what every node gets).
//
// Errors: *backend.TopologyError or *SettingError (backend.ErrBadInput) for a
// bad spec; *BaseDirError (backend.ErrBadInput) for an unusable base dir; *BinariesNotFoundError or *ServerUserError
// (backend.ErrNotInstalled) for a machine that lacks PostgreSQL or its user;
// *CitusNotInstalledError (backend.ErrNotInstalled) for TopologyCitus
// without the citus extension; *PortInUseError for an explicit port that is taken; *NodeStartError when a
// server does not come up; ctx.Err() wrapped when ctx ends first. On error
// nothing started is left running or on disk.
func (b *Backend) StartCluster(ctx context.Context, spec backend.Spec) (*Cluster, error) {
	plans, err := planNodes(spec)
	if err != nil {
		return nil, err
	}
	settings, err := userSettings(spec.Settings)
	if err != nil {
		return nil, err
	}
	if err := checkCPU(spec.CPU); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.startLimit)
	defer cancel()
	began := time.Now()

	bin, err := b.Binaries(ctx)
	if err != nil {
		return nil, err
	}
	citus := spec.Topology == TopologyCitus
	if citus {
		if err := CheckCitus(ctx, bin); err != nil {
			return nil, err
		}
		if settings, err = userSettings(citusSettings(ctx, bin, spec.Settings)); err != nil {
			return nil, err
		}
	}
	u, err := serverUser(b.runAs)
	if err != nil {
		return nil, err
	}
	me, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("look up current user: %w", err)
	}
	if err := checkBaseDir(b.baseDir, u); err != nil {
		return nil, err
	}

	c := &Cluster{
		b:        b,
		log:      b.log,
		bin:      bin,
		user:     u,
		invoker:  me.Username,
		keep:     b.keep,
		settings: settings,
		password: newPassword(),
		citus:    citus,
	}
	t0 := time.Now()
	tmpl, created, err := ensureTemplate(ctx, b.cacheDir, bin, u)
	if err != nil {
		return nil, fmt.Errorf("prepare template: %w", err)
	}
	c.template, c.templateCreated = tmpl, created
	step := "template"
	if created {
		step = "initdb"
	}
	c.step("", step, t0)

	// Nodes without cores of their own are started on every core this
	// process had at the start, even if noisysim pins itself later
	// (backend.generator_cores): a server restarted mid-run must not
	// inherit the generator's cores.
	if c.anyCores, err = affinity.Allowed(); err != nil {
		return nil, err
	}
	c.cores = map[string][]int{}
	for _, p := range plans {
		if cores := spec.CPU.CoresFor(p.role); len(cores) > 0 {
			if err := affinity.Check(cores); err != nil {
				if spec.CPU.Optional {
					c.log.Warn("running without the node's cores", "node", p.name, "reason", err)
					continue
				}
				return nil, &CPUBudgetError{Node: p.name, Err: fmt.Errorf("%w: %w", backend.ErrBadInput, err)}
			}
			c.cores[p.name] = cores
		}
	}
	b.sweep(b.baseDir)
	b.track(c, true)
	if err := c.makeDir(b.baseDir); err != nil {
		b.track(c, false)
		return nil, err
	}
	err = c.setupCPU(spec.CPU, plans)
	if err == nil {
		err = c.writeState()
	}
	if err != nil {
		c.removeCPU()
		os.RemoveAll(c.dir)
		b.track(c, false)
		return nil, err
	}
	if err := c.startNodes(ctx, plans); err != nil {
		if cerr := c.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", cerr))
		}
		// A concurrent CloseAll may have removed the dir while a copy was
		// still writing into it; every start goroutine has ended by now.
		os.RemoveAll(c.dir)
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("start cluster: %w (%w)", ctx.Err(), err)
		}
		return nil, err
	}
	if citus {
		if err := c.registerCitus(ctx); err != nil {
			if cerr := c.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", cerr))
			}
			return nil, err
		}
	}
	c.ready = time.Since(began)
	b.log.Debug("cluster up", "dir", c.dir, "nodes", len(c.nodes), "duration", c.ready)
	return c, nil
}

// nodePlan is one node to start.
type nodePlan struct {
	name     string
	role     backend.Role
	upstream string // replicas: the node streamed from
}

// Supported lists the topologies the local backend starts.
var Supported = []backend.Topology{backend.TopologySingle, backend.TopologyReplica, backend.TopologyPrimaries, TopologyCitus}

func planNodes(spec backend.Spec) ([]nodePlan, error) {
	switch spec.Topology {
	case "", backend.TopologySingle:
		return []nodePlan{{name: "primary", role: backend.RolePrimary}}, nil
	case backend.TopologyReplica:
		return []nodePlan{
			{name: "primary", role: backend.RolePrimary},
			{name: "replica1", role: backend.RoleReplica, upstream: "primary"},
		}, nil
	case backend.TopologyPrimaries:
		n := spec.Nodes
		if n == 0 {
			n = 2
		}
		if n < 1 || n > 64 {
			return nil, fmt.Errorf("plan nodes: %d nodes is out of range 1..64: %w", spec.Nodes, backend.ErrBadInput)
		}
		plans := make([]nodePlan, n)
		for i := range plans {
			plans[i] = nodePlan{name: fmt.Sprintf("primary%d", i+1), role: backend.RolePrimary}
		}
		return plans, nil
	case TopologyCitus:
		n := spec.Nodes
		if n == 0 {
			n = DefaultCitusWorkers
		}
		if n < 1 || n > 64 {
			return nil, fmt.Errorf("plan nodes: %d workers is out of range 1..64: %w", spec.Nodes, backend.ErrBadInput)
		}
		plans := []nodePlan{{name: "coordinator", role: backend.RoleCoordinator}}
		for i := range n {
			plans = append(plans, nodePlan{name: fmt.Sprintf("worker%d", i+1), role: backend.RoleWorker})
		}
		return plans, nil
	}
	return nil, &backend.TopologyError{Topology: spec.Topology, Supported: Supported}
}

// KeptClusters returns the directories under baseDir ("" means os.TempDir())
// holding clusters started with WithKeep that are still recorded there.
func KeptClusters(baseDir string) ([]string, error) {
	if baseDir == "" {
		baseDir = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(baseDir, "noisysim-*"))
	if err != nil {
		return nil, fmt.Errorf("list cluster dirs: %w", err)
	}
	var kept []string
	for _, d := range dirs {
		if st, err := readState(d); err == nil && st.Keep {
			kept = append(kept, d)
		}
	}
	return kept, nil
}

func (b *Backend) track(c *Cluster, live bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live == nil {
		b.live = map[*Cluster]bool{}
	}
	if live {
		b.live[c] = true
	} else {
		delete(b.live, c)
	}
}

func (b *Backend) liveClusters() []*Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*Cluster, 0, len(b.live))
	for c := range b.live {
		out = append(out, c)
	}
	return out
}

// CloseAll closes every cluster b started that is neither closed nor
// detached, including one whose Start has not returned yet (that Start then
// fails). It is the last-resort teardown of a program that may be
// interrupted anywhere, e.g. on panic.
func (b *Backend) CloseAll() error {
	var errs []error
	for _, c := range b.liveClusters() {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// KillAll is CloseAll with Kill: servers get SIGKILL at once.
func (b *Backend) KillAll() error {
	var errs []error
	for _, c := range b.liveClusters() {
		errs = append(errs, c.Kill())
	}
	return errors.Join(errs...)
}

// checkBaseDir returns a *BaseDirError unless dir is a directory the current
// user can create entries in and u can reach (search every directory from /
// down to dir: the servers run as u, with no supplementary groups).
func checkBaseDir(dir string, u osUser) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &BaseDirError{Dir: dir, Reason: "does not exist"}
	case err != nil:
		return &BaseDirError{Dir: dir, Reason: err.Error()}
	case !st.IsDir():
		return &BaseDirError{Dir: dir, Reason: "not a directory"}
	}
	if err := syscall.Access(dir, 0o3); err != nil { // W_OK|X_OK for the caller
		return &BaseDirError{Dir: dir, Reason: "not writable: " + err.Error()}
	}
	if !u.switchTo {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return &BaseDirError{Dir: dir, Reason: err.Error()}
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		var bit os.FileMode = 0o001
		switch {
		case int(sys.Uid) == u.uid:
			bit = 0o100
		case int(sys.Gid) == u.gid:
			bit = 0o010
		}
		if st.Mode().Perm()&bit == 0 {
			return &BaseDirError{Dir: dir, Reason: fmt.Sprintf("the server user %s cannot enter %s (mode %v, owner uid %d); choose a dir it can reach or make %s searchable (chmod o+x)",
				u.name, d, st.Mode().Perm(), sys.Uid, d)}
		}
		if d == "/" || d == filepath.Dir(d) {
			return nil
		}
	}
}
