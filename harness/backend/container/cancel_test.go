package container_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
)

// TestCancelledStartLeavesNothing cancels StartCluster at many points of
// its first second (dial, network create, container create and start): a
// Docker request cancelled in flight may still complete in the daemon, and
// whatever it made must be removed all the same.
func TestCancelledStartLeavesNothing(t *testing.T) {
	needImage(t, testImage(), buildHint)
	for i, d := range []time.Duration{0, 5, 10, 20, 30, 40, 50, 60, 80, 100, 130, 160, 200, 300, 500, 800} {
		attempt := fmt.Sprintf("%s-%d", testLabelValue, i)
		b := container.New(container.WithImages(testImage()), testLabel, container.WithLabel("org.noisysim.test-attempt", attempt))
		ctx, cancel := context.WithTimeout(context.Background(), d*time.Millisecond)
		c, err := b.StartCluster(ctx, backend.Spec{Topology: backend.TopologyReplica})
		cancel()
		if err == nil {
			c.Close()
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cancelled after %v: %v, want context.DeadlineExceeded", d*time.Millisecond, err)
		}
		// A create the daemon finishes after the cancelled call returned
		// shows up a little later.
		time.Sleep(300 * time.Millisecond)
		lctx, lcancel := context.WithTimeout(context.Background(), 15*time.Second)
		cs, ns, lerr := container.Leftovers(lctx, testSelector, "org.noisysim.test-attempt="+attempt)
		lcancel()
		if lerr != nil {
			t.Fatal(lerr)
		}
		if len(cs)+len(ns) > 0 {
			t.Errorf("cancelled after %v: left containers %v and networks %v", d*time.Millisecond, cs, ns)
			for _, n := range ns {
				container.Remove(context.Background(), n[len("noisysim-"):])
			}
		}
	}
}
