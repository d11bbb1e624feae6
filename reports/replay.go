package reports

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Replay describes what a replayed trace or PostgreSQL log sent (see
// REPORT.md, "replay").
type Replay struct {
	// Source is "trace" (a noisysim trace), "csvlog" or "jsonlog".
	Source string  `json:"source"`
	File   string  `json:"file"`
	Speed  float64 `json:"speed"`
	// Configuration is the recorded configuration replayed (trace).
	Configuration string `json:"configuration,omitempty"`
	// Records are the trace lines or log records read (a trace's header
	// excluded); every one is replayed or skipped:
	// Records = Replayed + the sum of Skipped.
	Records  int64 `json:"records"`
	Replayed int64 `json:"replayed"`
	// Untagged are the logged statements replay.tenant found no tenant
	// in, replayed as tenant "untagged" when tenants.keys has it.
	Untagged int64 `json:"untagged,omitempty"`
	// Skipped are the records not replayed, per cause.
	Skipped []ReplaySkip `json:"skipped,omitempty"`
	// Rules are the statements each classification rule (and the default
	// class) took, in rule order (log).
	Rules []ReplayRule `json:"rules,omitempty"`
	// Results are the result lines read (a trace of version 2): how each
	// recorded op ended. They are not records.
	Results int64 `json:"results,omitempty"`
	// Recorded are the recorded figures per tenant × class: a log's
	// durations (no Window), sorted by tenant then class; or a trace's
	// latencies from the intended start per measured window, the quiet
	// tenants merged (QuietAll) first, then each tenant.
	Recorded []RecordedRow `json:"recorded,omitempty"`
}

// ReplaySkip is one cause of skipped records, with the first lines.
type ReplaySkip struct {
	Cause string  `json:"cause"`
	Count int64   `json:"count"`
	Lines []int64 `json:"lines,omitempty"`
}

// ReplayRule is one rule's count of classified statements.
type ReplayRule struct {
	Rule  string `json:"rule"`
	Class string `json:"class"`
	Count int64  `json:"count"`
}

// RecordedRow is the distribution of one tenant × class's recorded
// durations, in ms.
type RecordedRow struct {
	// Window is the phase a trace's recorded latencies were measured in;
	// empty for a log's durations.
	Window string  `json:"window,omitempty"`
	Tenant string  `json:"tenant"`
	Class  string  `json:"class"`
	Count  int64   `json:"count"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// replayTable writes the recorded figures beside each configuration's
// replayed p99, as text table rows: a trace's per window beside the same
// window's p99 (the quiet tenants merged and the dominant tenant, or every
// tenant when all is set); a log's beside the worst window's p99 of the
// tenant × class.
func replayTable(r *Report, all bool) (head []string, rows [][]string) {
	if r.Replay == nil || len(r.Replay.Recorded) == 0 {
		return nil, nil
	}
	windowed := r.Replay.Recorded[0].Window != ""
	head = []string{"tenant", "class", "recorded n", "recorded p50", "recorded p99"}
	if windowed {
		head = append([]string{"window"}, head...)
	}
	type key struct{ window, tenant, class string }
	p99 := make([]map[key]float64, len(r.Configurations))
	for i, c := range r.Configurations {
		head = append(head, c.Name+" p99")
		p99[i] = map[key]float64{}
		for _, w := range c.Windows {
			for _, t := range append(slices.Clip(w.Tenants), w.QuietAll...) {
				if t.Count == 0 {
					continue
				}
				if windowed {
					p99[i][key{w.Name, t.Tenant, t.Class}] = t.P99
				} else {
					k := key{"", t.Tenant, t.Class}
					p99[i][k] = max(p99[i][k], t.P99)
				}
			}
		}
	}
	for _, rec := range r.Replay.Recorded {
		if windowed && !all && rec.Tenant != QuietAll && rec.Tenant != r.Dominant {
			continue
		}
		row := []string{rec.Tenant, rec.Class, strconv.FormatInt(rec.Count, 10), fmtMs(rec.P50), fmtMs(rec.P99)}
		if windowed {
			row = append([]string{rec.Window}, row...)
		}
		for i := range r.Configurations {
			v, ok := p99[i][key{rec.Window, rec.Tenant, rec.Class}]
			row = append(row, dash(ok, func() string { return fmtMs(v) }))
		}
		rows = append(rows, row)
	}
	return head, rows
}

func fmtMs(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" }

// replayLines are the replay's summary lines.
func replayLines(rp *Replay) []string {
	what := rp.Source + " " + rp.File
	if rp.Configuration != "" {
		what += " (configuration " + rp.Configuration + ")"
	}
	out := []string{fmt.Sprintf("replay of %s at speed %s: %d records, %d replayed", what,
		strconv.FormatFloat(rp.Speed, 'g', -1, 64), rp.Records, rp.Replayed)}
	if rp.Results > 0 {
		out = append(out, fmt.Sprintf("  recorded results: %d", rp.Results))
	}
	if rp.Untagged > 0 {
		out = append(out, fmt.Sprintf("  untagged statements: %d", rp.Untagged))
	}
	for _, s := range rp.Skipped {
		var ls []string
		for _, l := range s.Lines {
			ls = append(ls, strconv.FormatInt(l, 10))
		}
		more := ""
		if s.Count > int64(len(s.Lines)) {
			more = ", …"
		}
		out = append(out, fmt.Sprintf("  skipped, %s: %d (line %s%s)", s.Cause, s.Count, strings.Join(ls, ", "), more))
	}
	for _, rule := range rp.Rules {
		out = append(out, fmt.Sprintf("  %s → %s: %d", rule.Rule, rule.Class, rule.Count))
	}
	return out
}

// writeReplayText writes the replay section of the terminal report.
func writeReplayText(t *textWriter, r *Report) {
	if r.Replay == nil {
		return
	}
	t.p("\n")
	for _, l := range replayLines(r.Replay) {
		t.p("%s\n", l)
	}
	head, rows := replayTable(r, false)
	if head == nil {
		return
	}
	if r.Replay.Recorded[0].Window != "" {
		t.p("\nrecorded p99 (latency from the intended start) beside the replayed p99, per window (every tenant in report.json):\n")
	} else {
		t.p("\nrecorded durations beside the replayed p99 (worst window):\n")
	}
	tw := t.table()
	row(tw, head...)
	for _, cells := range rows {
		row(tw, cells...)
	}
	tw.Flush()
}

// writeReplayMarkdown writes the replay section of report.md.
func writeReplayMarkdown(w *bufio.Writer, r *Report) {
	if r.Replay == nil {
		return
	}
	fmt.Fprintf(w, "\n## Replay\n\n")
	for _, l := range replayLines(r.Replay) {
		fmt.Fprintf(w, "- %s\n", md(strings.TrimSpace(l)))
	}
	head, rows := replayTable(r, true)
	if head == nil {
		return
	}
	fmt.Fprintf(w, "\n| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, cells := range rows {
		for i := range cells {
			cells[i] = md(cells[i])
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}
