package local_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// stateOf returns the state letter of /proc/pid/stat, "" when gone.
func stateOf(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// treeOf returns pid and its descendants.
func treeOf(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, childrenOf(out[i])...)
	}
	return out
}

// ping runs SELECT 1 on a fresh connection within d.
func ping(dsn string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

// TestInjectPauseStop pauses the node (every process stopped, a query
// hangs), resumes it, stops it (a query fails, the held session is ended)
// and starts it again on the same port.
func TestInjectPauseStop(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c, err := local.Start(t.Context(), backend.Spec{}, local.WithBaseDir(base))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	primary := c.Nodes()[0]
	held := connect(t, primary.DSN())
	pid := c.Stat().Nodes[0].PID

	restore, err := c.Inject(t.Context(), "primary", local.FaultPause)
	if err != nil {
		t.Fatal(err)
	}
	tree := treeOf(pid)
	if len(tree) < 3 {
		t.Fatalf("postmaster tree %v: want the postmaster and its children", tree)
	}
	for _, p := range tree {
		// A backend that was exiting when the pause came (the one of a
		// connection Start made to check the server, say) stays a zombie:
		// the stopped postmaster cannot reap it. It runs nothing either.
		if s := stateOf(p); s != "T" && s != "Z" {
			t.Errorf("pid %d state %q while paused, want T (or Z, exited)", p, s)
		}
	}
	if _, err := c.Inject(t.Context(), "primary", local.FaultStop); !errors.Is(err, local.ErrFaulted) {
		t.Errorf("second fault on a paused node: %v, want ErrFaulted", err)
	}
	if err := ping(primary.DSN(), 300*time.Millisecond); err == nil {
		t.Error("a query ran on a paused node")
	}
	if err := restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, p := range treeOf(pid) {
		if s := stateOf(p); s == "T" {
			t.Errorf("pid %d still stopped after the restore", p)
		}
	}
	if err := ping(primary.DSN(), 10*time.Second); err != nil {
		t.Fatalf("after resume: %v", err)
	}

	restore, err = c.Inject(t.Context(), "primary", local.FaultStop)
	if err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Errorf("postmaster %d alive after stop", pid)
	}
	if _, err := held.Exec(t.Context(), "SELECT 1"); err == nil {
		t.Error("a session survived the stop")
	}
	if err := ping(primary.DSN(), time.Second); err == nil {
		t.Error("connected to a stopped node")
	}
	if err := restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := c.Stat().Nodes[0]
	if !st.Running || st.PID == pid || st.Port != primary.Port {
		t.Errorf("after restart: running %v pid %d (was %d) port %d (was %d)", st.Running, st.PID, pid, st.Port, primary.Port)
	}
	if err := ping(primary.DSN(), 10*time.Second); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if _, err := c.Inject(t.Context(), "nope", local.FaultPause); !errors.Is(err, backend.ErrBadInput) {
		t.Errorf("unknown node: %v, want ErrBadInput", err)
	}
	if _, err := c.Inject(t.Context(), "primary", "disconnect"); !errors.Is(err, backend.ErrBadInput) {
		t.Errorf("disconnect: %v, want ErrBadInput", err)
	}
}

// TestCloseWhilePaused closes a cluster whose node is paused: Close
// resumes it and stops it quickly, leaving no process.
func TestCloseWhilePaused(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c, err := local.Start(t.Context(), backend.Spec{}, local.WithBaseDir(base), local.WithStopTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tree := treeOf(c.Stat().Nodes[0].PID)
	if _, err := c.Inject(t.Context(), "primary", local.FaultPause); err != nil {
		c.Close()
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// A fast shutdown, not the 10 s stop timeout's escalation.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close of a paused node took %v", d)
	}
	if live := waitGone(tree, 5*time.Second); len(live) > 0 {
		t.Errorf("processes left after Close: %v", live)
	}
}

// TestStopKeptPaused stops a kept cluster left paused (as when its
// noisysim is killed during a pause): StopKept resumes it and stops it
// with a fast shutdown, not after the 20 s of pg_ctl's timeouts.
func TestStopKeptPaused(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	b := local.New(local.WithBaseDir(base), local.WithKeep(true))
	c, err := b.StartCluster(t.Context(), backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Kill() })
	tree := treeOf(c.Stat().Nodes[0].PID)
	if _, err := c.Inject(t.Context(), "primary", local.FaultPause); err != nil {
		t.Fatal(err)
	}
	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.StopKept(t.Context(), c.Dir()); err != nil {
		t.Fatalf("StopKept: %v", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("StopKept of a paused cluster took %v", d)
	}
	if live := waitGone(tree, 0); len(live) > 0 {
		t.Errorf("alive when StopKept returned: %v", live)
	}
}

// TestInjectStopReplica stops the primary of topology replica, then the
// replica: each restarts on its port and the replica streams again.
func TestInjectStopReplica(t *testing.T) {
	needPostgres(t)
	c, err := local.Start(t.Context(), backend.Spec{Topology: backend.TopologyReplica}, local.WithBaseDir(privateBase(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	primary, _ := backend.First(c, backend.RolePrimary)
	for _, name := range []string{"primary", "replica1"} {
		restore, err := c.Inject(t.Context(), name, local.FaultStop)
		if err != nil {
			t.Fatal(err)
		}
		if err := restore(t.Context()); err != nil {
			t.Fatalf("restart %s: %v", name, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			var n int
			conn, err := pgx.Connect(ctx, primary.DSN())
			if err == nil {
				err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").Scan(&n)
				conn.Close(context.Background())
			}
			cancel()
			if err == nil && n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after restarting %s: %d replicas streaming, err %v", name, n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
