package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// faultReport is sampleReport(6) with two faults in the isolated
// configuration: a stop that recovered, with an error burst over 12
// tenants (more than are listed), and a pause that failed to restore.
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
	}
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
	if len(fs) != 2 || fs[0].TimeToRecover != 412.5 || len(fs[0].Tenants) != 12 || fs[0].Tenants[0].ByClass["report"] != 4 {
		t.Errorf("faults in JSON = %+v", fs)
	}
	for _, key := range []string{`"time_to_recover_ms"`, `"at_s"`, `"restored_s"`, `"by_class"`} {
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
