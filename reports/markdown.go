package reports

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteMarkdown writes r to w as Markdown (report.md): a header with
// scenario, seed, schedule hash and result; per configuration its counters
// and a table of every tenant and class (tenant | class | count | rejected |
// errors | p50 | p99 | max ms | DB-time share), the solo baseline and the
// DB-time ranking; then every assertion with observed value, limit and
// result, failures first. The configuration's merged QuietAll and
// SoloQuietAll rows, when present, follow the tenants of their table, with a
// note that they are merged over all quiet tenants' requests; Markdown
// builds no worst-of fallback rows, as its tables list every tenant.
// Latencies are in ms. It returns an error wrapping
// ErrInvalid if r does not pass Validate, or the writer's error.
func WriteMarkdown(w io.Writer, r *Report) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	bw := bufio.NewWriter(w)
	writeMarkdown(bw, normalized(r))
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	return nil
}

func writeMarkdown(w *bufio.Writer, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	dominant := dominantTenant(r)

	simulated := ""
	if r.Simulated != nil {
		simulated = " (SIMULATED)"
	}
	p("# noisysim report: %s%s\n\n", md(r.Scenario), simulated)
	p("| | |\n|---|---|\n")
	if r.Incomplete != "" {
		p("| Result | **INCOMPLETE**: %s; what was measured until then, no verdict%s |\n", md(r.Incomplete), simulated)
	} else {
		p("| Result | **%s**%s%s |\n", passFail(r.Passed), md(AttemptsWords(r)), simulated)
	}
	if l := simulatedLine(r); l != "" {
		p("| Simulated | %s |\n", md(l))
	}
	if r.File != "" {
		p("| Scenario file | `%s` |\n", md(r.File))
	}
	p("| Seed | %d |\n", r.Seed)
	p("| Schedule hash | `%s` |\n", md(r.ScheduleHash))
	p("| Started | %s |\n", r.StartedAt.Format(time.RFC3339))
	p("| Duration | %s |\n", fmtSeconds(r.Duration))
	p("| Backend | %s |\n", md(r.Backend))
	if dominant != "" {
		p("| Dominant tenant | %s |\n", md(dominant))
	}
	p("\n")
	for _, n := range r.Notes {
		p("- %s\n", md(n))
	}
	for _, c := range r.Calibrations {
		p("- calibrated %s\n", md(calibrationLine(c)))
	}
	for _, l := range simulatedClassLines(r) {
		p("- simulated %s\n", md(l))
	}
	if q := r.QuietPlan; q != nil {
		p("- quiet_p99: %s\n", md(planLine(q)))
	}
	if len(r.Notes) > 0 || len(r.Calibrations) > 0 || r.QuietPlan != nil || r.Simulated != nil {
		p("\n")
	}
	writeReplayMarkdown(w, r)
	writeMachine(p, r.Machine)
	writeAttempts(p, r)

	p("| Configuration | Expect | Assertions | Met expectation |\n|---|---|---|---|\n")
	for _, c := range r.Configurations {
		if c.Incomplete {
			p("| %s | %s | incomplete: not evaluated | - |\n", md(c.Name), expectation(c))
			continue
		}
		p("| %s | %s | %s | %s |\n", md(c.Name), expectation(c), passFail(c.Passed), yesNo(c.AsExpected()))
	}

	for _, c := range r.Configurations {
		p("\n## Configuration %s\n\n", md(c.Name))
		if c.Incomplete {
			p("Expect %s; cut short: the rows cover the part measured, no assertion was evaluated.", expectation(c))
		} else {
			p("Expect %s; assertions %s; %s.", expectation(c), passFail(c.Passed), asExpectedWords(c))
		}
		if c.Duration > 0 {
			p(" Timeline %s.", fmtSeconds(c.Duration))
		}
		p("\n\n")
		p("%s\n\n", md(statsLine(c.Stats)))
		if c.QuietChecks != nil {
			p("%s.\n\n", md(checkedLine(c.QuietChecks)))
		}
		if rows := windowRows(c, dominant, mergedClasses(r, dominant)); len(rows) > 0 {
			p("| %s |\n|---|---|--:|--:|--:|---|---|---|\n", strings.Join(windowHeader, " | "))
			for _, cells := range rows {
				for i := range cells {
					cells[i] = md(cells[i])
				}
				p("| %s |\n", strings.Join(cells, " | "))
			}
			p("\nPer tenant, the window quiet_p99 judges (or the one cut short):\n\n")
		}
		mdRows(w, displayOrder(c.Tenants, dominant), c.QuietAll, rowMarks(r, c.Name, dominant))
		if len(c.Solo) > 0 || len(c.SoloQuietAll) > 0 {
			p("\n### Solo baseline\n\n")
			mdRows(w, displayOrder(c.Solo, dominant), c.SoloQuietAll, nil)
		}
		if len(c.TopDBTime) > 0 {
			p("\n### DB time by tenant\n\n| Tenant | DB time ms | Share |\n|---|--:|--:|\n")
			for _, s := range c.TopDBTime {
				p("| %s | %s | %s |\n", md(s.Tenant), fmtMS(s.DBTime), fmtShare(s.Share))
			}
		}
		if lines := serviceLines(c); len(lines) > 0 {
			p("\n### Service\n\n")
			for _, l := range lines {
				p("- %s\n", md(l))
			}
		}
		if l := recoveryLine(c); l != "" {
			p("\n### Recovery\n\n%s.\n", md(l))
		}
		mdActions(w, c)
		mdWriter(w, c)
		mdFaults(w, c)
	}
	mdHotShard(w, r.HotShard)

	if len(r.Marginal) > 0 {
		p("\n## Marginal verdicts\n\n%s could go either way: the limit lies inside the p99's 95%% confidence interval (`noisysim run --strict` fails on them).\n\n", plural(len(r.Marginal), "verdict"))
		for _, a := range r.Marginal {
			p("- %s\n", md(marginalLine(a)))
		}
	}

	p("\n## Assertions\n\n%s\n\n", assertionSummary(r))
	if len(r.Assertions) == 0 {
		return
	}
	p("| Result | Configuration | Assertion | Tenant | Class | Observed | Limit | Detail |\n")
	p("|---|---|---|---|---|--:|--:|---|\n")
	for _, a := range failuresFirst(r) {
		p("| %s | %s | %s | %s | %s | %s | %s %s | %s |\n",
			verdict(a, expectsFailure(r, a)), md(a.Configuration), md(a.Name), md(a.Tenant), md(a.Class),
			observed(a), md(a.Op), fmtValue(a.Limit, a.Unit), md(a.Detail))
	}
}

