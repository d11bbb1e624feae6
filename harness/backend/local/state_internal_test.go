package local

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

// serversIn returns the live postgres processes whose working directory
// (a server's data dir) is under dir.
func serversIn(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err == nil && strings.HasPrefix(cwd, dir+"/") && alive(p) {
			out = append(out, p)
		}
	}
	return out
}

// A node of a kept cluster restarted by hand (pg_ctl restart, to apply a
// setting) has a new pid; StopKept must stop it all the same, never remove
// the directory under a running server and report success.
func TestStopKeptStopsRestartedNode(t *testing.T) {
	if _, err := FindBinaries(t.Context(), ""); err != nil {
		t.Skip("skipping: PostgreSQL server binaries not found")
	}
	base, err := os.MkdirTemp("", "nstest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	t.Cleanup(func() { os.RemoveAll(base) })
	b := New(WithBaseDir(base), WithKeep(true))
	c, err := b.StartCluster(t.Context(), backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range serversIn(base) {
			killTree(p)
		}
	})
	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	n := c.Stat().Nodes[0]
	restart := c.user.command(exec.CommandContext(t.Context(), c.bin.Path("pg_ctl"), "restart", "-D", n.DataDir, "-l", n.LogPath, "-w", "-t", "30"), c.Dir())
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl restart: %v\n%s", err, out)
	}
	if len(serversIn(c.Dir())) == 0 {
		t.Fatal("the restarted node does not run")
	}
	err = b.StopKept(t.Context(), c.Dir())
	deadline := time.Now().Add(5 * time.Second)
	for len(serversIn(c.Dir())) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if live := serversIn(c.Dir()); len(live) > 0 {
		t.Errorf("StopKept returned %v and left servers %v running", err, live)
	} else if err != nil {
		t.Errorf("StopKept: %v", err)
	}
	if _, serr := os.Stat(c.Dir()); err == nil && serr == nil {
		t.Errorf("StopKept succeeded and left %s", c.Dir())
	}
}
