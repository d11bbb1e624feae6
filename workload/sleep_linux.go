package workload

import (
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep blocks the calling thread in nanosleep for d, resumed after
// a signal: the kernel's timer slack (50 µs by default) is its error.
func preciseSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
