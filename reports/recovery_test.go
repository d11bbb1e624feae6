package reports

import (
	"bytes"
	"strings"
	"testing"
)

// TestRecoveryLine: a configuration's recovery, recovered or not, is one
// line of report.md, the terminal and report.html, and recovery in
// report.json.
func TestRecoveryLine(t *testing.T) {
	rc := &Recovery{Stopped: 22, Windows: []string{"after"}, Baseline: "solo", Bounds: map[string]float64{"page": 45, "lookup": 31.6},
		Hold: 3, Recovered: true, Time: 2, Seconds: 6, Worst: 812, WorstClass: "page"}
	got := recoveryLine(Configuration{Recovery: rc})
	want := "recovery after the dominant tenant stopped at 22.0 s: recovered in 2.0 s (quiet p99 per second within lookup 32 ms, page 45 ms, from solo, for 3.0 s; in after 6 seconds judged, worst 812 ms page)"
	if got != want {
		t.Errorf("recovered:\n got %s\nwant %s", got, want)
	}
	never := *rc
	never.Recovered, never.Time = false, 6
	if got := recoveryLine(Configuration{Recovery: &never}); !strings.Contains(got, "stopped at 22.0 s: NOT RECOVERED in 6.0 s (") {
		t.Errorf("not recovered: %s", got)
	}
	if got := recoveryLine(Configuration{}); got != "" {
		t.Errorf("no recovery: %q", got)
	}
	r := sampleReport(1)
	r.Configurations[0].Recovery = rc
	for name, write := range renderers() {
		if name == "junit.xml" {
			continue
		}
		var b bytes.Buffer
		if err := write(&b, r); err != nil {
			t.Fatal(err)
		}
		want := "recovered in 2.0 s"
		if name == "report.json" {
			want = `"recovery": {`
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<h2>Service and recovery of "+r.Configurations[0].Name+"</h2>") || !strings.Contains(b.String(), "recovered in 2.0 s") {
		t.Errorf("report.html lacks the recovery")
	}
}
