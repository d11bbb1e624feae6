package harness

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// TestHousekeeping: the tag and reset statements of any service are not
// untagged work; work, even sent with a tag in one query string, is.
func TestHousekeeping(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"SELECT set_config('application_name', 't:1', false)", true},
		{"select set_config('application_name', $1, true);", true},
		{"SELECT pg_catalog.set_config( 'application_name' , 't:o''brien' , false )", true},
		{"SET application_name = 't:42'", true},
		{"SET SESSION application_name TO 't:42';", true},
		{"set local application_name = $1", true},
		{"RESET application_name", true},
		{"RESET ALL", true},
		{" DISCARD ALL ", true},
		{"SELECT set_config('application_name', $1, false)", true}, // noisysim's own stack
		{"SELECT set_config('application_name', 't:1', false); SELECT count(*) FROM orders", false},
		{"SELECT count(*) FROM orders WHERE tenant_id = 1", false},
		{"SET application_name = 't:1'; DELETE FROM orders", false},
		{"SELECT set_config('search_path', 'x', false)", false},
		{"SET work_mem = '1GB'", false},
		{"RESET work_mem", false},
		{"", false},
	} {
		if got := housekeeping(tc.query); got != tc.want {
			t.Errorf("housekeeping(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
}

// TestTaggedOnly: untagged work fails; tagged work passes; no active
// backend at all is skipped, not passed.
func TestTaggedOnly(t *testing.T) {
	for _, tc := range []struct {
		name            string
		a               reports.Activity
		passed, skipped bool
		detail          string
	}{
		{"tagged", reports.Activity{Samples: 50, Interval: 100, Tenants: []reports.ActivityRow{{Tenant: "1", ActiveSamples: 3}}},
			true, false, "every active backend of the roles carried a tenant tag (50 samples every 100 ms)"},
		{"untagged", reports.Activity{Samples: 50, Interval: 100, Tenants: []reports.ActivityRow{{Tenant: "1", ActiveSamples: 3}},
			Untagged: &reports.ActivityRow{ActiveSamples: 2, Active: 0.2, Share: 0.4}, UntaggedQueries: []string{"SELECT 1"}},
			false, false, "2 active backends seen without a tenant tag (0.2 s of backend time, 40% of all); queries: SELECT 1"},
		{"nothing seen", reports.Activity{Samples: 50, Interval: 100, Tenants: []reports.ActivityRow{}},
			true, true, "no active backend of the roles seen in 50 samples every 100 ms: nothing to check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := taggedOnly("gate", &tc.a)
			if got.Passed != tc.passed || got.Skipped != tc.skipped || !strings.HasPrefix(got.Detail, tc.detail) {
				t.Errorf("got passed %v skipped %v %q; want %v %v %q", got.Passed, got.Skipped, got.Detail, tc.passed, tc.skipped, tc.detail)
			}
		})
	}
}

// TestShareAlerts: a tenant above the threshold in every second of the
// window fires at the window's end and clears at the first second not
// above; a shorter run, or a second with nothing active, fires nothing.
func TestShareAlerts(t *testing.T) {
	if scenario.DefaultShareAlertThreshold != pools.DefaultShareThreshold ||
		scenario.DefaultShareAlertWindow.Duration() != pools.DefaultShareWindow {
		t.Errorf("service.share_alert defaults differ from the ledger's")
	}
	// secs builds seconds from "tag:n tag:n" strings, phase "run".
	secs := func(spec ...string) []activitySecond {
		var out []activitySecond
		for _, s := range spec {
			sec := activitySecond{phase: "run", active: map[string]int64{}}
			for _, f := range strings.Fields(s) {
				tag, n, _ := strings.Cut(f, ":")
				v, _ := strconv.ParseInt(n, 10, 64)
				if tag == "u" {
					tag = ""
				}
				sec.active[tag] = v
			}
			out = append(out, sec)
		}
		return out
	}
	rule := shareAlertRule{threshold: 0.5, window: 3}
	for _, tc := range []struct {
		name    string
		seconds []activitySecond
		want    string
	}{
		{"fires and clears", secs("1:6 2:4", "1:8 2:2", "1:7 2:3", "1:9 2:1", "1:2 2:8"),
			"1 0.70 fired 3 cleared 4"},
		{"still above at the end", secs("1:1 2:4", "1:6 2:4", "1:6 2:4", "1:6 2:4", "1:6 2:4"),
			"1 0.60 fired 4 cleared 0"},
		{"at the threshold is not above", secs("1:5 2:5", "1:5 2:5", "1:5 2:5"), ""},
		{"nothing active breaks the run", secs("1:9", "", "1:9", "1:9"), ""},
		{"untagged counts in the total, never alerts", secs("1:6 u:6", "1:6 u:6", "1:6 u:6", "u:9", "u:9", "u:9"), ""},
		{"two tenants, two runs", secs("1:9", "1:9", "1:9", "2:9", "2:9", "2:9", "1:9", "1:9", "1:9"),
			"1 1.00 fired 3 cleared 3; 2 1.00 fired 6 cleared 6; 1 1.00 fired 9 cleared 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range shareAlerts(tc.seconds, rule) {
				if a.Threshold != 0.5 || a.Window != 3 || a.Phase != "run" {
					t.Errorf("alert %+v", a)
				}
				got = append(got, fmt.Sprintf("%s %.2f fired %.0f cleared %.0f", a.Tenant, a.Share, a.Fired, a.Cleared))
			}
			if strings.Join(got, "; ") != tc.want {
				t.Errorf("alerts %q, want %q", strings.Join(got, "; "), tc.want)
			}
		})
	}
}
