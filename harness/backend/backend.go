// Package backend defines how noisysim obtains a PostgreSQL cluster to run a
// scenario against: a Backend starts a Topology and hands back a Cluster of
// named Nodes, each with a Role and connection details.
//
// Implementations live in subpackages: local (throwaway PostgreSQL processes,
// the default) and external (an existing cluster given by DSN). Containers,
// Citus and directory sharding fit the same shape: N named nodes with roles.
package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Role is what a node does in its cluster.
type Role string

// Node roles.
const (
	RolePrimary     Role = "primary"
	RoleReplica     Role = "replica"
	RoleCoordinator Role = "coordinator"
	RoleWorker      Role = "worker"
	RoleShard       Role = "shard"
)

// Topology names a cluster shape.
type Topology string

// Topologies.
const (
	// TopologySingle is one primary.
	TopologySingle Topology = "single"
	// TopologyReplica is a primary and one streaming hot standby.
	TopologyReplica Topology = "replica"
	// TopologyPrimaries is Spec.Nodes independent primaries named primary1,
	// primary2, …; it exists to measure and exercise many-node start-up and
	// suits directory sharding. Backends may not support it.
	TopologyPrimaries Topology = "primaries"
)

// Errors callers branch on. Backends wrap them (usually in a typed error with
// details), so test with errors.Is.
var (
	// ErrBadInput marks a failure caused by the caller's input: an unknown
	// topology, a malformed setting, an explicit port that is in use. The
	// noisysim CLI exits 2 on it.
	ErrBadInput = errors.New("bad input")
	// ErrNotInstalled marks a failure caused by something missing from the
	// machine: PostgreSQL's server binaries, the unprivileged system user
	// to run them as. The noisysim CLI exits 2 on it.
	ErrNotInstalled = errors.New("missing prerequisite")
)

// TopologyError reports a topology a backend does not support. It unwraps
// to ErrBadInput.
type TopologyError struct {
	Topology  Topology
	Supported []Topology
}

func (e *TopologyError) Error() string {
	return fmt.Sprintf("unknown topology %q (supported: %v)", e.Topology, e.Supported)
}

// Unwrap returns ErrBadInput.
func (e *TopologyError) Unwrap() error { return ErrBadInput }

// Spec says what cluster to start.
type Spec struct {
	// Topology is the cluster shape. Empty means TopologySingle.
	Topology Topology
	// Settings are server settings (postgresql.conf parameters) applied to
	// every node, e.g. {"max_connections": "200", "work_mem": "4MB"}.
	// nil means the backend's defaults.
	Settings map[string]string
	// Nodes is the node count of topologies that take one
	// (TopologyPrimaries). 0 means the topology's default; fixed topologies
	// ignore it.
	Nodes int
	// CPU gives each node its own CPU budget. The zero value sets none.
	CPU CPUBudget
}

// CPUBudget gives nodes their own share of the machine's CPU, so that one
// machine behaves like several smaller ones: a node at 0.4 CPU gets 40 ms
// of CPU time every 100 ms, however idle the rest of the machine is. Local
// processes get it through a cgroup per node, containers through Docker's
// CPU quota.
type CPUBudget struct {
	// Node is every node's budget in CPUs (0.4 = 40% of one core). 0 means
	// no budget.
	Node float64
	// Roles overrides Node for the nodes of a role, e.g. {worker: 0.5}; 0
	// for a role means no budget for it.
	Roles map[Role]float64
	// Cores pins the nodes of a role to CPU cores of their own (sorted
	// core numbers): every process of such a node runs on those cores
	// only, so that a busy node does not delay another's wake-ups on a
	// shared core (which a budget alone cannot prevent). Local processes
	// inherit it from the thread that starts them; containers get
	// Docker's cpuset.
	Cores map[Role][]int
	// Optional starts the cluster without budgets where the machine cannot
	// enforce them (no writable cgroup cpu controller); the cluster's
	// CPUBudgets says so. false fails Start instead.
	Optional bool
}

// For returns the budget of a node of role r, 0 for none.
func (b CPUBudget) For(r Role) float64 {
	if v, ok := b.Roles[r]; ok {
		return v
	}
	return b.Node
}

// CoresFor returns the cores of a node of role r, nil for any.
func (b CPUBudget) CoresFor(r Role) []int { return b.Cores[r] }

