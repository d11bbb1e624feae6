package reports

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// serviceLines describes a configuration's service, HTTP answers and
// sampled database activity in a few lines; none without them.
func serviceLines(c Configuration) []string {
	var out []string
	if s := c.Service; s != nil {
		line := "service " + strings.Join(s.Instances, ", ")
		if s.Ready > 0 {
			line += fmt.Sprintf(" (ready in %.2f s)", s.Ready)
		}
		if len(s.Logs) > 0 {
			line += ", logs " + strings.Join(s.Logs, ", ")
		}
		out = append(out, line)
	}
	if h := c.HTTP; h != nil {
		line := fmt.Sprintf("http %d arrivals, %d requests (amplification %.2fx, %d retries): %s",
			h.Arrivals, h.Requests, h.Amplification, h.Retries, counts(h.Outcomes))
		if len(h.RetryAfter) > 0 {
			line += " (429 Retry-After: " + counts(h.RetryAfter)
			if h.RetryAfter["seconds"]+h.RetryAfter["date"] > 0 { // a mean of well-formed values only
				line += fmt.Sprintf("; mean %.1f s", h.RetryAfterMean)
			}
			line += ")"
		}
		out = append(out, line)
	}
	if a := c.Activity; a != nil {
		var parts []string
		if u := a.Untagged; u != nil && u.ActiveSamples > 0 {
			parts = append(parts, fmt.Sprintf("UNTAGGED %.1f s %s (max %d at once, longest %.0f ms)", u.Active, fmtShare(u.Share), u.MaxActive, u.Longest))
		}
		for i, t := range a.Tenants {
			if i == 5 {
				parts = append(parts, fmt.Sprintf("%d more", len(a.Tenants)-5))
				break
			}
			parts = append(parts, fmt.Sprintf("t:%s %.1f s %s", t.Tenant, t.Active, fmtShare(t.Share)))
		}
		if len(parts) == 0 {
			parts = append(parts, "no active backend seen")
		}
		out = append(out, fmt.Sprintf("database activity (pg_stat_activity every %.0f ms, %d samples), active-backend time: %s",
			a.Interval, a.Samples, strings.Join(parts, ", ")))
		for _, w := range a.Windows {
			var ws []string
			if w.Untagged > 0 {
				ws = append(ws, fmt.Sprintf("UNTAGGED %.1f s", w.Untagged))
			}
			for i, sh := range w.Shares {
				if i == 3 {
					break
				}
				ws = append(ws, fmt.Sprintf("t:%s %s", sh.Tenant, fmtShare(sh.Share)))
			}
			if len(ws) > 0 {
				out = append(out, fmt.Sprintf("  in %s: %s", w.Window, strings.Join(ws, ", ")))
			}
		}
		if a.AlertWindow > 0 {
			var as []string
			for _, al := range a.Alerts {
				line := fmt.Sprintf("t:%s %s from %s (%s)", al.Tenant, fmtShare(al.Share), fmtSeconds(al.Fired), al.Phase)
				if al.Cleared > 0 {
					line += " to " + fmtSeconds(al.Cleared)
				} else {
					line += " to the end"
				}
				as = append(as, line)
			}
			if len(as) == 0 {
				as = append(as, "none")
			}
			out = append(out, fmt.Sprintf("share alerts (a tenant above %s of active-backend time for %s): %s",
				fmtShare(a.AlertThreshold), fmtSeconds(a.AlertWindow), strings.Join(as, "; ")))
		}
	}
	return out
}

// counts writes a map of counts as "k n, k n", keys sorted.
func counts(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
