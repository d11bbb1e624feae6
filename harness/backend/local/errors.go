package local

import (
	"errors"
	"fmt"
	"strings"

	"github.com/noisysim/noisysim/harness/backend"
)

// Sentinel errors of the local backend. Typed errors below unwrap to them and
// to backend.ErrBadInput or backend.ErrNotInstalled.
var (
	// ErrBinariesNotFound means no directory with PostgreSQL's server
	// binaries (postgres, initdb) was found.
	ErrBinariesNotFound = errors.New("postgresql server binaries not found")
	// ErrNoServerUser means noisysim runs as root and the unprivileged user
	// to run PostgreSQL as does not exist.
	ErrNoServerUser = errors.New("no unprivileged user to run postgresql as")
	// ErrPortInUse means an explicitly requested port is taken.
	ErrPortInUse = errors.New("port in use")
	// ErrBadSetting means a server setting is malformed, reserved by
	// noisysim, or rejected by PostgreSQL.
	ErrBadSetting = errors.New("bad server setting")
	// ErrNodeStart means a node's server did not come up.
	ErrNodeStart = errors.New("node did not start")
	// ErrNotKept means a directory holds no cluster kept by `cluster up
	// --keep` (no state file, or the cluster was not started with Keep).
	ErrNotKept = errors.New("no kept cluster")
)

// BinariesNotFoundError lists where the server binaries were looked for.
// It unwraps to ErrBinariesNotFound and backend.ErrNotInstalled.
type BinariesNotFoundError struct {
	// Searched holds one entry per place looked at, "source: dir (reason)".
	Searched []string
}

func (e *BinariesNotFoundError) Error() string {
	return fmt.Sprintf("PostgreSQL server binaries (postgres, initdb) not found; searched: %s. "+
		"Install PostgreSQL's server package (postgres and initdb, not only the client) "+
		"or set %s to the directory holding them",
		strings.Join(e.Searched, "; "), EnvBinDir)
}

// Unwrap returns ErrBinariesNotFound and backend.ErrNotInstalled.
func (e *BinariesNotFoundError) Unwrap() []error {
	return []error{ErrBinariesNotFound, backend.ErrNotInstalled}
}

// ServerUserError reports that noisysim runs as root and User does not exist.
// It unwraps to ErrNoServerUser and backend.ErrNotInstalled.
type ServerUserError struct {
	User string
	Err  error
}

func (e *ServerUserError) Error() string {
	return fmt.Sprintf("PostgreSQL refuses to run as root and system user %q was not found (%v); "+
		"create it (PostgreSQL's server package does) or run noisysim as an unprivileged user", e.User, e.Err)
}

// Unwrap returns ErrNoServerUser and backend.ErrNotInstalled.
func (e *ServerUserError) Unwrap() []error {
	return []error{ErrNoServerUser, backend.ErrNotInstalled}
}

// PortInUseError reports an explicitly requested port that is taken. It
// unwraps to ErrPortInUse and backend.ErrBadInput. A port noisysim picked
// itself is retried instead.
type PortInUseError struct {
	Port int
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("port %d on 127.0.0.1 is already in use; choose another or let noisysim pick one", e.Port)
}

// Unwrap returns ErrPortInUse and backend.ErrBadInput.
func (e *PortInUseError) Unwrap() []error { return []error{ErrPortInUse, backend.ErrBadInput} }

// BaseDirError reports a base directory (WithBaseDir) that clusters cannot
// be created in: missing, not a directory, or not reachable by the server
// user. It unwraps to backend.ErrBadInput.
type BaseDirError struct {
	Dir    string
	Reason string
}

func (e *BaseDirError) Error() string {
	return fmt.Sprintf("base dir %s: %s", e.Dir, e.Reason)
}

// Unwrap returns backend.ErrBadInput.
func (e *BaseDirError) Unwrap() error { return backend.ErrBadInput }

// SettingError reports a server setting that cannot be applied. It unwraps to
// ErrBadSetting and backend.ErrBadInput.
type SettingError struct {
	Name   string
	Reason string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("server setting %q: %s", e.Name, e.Reason)
}

// Unwrap returns ErrBadSetting and backend.ErrBadInput.
func (e *SettingError) Unwrap() []error { return []error{ErrBadSetting, backend.ErrBadInput} }

// NodeStartError reports a node whose server did not come up, with the tail
// of its server log. It unwraps to ErrNodeStart and to Err.
type NodeStartError struct {
	Node string
	// Log is the last lines of the node's server log, possibly empty.
	Log string
	Err error
}

func (e *NodeStartError) Error() string {
	msg := fmt.Sprintf("start node %s: %v", e.Node, e.Err)
	if e.Log != "" {
		msg += "\nserver log (last lines):\n" + e.Log
	}
	return msg
}

// Unwrap returns ErrNodeStart and Err.
func (e *NodeStartError) Unwrap() []error { return []error{ErrNodeStart, e.Err} }
