package reports

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWriterCheck: the writer's verdict reads on one line in the terminal
// and Markdown, and keeps its documented JSON keys.
func TestWriterCheck(t *testing.T) {
	wc := &WriterCheck{Tenant: "1", Rate: 100, Inserts: 70, Updates: 30, Errors: 2, Lost: 1, Stale: 3,
		LongestWrite: 437, LongestWriteAt: 13.7, LongestWriteWindow: "move", Node: "primary4"}
	line := writerLine(wc)
	for _, want := range []string{"tenant 1 at 100 writes/s", "70 inserts and 30 updates acknowledged, 2 failed", "1 lost", "3 stale",
		"read back at primary4", "longest write 437 ms", "in move"} {
		if !strings.Contains(line, want) {
			t.Errorf("writer line %q lacks %q", line, want)
		}
	}
	raw, err := json.Marshal(Configuration{Name: "c", Writer: wc})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"writer":{`, `"rate_per_s":100`, `"lost":1`, `"vanished":0`, `"longest_write_ms":437`, `"longest_write_window":"move"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("JSON %s lacks %s", raw, key)
		}
	}
	if line := actionLine(ActionResult{Phase: "move", Type: "move_tenant", FiredBy: "promote"}); !strings.Contains(line, "fired by policy promote") {
		t.Errorf("action line %q does not name the policy that fired it", line)
	}
}
