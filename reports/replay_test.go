package reports_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestReplayTable: a trace's recorded figures stand beside the same
// window's replayed p99 of each configuration; the terminal shows the quiet
// tenants merged and the dominant tenant, report.md every tenant; a log's
// durations stand beside the worst window's p99.
func TestReplayTable(t *testing.T) {
	cfg := func(name string, quiet, dom, t7 float64) reports.Configuration {
		return reports.Configuration{Name: name, Windows: []reports.Window{
			{Name: "solo", Tenants: []reports.TenantRow{{Tenant: "7", Class: "lookup", Count: 5, P99: 1}}},
			{Name: "run", Tenants: []reports.TenantRow{{Tenant: "1", Class: "report", Count: 9, P99: dom}, {Tenant: "7", Class: "lookup", Count: 5, P99: t7}},
				QuietAll: []reports.TenantRow{{Tenant: reports.QuietAll, Class: "lookup", Count: 50, P99: quiet}}},
		}}
	}
	r := &reports.Report{Scenario: "replay", Dominant: "1", Configurations: []reports.Configuration{cfg("naive", 3000, 900, 2900), cfg("isolated", 40, 1200, 35)},
		Replay: &reports.Replay{Source: "trace", File: "i.jsonl.gz", Speed: 1, Records: 64, Replayed: 64, Results: 64, Recorded: []reports.RecordedRow{
			{Window: "run", Tenant: reports.QuietAll, Class: "lookup", Count: 50, P50: 800, P99: 3100},
			{Window: "run", Tenant: "1", Class: "report", Count: 9, P50: 500, P99: 950},
			{Window: "run", Tenant: "7", Class: "lookup", Count: 5, P50: 700, P99: 2950},
		}}}
	var text, md bytes.Buffer
	if err := reports.WriteText(&text, r, reports.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := reports.WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"recorded results: 64", "per window", "window  tenant       class   recorded n  recorded p50  recorded p99  naive p99  isolated p99",
		"run     quiet (all)  lookup  50          800.0 ms      3100.0 ms     3000.0 ms  40.0 ms", "run     1            report  9           500.0 ms      950.0 ms      900.0 ms   1200.0 ms"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "2950.0 ms") {
		t.Errorf("text shows a single quiet tenant's row:\n%s", text.String())
	}
	if !strings.Contains(md.String(), "| run | 7 | lookup | 5 | 700.0 ms | 2950.0 ms | 2900.0 ms | 35.0 ms |") {
		t.Errorf("report.md lacks tenant 7's row:\n%s", md.String())
	}

	// A log: no window, the worst window's p99.
	r.Replay.Results = 0
	r.Replay.Recorded = []reports.RecordedRow{{Tenant: "7", Class: "lookup", Count: 10, P50: 0.5, P99: 2}}
	text.Reset()
	if err := reports.WriteText(&text, r, reports.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "7       lookup  10          0.5 ms        2.0 ms        2900.0 ms  35.0 ms"; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
}
