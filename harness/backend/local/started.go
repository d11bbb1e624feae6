package local

import (
	"fmt"
	"path/filepath"
)

// StartedNode is a running server this backend started, found by
// StartedBy: its cluster directory and node name.
type StartedNode struct {
	// Dir is the cluster's directory (<base>/noisysim-*).
	Dir string
	// Name is the node's name in the cluster (primary, replica, …).
	Name string
	// DataDir is the node's data directory.
	DataDir string
}

// StartedBy reports whether the server a connection reaches is a node of a
// cluster this backend started and that still runs on this machine: what
// the server says of itself (SHOW data_directory, port and cluster_name)
// must match a node recorded in its cluster directory's state file, in
// this PID namespace, with a live postmaster serving that data directory.
// A server that reports otherwise, or that noisysim never recorded, is
// not one (a *NotStartedError says why): the caller must not change it.
func StartedBy(dataDir string, port int, clusterName string) (StartedNode, error) {
	dir := filepath.Dir(filepath.Dir(dataDir)) // <cluster>/<node>/data
	st, err := readState(dir)
	if err != nil {
		return StartedNode{}, &NotStartedError{DataDir: dataDir, Reason: "no noisysim cluster records it (" + err.Error() + ")"}
	}
	if st.PIDNamespace != pidNamespace() {
		return StartedNode{}, &NotStartedError{DataDir: dataDir, Reason: "its cluster was started in another PID namespace"}
	}
	for _, n := range st.Nodes {
		if !sameDir(n.DataDir, dataDir) {
			continue
		}
		switch {
		case n.Port != port:
			return StartedNode{}, &NotStartedError{DataDir: dataDir, Reason: fmt.Sprintf("the server listens on port %d, noisysim started it on %d", port, n.Port)}
		case clusterName != filepath.Base(dir)+"/"+n.Name:
			return StartedNode{}, &NotStartedError{DataDir: dataDir, Reason: fmt.Sprintf("its cluster_name is %q, noisysim names it %q", clusterName, filepath.Base(dir)+"/"+n.Name)}
		case len(postmastersOf(n.PID, n.DataDir)) == 0:
			return StartedNode{}, &NotStartedError{DataDir: dataDir, Reason: "no live postmaster of noisysim's serves it"}
		}
		return StartedNode{Dir: dir, Name: n.Name, DataDir: n.DataDir}, nil
	}
	return StartedNode{}, &NotStartedError{DataDir: dataDir, Reason: "its cluster directory " + dir + " records no node with that data directory"}
}

// NotStartedError says why a server is not one noisysim started.
type NotStartedError struct {
	DataDir string
	Reason  string
}

func (e *NotStartedError) Error() string {
	return fmt.Sprintf("data directory %s: not started by noisysim: %s", e.DataDir, e.Reason)
}
