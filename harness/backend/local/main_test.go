package local_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the backend starts (the process waiters, the locked
// spawner thread) ends once its clusters are closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
