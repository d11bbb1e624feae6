package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// rss returns the process's resident set size in bytes from
// /proc/self/status (VmRSS), or 0 where it cannot be read.
func rss() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// selfCPU returns the user plus system CPU time the process has used (all
// threads; getrusage, the counters /proc/self/stat shows in clock ticks),
// or 0 where it cannot be read.
func selfCPU() time.Duration {
	cpu, _ := selfUsage()
	return cpu
}

// selfUsage returns selfCPU and the context switches of the process so far
// (all threads, voluntary and not: getrusage's nvcsw + nivcsw).
func selfUsage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), switches(&ru)
}

// switches returns ru's context switches, voluntary (blocked: a read that
// waits, a sleep) and not (preempted).
func switches(ru *syscall.Rusage) int64 { return int64(ru.Nvcsw + ru.Nivcsw) }

// perOp returns n per op, or 0 without ops.
func perOp(n, ops int64) float64 {
	if ops <= 0 {
		return 0
	}
	return float64(n) / float64(ops)
}

// perKOp returns cpu per 1,000 of ops, or 0 without ops.
func perKOp(cpu time.Duration, ops int64) time.Duration {
	if ops <= 0 {
		return 0
	}
	return time.Duration(float64(cpu) * 1000 / float64(ops))
}
