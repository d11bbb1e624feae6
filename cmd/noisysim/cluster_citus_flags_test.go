package main

import (
	"bytes"
	"strings"
	"testing"
)

// cluster up's help names topology citus, which it starts, and --nodes
// sets a Citus cluster's worker count (the README's "citus --nodes 4"): it
// was refused as "applies only to --topology primaries".
func TestClusterUpCitusNodes(t *testing.T) {
	var out, errOut bytes.Buffer
	realMain([]string{"cluster", "up", "--help"}, &out, &errOut)
	if !strings.Contains(out.String(), "single, replica, primaries or citus") {
		t.Errorf("cluster up --help does not name topology citus:\n%s", out.String())
	}
	out.Reset()
	errOut.Reset()
	// An empty --bindir stops it before anything starts: the error is
	// the missing server, not --nodes.
	code := realMain([]string{"cluster", "up", "--topology", "citus", "--nodes", "2", "--bindir", t.TempDir()}, &out, &errOut)
	if code != exitUsage || strings.Contains(errOut.String(), "--nodes") || !strings.Contains(errOut.String(), "server package") {
		t.Errorf("cluster up --topology citus --nodes 2 (no server): exit %d, stderr %q; want 2 for the missing server, --nodes accepted", code, errOut.String())
	}
	errOut.Reset()
	if code := realMain([]string{"cluster", "up", "--topology", "replica", "--nodes", "2"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "--nodes applies only") {
		t.Errorf("--topology replica --nodes 2: exit %d, stderr %q; want 2 naming --nodes", code, errOut.String())
	}
}
