// Package reports renders the result of a finished noisysim run: report.json
// for scripts, report.md for people, junit.xml for CI systems and a text
// summary for the terminal.
//
// The package only reads results. It imports nothing of the harness: it
// defines its own data model, Report, which the harness fills in at the end
// of a run and hands to the renderers:
//
//	r := &reports.Report{
//		Scenario: "ci-gate", Seed: 42, ScheduleHash: "9f2c4e1a", Passed: true,
//		Configurations: []reports.Configuration{{Name: "isolated", Expect: reports.ExpectPass, Passed: true /* ... */}},
//		Assertions:     []reports.Assertion{ /* ... */ },
//	}
//	if err := reports.WriteText(os.Stdout, r, reports.TextOptions{}); err != nil { ... }
//	if err := reports.WriteDir("out", r); err != nil { ... } // report.json, report.md, junit.xml
//
// Output is deterministic: the renderers work on a copy of the report whose
// rows are sorted (tenants in natural order, "t2" before "t10"; tables for
// reading put the dominant tenant first, then the busiest tenants), maps are
// printed in sorted key order, and numbers have fixed formats: latencies in
// ms with two decimals, shares in percent with one decimal, durations in s.
// The same results therefore always give the same bytes, whatever order the
// harness collected them in.
//
// Every renderer first calls Report.Validate and returns an error wrapping
// ErrInvalid (with *InvalidError details naming the field) rather than
// writing a report it cannot render faithfully, such as one holding NaN.
//
// The harness may add one QuietAll row per class merged over all quiet
// tenants (Configuration.QuietAll and SoloQuietAll, from the merged
// histograms, so their percentiles are exact). The terminal tables show them
// as the "quiet (all)" rows; without them they fall back to the worst single
// quiet tenant's latencies, an upper bound, and a footnote says which.
//
// A configuration may be a control expected to fail (Expect: ExpectFail),
// proving the scenario can see the problem. Its failed assertions are shown
// as XFAIL, and in JUnit as skipped "expected failure" testcases, so that CI
// goes red exactly when a configuration misses its expectation.
package reports
