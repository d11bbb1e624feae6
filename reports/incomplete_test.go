package reports

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// An interrupted run's report says so in every format: no verdict, the
// configuration cut short marked, a failing testcase for CI.
func TestIncompleteReport(t *testing.T) {
	r := sampleReport(3)
	r.Incomplete = "interrupted during run of isolated"
	r.Passed = false
	last := &r.Configurations[len(r.Configurations)-1]
	last.Incomplete = true
	var kept []Assertion
	for _, a := range r.Assertions {
		if a.Configuration != last.Name {
			kept = append(kept, a)
		}
	}
	r.Assertions = kept

	var text, mdown, junit, js bytes.Buffer
	if err := WriteText(&text, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&mdown, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJUnit(&junit, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"INCOMPLETE: interrupted during run of isolated", "RESULT: INCOMPLETE (interrupted during run of isolated)", "incomplete: not evaluated"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	// The section of the configuration cut short judges nothing either.
	if want := "== " + last.Name + ": expect " + expectation(*last) + ", cut short: not evaluated =="; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks the header %q:\n%s", want, text.String())
	}
	if strings.Contains(text.String(), "RESULT: FAIL") || strings.Contains(text.String(), "RESULT: PASS") {
		t.Errorf("text gives a verdict:\n%s", text.String())
	}
	if !strings.Contains(mdown.String(), "| Result | **INCOMPLETE**: interrupted during run of isolated") {
		t.Errorf("markdown lacks the incomplete result:\n%s", mdown.String())
	}
	if !strings.Contains(junit.String(), `<testcase name="complete"`) || !strings.Contains(junit.String(), "the run is incomplete: interrupted during run of isolated") {
		t.Errorf("junit lacks the failing complete case:\n%s", junit.String())
	}
	var back struct {
		Incomplete     string `json:"incomplete"`
		Configurations []struct {
			Name       string `json:"name"`
			Incomplete bool   `json:"incomplete"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Incomplete != r.Incomplete || !back.Configurations[len(back.Configurations)-1].Incomplete || back.Configurations[0].Incomplete {
		t.Errorf("report.json: %+v", back)
	}
	// report.html judges the configuration cut short neither way: an
	// interrupted control that expects to fail has not failed as expected.
	last.Expect = "fail"
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	if want := last.Name + " (expect fail: incomplete, not evaluated)"; !strings.Contains(page.String(), want) {
		t.Errorf("report.html lacks %q", want)
	}
	if !strings.Contains(page.String(), `id="verdict">INCOMPLETE: interrupted during run of isolated`) {
		t.Errorf("report.html lacks the incomplete verdict")
	}
}
