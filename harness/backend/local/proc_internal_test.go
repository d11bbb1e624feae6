package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A program run with a context (initdb, pg_basebackup, pg_ctl) may fork
// children that keep its output pipe open: pg_basebackup -X stream forks its
// WAL receiver. Cancelling the context must end the whole process group, or
// CombinedOutput waits for the orphan forever (a Ctrl-C during replica
// creation hung `cluster up`).
func TestCommandCancelKillsForkedChildren(t *testing.T) {
	u, err := serverUser("")
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	dir, err := os.MkdirTemp("", "nstest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777) // the server user writes the pid file
	pidFile := filepath.Join(dir, "child.pid")
	ctx, cancel := context.WithCancel(t.Context())
	script := "sleep 300 & echo $! > " + pidFile + "; wait"
	cmd := u.command(exec.CommandContext(ctx, "/bin/sh", "-c", script), "/")
	done := make(chan error, 1)
	go func() { _, err := cmd.CombinedOutput(); done <- err }()
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(data), "\n") {
			child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the script's child did not start")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		killTree(child)
		t.Fatal("CombinedOutput still waits 10 s after cancel: a forked child holds the pipe")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			killTree(child)
			t.Fatalf("forked child %d survived the cancel", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