// Any reports whether some node gets a budget.
func (b CPUBudget) Any() bool {
	if b.Node > 0 {
		return true
	}
	for _, v := range b.Roles {
		if v > 0 {
			return true
		}
	}
	return false
}

// NodeCPU is one node's CPU budget as enforced.
type NodeCPU struct {
	Node string `json:"node"`
	// CPUs is the budget read back from the kernel (or the container
	// engine), 0 for none.
	CPUs float64 `json:"cpus"`
	// Cores are the cores the node is pinned to, as a CPU list ("1",
	// "0,2-3"), read back from the server process; empty for any.
	Cores string `json:"cores,omitempty"`
}

// CPUStat says how a cluster's CPU budgets are enforced.
type CPUStat struct {
	// Mechanism is e.g. "cgroup v1 /sys/fs/cgroup/cpu" or "docker cpu
	// quota"; empty when no budget is enforced.
	Mechanism string `json:"mechanism,omitempty"`
	// Nodes are the budgets per node, in node order.
	Nodes []NodeCPU `json:"nodes,omitempty"`
	// Skipped, when not empty, says why budgets that were asked for (with
	// CPUBudget.Optional) are not enforced.
	Skipped string `json:"skipped,omitempty"`
}

// CPUReporter is implemented by clusters that can give nodes CPU budgets.
type CPUReporter interface {
	// CPUBudgets returns how the cluster's budgets are enforced.
	CPUBudgets() CPUStat
}

// Node is one PostgreSQL server of a cluster.
type Node struct {
	// Name is unique within the cluster, e.g. "primary", "replica1".
	Name string
	// Role is what the node does.
	Role Role
	// Host and Port are the TCP address clients connect to.
	Host string
	Port int
	// Database is the database noisysim uses on this node.
	Database string
	// User and Password are the superuser's credentials. Password is never
	// printed: use RedactedDSN for anything shown to a person.
	User     string
	Password string `json:"-"`
	// Params are extra libpq URL parameters, e.g. {"sslmode": "require"}.
	// Without an sslmode entry DSNs carry sslmode=disable (local clusters
	// listen on loopback only).
	Params map[string]string
}

// DSN returns a libpq URL connecting to the node as its superuser.
func (n Node) DSN() string { return n.DSNFor(n.User, n.Password) }

// DSNFor returns a libpq URL connecting to the node as user with password.
func (n Node) DSNFor(user, password string) string {
	q := url.Values{}
	for k, v := range n.Params {
		q.Set(k, v)
	}
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u := url.URL{
		Scheme: "postgres",
		User:   url.UserPassword(user, password),
		Host:   net.JoinHostPort(n.Host, strconv.Itoa(n.Port)),
		Path:   "/" + n.Database,
		// A space as %20: libpq, and pgx after it, read "+" as itself.
		RawQuery: strings.ReplaceAll(q.Encode(), "+", "%20"),
	}
	if password == "" {
		u.User = url.User(user)
	}
	return u.String()
}

// RedactedDSN returns DSN with the password replaced by "xxxxx".
func (n Node) RedactedDSN() string { return Redact(n.DSN()) }

// String returns "name (role) at host:port".
func (n Node) String() string {
	return fmt.Sprintf("%s (%s) at %s", n.Name, n.Role, net.JoinHostPort(n.Host, strconv.Itoa(n.Port)))
}

// Redact returns dsn with any password replaced by "xxxxx". A string that is
// not a URL is returned as "<unparseable DSN>" so that no secret leaks.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "<unparseable DSN>"
	}
	return u.Redacted()
}

// Cluster is a running set of nodes.
type Cluster interface {
	// Nodes returns the cluster's nodes, primary (or coordinator) first.
	Nodes() []Node
	// Close stops every node and removes what the backend created. It is
	// idempotent and safe to call from several goroutines.
	Close() error
}

// Backend starts clusters.
type Backend interface {
	// Start starts a cluster as spec says and returns once every node accepts
	// queries (and every replica has replayed the primary's WAL position at
	// the time of the call). On error nothing is left running.
	Start(ctx context.Context, spec Spec) (Cluster, error)
}

// First returns the first node with role r and true, or a zero Node and false.
func First(c Cluster, r Role) (Node, bool) {
	for _, n := range c.Nodes() {
		if n.Role == r {
			return n, true
		}
	}
	return Node{}, false
}
