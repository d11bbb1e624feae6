package harness

import (
	"github.com/noisysim/noisysim/isolation/directory"
)

// Routing is where the tenants of topology shards live: the tenant
// catalog (on the first node), the router the isolation stack asks for
// each call's node, and every node's DSN as the cluster's owner role in
// the run's schema (for actions that move data).
type Routing struct {
	Catalog *directory.Catalog
	Router  *directory.Router
	// Nodes maps node names to DSNs; Names lists them in cluster order.
	Nodes map[string]string
	Names []string
	// Tables hold the tenants' rows, in the order a move copies them, each
	// with the tenant column Column (the built-in data set's tenants and
	// orders by tenant_id, or data.directory's).
	Tables []string
	Column string
	// Builtin: the tables are the built-in data set's.
	Builtin bool
}
