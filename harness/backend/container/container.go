package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"sync"
	"time"

	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/noisysim/noisysim/harness/backend"
)

// Images. The defaults are pinned so that a scenario means the same server
// on every machine.
const (
	// DefaultImage is the image of plain PostgreSQL nodes (primary,
	// replica, shard): the official postgres image.
	DefaultImage = "postgres:15.13-bookworm"
	// DefaultCitusImage is the image of Citus coordinators and workers.
	DefaultCitusImage = "citusdata/citus:12.1.6"
	// LocalTestImage is the tag .ci/pg-image.sh builds on machines without
	// a registry: Debian's postgresql-15 with an entry point that honours
	// the official image's variables. noisysim's own tests use it.
	LocalTestImage = "noisysim-local/postgres:15-bookworm"
)

// TopologyCitus is a Citus coordinator and Spec.Nodes workers (default
// DefaultWorkers) on one Docker network, with CitusSettings, the citus
// extension created on every node and the workers registered with
// citus_add_node by their network alias (Cluster.PeerAddr).
const TopologyCitus backend.Topology = "citus"

// Defaults of Backend options and topologies.
const (
	// DefaultWorkers is the worker count of TopologyCitus when Spec.Nodes is 0.
	DefaultWorkers = 4
	// DefaultPrimaries is the node count of backend.TopologyPrimaries when
	// Spec.Nodes is 0.
	DefaultPrimaries = 2
	// MaxNodes bounds Spec.Nodes.
	MaxNodes = 32
	// DefaultStartTimeout bounds one Start call.
	DefaultStartTimeout = 3 * time.Minute
)

// Labels put on every container and network the backend creates; Remove
// finds them by these.
const (
	// LabelManaged is "true" on everything noisysim creates.
	LabelManaged = "org.noisysim.managed"
	// LabelRun holds the run id of the cluster.
	LabelRun = "org.noisysim.run"
	// LabelNode holds the node name (containers only).
	LabelNode = "org.noisysim.node"
	// LabelKept is "true" on the clusters of a Backend made WithKeep
	// (`noisysim cluster up --keep`): RemoveKept removes those only.
	LabelKept = "org.noisysim.kept"
)

const (
	superuser = "postgres"
	database  = "postgres"
	pgPort    = 5432
)

// Supported lists the topologies the container backend starts.
var Supported = []backend.Topology{backend.TopologySingle, backend.TopologyReplica, backend.TopologyPrimaries, TopologyCitus}

// Backend starts PostgreSQL clusters in Docker containers through
// testcontainers-go. It implements backend.Backend and may start several
// clusters, concurrently.
type Backend struct {
	log        *slog.Logger
	images     map[backend.Role]string
	startLimit time.Duration
	keep       bool
	extra      map[string]string

	mu   sync.Mutex
	live map[*Cluster]bool
}

var _ backend.Backend = (*Backend)(nil)

// Option configures a Backend.
type Option func(*Backend)

// WithLogger sets the logger; nil (the default) is silent. testcontainers'
// own messages go to it at debug level.
func WithLogger(l *slog.Logger) Option { return func(b *Backend) { b.log = l } }

// WithImage sets the image of nodes with role r. "" restores the default:
// DefaultImage for primaries, replicas and shards, DefaultCitusImage for
// coordinators and workers.
func WithImage(r backend.Role, image string) Option {
	return func(b *Backend) {
		if image == "" {
			delete(b.images, r)
		} else {
			b.images[r] = image
		}
	}
}

// WithImages sets the image of every role to image ("" keeps the defaults),
// e.g. LocalTestImage for plain topologies.
func WithImages(image string) Option {
	return func(b *Backend) {
		for _, r := range []backend.Role{backend.RolePrimary, backend.RoleReplica, backend.RoleShard, backend.RoleCoordinator, backend.RoleWorker} {
			WithImage(r, image)(b)
		}
	}
}

