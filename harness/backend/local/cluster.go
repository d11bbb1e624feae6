package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/noisysim/noisysim/harness/backend"
)

// Cluster is a running local cluster. It implements backend.Cluster. Its
// methods are safe for concurrent use.
type Cluster struct {
	b        *Backend
	log      *slog.Logger
	bin      Binaries
	user     osUser
	invoker  string
	keep     bool
	settings []setting
	password string
	citus    bool // TopologyCitus: servers get PGPASSFILE for node-to-node connections
	ready    time.Duration
	cpu      *cpuGroups       // nil: no CPU budgets asked for
	cores    map[string][]int // by node: the cores it is pinned to (backend.CPUBudget.Cores)
	anyCores []int            // the cores of a node without its own: this process's at Start

	template        string
	templateCreated bool

	dir   string
	nodes []*node

	mu       sync.Mutex
	steps    []Step
	detached bool
	closing  bool // set under mu by teardown; no server starts after it

	closeOnce sync.Once
	closeErr  error
}

var _ backend.Cluster = (*Cluster)(nil)

// Step is the duration of one start-up step.
type Step struct {
	// Node is the node's name, "" for cluster-wide steps.
	Node string
	// Name is the step: "initdb" (template created), "template" (template
	// found), "copy", "launch", "password", "basebackup", "catchup".
	Name     string
	Duration time.Duration
}

// NodeStat describes one node's process and files.
type NodeStat struct {
	backend.Node
	// PID is the postmaster's process id (also its process group id).
	PID int
	// Running is false once the postmaster has exited.
	Running bool
	DataDir string
	// LogPath is the server log file.
	LogPath string
	// SocketDir is the private (0700) directory of its unix socket.
	SocketDir string
}

// Stat is a snapshot of a cluster.
type Stat struct {
	// Dir is the cluster's directory, removed by Close.
	Dir      string
	Binaries Binaries
	// ServerUser is the system user the servers run as.
	ServerUser string
	// Template is the cached initdb data directory nodes were copied from;
	// TemplateCreated is true when this Start ran initdb.
	Template        string
	TemplateCreated bool
	Nodes           []NodeStat
	// Steps are start-up step durations in completion order; Ready is the
	// whole Start, from call to return.
	Steps []Step
	Ready time.Duration
	// Kept is true for a cluster started with WithKeep; Detached once
	// Detach was called.
	Kept, Detached bool
}

// Nodes returns the cluster's nodes, primaries first.
func (c *Cluster) Nodes() []backend.Node {
	out := make([]backend.Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Node
	}
	return out
}

// Dir returns the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// Stat returns a snapshot of the cluster.
func (c *Cluster) Stat() Stat {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stat{
		Dir: c.dir, Binaries: c.bin, ServerUser: c.user.name,
		Template: c.template, TemplateCreated: c.templateCreated,
		Steps: append([]Step(nil), c.steps...), Ready: c.ready,
		Kept: c.keep, Detached: c.detached,
	}
	for _, n := range c.nodes {
		st.Nodes = append(st.Nodes, n.stat())
	}
	return st
}

func (c *Cluster) step(node, name string, since time.Time) {
	d := time.Since(since)
	c.mu.Lock()
	c.steps = append(c.steps, Step{Node: node, Name: name, Duration: d})
	c.mu.Unlock()
	c.log.Debug("start step", "node", node, "step", name, "duration", d)
}

// makeDir creates the cluster directory and its password file.
func (c *Cluster) makeDir(base string) error {
	dir, err := os.MkdirTemp(base, "noisysim-")
	if err != nil {
		return fmt.Errorf("create cluster dir: %w", err)
	}
	// A Close or Kill may run while Start does (CloseAll from a signal): it
	// reads c.dir under c.mu, and once it has begun no directory is made.
	c.mu.Lock()
	closing := c.closing
	if !closing {
		c.dir = dir
	}
	c.mu.Unlock()
	if closing {
		os.RemoveAll(dir)
		return errClosing
	}
	if err := c.user.chown(dir); err != nil {
		os.RemoveAll(dir)
		return err
	}
	if err := c.writeState(); err != nil {
		os.RemoveAll(dir)
		return err
	}
	// A libpq password file: used by replicas' primary_conninfo, and by
	// people connecting to a kept cluster (PGPASSFILE).
	line := fmt.Sprintf("127.0.0.1:*:*:%s:%s\n", superuser, c.password)
	if err := writeFileAs(c.passfile(), []byte(line), 0o600, c.user); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("write password file: %w", err)
	}
	return nil
}

