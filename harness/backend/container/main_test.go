package container_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend/container"
)

// TestMain fails the package when anything labelled by noisysim is left in
// Docker after the tests (containers or networks of any run), and removes it.
func TestMain(m *testing.M) {
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if container.Available(ctx) == nil {
		cs, ns, err := container.Leftovers(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "list leftovers:", err)
			code = 1
		} else if len(cs)+len(ns) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: noisysim containers %v and networks %v left after the tests\n", cs, ns)
			container.Remove(ctx, "")
			code = 1
		}
	}
	os.Exit(code)
}
