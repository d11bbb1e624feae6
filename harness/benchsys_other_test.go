//go:build !linux

package harness

import "time"

// kernelSleep sleeps d on a Go timer, as the open loop's PreciseWait does
// off Linux (workload/sleep_other.go).
func kernelSleep(d time.Duration) { time.Sleep(d) }

// processCPU returns 0: the benchmark reads the process's CPU time on Linux
// only.
func processCPU() time.Duration { return 0 }
