package reports

import (
	"bufio"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// actionLine says what one action did, on one line: its type, phase, start,
// length, detail, figures before → after, and error.
func actionLine(a ActionResult) string {
	var b strings.Builder
	if a.NotStarted {
		fmt.Fprintf(&b, "%s in %s due at %s: %s", a.Type, a.Phase, fmtSeconds(a.At), a.Detail)
		return b.String()
	}
	fmt.Fprintf(&b, "%s in %s at %s, took %s", a.Type, a.Phase, fmtSeconds(a.At), fmtSeconds(a.Took))
	if a.FiredBy != "" {
		b.WriteString(", fired by policy " + a.FiredBy)
	}
	if a.Detail != "" {
		b.WriteString(": " + a.Detail)
	}
	for _, k := range slices.Sorted(maps.Keys(a.Before)) {
		fmt.Fprintf(&b, "; %s %g", k, a.Before[k])
		if v, ok := a.After[k]; ok {
			fmt.Fprintf(&b, " → %g", v)
		}
	}
	if a.Error != "" {
		b.WriteString("; FAILED: " + a.Error)
	}
	return b.String()
}

// mdActions writes a configuration's actions as a list.
func mdActions(w *bufio.Writer, c Configuration) {
	if len(c.Actions) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Actions\n\n")
	for _, a := range c.Actions {
		fmt.Fprintf(w, "- %s\n", md(actionLine(a)))
	}
	if hasFaultAction(c) {
		fmt.Fprintf(w, "\n%s.\n", strings.ToUpper(faultLegend[:1])+faultLegend[1:])
	}
}

// hasFaultAction reports whether one of c's actions is a node fault that
// ran: its figures (stalled, recovered) are faults[]'s, whose legend the
// reports give after the actions.
func hasFaultAction(c Configuration) bool {
	return slices.ContainsFunc(c.Actions, func(a ActionResult) bool { return a.Type == "fault" && !a.NotStarted })
}

// mdWriter writes a configuration's checked writer as one line.
func mdWriter(w *bufio.Writer, c Configuration) {
	wc := c.Writer
	if wc == nil {
		return
	}
	fmt.Fprintf(w, "\n### Checked writer\n\n")
	fmt.Fprintf(w, "- %s\n", md(writerLine(wc)))
}

// writerLine says what the checked writer wrote and what the checker
// found, on one line.
func writerLine(wc *WriterCheck) string {
	return fmt.Sprintf("tenant %s at %g writes/s: %d inserts and %d updates acknowledged, %d failed; "+
		"%d lost, %d duplicated, %d stale, %d updates found no row (read back at %s); longest write %.0f ms at %s in %s",
		wc.Tenant, wc.Rate, wc.Inserts, wc.Updates, wc.Errors, wc.Lost, wc.Duplicated, wc.Stale, wc.Vanished, wc.Node,
		wc.LongestWrite, fmtSeconds(wc.LongestWriteAt), wc.LongestWriteWindow)
}
