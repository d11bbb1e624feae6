package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// faultReport is sampleReport(6) with three faults in the isolated
// configuration: a stop that recovered, with an error burst over 12
// tenants (more than are listed), a pause that failed to restore, and a
// pause with no error but stalled operations that did not recover.
func faultReport() *Report {
	r := sampleReport(6)
	var ts []FaultTenant
	var total int64
	for i := 1; i <= 12; i++ {
		n := int64(13 - i)
		ts = append(ts, FaultTenant{Tenant: fmt.Sprint(i), Errors: n, ByClass: map[string]int64{"interactive": n}})
		total += n
	}
	ts[0].ByClass = map[string]int64{"interactive": 8, "report": 4}
	last := len(r.Configurations) - 1
	r.Configurations[last].Faults = []Fault{
		{Node: "replica1", Action: "stop", At: 3, Restored: 5.25, Recovered: true, TimeToRecover: 412.5, Errors: total, Tenants: ts},
		{Node: "primary", Action: "pause", At: 6, Restored: 6, Error: "unpause node primary: boom"},
		{Node: "primary", Action: "pause", At: 10, Restored: 12.5, Stalled: 5, WorstLatency: 2512.25, Tenants: []FaultTenant{
			{Tenant: "2", Stalled: 2, WorstLatency: 1200},
			{Tenant: "1", Stalled: 3, WorstLatency: 2512.25},
		}},
	}
	r.Configurations[last].Faults[0].WorstLatency = 2250
	r.Configurations[last].Faults[0].Tenants[1].Stalled = 1
	r.Configurations[last].Faults[0].Tenants[1].WorstLatency = 2250
	return r
}

func TestFaultsGolden(t *testing.T) {
	golden(t, "faults.txt", renderText(t, faultReport(), TextOptions{}))
	var md bytes.Buffer
	if err := WriteMarkdown(&md, faultReport()); err != nil {
		t.Fatal(err)
	}
	golden(t, "faults.md", md.Bytes())
}

func TestFaultsJSON(t *testing.T) {
	b := renderJSON(t, faultReport())
	var got struct {
		Configurations []struct {
			Faults []Fault `json:"faults"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	fs := got.Configurations[len(got.Configurations)-1].Faults
	if len(fs) != 3 || fs[0].TimeToRecover != 412.5 || len(fs[0].Tenants) != 12 || fs[0].Tenants[0].ByClass["report"] != 4 ||
		fs[2].Stalled != 5 || fs[2].WorstLatency != 2512.25 || fs[2].Tenants[1].Stalled != 3 || fs[2].Tenants[1].WorstLatency != 2512.25 {
		t.Errorf("faults in JSON = %+v", fs)
	}
	for _, key := range []string{`"time_to_recover_ms"`, `"at_s"`, `"restored_s"`, `"by_class"`, `"stalled"`, `"worst_latency_ms"`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("report.json lacks %s", key)
		}
	}
	// A report without faults renders no faults section anywhere.
	plain := renderText(t, sampleReport(6), TextOptions{})
	if strings.Contains(string(plain), "faults:") || bytes.Contains(renderJSON(t, sampleReport(6)), []byte(`"faults"`)) {
		t.Errorf("fault section in a report without faults")
	}
}

// TestFaultsStalledShown: a fault without errors but with stalled
// operations is reported with its stalls and worst latency in text and
// Markdown, tenants ranked by errors, then stalls.
func TestFaultsStalledShown(t *testing.T) {
	text := string(renderText(t, faultReport(), TextOptions{}))
	var md bytes.Buffer
	if err := WriteMarkdown(&md, faultReport()); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		out  string
		want []string
	}{
		"text":     {text, []string{"0 errors, 5 stalled over 2 tenants, worst latency 2512.25 ms", "stalled: operations", "2x its class's median"}},
		"markdown": {md.String(), []string{"| primary | pause | 10.0 s | 12.5 s | 0 | 5 | 2512.25 | 2 | not recovered |", "Stalled: operations", "2x its class's median"}},
	} {
		for _, want := range tc.want {
			if !strings.Contains(tc.out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, tc.out)
			}
		}
	}
	got := sortedFaultTenants(faultReport().Configurations[1].Faults[2].Tenants)
	if got[0].Tenant != "1" {
		t.Errorf("tenants ranked %v, want tenant 1 (3 stalled) first", got)
	}
}
