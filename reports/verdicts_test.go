package reports

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// verdictReport is sampleReport(6) with the isolated configuration's t3
// interactive check skipped for too few samples while over its limit, its
// t2 interactive check marginal, a sample plan, pair counts and a
// calibrated class.
func verdictReport(t *testing.T) *Report {
	t.Helper()
	r := sampleReport(6)
	var skipped, marginal bool
	for i := range r.Assertions {
		a := &r.Assertions[i]
		if a.Configuration != "isolated" || a.Name != "quiet_p99" || a.Class != "interactive" {
			continue
		}
		switch a.Tenant {
		case "t3":
			a.Skipped, a.Passed, a.Observed = true, true, a.Limit*3
			a.Detail = "too few samples (solo 40, run 60, need 100)"
			skipped = true
		case "t2":
			a.Marginal = true
			a.CI = &CI{Low: a.Observed * 0.9, High: a.Limit * 1.2, LowBounded: true, HighBounded: true}
			r.Marginal = append(r.Marginal, *a)
			marginal = true
		}
	}
	if !skipped || !marginal {
		t.Fatal("fixture lacks isolated quiet_p99 checks of t2 and t3")
	}
	r.QuietPlan = &QuietPlan{Window: "run", Baseline: "solo", MinSamples: 100, Pairs: 7, Reaching: 4,
		TooFew: []PlannedPair{{Tenant: "t3", Class: "interactive", Window: 60, Baseline: 40}}}
	for i := range r.Configurations {
		r.Configurations[i].QuietChecks = &QuietChecks{Pairs: 7, Checked: 6, Skipped: 1}
	}
	r.Configurations[1].QuietChecks = &QuietChecks{Pairs: 7, Checked: 5, Skipped: 2, SkippedOverLimit: 1}
	r.Calibrations = []Calibration{{Class: "report", Query: "report", Samples: 40, Seconds: 2, ServiceMean: 30,
		ServiceP50: 28, LoadFactor: 3, Pool: 40, PoolName: "naive shared pool", Rate: 4000}}
	return r
}

// TestVerdictsRendered checks that every renderer says how many pairs were
// checked, marks the skipped pair over its limit in every table that shows
// it, and lists the marginal verdict apart.
func TestVerdictsRendered(t *testing.T) {
	r := verdictReport(t)
	var text, mdown, js bytes.Buffer
	if err := WriteText(&text, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&mdown, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"quiet_p99 4 of 7 quiet tenant × class pairs planned to reach min_samples 100 in both run and solo\n",
		"quiet_p99 checked 5 of 7 quiet tenant × class pairs (2 skipped: too few samples; 1 of them over their limit, marked !)\n",
		"calibrated report (report): service time 30.00 ms mean (p50 28.00 ms) over 40 queries alone; rate 4000.0/s = load_factor 3 × 40 (naive shared pool) / 30.00 ms\n",
		"! p99 over its limit, but too few samples to judge (quiet_p99 skipped it)\n",
		"== Marginal verdicts: 1 ",
		"MARGINAL: 1 verdict could go either way",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	// t3/interactive in isolated: side by side and its own table.
	sides := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "t3" || f[1] != "interactive" {
			continue
		}
		if strings.Contains(line, "!") {
			sides++
		}
	}
	if sides != 2 {
		t.Errorf("t3 interactive marked ! in %d text tables, want 2 (side by side, isolated's):\n%s", sides, out)
	}
	// t2/interactive in isolated is marginal: marked "?".
	if !strings.Contains(out, "?") {
		t.Errorf("marginal row unmarked:\n%s", out)
	}

	md := mdown.String()
	iso := md[strings.Index(md, "## Configuration isolated"):]
	iso = iso[:strings.Index(iso, "### Solo baseline")]
	for _, want := range []string{"| t3 | interactive |", "quiet_p99 checked 5 of 7 quiet tenant × class pairs"} {
		if !strings.Contains(iso, want) {
			t.Errorf("markdown isolated section lacks %q:\n%s", want, iso)
		}
	}
	for _, line := range strings.Split(iso, "\n") {
		if strings.HasPrefix(line, "| t3 | interactive |") && !strings.Contains(line, "!") {
			t.Errorf("markdown t3 row unmarked: %q", line)
		}
	}
	if !strings.Contains(md, "## Marginal verdicts") || !strings.Contains(md, "- isolated quiet\\_p99 t2/interactive") && !strings.Contains(md, "- isolated quiet_p99 t2/interactive") {
		t.Errorf("markdown lacks the marginal list:\n%s", md)
	}

	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Marginal) != 1 || back.Marginal[0].Tenant != "t2" || back.Marginal[0].CI == nil {
		t.Errorf("json marginal = %+v", back.Marginal)
	}
	if q := back.Configurations[1].QuietChecks; q == nil || q.Checked != 5 || q.Pairs != 7 || q.SkippedOverLimit != 1 {
		t.Errorf("json quiet_checks = %+v", q)
	}
	if back.QuietPlan == nil || back.QuietPlan.Reaching != 4 || len(back.QuietPlan.TooFew) != 1 {
		t.Errorf("json quiet_plan = %+v", back.QuietPlan)
	}
	if len(back.Calibrations) != 1 || back.Calibrations[0].Rate != 4000 {
		t.Errorf("json calibrations = %+v", back.Calibrations)
	}
}
