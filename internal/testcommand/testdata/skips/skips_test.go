// Package skips is a fixture for the README's test command: one test
// passes, one skips with a reason.
package skips

import "testing"

func TestPasses(t *testing.T) {}

func TestSkipsWithReason(t *testing.T) {
	t.Skip("skipping: the fixture's reason, on one line")
}
