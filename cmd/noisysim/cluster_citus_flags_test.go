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

// --role-cpu for a role the topology starts no node of is refused (exit 2)
// before any cluster starts: it started one and applied the budget to
// nothing, silently.
func TestClusterUpRoleCPUNotInTopology(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--role-cpu", "replica=0.25"}, "--role-cpu replica: topology single has no replica node (its nodes' roles: primary)"},
		{[]string{"--topology", "replica", "--role-cpu", "worker=1"}, "--role-cpu worker: topology replica has no worker node (its nodes' roles: primary, replica)"},
		{[]string{"--topology", "citus", "--role-cpu", "primary=1"}, "--role-cpu primary: topology citus has no primary node (its nodes' roles: coordinator, worker)"},
	} {
		var out, errOut bytes.Buffer
		if code := realMain(append([]string{"cluster", "up", "--base-dir", t.TempDir()}, tc.args...), &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, errOut.String(), tc.want)
		}
		if strings.Contains(out.String(), "cluster up:") {
			t.Errorf("%v: a cluster started:\n%s", tc.args, out.String())
		}
	}
}
