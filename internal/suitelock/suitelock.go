// Package suitelock lets the test binaries that start databases and measure
// latency take turns on the machine, so that `go test ./...` can run
// packages in parallel (its default) without one package's load being
// measured as another's latency.
//
// A package whose tests start PostgreSQL or drive load calls Hold first in
// its TestMain:
//
//	func TestMain(m *testing.M) {
//		suitelock.Hold("harness")
//		os.Exit(m.Run())
//	}
//
// Hold takes the machine-wide lock of measured runs (internal/runlock: the
// same lock `noisysim run` holds, so a test binary and a user's measured run
// do not measure each other either), keeps it until the test binary exits
// (the kernel frees it however the binary ends), and then waits, bounded,
// until the rest of the machine is idle: go test compiles the packages still
// to come beside the first ones to run. Packages of pure unit tests do not
// call it and run beside the others.
//
// The binary's own runs of noisysim (in process or as child processes) get
// a lock file of their own through $NOISYSIM_LOCK_FILE (InnerPath), unless
// a test sets another: they run inside the turn the binary already holds.
package suitelock

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/noisysim/noisysim/internal/runlock"
)

// Quiet bounds the wait for an idle machine after the lock is taken.
const (
	// IdleCPU is the CPU the rest of the machine may use, in cores, for it
	// to count as idle.
	IdleCPU = 0.3
	// IdleFor is how long it must stay idle.
	IdleFor = 3 * time.Second
)

// maxIdleWait is how long Hold waits for an idle machine before it goes on
// and says so: $NOISYSIM_TEST_IDLE_WAIT (a Go duration; 0 does not wait,
// for a developer's targeted tests on a machine busy with other work), or
// 2 minutes, about what go test takes to compile this module's test
// binaries with -race on 2 cores.
var maxIdleWait = idleWaitFromEnv()

// EnvIdleWait names the environment variable that sets the idle wait.
const EnvIdleWait = "NOISYSIM_TEST_IDLE_WAIT"

func idleWaitFromEnv() time.Duration {
	if v := os.Getenv(EnvIdleWait); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "%s=%q: want a duration such as 0, 30s or 2m\n", EnvIdleWait, v)
			os.Exit(2)
		}
		return d
	}
	return 2 * time.Minute
}

// held is the lock Hold took.
var held *runlock.Lock

// Hold takes the machine for the test binary of pkg (see the package doc)
// and returns once it holds it. It exits the binary with status 2 if the
// lock cannot be opened.
func Hold(pkg string) {
	path := runlock.Path()
	what := "go test ./" + pkg
	start := time.Now()
	l, err := runlock.Acquire(context.Background(), path, runlock.Options{What: what,
		OnWait: func(w runlock.Wait) {
			place := w.InLine()
			if w.NoTicket != nil {
				place = "without a place in line: " + w.NoTicket.Error()
			}
			fmt.Fprintf(os.Stderr, "%s: waiting for the machine: %s holds %s (%s)\n", what, w.Holder, path, place)
		}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(2)
	}
	// Kept for the life of the process: a *Lock no longer referenced would
	// have its file closed by the garbage collector, and the lock with it.
	// The kernel releases it when the process exits. The
	// binary's own runs take another lock file (InnerPath), or they would
	// wait for this binary, which waits for them.
	held = l
	os.Setenv(runlock.EnvPath, InnerPath(path))
	if maxIdleWait == 0 {
		return
	}
	if busy, ok := waitIdle(maxIdleWait); !ok {
		fmt.Fprintf(os.Stderr, "%s: the machine stayed busy (%.1f other cores in use) for %s; testing anyway\n", what, busy, maxIdleWait)
	} else if d := time.Since(start); d > 10*time.Second {
		fmt.Fprintf(os.Stderr, "%s: waited %s for the machine\n", what, d.Round(time.Second))
	}
}

// waitIdle waits until the CPU used outside this process stays under
// IdleCPU cores for IdleFor, or max passes. It returns the last reading
// and whether the machine became idle. Without /proc it returns at once.
func waitIdle(max time.Duration) (float64, bool) {
	const step = 500 * time.Millisecond
	deadline := time.Now().Add(max)
	prevAll, prevSelf, ok := readCPU()
	if !ok {
		return 0, true
	}
	var idle time.Duration
	var busy float64
	for time.Now().Before(deadline) {
		time.Sleep(step)
		all, self, ok := readCPU()
		if !ok {
			return 0, true
		}
		busy = (float64(all-prevAll) - float64(self-prevSelf)) / ticksPerSecond / step.Seconds()
		prevAll, prevSelf = all, self
		if busy < IdleCPU {
			idle += step
			if idle >= IdleFor {
				return busy, true
			}
		} else {
			idle = 0
		}
	}
	return busy, false
}

// ticksPerSecond is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const ticksPerSecond = 100

// readCPU returns the machine's busy CPU time (user, nice, system, irq,
// softirq, steal) and this process's (user + system), in ticks.
func readCPU() (all, self int64, ok bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		all += v
	}
	own, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, false
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(own)
	rest := s[strings.LastIndexByte(s, ')')+2:]
	g := strings.Fields(rest)
	if len(g) < 13 {
		return 0, 0, false
	}
	ut, err1 := strconv.ParseInt(g[11], 10, 64)
	st, err2 := strconv.ParseInt(g[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return all, ut + st, true
}

// InnerPath is the lock file of the runs a test binary holding the lock at
// path makes: path with ".test" added.
func InnerPath(path string) string { return path + ".test" }

// Main is the whole TestMain of a package that needs nothing else there:
// it holds the machine for pkg, runs the tests and exits with their status.
//
//	func TestMain(m *testing.M) { suitelock.Main(m, "harness") }
func Main(m interface{ Run() int }, pkg string) {
	Hold(pkg)
	os.Exit(m.Run())
}
