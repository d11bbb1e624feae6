package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// TestBusyServersLeaveNoisysimOnTime loads the machine as ci-gate's naive
// control does (more CPU-bound backends than cores) while this process,
// like noisysim's load generator, wants a fifth of a CPU in short bursts,
// and measures how late a 5 ms ticker wakes (the guard's stall meter).
// Each backend is a session of its own; with the kernel's autogroup each
// would weigh as much as this whole process, which then waited hundreds of
// ms for a CPU. The servers are gathered in one cgroup, so it does not.
func TestBusyServersLeaveNoisysimOnTime(t *testing.T) {
	needPostgres(t)
	h := needCgroups(t)
	c, err := local.Start(t.Context(), backend.Spec{Topology: backend.TopologySingle}, local.WithBaseDir(privateBase(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := c.Stat().Nodes[0]
	// Without budgets the servers still run in a group of their own.
	if got, want := cpuGroupOf(t, h, n.PID), "/noisysim/"+filepath.Base(c.Dir())+"/primary"; got != want {
		t.Errorf("the postmaster is in cpu group %q, want %q", got, want)
	}

	const (
		backends = 24                     // 12 per core on 2 cores
		busy     = 1 * time.Millisecond   // this process's demand: busy every tick
		tick     = 5 * time.Millisecond   // guard.StallTick
		measure  = 2 * time.Second        // the window
		bound    = 150 * time.Millisecond // guard.DefaultMaxStall is 250 ms
	)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	started := make(chan struct{}, backends)
	for range backends {
		conn := connect(t, n.DSN())
		wg.Go(func() {
			started <- struct{}{}
			// Pure CPU until the window is over (statement_timeout ends it).
			conn.Exec(ctx, "SET statement_timeout = '3s'")
			conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 1000000000)")
		})
	}
	for range backends {
		<-started
	}
	time.Sleep(300 * time.Millisecond) // the statements are running

	stop := make(chan struct{})
	var spin sync.WaitGroup
	spin.Go(func() { // the generator's own work, a fifth of a CPU
		for {
			select {
			case <-stop:
				return
			default:
			}
			for end := time.Now().Add(busy); time.Now().Before(end); {
			}
			time.Sleep(tick - busy)
		}
	})
	var worst time.Duration
	timer := time.NewTimer(tick)
	want := time.Now().Add(tick)
	for end := time.Now().Add(measure); time.Now().Before(end); {
		<-timer.C
		now := time.Now()
		worst = max(worst, now.Sub(want))
		want = now.Add(tick)
		timer.Reset(tick)
	}
	close(stop)
	spin.Wait()
	cancel()
	wg.Wait()
	t.Logf("%d CPU-bound backends: the longest stall of a %v ticker over %v was %v", backends, tick, measure, worst.Round(time.Millisecond))
	if worst >= bound {
		t.Errorf("a %v ticker woke %v late with %d busy backends, want < %v: the servers crowd noisysim out (%s)",
			tick, worst.Round(time.Millisecond), backends, bound, strings.TrimSpace(autogroup()))
	}
}

// autogroup says whether the kernel groups tasks by session.
func autogroup() string {
	b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	if err != nil {
		return "no kernel.sched_autogroup_enabled"
	}
	return "kernel.sched_autogroup_enabled = " + strings.TrimSpace(string(b))
}
