package external

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
)

// Config names the servers of an external cluster.
type Config struct {
	// Primary is a libpq DSN (URL or key=value) of the primary. Required.
	Primary string
	// Replica is a DSN of a streaming hot standby of Primary; "" means none.
	Replica string
	// Logger receives warnings (settings that differ from the spec); nil is
	// silent.
	Logger *slog.Logger
}

// TopologyCitus is an existing Citus cluster given by its coordinator's
// DSN (Config.Primary). It has the same name as the local and container
// backends' citus topologies.
const TopologyCitus backend.Topology = "citus"

// Supported lists the topologies Start accepts.
var Supported = []backend.Topology{backend.TopologySingle, backend.TopologyReplica, TopologyCitus}

// Errors returned by Start.
var (
	// ErrNoPrimary means Config.Primary is empty.
	ErrNoPrimary = fmt.Errorf("no primary DSN: %w", backend.ErrBadInput)
	// ErrNotCitus means the DSN of topology citus does not name a Citus
	// coordinator with active workers. It wraps backend.ErrBadInput.
	ErrNotCitus = fmt.Errorf("not a Citus coordinator: %w", backend.ErrBadInput)
	// ErrRole means a server is not what its DSN claims: the primary is in
	// recovery, or the replica is not.
	ErrRole = errors.New("server has the wrong role")
)

// Backend hands out an existing cluster. It implements backend.Backend.
type Backend struct {
	cfg Config
	log *slog.Logger
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend for the servers cfg names.
func New(cfg Config) *Backend {
	l := cfg.Logger
	if l == nil {
		l = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Backend{cfg: cfg, log: l}
}

// Start checks the servers and returns them as a Cluster: it connects to each
// and runs a query, and checks that the primary is not in recovery and the
// replica is (ErrRole). The topology is spec.Topology, or when empty replica
// if a replica DSN was given, else single; single ignores the replica;
// replica without a replica DSN fails with backend.ErrBadInput. TopologyCitus
// takes Config.Primary as a Citus coordinator's DSN (node "coordinator",
// RoleCoordinator; no replica) and checks that it has the citus extension,
// is the coordinator (pg_dist_local_group 0, not a worker) and has at least
// one active primary worker (ErrNotCitus otherwise); the
// workers are not nodes of the Cluster, as this process may not reach them
// at the names pg_dist_node has: reach them through the coordinator, and
// Spec.Nodes is not checked. Spec.Settings
// cannot be applied to servers noisysim does not own: each one whose
// current_setting differs textually is logged as a warning. Errors never
// hold a password.
func (b *Backend) Start(ctx context.Context, spec backend.Spec) (backend.Cluster, error) {
	if b.cfg.Primary == "" {
		return nil, ErrNoPrimary
	}
	topo := spec.Topology
	if topo == "" {
		topo = backend.TopologySingle
		if b.cfg.Replica != "" {
			topo = backend.TopologyReplica
		}
	}
	type want struct {
		name, dsn string
		role      backend.Role
	}
	wants := []want{{"primary", b.cfg.Primary, backend.RolePrimary}}
	switch topo {
	case backend.TopologySingle:
	case backend.TopologyReplica:
		if b.cfg.Replica == "" {
			return nil, fmt.Errorf("start external cluster: topology replica needs a replica DSN: %w", backend.ErrBadInput)
		}
		wants = append(wants, want{"replica1", b.cfg.Replica, backend.RoleReplica})
	case TopologyCitus:
		if b.cfg.Replica != "" {
			return nil, fmt.Errorf("start external cluster: topology citus takes the coordinator's DSN only, not a replica DSN: %w", backend.ErrBadInput)
		}
		wants[0] = want{"coordinator", b.cfg.Primary, backend.RoleCoordinator}
	default:
		return nil, &backend.TopologyError{Topology: topo, Supported: Supported}
	}
	c := &Cluster{}
	for _, w := range wants {
		n, err := nodeFromDSN(w.name, w.role, w.dsn)
		if err != nil {
			return nil, err
		}
		if err := b.check(ctx, n, spec.Settings); err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

func (b *Backend) check(ctx context.Context, n backend.Node, settings map[string]string) error {
	conn, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return backend.ConnectError(ctx, n.String(), err)
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return fmt.Errorf("query %s: %w", n, err)
	}
	if inRecovery != (n.Role == backend.RoleReplica) {
		state := "is in recovery"
		if !inRecovery {
			state = "is not in recovery"
		}
		return fmt.Errorf("check %s: %s: %w", n, state, ErrRole)
	}
	if n.Role == backend.RoleCoordinator {
		if err := checkCoordinator(ctx, conn, n); err != nil {
			return err
		}
	}
	for k, v := range settings {
		var cur string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1, true)", k).Scan(&cur); err != nil {
			return fmt.Errorf("read setting %s on %s: %w", k, n, err)
		}
		if cur != v {
			b.log.Warn("external server setting differs from the spec; noisysim cannot change it",
				"node", n.Name, "setting", k, "want", v, "have", cur)
		}
	}
	return nil
}

// checkCoordinator returns ErrNotCitus (wrapped, with how to fix it) unless
// n has the citus extension, is the coordinator and has at least one
// active primary worker.
func checkCoordinator(ctx context.Context, conn *pgx.Conn, n backend.Node) error {
	var citus bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil {
		return fmt.Errorf("query %s: %w", n, err)
	}
	if !citus {
		return fmt.Errorf("check %s: database %s has no citus extension; give the DSN of a Citus coordinator (CREATE EXTENSION citus, then citus_add_node for each worker): %w",
			n, n.Database, ErrNotCitus)
	}
	var group int
	if err := conn.QueryRow(ctx, "SELECT groupid FROM pg_dist_local_group").Scan(&group); err != nil {
		return fmt.Errorf("query %s: %w", n, err)
	}
	if group != 0 {
		return fmt.Errorf("check %s: it is a Citus worker (group %d), not the coordinator; give the coordinator's DSN: %w", n, group, ErrNotCitus)
	}
	var workers int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM citus_get_active_worker_nodes()").Scan(&workers); err != nil {
		return fmt.Errorf("list workers of %s: %w", n, err)
	}
	if workers == 0 {
		return fmt.Errorf("check %s: the coordinator has no active worker; add workers with citus_add_node: %w", n, ErrNotCitus)
	}
	return nil
}

