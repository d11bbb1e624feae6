package citus_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/internal/suitelock"
)

// Every goroutine a test starts (samplers, writers, load drivers, pools,
// the local backend's process waiters) ends before the package's tests do.
func TestMain(m *testing.M) {
	suitelock.Hold("isolation/citus") // the tests start PostgreSQL and measure: they take their turn
	goleak.VerifyTestMain(m)
}
