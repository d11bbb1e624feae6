package harness

import (
	"time"

	"golang.org/x/sys/unix"
)

// kernelSleep blocks the calling thread in nanosleep for d, as the open
// loop's PreciseWait does (workload/sleep_linux.go).
func kernelSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
