package pools

import (
	"context"
	"errors"
	"fmt"
)

// Router resolves the node that holds a tenant's data, for directory
// sharding: with Config.Router set, each call runs on the pool of its
// class for that node. The directory package's *directory.Router
// implements it from a cached tenant catalog.
type Router interface {
	// Route returns the node for one call of tenant, and a function the
	// Stack calls once the call has given its connection back (nil means
	// nothing to call). It runs after the limiter admitted the call and
	// may block (while the tenant's data moves) until ctx is done.
	Route(ctx context.Context, tenant string) (node string, done func(), err error)
}

// ErrUnknownNode is returned (in a *RouteError) when the Router names a
// node the Stack has no pool for.
var ErrUnknownNode = errors.New("no pool for node")

// RouteError is returned when a call could not be routed: the Router
// failed (Node is empty), or it named a node without a pool for the
// call's class. Unwrap gives the cause.
type RouteError struct {
	Tenant string
	Node   string
	Err    error
}

// Error returns "route tenant <tenant>[ to node <node>]: <cause>".
func (e *RouteError) Error() string {
	if e.Node == "" {
		return fmt.Sprintf("route tenant %s: %v", e.Tenant, e.Err)
	}
	return fmt.Sprintf("route tenant %s to node %s: %v", e.Tenant, e.Node, e.Err)
}

// Unwrap returns the cause.
func (e *RouteError) Unwrap() error { return e.Err }
