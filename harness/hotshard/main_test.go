package hotshard

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (samplers, writers, load drivers, pools,
// the local backend's process waiters) ends before the package's tests do.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