// passfile returns the cluster's libpq password file.
func (c *Cluster) passfile() string { return filepath.Join(c.dir, "pgpass") }

// PassFile returns the path of a libpq password file (PGPASSFILE) holding
// the cluster's password, readable by the server user (and root).
func (c *Cluster) PassFile() string { return c.passfile() }

func (c *Cluster) startNodes(ctx context.Context, plans []nodePlan) error {
	byName := map[string]*node{}
	for i, p := range plans {
		n := newNode(c, p)
		if i == 0 && c.b.port != 0 {
			n.fixedPort = c.b.port
		}
		byName[p.name] = n
		c.mu.Lock()
		c.nodes = append(c.nodes, n)
		c.mu.Unlock()
	}
	for _, n := range c.nodes {
		if n.plan.upstream != "" {
			n.upstream = byName[n.plan.upstream]
		}
	}
	// Tier 1: nodes with no upstream; tier 2: replicas of them.
	for _, tier := range [][]*node{c.filter(false), c.filter(true)} {
		g, gctx := errgroup.WithContext(ctx)
		for _, n := range tier {
			g.Go(func() error { return n.start(gctx) })
		}
		err := g.Wait()
		if serr := c.writeState(); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) filter(replicas bool) []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for _, n := range c.nodes {
		if (n.upstream != nil) == replicas {
			out = append(out, n)
		}
	}
	return out
}

// Detach leaves a cluster started with WithKeep running: Close becomes a
// no-op and the cluster is stopped later by StopKept(ctx, c.Dir()). It
// returns an error wrapping ErrNotKept for a cluster started without WithKeep.
func (c *Cluster) Detach() error {
	if !c.keep {
		return fmt.Errorf("detach cluster: started without WithKeep: %w", ErrNotKept)
	}
	c.mu.Lock()
	c.detached = true
	c.mu.Unlock()
	c.b.track(c, false)
	return nil
}

// Close stops every node and removes the cluster directory. Each node gets a
// fast shutdown (SIGINT, as `pg_ctl stop -m fast`), then after the stop
// timeout an immediate one (SIGQUIT), then SIGKILL to it and its children;
// replicas stop before primaries. Close is idempotent and safe to call from
// several goroutines; later calls return the first call's error. After
// Detach it does nothing.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		detached := c.detached
		c.mu.Unlock()
		if detached {
			return
		}
		c.closeErr = c.teardown(c.b.stopTimeout)
	})
	return c.closeErr
}

// Kill stops every node at once with SIGKILL to it and its children, then
// does what Close does. Use it when a graceful Close is too slow (a second
// Ctrl-C); it may run while Close runs, and makes that Close finish quickly.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	detached := c.detached
	nodes := append([]*node(nil), c.nodes...)
	c.mu.Unlock()
	if detached {
		return nil
	}
	for _, n := range nodes {
		n.kill()
	}
	return c.Close()
}

func (c *Cluster) teardown(grace time.Duration) error {
	defer c.b.track(c, false)
	c.mu.Lock()
	c.closing = true // from here no node spawns a server (see node.spawn)
	dir := c.dir     // no directory is made after closing (see makeDir)
	c.mu.Unlock()
	var errs []error
	for _, tier := range [][]*node{c.filter(true), c.filter(false)} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, n := range tier {
			wg.Go(func() {
				if err := n.stop(grace); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	// The groups go before the directory: a sweep takes a group without
	// its cluster directory for a leftover.
	if err := c.removeCPU(); err != nil {
		errs = append(errs, err)
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove cluster dir: %w", err))
		}
	}
	for _, n := range append(c.filter(false), c.filter(true)...) {
		releasePort(n.stat().Port)
	}
	return errors.Join(errs...)
}

// writeFileAs writes data to path with perm, owned by u.
func writeFileAs(path string, data []byte, perm os.FileMode, u osUser) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return err
	}
	return u.chown(path)
}
