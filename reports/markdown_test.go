package reports

import (
	"bytes"
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
