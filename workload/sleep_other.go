//go:build !linux

package workload

import "time"

// preciseSleep sleeps d on a Go timer: the Go runtime's timers are as fine
// as this system's wait.
func preciseSleep(d time.Duration) { time.Sleep(d) }
