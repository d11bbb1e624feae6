package local_test

import (
	"context"
	"errors"
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
// like noisysim's load generator, wants 0.6 CPU in short bursts,
// and measures how late a 5 ms ticker wakes (the guard's stall meter).
// Each backend is a session of its own; with the kernel's autogroup each
// would weigh as much as this whole process, which then waited hundreds of
// ms for a CPU. The servers are gathered in one cgroup, so it does not:
// with 24 backends on a shared 2-core machine the ticker woke 71 ms late
// before, 8 ms after.
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
		backends = 40                     // ci-gate's naive control: its 40 reports at once
		spinners = 3                      // goroutines of this process that want CPU …
		busy     = 1 * time.Millisecond   // … this long every tick: 0.6 CPU in all
		tick     = 5 * time.Millisecond   // guard.StallTick
		measure  = 2 * time.Second        // the window
		bound    = 100 * time.Millisecond // guard.StallMin is 50 ms, guard.DefaultMaxStall 250 ms
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
			conn.Exec(ctx, "DO $$BEGIN LOOP END LOOP; END$$")
		})
	}
	for range backends {
		<-started
	}
	time.Sleep(300 * time.Millisecond) // the statements are running

	// The generator's own work: goroutines that each want a fifth of a
	// CPU, enough to hold both of a 2-core machine's Ps at times, as
	// noisysim's dispatcher and calls do under a backlog. A P whose thread
	// the kernel does not run keeps the ticker's goroutine waiting.
	stop := make(chan struct{})
	var spin sync.WaitGroup
	for range spinners {
		spin.Go(func() {
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
	}
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
	group := h.Group("noisysim/" + filepath.Base(c.Dir())).Path
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(group); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's cpu group %s is left after Close (%v)", group, err)
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
