package container

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	dcontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"golang.org/x/sync/errgroup"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/internal/affinity"
)

// Cluster is a running set of PostgreSQL containers on one Docker network.
// It implements backend.Cluster.
type Cluster struct {
	b        *Backend
	log      *slog.Logger
	cli      *testcontainers.DockerClient
	runID    string
	password string
	settings map[string]string
	topology backend.Topology
	keep     bool
	cpu      backend.CPUBudget
	network  string
	ready    time.Duration

	mu    sync.Mutex
	nodes []*node // in plan order

	// createMu guards closing; creating counts Docker create calls in
	// flight (see create).
	createMu sync.Mutex
	closing  bool
	creating sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// createTimeout bounds one Docker create call, which the caller's context
// does not cancel (see create).
const createTimeout = time.Minute

// errClosed is returned by a create refused because the cluster is being
// removed (CloseAll during StartCluster).
var errClosed = errors.New("cluster closed while starting")

// create runs fn, a Docker call that creates part of the cluster, so that
// removal sees what it made. A create cancelled in flight may still
// complete in the daemon after the client gave up, and so after remove
// listed the run: fn therefore gets a context ctx's cancellation does not
// end (bounded by createTimeout), and remove refuses new creates and waits
// for those in flight before it lists.
func (c *Cluster) create(ctx context.Context, fn func(ctx context.Context) error) error {
	c.createMu.Lock()
	if c.closing {
		c.createMu.Unlock()
		return errClosed
	}
	c.creating.Add(1)
	c.createMu.Unlock()
	defer c.creating.Done()
	if err := ctx.Err(); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	return fn(cctx)
}

var _ backend.Cluster = (*Cluster)(nil)

// node is one container of a cluster.
type node struct {
	plan nodePlan
	id   string // container id
	info backend.Node
}

// RunID returns the id in the LabelRun label of the cluster's containers
// and network.
func (c *Cluster) RunID() string { return c.runID }

// Network returns the name of the cluster's Docker network.
func (c *Cluster) Network() string { return c.network }

// ContainerName returns the name of node's container:
// noisysim-<run id>-<node>. Its environment holds the cluster's password
// (POSTGRES_PASSWORD), readable with docker inspect by whoever may use the
// daemon.
func (c *Cluster) ContainerName(node string) string { return containerName(c.runID, node) }

func containerName(runID, node string) string { return "noisysim-" + runID + "-" + node }

// Ready returns how long StartCluster took, from its call until every node
// answered (the "time to ready").
func (c *Cluster) Ready() time.Duration { return c.ready }

// Topology returns the cluster's topology.
func (c *Cluster) Topology() backend.Topology { return c.topology }

// Nodes returns the cluster's nodes in start order: primary (or
// coordinator) first. Host is 127.0.0.1 and Port the published port.
func (c *Cluster) Nodes() []backend.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]backend.Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.info
	}
	return out
}

// PeerAddr returns the address the cluster's other nodes reach node at:
// its name (its network alias) and port 5432, as Citus has the workers in
// pg_dist_node; false for a node the cluster does not have. Nodes gives
// the address this process reaches it at.
func (c *Cluster) PeerAddr(node string) (host string, port int, ok bool) {
	if _, ok := c.node(node); !ok {
		return "", 0, false
	}
	return node, pgPort, true
}

// Close removes every container (with its anonymous volumes) and the
// network of the cluster, by label; with WithKeep it only releases the
// Docker client. It is idempotent and safe from several goroutines.
func (c *Cluster) Close() error { return c.close(c.keep) }

// close is Close; keep false removes the cluster whatever WithKeep said
// (CloseAll).
func (c *Cluster) close(keep bool) error {
	c.closeOnce.Do(func() {
		if !keep {
			c.closeErr = c.remove()
		}
		c.cli.Close()
		c.b.track(c, false)
	})
	return c.closeErr
}

