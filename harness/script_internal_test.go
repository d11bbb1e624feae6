package harness

import (
	"slices"
	"testing"
)

// TestAsText: script values go to the server as pgbench prints them.
func TestAsText(t *testing.T) {
	got := asText([]any{int64(-42), 1.0 / 3, 2.5, true, "acme-1", nil})
	want := []any{"-42", "0.333333333333333", "2.5", "true", "acme-1", nil}
	if !slices.Equal(got, want) {
		t.Errorf("asText = %q, want %q", got, want)
	}
}
