//go:build linux

package bench

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// schedBatch puts every thread of the process in the kernel's SCHED_BATCH
// policy (threads started meanwhile inherit it) and returns a function that
// puts every thread back in SCHED_OTHER. A batch thread that is woken (a
// response read, a timer) does not preempt the thread running on its CPU
// (a server's backend, on a small machine); it runs when that one blocks or
// at the scheduler's tick. Threads whose policy cannot be set are left as
// they are: the first error is returned with the restore function.
func schedBatch() (restore func(), err error) {
	set := func(policy uint32) error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		var first error
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy}, 0); err != nil && first == nil && err != unix.ESRCH {
				first = err
			}
		}
		return first
	}
	return func() { _ = set(unix.SCHED_NORMAL) }, set(unix.SCHED_BATCH)
}
