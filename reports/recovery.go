package reports

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// recoveryLine describes a configuration's recovery after the dominant
// tenant stopped; empty without one.
func recoveryLine(c Configuration) string {
	rc := c.Recovery
	if rc == nil {
		return ""
	}
	var bounds []string
	for _, class := range slices.Sorted(maps.Keys(rc.Bounds)) {
		bounds = append(bounds, fmt.Sprintf("%s %.0f ms", class, rc.Bounds[class]))
	}
	head := fmt.Sprintf("recovery after the dominant tenant stopped at %s: ", fmtSeconds(rc.Stopped))
	tail := fmt.Sprintf(" (quiet p99 per second within %s, from %s, for %s; in %s %d seconds judged, worst %.0f ms %s)",
		strings.Join(bounds, ", "), rc.Baseline, fmtSeconds(rc.Hold), strings.Join(rc.Windows, ", "), rc.Seconds, rc.Worst, rc.WorstClass)
	if !rc.Recovered {
		return head + "NOT RECOVERED in " + fmtSeconds(rc.Time) + tail
	}
	return head + "recovered in " + fmtSeconds(rc.Time) + tail
}