// mdRows writes a table of rows followed by the merged QuietAll rows, and
// a note on the latter if there are any; each p99 carries its row's marks
// (rowMarks), explained below the table.
func mdRows(w *bufio.Writer, rows, merged []TenantRow, marks map[rowKey]string) {
	fmt.Fprint(w, "| Tenant | Class | Count | Rejected | Errors | p50 ms | p99 ms | Max ms | DB-time share |\n")
	fmt.Fprint(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	used := map[string]bool{}
	for _, t := range append(slices.Clip(rows), merged...) {
		m := marks[keyOf(t)]
		marksUsed(used, m)
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s | %s | %s | %s |\n",
			md(t.Tenant), md(t.Class), t.Count, t.Rejected, t.Errors,
			fmtMS(t.P50), fmtMS(t.P99)+md(m), fmtMS(t.Max), fmtShare(t.DBTimeShare))
	}
	if len(merged) > 0 {
		fmt.Fprintf(w, "\n%s: %s; DB-time share of all quiet tenants, each counted once.\n", md(QuietAll), quietMergedNote)
	}
	if legend := markLegend(used); len(legend) > 0 {
		fmt.Fprintln(w)
		for _, l := range legend {
			fmt.Fprintf(w, "%s  \n", md(l))
		}
	}
}

// statsLine summarises a configuration's counters in one line.
func statsLine(s RunStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "issued %d, completed %d, dropped %d, incomplete %d, rejected %d",
		s.Issued, s.Completed, s.Dropped, s.Incomplete, s.Rejected)
	if len(s.RejectedByReason) > 0 {
		fmt.Fprintf(&b, " (%s)", fmtCounts(s.RejectedByReason))
	}
	fmt.Fprintf(&b, ", errors %d", s.Errors)
	if len(s.ErrorsByClass) > 0 {
		fmt.Fprintf(&b, " (%s)", fmtCounts(s.ErrorsByClass))
	}
	switch {
	case s.TargetRate > 0:
		fmt.Fprintf(&b, ", rate %s/s of %s/s",
			strconv.FormatFloat(s.AchievedRate, 'f', 1, 64), strconv.FormatFloat(s.TargetRate, 'f', 1, 64))
	case s.AchievedRate > 0: // a closed loop: the users set the pace
		fmt.Fprintf(&b, ", rate %s/s", strconv.FormatFloat(s.AchievedRate, 'f', 1, 64))
	}
	return b.String()
}

// md escapes text for a Markdown table cell: pipes, line breaks, backticks,
// asterisks, and a "<" that could open an HTML tag ("<=" stays as it is).
func md(s string) string {
	s = mdEscaper.Replace(s)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '<' && i+1 < len(s) && opensTag(s[i+1]) {
			b.WriteString("&lt;")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func opensTag(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '/' || c == '!' || c == '?'
}

var mdEscaper = strings.NewReplacer("|", `\|`, "\n", " ", "\r", "", "`", "'", "*", `\*`)

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func asExpectedWords(c Configuration) string {
	if c.AsExpected() {
		return "as expected"
	}
	return "NOT as expected"
}
