package reports

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// TestActionNotStartedAndFaultLegend: an action the run never reached
// reads as not started at its due time, not as run and failed; a fault
// action that ran brings the legend of its figures (stalled, recovered)
// to the text and Markdown reports, and only then.
func TestActionNotStartedAndFaultLegend(t *testing.T) {
	ran := ActionResult{Phase: "faults", Type: "fault", At: 1.5, Took: 1.1, Detail: "pause primary: down 1.02 s; 0 errors, 80 stalled"}
	due := ActionResult{Phase: "faults", Type: "fault", At: 4.3, NotStarted: true, Detail: "not started: the run stopped before its time (stopped by SIGINT)"}
	if l := actionLine(due); l != "fault in faults due at 4.3 s: not started: the run stopped before its time (stopped by SIGINT)" {
		t.Errorf("not started: %q", l)
	}
	render := func(acts ...ActionResult) (text, md string) {
		r := sampleReport(1)
		r.Configurations[0].Actions = acts
		var m bytes.Buffer
		w := bufio.NewWriter(&m)
		mdActions(w, r.Configurations[0])
		w.Flush()
		return string(renderText(t, r, TextOptions{})), m.String()
	}
	text, md := render(ran, due)
	for name, out := range map[string]string{"text": text, "markdown": md} {
		if !strings.Contains(out, "stalled: operations in flight or issued during the fault") && !strings.Contains(out, "Stalled: operations in flight") {
			t.Errorf("%s lacks the fault legend:\n%s", name, out)
		}
		if strings.Contains(out, "FAILED") {
			t.Errorf("%s says FAILED for an action that did not start:\n%s", name, out)
		}
	}
	text, md = render(due)
	if strings.Contains(text, "stalled: operations") || strings.Contains(md, "Stalled: operations") {
		t.Errorf("legend without a fault that ran:\n%s\n%s", text, md)
	}
}
