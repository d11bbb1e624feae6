package reports

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

// failingReport is sampleReport(n) where the isolated configuration lets
// t3's interactive p99 (and so the merged quiet p99) exceed their limits and
// the naive control passes every assertion: both configurations miss their
// expectation.
func failingReport(n int) *Report {
	r := sampleReport(n)
	r.Passed = false
	for i := range r.Configurations {
		c := &r.Configurations[i]
		c.Passed = c.Name == "naive"
	}
	for i := range r.Configurations[1].Tenants {
		if row := &r.Configurations[1].Tenants[i]; row.Tenant == "t3" && row.Class == "interactive" {
			row.P99, row.Max = 31.5, 40
		}
	}
	mergeQuiet(r)
	for i := range r.Assertions {
		a := &r.Assertions[i]
		switch {
		case a.Configuration == "naive" && !a.Skipped:
			a.Passed = true
		case a.Configuration == "isolated" && a.Name == "quiet_p99" && a.Tenant == "t3":
			a.Observed = 31.5
			a.Passed = false
			a.Detail = "solo p99 2.38 ms"
		}
	}
	return r
}

func renderJUnit(t *testing.T, r *Report) ([]byte, junitSuites) {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJUnit(&b, r); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v\n%s", err, b.Bytes())
	}
	return b.Bytes(), doc
}

func TestJUnitGolden(t *testing.T) {
	out, _ := renderJUnit(t, sampleReport(6))
	golden(t, "junit.xml", out)
	out, _ = renderJUnit(t, failingReport(4))
	golden(t, "junit-failing.xml", out)
}

func TestJUnitOneTestcasePerAssertion(t *testing.T) {
	for name, r := range map[string]*Report{"passing": sampleReport(9), "failing": failingReport(5)} {
		t.Run(name, func(t *testing.T) {
			_, doc := renderJUnit(t, r)
			if len(doc.Suites) != len(r.Configurations) {
				t.Fatalf("suites: got %d, want one per configuration (%d)", len(doc.Suites), len(r.Configurations))
			}
			seen := map[string]int{}
			total, failures := 0, 0
			for _, s := range doc.Suites {
				cases, fails, skips := 0, 0, 0
				for _, tc := range s.Cases {
					cases++
					if tc.Failure != nil {
						fails++
					}
					if tc.Skipped != nil {
						skips++
					}
					if tc.Name == JUnitExpectationCase {
						continue
					}
					seen[s.Name+" "+tc.Name]++
				}
				if s.Tests != cases || s.Failures != fails || s.Skipped != skips {
					t.Errorf("suite %s: attributes tests=%d failures=%d skipped=%d, content %d/%d/%d",
						s.Name, s.Tests, s.Failures, s.Skipped, cases, fails, skips)
				}
				total += cases
				failures += fails
			}
			if doc.Tests != total || doc.Failures != failures {
				t.Errorf("testsuites: tests=%d failures=%d, content %d/%d", doc.Tests, doc.Failures, total, failures)
			}
			for _, a := range r.Assertions {
				key := a.Configuration + " " + junitCaseName(a)
				if seen[key] != 1 {
					t.Errorf("assertion %s: %d testcases, want 1", key, seen[key])
				}
				delete(seen, key)
			}
			if len(seen) > 0 {
				t.Errorf("testcases without an assertion: %v", seen)
			}
			if r.Passed != (doc.Failures == 0) {
				t.Errorf("report passed=%v but junit has %d failures", r.Passed, doc.Failures)
			}
		})
	}
}

func TestJUnitFailuresCarryObservedAndLimit(t *testing.T) {
	_, doc := renderJUnit(t, failingReport(4))
	byName := map[string]junitCase{}
	for _, s := range doc.Suites {
		for _, tc := range s.Cases {
			byName[s.Name+" "+tc.Name] = tc
		}
	}
	tc := byName["isolated quiet_p99/t3/interactive"]
	if tc.Failure == nil {
		t.Fatal("isolated quiet_p99/t3/interactive: no <failure>")
	}
	if want := "observed 31.50 ms, want <= 8.56 ms"; tc.Failure.Message != want {
		t.Errorf("failure message: got %q, want %q", tc.Failure.Message, want)
	}
	if !strings.Contains(tc.Failure.Text, "detail: solo p99 2.38 ms") {
		t.Errorf("failure text lacks the detail: %q", tc.Failure.Text)
	}
	if tc := byName["naive "+JUnitExpectationCase]; tc.Failure == nil {
		t.Error("naive control passed everything but its expectation testcase did not fail")
	}
	if tc := byName["isolated replica_lag"]; tc.Skipped == nil || !strings.Contains(tc.Skipped.Message, "topology has no replica") {
		t.Errorf("skipped assertion: got %+v", tc.Skipped)
	}

	_, doc = renderJUnit(t, sampleReport(4))
	for _, s := range doc.Suites {
		for _, tc := range s.Cases {
			if s.Name == "naive" && tc.Name == "quiet_p99/t2/interactive" {
				if tc.Failure != nil || tc.Skipped == nil || !strings.HasPrefix(tc.Skipped.Message, "expected failure: observed 43.50 ms, want <= 8.38 ms") {
					t.Errorf("expected failure in the control: got failure=%+v skipped=%+v", tc.Failure, tc.Skipped)
				}
			}
		}
	}
}