// remove deletes what the run created, whatever the cluster's state: it
// ends creation first (see create).
func (c *Cluster) remove() error {
	c.createMu.Lock()
	c.closing = true
	c.createMu.Unlock()
	c.creating.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := removeRun(ctx, c.cli, c.runID); err != nil {
		return fmt.Errorf("remove cluster %s: %w", c.runID, err)
	}
	return nil
}

func (c *Cluster) node(name string) (*node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.plan.name == name {
			return n, true
		}
	}
	return nil, false
}

func (c *Cluster) labels(node string) map[string]string {
	l := maps.Clone(c.b.extra)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelManaged], l[LabelRun] = "true", c.runID
	if c.keep {
		l[LabelKept] = "true"
	}
	if node != "" {
		l[LabelNode] = node
	}
	return l
}

func (c *Cluster) step(node, step string, t0 time.Time) {
	c.log.Debug("step", "run", c.runID, "node", node, "step", step, "duration", time.Since(t0).Round(time.Millisecond))
}

// start creates the network and the nodes: every non-replica node at
// once, each replica once its upstream is up; then Citus registration and
// replica catch-up.
func (c *Cluster) start(ctx context.Context, plans []nodePlan) error {
	images := map[string]bool{}
	for _, p := range plans {
		img := c.b.Image(p.role)
		if !images[img] {
			ok, err := imagePresent(ctx, c.cli, img)
			if err != nil {
				return err
			}
			if !ok {
				if err := c.pull(ctx, img); err != nil {
					return err
				}
			}
			images[img] = true
		}
	}

	t0 := time.Now()
	c.network = "noisysim-" + c.runID
	if err := c.create(ctx, func(ctx context.Context) error {
		_, err := c.cli.NetworkCreate(ctx, c.network, client.NetworkCreateOptions{Driver: "bridge", Labels: c.labels("")})
		return err
	}); err != nil {
		return fmt.Errorf("create network %s: %w", c.network, err)
	}
	c.step("", "network", t0)

	c.nodes = make([]*node, len(plans))
	g, gctx := errgroup.WithContext(ctx)
	for i, p := range plans {
		if p.upstream != "" {
			continue
		}
		g.Go(func() error { return c.startNode(gctx, i, p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	g, gctx = errgroup.WithContext(ctx)
	for i, p := range plans {
		if p.upstream == "" {
			continue
		}
		g.Go(func() error { return c.startNode(gctx, i, p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if c.topology == TopologyCitus {
		if err := c.registerWorkers(ctx); err != nil {
			return err
		}
	}
	return c.catchUp(ctx)
}

// pull pulls image once, so that a missing image fails at once with an
// *ImageError rather than through testcontainers' pull retries.
func (c *Cluster) pull(ctx context.Context, image string) error {
	t0 := time.Now()
	resp, err := c.cli.ImagePull(ctx, image, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(ctx)
		resp.Close()
	}
	if err != nil {
		return &ImageError{Image: image, Err: err}
	}
	c.step("", "pull "+image, t0)
	return nil
}

// startNode starts plans[i] and stores it at c.nodes[i]. A published port
// taken between the pick and the start is retried with another.
func (c *Cluster) startNode(ctx context.Context, i int, p nodePlan) error {
	t0 := time.Now()
	image := c.b.Image(p.role)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		var n *node
		n, err = c.run(ctx, p, image, port)
		if err == nil {
			c.mu.Lock()
			c.nodes[i] = n
			c.mu.Unlock()
			c.step(p.name, "ready", t0)
			return nil
		}
		if !portTaken(err) {
			break
		}
		c.log.Debug("published port taken, retrying", "node", p.name, "port", port)
	}
	return err
}

func portTaken(err error) bool {
	s := err.Error()
	return strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use")
}

// initScript runs once, as the postgres user, when a node's data directory
// is created by the image's entry point: it lets replicas stream with the
// cluster password and gives the server a libpq password file for
// node-to-node connections (Citus).
const initScript = `#!/bin/sh
set -e
printf '\nhost replication all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
umask 077
printf '*:*:*:%s:%s\n' "$POSTGRES_USER" "$POSTGRES_PASSWORD" > "$PGPASSFILE"
`

// replicaScript makes the data directory a base backup of the upstream
// (once: a restarted replica keeps its data) and runs the server.
const replicaScript = `set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	chmod 700 "$PGDATA"
	PGPASSWORD="$POSTGRES_PASSWORD" pg_basebackup -h "$NOISYSIM_UPSTREAM" -p 5432 -U "$POSTGRES_USER" \
		-D "$PGDATA" -X stream -R -C -S "$NOISYSIM_SLOT" -c fast
	printf "primary_conninfo = 'host=%s port=5432 user=%s password=%s application_name=%s'\n" \
		"$NOISYSIM_UPSTREAM" "$POSTGRES_USER" "$POSTGRES_PASSWORD" "$NOISYSIM_SLOT" >> "$PGDATA/postgresql.auto.conf"
fi
exec "$@"
`

// CitusSettings are applied to coordinators and workers after
// DefaultSettings and before Spec.Settings: logical WAL and replication
// slots for shard moves (citus_move_shard_placement, force_logical),
// prepared transactions for multi-shard writes, and per-tenant statistics
// (citus_stat_tenants). citus is always added to shared_preload_libraries.
var CitusSettings = map[string]string{
	"wal_level":                 "logical",
	"max_replication_slots":     "20",
	"max_wal_senders":           "20",
	"max_prepared_transactions": "100",
	"citus.stat_tenants_track":  "all",
}

// serverArgs returns `postgres -c k=v …` with the defaults, the spec's
// settings and what the role needs.
func (c *Cluster) serverArgs(p nodePlan) []string {
	s := maps.Clone(DefaultSettings)
	citus := p.role == backend.RoleCoordinator || p.role == backend.RoleWorker
	if citus {
		maps.Copy(s, CitusSettings)
	}
	maps.Copy(s, c.settings)
	if citus {
		libs := s["shared_preload_libraries"]
		if !slices.Contains(strings.Split(strings.ReplaceAll(libs, " ", ""), ","), "citus") {
			s["shared_preload_libraries"] = strings.TrimSuffix("citus,"+libs, ",")
		}
	}
	if p.role == backend.RoleReplica {
		s["hot_standby_feedback"] = "off"
	}
	args := []string{"postgres"}
	for _, k := range slices.Sorted(maps.Keys(s)) {
		args = append(args, "-c", k+"="+s[k])
	}
	return args
}

// run creates and starts one node's container publishing port and waits
// until it answers a query.
func (c *Cluster) run(ctx context.Context, p nodePlan, image string, port int) (*node, error) {
	pgPortSpec := network.MustParsePort(strconv.Itoa(pgPort) + "/tcp")
	req := testcontainers.ContainerRequest{
		Image:          image,
		Name:           containerName(c.runID, p.name),
		Labels:         c.labels(p.name),
		ExposedPorts:   []string{pgPortSpec.String()},
		Networks:       []string{c.network},
		NetworkAliases: map[string][]string{c.network: {p.name}},
		Env: map[string]string{
			"POSTGRES_USER":     superuser,
			"POSTGRES_PASSWORD": c.password,
			"POSTGRES_DB":       database,
			"PGPASSFILE":        "/var/lib/postgresql/.pgpass",
			// The postgres user's home: an entry point that drops root
			// without setting it (setpriv) leaves /root, where libpq's
			// node-to-node connections (Citus, sslmode=require) fail to
			// read ~/.postgresql/postgresql.crt.
			"HOME": "/var/lib/postgresql",
			// Throwaway data: initdb need not wait for the disk.
			"POSTGRES_INITDB_ARGS": "--no-sync",
		},
		Cmd: c.serverArgs(p),
		ConfigModifier: func(cfg *dcontainer.Config) {
			cfg.StopSignal = "SIGINT" // fast shutdown
		},
		HostConfigModifier: func(hc *dcontainer.HostConfig) {
			hc.PortBindings = network.PortMap{pgPortSpec: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}}}
			// Docker's --cpus: a CFS quota on the container's cgroup.
			hc.NanoCPUs = nanoCPUs(c.cpu.For(p.role))
			// Docker's --cpuset-cpus: the node's cores of its own.
			if cores := c.cpu.CoresFor(p.role); len(cores) > 0 {
				hc.CpusetCpus = affinity.Format(cores)
			}
		},
	}
	ready := "database system is ready to accept connections"
	occurrences := 2 // the entry point's temporary server, then the real one
	if p.upstream != "" {
		req.Env["NOISYSIM_UPSTREAM"] = p.upstream
		req.Env["NOISYSIM_SLOT"] = p.name
		req.Entrypoint = []string{"bash", "-c", replicaScript, "noisysim-replica"}
		req.ConfigModifier = func(cfg *dcontainer.Config) {
			cfg.StopSignal = "SIGINT"
			cfg.User = "postgres"
		}
		ready = "database system is ready to accept read-only connections"
		occurrences = 1
	} else {
		req.Files = []testcontainers.ContainerFile{{
			Reader: strings.NewReader(initScript), ContainerFilePath: "/docker-entrypoint-initdb.d/00-noisysim.sh", FileMode: 0o755,
		}}
	}
	req.WaitingFor = wait.ForLog(ready).WithOccurrence(occurrences).
		WithPollInterval(50 * time.Millisecond).WithStartupTimeout(c.b.startLimit)

	// Created (under create) and then started, so that an interruption
	// cannot leave a container made after the run was removed.
	var ctr testcontainers.Container
	err := c.create(ctx, func(cctx context.Context) error {
		var err error
		ctr, err = testcontainers.GenericContainer(cctx, testcontainers.GenericContainerRequest{
			ContainerRequest: req,
			Logger:           slogPrintf{c.log},
		})
		return err
	})
	if err == nil {
		err = ctr.Start(ctx)
	}
	n := &node{plan: p, info: backend.Node{
		Name: p.name, Role: p.role, Host: "127.0.0.1", Port: port,
		Database: database, User: superuser, Password: c.password,
	}}
	if ctr != nil {
		n.id = ctr.GetContainerID()
	}
	if err != nil {
		if ctr != nil && portTaken(err) {
			// Free the name for the retry.
			c.cli.ContainerRemove(context.WithoutCancel(ctx), n.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
		if portTaken(err) || ctr == nil {
			return nil, fmt.Errorf("start node %s: %w", p.name, err)
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			// Interrupted: the container's log says nothing about it.
			return nil, fmt.Errorf("start node %s: %w", p.name, ctx.Err())
		}
		tail := c.logTail(n.id, 30)
		if (p.role == backend.RoleCoordinator || p.role == backend.RoleWorker) && strings.Contains(tail, noCitusLog) {
			return nil, &CitusImageError{Image: image, Node: p.name}
		}
		return nil, &NodeStartError{Node: p.name, Log: tail, Err: err}
	}
	if err := waitQuery(ctx, n.info, p.upstream != "", c.b.startLimit); err != nil {
		return nil, &NodeStartError{Node: p.name, Log: c.logTail(n.id, 30), Err: err}
	}
	return n, nil
}

// waitQuery polls until node answers a real query (and, for a standby,
// reports that it is in recovery), or limit passes.
func waitQuery(ctx context.Context, n backend.Node, standby bool, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		last = query(ctx, n, standby)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to answer: %w (last: %w)", n.Name, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func query(ctx context.Context, n backend.Node, standby bool) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, n.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var recovery bool
	if err := conn.QueryRow(cctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil {
		return err
	}
	if recovery != standby {
		return fmt.Errorf("pg_is_in_recovery() is %v", recovery)
	}
	return nil
}

// noCitusLog is what PostgreSQL logs when shared_preload_libraries names
// citus and the image has no citus library.
const noCitusLog = `could not access file "citus"`

// registerWorkers creates the citus extension on every node (an image's
// own init script may have done so already) and allows its decoder (see
// allowCitusDecoder), makes the coordinator a
// Citus coordinator and adds every worker by its network alias and port
// 5432 (see PeerAddr).
func (c *Cluster) registerWorkers(ctx context.Context) error {
	t0 := time.Now()
	coord, ok := backend.First(c, backend.RoleCoordinator)
	if !ok {
		return errors.New("register workers: no coordinator")
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range c.Nodes() {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, n.DSN())
			if err != nil {
				return fmt.Errorf("connect to %s: %w", n.Name, err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(gctx, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
				return fmt.Errorf("create extension citus on %s: %w", n.Name, err)
			}
			return allowCitusDecoder(gctx, conn, n.Name)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, coord.DSN())
	if err != nil {
		return fmt.Errorf("connect to coordinator: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2)", "coordinator", pgPort); err != nil {
		return fmt.Errorf("set coordinator host: %w", err)
	}
	for _, n := range c.Nodes() {
		if n.Role != backend.RoleWorker {
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT citus_add_node($1, $2)", n.Name, pgPort); err != nil {
			return fmt.Errorf("add worker %s: %w", n.Name, err)
		}
	}
	c.step("coordinator", "citus_add_node", t0)
	return nil
}

// allowCitusDecoder lets shard moves (force_logical) decode with citus's
// output plugin on builds that restrict plugins with
// output_plugin_libraries (some distributions' PostgreSQL 15 has it; the
// official image does not): it adds citus to the list and reloads.
func allowCitusDecoder(ctx context.Context, conn *pgx.Conn, node string) error {
	var libs *string
	if err := conn.QueryRow(ctx, "SELECT current_setting('output_plugin_libraries', true)").Scan(&libs); err != nil {
		return fmt.Errorf("read output_plugin_libraries on %s: %w", node, err)
	}
	if libs == nil {
		return nil
	}
	list := []string{"citus"}
	for _, l := range strings.Split(strings.ReplaceAll(*libs, " ", ""), ",") {
		if l == "citus" {
			return nil
		}
		if l != "" {
			list = append(list, l)
		}
	}
	// A list setting: one literal per element (one literal holding commas
	// would be a single element).
	for i, l := range list {
		list[i] = quoteLiteral(l)
	}
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET output_plugin_libraries = "+strings.Join(list, ", ")); err != nil {
		return fmt.Errorf("allow citus as output plugin on %s: %w", node, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload configuration of %s: %w", node, err)
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// catchUp waits until every replica has replayed its upstream's current
// WAL position.
func (c *Cluster) catchUp(ctx context.Context) error {
	for _, n := range c.nodes {
		if n.plan.upstream == "" {
			continue
		}
		up, _ := c.node(n.plan.upstream)
		if err := WaitReplay(ctx, up.info, n.info); err != nil {
			return fmt.Errorf("replica %s: %w", n.plan.name, err)
		}
	}
	return nil
}

// WaitReplay waits until replica has replayed primary's WAL position taken
// at the call, polling every 20 ms. Errors: connection or query failures,
// ctx.Err().
func WaitReplay(ctx context.Context, primary, replica backend.Node) error {
	pc, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", primary.Name, err)
	}
	defer pc.Close(context.Background())
	var lsn string
	if err := pc.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return fmt.Errorf("read WAL position of %s: %w", primary.Name, err)
	}
	rc, err := pgx.Connect(ctx, replica.DSN())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", replica.Name, err)
	}
	defer rc.Close(context.Background())
	for {
		var done bool
		if err := rc.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done); err != nil {
			return fmt.Errorf("read replay position of %s: %w", replica.Name, err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to replay %s: %w", replica.Name, lsn, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail returns the last n lines of a container's output.
func (c *Cluster) logTail(id string, n int) string {
	if id == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := c.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(n)})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var lines []string
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 8 && (line[0] == 1 || line[0] == 2) && line[1] == 0 {
			line = line[8:] // multiplexed stream header
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// slogPrintf adapts a *slog.Logger to testcontainers' Printf logger, at
// debug level.
type slogPrintf struct{ l *slog.Logger }

func (s slogPrintf) Printf(format string, v ...any) {
	s.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "source", "testcontainers")
}
