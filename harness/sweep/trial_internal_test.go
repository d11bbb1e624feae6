package sweep

import (
	"testing"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/reports"
)

// TestTrialQuietClassJudged: a trial's quiet class is the worst of the
// classes quiet_p99 judged; a class it skipped for too few samples does
// not stand for the point, however far above its solo p99.
func TestTrialQuietClassJudged(t *testing.T) {
	row := func(class string, p99 float64) reports.TenantRow {
		return reports.TenantRow{Tenant: reports.QuietAll, Class: class, P99: p99}
	}
	check := func(class string, skipped bool) reports.Assertion {
		return reports.Assertion{Name: harness.AssertQuietP99, Configuration: "naive", Tenant: reports.QuietAll, Class: class,
			Passed: true, Skipped: skipped}
	}
	rep := &reports.Report{Configurations: []reports.Configuration{{
		Name:         "naive",
		QuietAll:     []reports.TenantRow{row("lookup", 6), row("page", 4), row("report", 140)},
		SoloQuietAll: []reports.TenantRow{row("lookup", 3), row("page", 4), row("report", 40)},
	}}}
	for _, tc := range []struct {
		name   string
		checks []reports.Assertion
		class  string
		ratio  float64
	}{
		{"report skipped", []reports.Assertion{check("lookup", false), check("page", false), check("report", true)}, "lookup", 2},
		{"report judged", []reports.Assertion{check("lookup", false), check("page", false), check("report", false)}, "report", 3.5},
		{"none judged", []reports.Assertion{check("lookup", true), check("page", true), check("report", true)}, "report", 3.5},
		{"another configuration's", []reports.Assertion{{Name: harness.AssertQuietP99, Configuration: "isolated", Tenant: reports.QuietAll, Class: "page"}}, "report", 3.5},
	} {
		rep.Assertions = tc.checks
		ct := trialOf(rep, 42).Configurations[0]
		if ct.QuietClass != tc.class || ct.QuietOverSolo != tc.ratio {
			t.Errorf("%s: quiet class %q at %.2f× solo; want %q at %.2f×", tc.name, ct.QuietClass, ct.QuietOverSolo, tc.class, tc.ratio)
		}
	}
}
