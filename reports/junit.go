package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// JUnitExpectationCase is the name of the extra testcase WriteJUnit adds to
// each configuration expected to fail.
const JUnitExpectationCase = "expected_to_fail"

// JUnitCompleteCase is the failing testcase WriteJUnit adds, in a suite
// named "run", to an incomplete report (Report.Incomplete).
const JUnitCompleteCase = "complete"

// WriteJUnit writes r to w as JUnit XML (junit.xml) for CI systems: one
// testsuite per configuration, one testcase per assertion (named
// "name/tenant/class", classname "scenario.configuration"). A failed
// assertion carries a <failure> whose message gives observed value and
// limit; a skipped one carries <skipped>.
//
// JUnit has no notion of an expected failure, so WriteJUnit follows the
// usual xfail convention: in a configuration whose Expect is ExpectFail, a
// failed assertion is reported as <skipped> with the message
// "expected failure: ...", and one extra testcase, JUnitExpectationCase,
// fails if all of that configuration's assertions passed (the scenario
// could not see the problem). A CI system thus goes red exactly when a
// configuration misses its expectation.
//
// Times are in seconds. It returns an error wrapping ErrInvalid if r does
// not pass Validate, or the writer's error.
func WriteJUnit(w io.Writer, r *Report) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	doc := junitDocument(normalized(r))
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure"`
	Skipped   *junitSkipped `xml:"skipped"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr,omitempty"`
}

func junitDocument(r *Report) junitSuites {
	doc := junitSuites{Name: "noisysim " + r.Scenario, Time: fmtJUnitTime(r.Duration)}
	simulated := ""
	if s := r.Simulated; s != nil {
		doc.Name += " (SIMULATED, service times from " + s.Calibration + ")"
		simulated = s.Calibration
	}
	for _, c := range r.Configurations {
		s := junitSuite{
			Name:      c.Name,
			Time:      fmtJUnitTime(c.Duration),
			Timestamp: r.StartedAt.Format("2006-01-02T15:04:05"),
		}
		for _, p := range []junitProperty{
			{"scenario", r.Scenario},
			{"file", r.File},
			{"seed", strconv.FormatInt(r.Seed, 10)},
			{"schedule_hash", r.ScheduleHash},
			{"backend", r.Backend},
			{"simulated_from", simulated},
			{"expect", expectation(c)},
		} {
			if p.Value != "" {
				s.Properties = append(s.Properties, p)
			}
		}
		classname := r.Scenario + "." + c.Name
		for _, a := range r.Assertions {
			if a.Configuration != c.Name {
				continue
			}
			tc := junitCase{Name: junitCaseName(a), Classname: classname, Time: "0"}
			switch {
			case a.Skipped:
				tc.Skipped = &junitSkipped{Message: joinNonEmpty("; ", "skipped", a.Detail)}
			case a.Passed:
			case c.expectsFailure():
				tc.Skipped = &junitSkipped{Message: joinNonEmpty("; ", "expected failure: "+check(a), a.Detail)}
			default:
				tc.Failure = &junitFailure{Message: check(a), Type: a.Name, Text: junitFailureText(a)}
			}
			s.Cases = append(s.Cases, tc)
		}
		if c.expectsFailure() {
			tc := junitCase{Name: JUnitExpectationCase, Classname: classname, Time: "0"}
			if c.Passed {
				msg := "configuration " + c.Name + " was expected to fail an assertion but all passed: the scenario cannot see the problem"
				tc.Failure = &junitFailure{Message: msg, Type: JUnitExpectationCase}
			}
			s.Cases = append(s.Cases, tc)
		}
		for _, tc := range s.Cases {
			s.Tests++
			if tc.Failure != nil {
				s.Failures++
			}
			if tc.Skipped != nil {
				s.Skipped++
			}
		}
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Skipped += s.Skipped
		doc.Suites = append(doc.Suites, s)
	}
	if r.Incomplete != "" {
		// A run cut short fails in CI whatever its assertions said so far.
		doc.Suites = append(doc.Suites, junitSuite{Name: "run", Tests: 1, Failures: 1, Cases: []junitCase{{
			Name: JUnitCompleteCase, Classname: r.Scenario, Time: "0",
			Failure: &junitFailure{Message: "the run is incomplete: " + r.Incomplete, Type: JUnitCompleteCase},
		}}})
		doc.Tests++
		doc.Failures++
	}
	return doc
}

// junitCaseName is "name/tenant/class" without the empty parts.
func junitCaseName(a Assertion) string {
	return joinNonEmpty("/", a.Name, a.Tenant, a.Class)
}

func junitFailureText(a Assertion) string {
	lines := []string{
		"configuration: " + a.Configuration,
		"assertion: " + a.Name,
	}
	if a.Tenant != "" {
		lines = append(lines, "tenant: "+a.Tenant)
	}
	if a.Class != "" {
		lines = append(lines, "class: "+a.Class)
	}
	lines = append(lines,
		"observed: "+fmtValue(a.Observed, a.Unit),
		"limit: "+a.Op+" "+fmtValue(a.Limit, a.Unit),
	)
	if a.Detail != "" {
		lines = append(lines, "detail: "+a.Detail)
	}
	return strings.Join(lines, "\n")
}

func fmtJUnitTime(seconds float64) string {
	return strconv.FormatFloat(zero(seconds), 'f', 3, 64)
}

func joinNonEmpty(sep string, parts ...string) string {
	out := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
