package workload_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/internal/suitelock"
)

func TestMain(m *testing.M) {
	suitelock.Hold("workload") // the tests time waits and arrivals in milliseconds: they take their turn
	goleak.VerifyTestMain(m)
}
