package redislimiter_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/internal/suitelock"
)

func TestMain(m *testing.M) {
	suitelock.Hold("isolation/limiter/redislimiter") // leases and waits timed in milliseconds: the tests take their turn
	goleak.VerifyTestMain(m)
}
