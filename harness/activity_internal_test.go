package harness

import (
	"strings"
	"testing"

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
