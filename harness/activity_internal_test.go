package harness

import "testing"

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