// nodeFromDSN parses dsn (URL or key=value form) into a Node. Connection
// parameters other than host, port, user, password and dbname are kept in
// Params; sslmode defaults to libpq's "prefer".
func nodeFromDSN(name string, role backend.Role, dsn string) (backend.Node, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors never echo the DSN's password.
		return backend.Node{}, fmt.Errorf("parse %s DSN: %w: %w", name, err, backend.ErrBadInput)
	}
	params, err := extraParams(dsn)
	if err != nil {
		return backend.Node{}, fmt.Errorf("parse %s DSN: %w: %w", name, err, backend.ErrBadInput)
	}
	if params["sslmode"] == "" {
		params["sslmode"] = "prefer"
	}
	return backend.Node{
		Name: name, Role: role, Host: cfg.Host, Port: int(cfg.Port),
		Database: cfg.Database, User: cfg.User, Password: cfg.Password, Params: params,
	}, nil
}

// connFields are carried by Node's own fields, not Params.
var connFields = map[string]bool{"host": true, "hostaddr": true, "port": true, "user": true, "password": true, "dbname": true}

// extraParams returns the parameters of dsn other than connFields.
func extraParams(dsn string) (map[string]string, error) {
	out := map[string]string{}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, errors.New("malformed URL")
		}
		for k, vs := range u.Query() {
			if !connFields[k] && len(vs) > 0 {
				out[k] = vs[len(vs)-1]
			}
		}
		return out, nil
	}
	kv, err := parseKeywordValue(dsn)
	if err != nil {
		return nil, err
	}
	for k, v := range kv {
		if !connFields[k] {
			out[k] = v
		}
	}
	return out, nil
}

// parseKeywordValue parses libpq's "key=value key='quoted \' value'" form.
func parseKeywordValue(s string) (map[string]string, error) {
	out := map[string]string{}
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' {
			i++
		}
		key := s[start:i]
		skip()
		if i >= len(s) || s[i] != '=' {
			return nil, fmt.Errorf("missing = after %q", key)
		}
		i++
		skip()
		var val strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for ; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated quoted value for %q", key)
			}
			i++
		} else {
			for ; i < len(s) && s[i] != ' '; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
		}
		out[key] = val.String()
	}
}

// Cluster is an external cluster. Close does nothing to its servers.
type Cluster struct {
	nodes []backend.Node
}

var _ backend.Cluster = (*Cluster)(nil)

// Nodes returns the primary, then the replica if any; for TopologyCitus
// the coordinator alone.
func (c *Cluster) Nodes() []backend.Node { return append([]backend.Node(nil), c.nodes...) }

// Close does nothing and returns nil: the servers are not noisysim's.
func (c *Cluster) Close() error { return nil }
