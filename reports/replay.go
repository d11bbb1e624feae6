package reports

import (
	"bufio"
	"fmt"
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
	// Recorded are the recorded durations per tenant × class (log), sorted
	// by tenant then class.
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
	Tenant string  `json:"tenant"`
	Class  string  `json:"class"`
	Count  int64   `json:"count"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// replayTable writes the recorded durations beside each configuration's
// replayed p99 over all its windows' rows (the worst window's p99 of the
// tenant × class), as text table rows.
func replayTable(r *Report) (head []string, rows [][]string) {
	if r.Replay == nil || len(r.Replay.Recorded) == 0 {
		return nil, nil
	}
	head = []string{"tenant", "class", "recorded n", "recorded p50", "recorded p99"}
	p99 := make([]map[rowKey]float64, len(r.Configurations))
	for i, c := range r.Configurations {
		head = append(head, c.Name+" p99")
		p99[i] = map[rowKey]float64{}
		for _, w := range c.Windows {
			for _, t := range w.Tenants {
				if t.Count > 0 {
					p99[i][keyOf(t)] = max(p99[i][keyOf(t)], t.P99)
				}
			}
		}
	}
	for _, rec := range r.Replay.Recorded {
		row := []string{rec.Tenant, rec.Class, strconv.FormatInt(rec.Count, 10), fmtMs(rec.P50), fmtMs(rec.P99)}
		for i := range r.Configurations {
			v, ok := p99[i][rowKey{rec.Tenant, rec.Class}]
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
	head, rows := replayTable(r)
	if head == nil {
		return
	}
	t.p("\nrecorded durations beside the replayed p99 (worst window):\n")
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
	head, rows := replayTable(r)
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
