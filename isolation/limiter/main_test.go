package limiter_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/internal/suitelock"
)

func TestMain(m *testing.M) {
	suitelock.Hold("isolation/limiter") // the tests time waits and arrivals in milliseconds: they take their turn
	goleak.VerifyTestMain(m)
}
