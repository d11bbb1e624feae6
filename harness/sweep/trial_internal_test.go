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
		name     string
		checks   []reports.Assertion
		class    string
		ratio    float64
		unjudged bool
	}{
		{"report skipped", []reports.Assertion{check("lookup", false), check("page", false), check("report", true)}, "lookup", 2, false},
		{"report judged", []reports.Assertion{check("lookup", false), check("page", false), check("report", false)}, "report", 3.5, false},
		{"page alone judged", []reports.Assertion{check("lookup", true), check("page", false), check("report", true)}, "page", 1, false},
		// The worst class of all still stands for the trial, marked.
		{"none judged", []reports.Assertion{check("lookup", true), check("page", true), check("report", true)}, "report", 3.5, true},
		{"another configuration's", []reports.Assertion{{Name: harness.AssertQuietP99, Configuration: "isolated", Tenant: reports.QuietAll, Class: "page"}}, "report", 3.5, true},
	} {
		rep.Assertions = tc.checks
		ct := TrialOf(rep, 42).Configurations[0]
		if ct.QuietClass != tc.class || ct.QuietOverSolo != tc.ratio || ct.QuietUnjudged != tc.unjudged {
			t.Errorf("%s: quiet class %q at %.2f× solo, unjudged %v; want %q at %.2f×, unjudged %v",
				tc.name, ct.QuietClass, ct.QuietOverSolo, ct.QuietUnjudged, tc.class, tc.ratio, tc.unjudged)
		}
	}
}

// TestTrialQuietUnjudgedNoSolo: without a solo phase the trial's quiet class
// is the worst p99 among the judged classes, or of all when none was judged
// (marked).
func TestTrialQuietUnjudgedNoSolo(t *testing.T) {
	row := func(class string, p99 float64) reports.TenantRow {
		return reports.TenantRow{Tenant: reports.QuietAll, Class: class, P99: p99}
	}
	rep := &reports.Report{Configurations: []reports.Configuration{{
		Name: "naive", QuietAll: []reports.TenantRow{row("lookup", 6), row("report", 140)}}}}
	for _, tc := range []struct {
		name     string
		skipped  bool
		class    string
		unjudged bool
	}{{"lookup judged", false, "lookup", false}, {"lookup skipped", true, "report", true}} {
		rep.Assertions = []reports.Assertion{{Name: harness.AssertQuietP99, Configuration: "naive", Tenant: reports.QuietAll,
			Class: "lookup", Skipped: tc.skipped}}
		ct := TrialOf(rep, 1).Configurations[0]
		if ct.QuietClass != tc.class || ct.QuietUnjudged != tc.unjudged {
			t.Errorf("%s: quiet class %q unjudged %v; want %q unjudged %v", tc.name, ct.QuietClass, ct.QuietUnjudged, tc.class, tc.unjudged)
		}
	}
}

// TestSummaryCountsUnjudged: a point's summary counts its trials whose quiet
// figure was unjudged; held comes from the assertions alone.
func TestSummaryCountsUnjudged(t *testing.T) {
	trial := func(held, unjudged bool) Trial {
		return Trial{Configurations: []ConfigTrial{{Name: "naive", Held: held, QuietClass: "report", QuietP99: 90,
			SoloP99: 30, QuietOverSolo: 3, QuietUnjudged: unjudged}}}
	}
	s := summarize([]Trial{trial(true, true), trial(true, false), trial(false, true)})[0]
	if s.QuietUnjudged != 2 || s.Held != 2 || s.Trials != 3 || s.QuietOverSolo.N != 3 {
		t.Errorf("summary %+v: want 2 of 3 unjudged, 2 held", s)
	}
	if s := summarize([]Trial{trial(true, false)})[0]; s.QuietUnjudged != 0 {
		t.Errorf("a judged trial's summary counts %d unjudged", s.QuietUnjudged)
	}
}
