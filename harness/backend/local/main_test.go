package local_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/internal/suitelock"
)

// Every goroutine the backend starts (the process waiters, the locked
// spawner thread) ends once its clusters are closed.
func TestMain(m *testing.M) {
	suitelock.Hold("harness/backend/local") // the tests start PostgreSQL and measure: they take their turn
	goleak.VerifyTestMain(m)
}
