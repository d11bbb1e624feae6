//go:build !linux

package bench

import "errors"

// schedBatch is Linux's only.
func schedBatch() (restore func(), err error) {
	return func() {}, errors.New("SCHED_BATCH is Linux's only")
}
