package external_test

import (
	"os"
	"testing"

	"github.com/noisysim/noisysim/internal/suitelock"
)

// The package's tests start PostgreSQL and measure: they take their turn on
// the machine (internal/suitelock).
func TestMain(m *testing.M) {
	suitelock.Hold("harness/backend/external")
	os.Exit(m.Run())
}