// WithLabel adds label key=value to every container and network the
// backend creates, beside its own (e.g. to tell one test process's clusters
// from another's; see Leftovers). Keys of its own are not overridden.
func WithLabel(key, value string) Option {
	return func(b *Backend) {
		if b.extra == nil {
			b.extra = map[string]string{}
		}
		b.extra[key] = value
	}
}

// WithStartTimeout bounds each Start call; 0 means DefaultStartTimeout.
func WithStartTimeout(d time.Duration) Option { return func(b *Backend) { b.startLimit = d } }

// WithKeep makes Close leave the containers and the network running (for
// `noisysim cluster up --keep`) and labels them LabelKept; RemoveKept or
// Remove deletes them later.
func WithKeep(keep bool) Option { return func(b *Backend) { b.keep = keep } }

var setupOnce sync.Once

// setup disables testcontainers' reaper and quiets its process-wide logger,
// once, before the first testcontainers call (its configuration is read
// once per process).
func setup() {
	setupOnce.Do(func() {
		if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
			os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
		tclog.SetDefault(tclog.NewNoopLogger())
	})
}

// New returns a Backend configured by opts.
//
// testcontainers' reaper container (ryuk) is not used: the backend removes
// what it creates itself, by label. The package therefore sets
// TESTCONTAINERS_RYUK_DISABLED=true unless the environment already sets it,
// and routes testcontainers' process-wide logger away from the terminal,
// before its first call into testcontainers (a program that used
// testcontainers earlier keeps its own settings).
func New(opts ...Option) *Backend {
	setup()
	b := &Backend{images: map[backend.Role]string{}}
	for _, o := range opts {
		o(b)
	}
	if b.log == nil {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
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

// Image returns the image nodes with role r run.
func (b *Backend) Image(r backend.Role) string {
	if img, ok := b.images[r]; ok {
		return img
	}
	if r == backend.RoleCoordinator || r == backend.RoleWorker {
		return DefaultCitusImage
	}
	return DefaultImage
}

// StartCluster starts a cluster as spec says, each node in its own container
// on a new Docker network named noisysim-<run id>, and returns once every
// node answers a query (and, for replicas, has replayed the primary's WAL
// position taken after the primary came up).
//
// Topologies: backend.TopologySingle (node "primary"),
// backend.TopologyReplica ("primary" and "replica1", a hot standby made by
// pg_basebackup through a replication slot, hot_standby_feedback=off),
// backend.TopologyPrimaries (spec.Nodes independent primaries primary1…,
// default DefaultPrimaries) and TopologyCitus ("coordinator" and
// spec.Nodes workers worker1…, default DefaultWorkers). Each node's port
// 5432 is published on 127.0.0.1 at a free port that stays the same when
// the container restarts (see Cluster.Inject).
//
// Errors: *backend.TopologyError or a backend.ErrBadInput error for a bad
// spec; *DockerError (no daemon) or *ImageError (image missing and not
// pullable) and *CitusImageError (a Citus node's image has no citus
// extension), all backend.ErrNotInstalled; *NodeStartError when a node does
// not become ready; ctx.Err() wrapped when ctx ends first. On error
// everything created is removed.
func (b *Backend) StartCluster(ctx context.Context, spec backend.Spec) (*Cluster, error) {
	plans, err := planNodes(spec)
	if err != nil {
		return nil, err
	}
	if err := checkSettings(spec.Settings); err != nil {
		return nil, err
	}
	if err := checkCPU(spec.CPU); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.startLimit)
	defer cancel()
	began := time.Now()

	cli, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		b:        b,
		log:      b.log,
		cli:      cli,
		runID:    newRunID(),
		password: newPassword(),
		settings: spec.Settings,
		topology: spec.Topology,
		keep:     b.keep,
		cpu:      spec.CPU,
	}
	if c.topology == "" {
		c.topology = backend.TopologySingle
	}
	b.track(c, true)
	if err := c.start(ctx, plans); err != nil {
		if cerr := c.remove(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", cerr))
		}
		b.track(c, false)
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("start cluster: %w (%w)", ctx.Err(), err)
		}
		return nil, err
	}
	c.createMu.Lock()
	closed := c.closing
	c.createMu.Unlock()
	if closed { // CloseAll removed it while it started
		b.track(c, false)
		return nil, fmt.Errorf("start cluster: %w", errClosed)
	}
	c.ready = time.Since(began)
	b.log.Debug("cluster up", "run", c.runID, "nodes", len(c.nodes), "duration", c.ready)
	return c, nil
}

