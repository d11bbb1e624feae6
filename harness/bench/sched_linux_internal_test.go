//go:build linux

package bench

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSchedBatch: schedBatch puts every thread of the process in
// SCHED_BATCH, and its restore function puts every one back in SCHED_OTHER.
func TestSchedBatch(t *testing.T) {
	policies := func() map[int]uint32 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]uint32{}
		for _, task := range tasks {
			tid, _ := strconv.Atoi(task.Name())
			attr, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				continue // the thread exited meanwhile
			}
			out[tid] = attr.Policy
		}
		return out
	}
	restore, err := schedBatch()
	if err != nil {
		restore()
		t.Fatalf("schedBatch: %v", err)
	}
	batch := policies()
	restore()
	if len(batch) == 0 {
		t.Fatal("no thread found in /proc/self/task")
	}
	for tid, p := range batch {
		if p != unix.SCHED_BATCH {
			t.Errorf("thread %d: policy %d after schedBatch, want SCHED_BATCH (%d)", tid, p, unix.SCHED_BATCH)
		}
	}
	for tid, p := range policies() {
		if p != unix.SCHED_NORMAL {
			t.Errorf("thread %d: policy %d after restore, want SCHED_OTHER (%d)", tid, p, unix.SCHED_NORMAL)
		}
	}
}
