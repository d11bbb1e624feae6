package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestMarkdownGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sampleReport(6)); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.md", b.Bytes())
}

func TestMarkdownEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"quiet_p99", "quiet_p99"},
		{"a|b", `a\|b`},
		{"<= 5 ms", "<= 5 ms"},
		{"tag t:<tenant>", "tag t:&lt;tenant>"},
		{"line\nbreak", "line break"},
		{"`code`", "'code'"},
		{"*bold*", `\*bold\*`},
	}
	for _, tt := range tests {
		if got := md(tt.in); got != tt.want {
			t.Errorf("md(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestMarkdownQuietAll checks the merged QuietAll rows appear in their
// configuration's tables with the numbers of report.json, with the note
// that they are merged, and that without them Markdown shows no QuietAll row.
func TestMarkdownQuietAll(t *testing.T) {
	render := func(r *Report) string {
		var b bytes.Buffer
		if err := WriteMarkdown(&b, r); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	r := sampleReport(9)
	out := render(r)
	for _, c := range r.Configurations {
		section := out[strings.Index(out, "## Configuration "+c.Name+"\n"):]
		section = section[:strings.Index(section[1:], "\n## ")+1]
		noisy, solo, _ := strings.Cut(section, "### Solo baseline")
		for _, part := range []struct {
			text  string
			rows  []TenantRow
			marks map[rowKey]string
		}{{noisy, c.QuietAll, rowMarks(r, c.Name, r.Dominant)}, {solo, c.SoloQuietAll, nil}} {
			for _, q := range part.rows {
				line := fmt.Sprintf("| %s | %s | %d | %d | %d | %s | %s | %s | %s |\n", QuietAll, q.Class, q.Count, q.Rejected,
					q.Errors, fmtMS(q.P50), fmtMS(q.P99)+md(part.marks[keyOf(q)]), fmtMS(q.Max), fmtShare(q.DBTimeShare))
				if !strings.Contains(part.text, line) {
					t.Errorf("%s: row %q missing:\n%s", c.Name, line, part.text)
				}
			}
			if !strings.Contains(part.text, "\n"+QuietAll+": "+quietMergedNote) {
				t.Errorf("%s: merged note missing:\n%s", c.Name, part.text)
			}
		}
	}
	if out := render(withoutMerged(sampleReport(9))); strings.Contains(out, QuietAll) {
		t.Errorf("without merged rows Markdown shows %s:\n%s", QuietAll, out)
	}
}

// Markdown lists every window of a configuration's timeline, as the
// terminal does (windowRows), before the judged window's rows.
func TestMarkdownWindows(t *testing.T) {
	r := sampleReport(4)
	c := &r.Configurations[0]
	c.Windows = []Window{
		{Name: "warmup", Start: 0, End: 1, Senders: "quiet"},
		{Name: "move", Start: 1, End: 18.8, Senders: "all", Measured: true, Tenants: c.Tenants, QuietAll: c.QuietAll,
			Stats: RunStats{Issued: 1234, Errors: 7, AchievedRate: 89.4}, TopDBTime: []Share{{Tenant: r.Dominant, Share: 0.784}}},
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, cells := range windowRows(*c, r.Dominant, mergedClasses(r, r.Dominant)) {
		for i := range cells {
			cells[i] = md(cells[i])
		}
		if want := "| " + strings.Join(cells, " | ") + " |\n"; !strings.Contains(out, want) {
			t.Errorf("markdown lacks the window row %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "| move | 1.0–18.8 | 1234 | 7 | 89.4 |") || !strings.Contains(out, "| warmup (warm-up) | 0.0–1.0 |") {
		t.Errorf("markdown lacks the windows move and warmup:\n%s", out)
	}
}