// nodePlan is one node to start.
type nodePlan struct {
	name     string
	role     backend.Role
	upstream string // replicas: the node streamed from
}

func planNodes(spec backend.Spec) ([]nodePlan, error) {
	count := func(def int) (int, error) {
		n := spec.Nodes
		if n == 0 {
			n = def
		}
		if n < 1 || n > MaxNodes {
			return 0, fmt.Errorf("plan nodes: %d nodes is out of range 1..%d: %w", spec.Nodes, MaxNodes, backend.ErrBadInput)
		}
		return n, nil
	}
	switch spec.Topology {
	case "", backend.TopologySingle:
		return []nodePlan{{name: "primary", role: backend.RolePrimary}}, nil
	case backend.TopologyReplica:
		return []nodePlan{
			{name: "primary", role: backend.RolePrimary},
			{name: "replica1", role: backend.RoleReplica, upstream: "primary"},
		}, nil
	case backend.TopologyPrimaries:
		n, err := count(DefaultPrimaries)
		if err != nil {
			return nil, err
		}
		plans := make([]nodePlan, n)
		for i := range plans {
			plans[i] = nodePlan{name: fmt.Sprintf("primary%d", i+1), role: backend.RolePrimary}
		}
		return plans, nil
	case TopologyCitus:
		n, err := count(DefaultWorkers)
		if err != nil {
			return nil, err
		}
		plans := []nodePlan{{name: "coordinator", role: backend.RoleCoordinator}}
		for i := range n {
			plans = append(plans, nodePlan{name: fmt.Sprintf("worker%d", i+1), role: backend.RoleWorker})
		}
		return plans, nil
	}
	return nil, &backend.TopologyError{Topology: spec.Topology, Supported: Supported}
}

// NodeNames returns the node names spec's topology gets, in start order, or
// an error for a spec StartCluster would refuse. Scenario validation uses it
// to check fault targets.
func NodeNames(spec backend.Spec) ([]string, error) {
	plans, err := planNodes(spec)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.name
	}
	return names, nil
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// reserved settings are the ones the backend sets itself.
var reserved = []string{"listen_addresses", "port", "hot_standby_feedback", "primary_conninfo", "primary_slot_name", "data_directory", "hba_file"}

func checkSettings(s map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(s)) {
		switch {
		case !settingName.MatchString(k):
			return fmt.Errorf("server setting %q: not a setting name: %w", k, backend.ErrBadInput)
		case slices.Contains(reserved, k):
			return fmt.Errorf("server setting %q: set by the container backend itself: %w", k, backend.ErrBadInput)
		}
	}
	return nil
}

// DefaultSettings are applied to every node before Spec.Settings: clusters
// are throwaway, so durability is traded for speed.
var DefaultSettings = map[string]string{
	"fsync":              "off",
	"full_page_writes":   "off",
	"synchronous_commit": "off",
	"max_connections":    "200",
}

func newRunID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newPassword returns 192 random bits, hex encoded: safe in a conninfo
// string and a shell word.
func newPassword() string {
	var b [24]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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

// CloseAll removes every cluster b started that is not closed yet,
// including one whose Start has not returned (that Start then fails) and
// kept ones. It is the last-resort teardown of a program that may be
// interrupted anywhere, e.g. on a signal or a panic.
func (b *Backend) CloseAll() error {
	b.mu.Lock()
	cs := slices.Collect(maps.Keys(b.live))
	b.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.close(false))
	}
	return errors.Join(errs...)
}
