package container_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/internal/suitelock"
)

// TestMain fails the package when anything its tests created (every start
// carries testLabel) is left in Docker afterwards — containers or networks —
// and removes it. Other processes' clusters on the same daemon are ignored.
func TestMain(m *testing.M) {
	suitelock.Hold("harness/backend/container") // the tests start PostgreSQL and measure: they take their turn
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if container.Available(ctx) == nil {
		cs, ns, err := container.Leftovers(ctx, testSelector)
		if err != nil {
			fmt.Fprintln(os.Stderr, "list leftovers:", err)
			code = 1
		} else if len(cs)+len(ns) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: noisysim containers %v and networks %v left after the tests\n", cs, ns)
			// Networks are named noisysim-<run id>, containers
			// noisysim-<run id>-<node>.
			runs := map[string]bool{}
			for _, n := range append(cs, ns...) {
				run, _, _ := strings.Cut(strings.TrimPrefix(n, "noisysim-"), "-")
				runs[run] = true
			}
			for run := range runs {
				container.Remove(ctx, run)
			}
			code = 1
		}
	}
	os.Exit(code)
}
