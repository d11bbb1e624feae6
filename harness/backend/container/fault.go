package container

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/noisysim/noisysim/harness/backend"
)

// Fault is what Inject does to a node.
type Fault string

// Faults.
const (
	// FaultStop stops the node's container (SIGINT: a fast shutdown, so
	// sessions end with an error); restoring starts it again on the same
	// published port and waits until it answers.
	FaultStop Fault = "stop"
	// FaultPause freezes the container's processes (docker pause): sessions
	// hang rather than fail; restoring unpauses it.
	FaultPause Fault = "pause"
	// FaultDisconnect detaches the container from the cluster network (and
	// so from its published port); restoring reattaches it under its alias
	// and waits until it answers.
	FaultDisconnect Fault = "disconnect"
)

// Faults lists the faults Inject knows.
var Faults = []Fault{FaultStop, FaultPause, FaultDisconnect}

// DefaultRestoreTimeout bounds how long a restore waits for the node to
// answer again.
const DefaultRestoreTimeout = 60 * time.Second

// Restore undoes an injected fault. It returns once the node answers a
// query again (FaultStop, FaultDisconnect) or is unpaused (FaultPause).
// Calling it more than once is harmless: later calls return the first
// call's error.
type Restore func(ctx context.Context) error

// Inject applies fault to the node named node and returns how to undo it.
// Errors: ErrUnknownNode and backend.ErrBadInput for a name the cluster
// lacks, backend.ErrBadInput for a fault it does not know; Docker API errors otherwise. Close
// removes the node whatever its state, restored or not.
func (c *Cluster) Inject(ctx context.Context, nodeName string, fault Fault) (Restore, error) {
	n, ok := c.node(nodeName)
	if !ok {
		return nil, fmt.Errorf("inject %s: node %q: %w: %w", fault, nodeName, ErrUnknownNode, backend.ErrBadInput)
	}
	var undo func(ctx context.Context) error
	switch fault {
	case FaultStop:
		timeout := 10
		if _, err := c.cli.ContainerStop(ctx, n.id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
			return nil, fmt.Errorf("stop node %s: %w", nodeName, err)
		}
		undo = func(ctx context.Context) error {
			if _, err := c.cli.ContainerStart(ctx, n.id, client.ContainerStartOptions{}); err != nil {
				return fmt.Errorf("start node %s: %w", nodeName, err)
			}
			return waitQuery(ctx, n.info, n.plan.upstream != "", DefaultRestoreTimeout)
		}
	case FaultPause:
		if _, err := c.cli.ContainerPause(ctx, n.id, client.ContainerPauseOptions{}); err != nil {
			return nil, fmt.Errorf("pause node %s: %w", nodeName, err)
		}
		undo = func(ctx context.Context) error {
			if _, err := c.cli.ContainerUnpause(ctx, n.id, client.ContainerUnpauseOptions{}); err != nil {
				return fmt.Errorf("unpause node %s: %w", nodeName, err)
			}
			return nil
		}
	case FaultDisconnect:
		if _, err := c.cli.NetworkDisconnect(ctx, c.network, client.NetworkDisconnectOptions{Container: n.id, Force: true}); err != nil {
			return nil, fmt.Errorf("disconnect node %s: %w", nodeName, err)
		}
		undo = func(ctx context.Context) error {
			if _, err := c.cli.NetworkConnect(ctx, c.network, client.NetworkConnectOptions{
				Container: n.id, EndpointConfig: &network.EndpointSettings{Aliases: []string{nodeName}},
			}); err != nil {
				return fmt.Errorf("reconnect node %s: %w", nodeName, err)
			}
			return waitQuery(ctx, n.info, n.plan.upstream != "", DefaultRestoreTimeout)
		}
	default:
		return nil, fmt.Errorf("inject: unknown fault %q (known: %v): %w", fault, Faults, backend.ErrBadInput)
	}
	c.log.Debug("fault injected", "run", c.runID, "node", nodeName, "fault", fault)
	var once sync.Once
	var err error
	return func(ctx context.Context) error {
		once.Do(func() {
			err = undo(ctx)
			c.log.Debug("fault restored", "run", c.runID, "node", nodeName, "fault", fault, "err", err)
		})
		return err
	}, nil
}
