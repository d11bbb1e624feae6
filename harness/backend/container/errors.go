package container

import (
	"errors"
	"fmt"

	"github.com/noisysim/noisysim/harness/backend"
)

// Sentinel errors of the container backend. Typed errors below unwrap to them
// and to backend.ErrBadInput or backend.ErrNotInstalled.
var (
	// ErrNoDocker means no Docker daemon answered.
	ErrNoDocker = errors.New("no docker daemon reachable")
	// ErrNoImage means an image is neither present nor pullable.
	ErrNoImage = errors.New("container image unavailable")
	// ErrNoCitus means the image of a Citus node has no citus extension.
	ErrNoCitus = errors.New("no citus extension in the image")
	// ErrNodeStart means a node's container did not become ready.
	ErrNodeStart = errors.New("node did not start")
	// ErrUnknownNode means a fault names a node the cluster does not have.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNoCluster means no container or network of noisysim's carries the
	// run id asked for.
	ErrNoCluster = errors.New("no such cluster")
)

// DockerError reports that no Docker daemon could be reached. It unwraps to
// ErrNoDocker, backend.ErrNotInstalled and the client's error.
type DockerError struct{ Err error }

func (e *DockerError) Error() string {
	return fmt.Sprintf("no Docker daemon is reachable (%v); start Docker or set DOCKER_HOST", e.Err)
}

// Unwrap returns ErrNoDocker, backend.ErrNotInstalled and the cause.
func (e *DockerError) Unwrap() []error { return []error{ErrNoDocker, backend.ErrNotInstalled, e.Err} }

// ImageError reports an image that is not on the machine and could not be
// pulled. It unwraps to ErrNoImage, backend.ErrNotInstalled and the cause.
type ImageError struct {
	Image string
	Err   error
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("container image %s is not present and could not be pulled (%v); "+
		"pull or build it, or choose another image", e.Image, e.Err)
}

// Unwrap returns ErrNoImage, backend.ErrNotInstalled and the cause.
func (e *ImageError) Unwrap() []error { return []error{ErrNoImage, backend.ErrNotInstalled, e.Err} }

// NodeStartError reports a node whose container did not become ready; Log
// holds the tail of its output (no password: it is passed by environment).
type NodeStartError struct {
	Node string
	Log  string
	Err  error
}

func (e *NodeStartError) Error() string {
	s := fmt.Sprintf("start node %s: %v", e.Node, e.Err)
	if e.Log != "" {
		s += "\n--- container log (tail) ---\n" + e.Log
	}
	return s
}

// Unwrap returns ErrNodeStart and the cause.
func (e *NodeStartError) Unwrap() []error { return []error{ErrNodeStart, e.Err} }

// CitusImageError reports an image given to Citus nodes (coordinator,
// worker) that has no citus extension: PostgreSQL could not load it. It
// unwraps to ErrNoCitus and backend.ErrNotInstalled.
type CitusImageError struct {
	Image string
	Node  string
}

func (e *CitusImageError) Error() string {
	return fmt.Sprintf("image %s has no citus extension (node %s could not load it); "+
		"give the coordinator and workers an image with Citus installed", e.Image, e.Node)
}

// Unwrap returns ErrNoCitus and backend.ErrNotInstalled.
func (e *CitusImageError) Unwrap() []error { return []error{ErrNoCitus, backend.ErrNotInstalled} }

// NotFoundError reports a run id that nothing of noisysim's on the daemon
// carries (Run "" when none was given). It unwraps to ErrNoCluster and
// backend.ErrBadInput.
type NotFoundError struct{ Run string }

func (e *NotFoundError) Error() string {
	if e.Run == "" {
		return "no run id given: nothing found to remove"
	}
	return fmt.Sprintf("run %s: nothing found: no noisysim container or network carries %s=%s", e.Run, LabelRun, e.Run)
}

// Unwrap returns ErrNoCluster and backend.ErrBadInput.
func (e *NotFoundError) Unwrap() []error { return []error{ErrNoCluster, backend.ErrBadInput} }
