package localtest_test

import (
	"testing"

	"github.com/noisysim/noisysim/internal/suitelock"
)

// The tests start PostgreSQL and measure: they take their turn on the machine.
func TestMain(m *testing.M) { suitelock.Main(m, "harness/backend/local/localtest") }
