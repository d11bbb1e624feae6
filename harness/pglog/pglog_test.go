package pglog

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseParams(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // values joined by |, NULL as <nil>
		err      string
	}{
		{"plain", "$1 = '1', $2 = 'abc'", "1|abc", ""},
		{"quote and comma", "$1 = 'it''s, fine', $2 = NULL, $3 = ''", "it's, fine|<nil>|", ""},
		{"newline", "$1 = 'a\nb'", "a\nb", ""},
		{"gap", "$1 = '1', $3 = '2'", "", "want $2"},
		{"unclosed", "$1 = 'abc", "", "no closing quote"},
		{"bare", "$1 = 12", "", "quoted value or NULL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseParams(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, p := range got {
				if p == nil {
					parts = append(parts, "<nil>")
				} else {
					parts = append(parts, *p)
				}
			}
			if s := strings.Join(parts, "|"); s != tc.want {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
}

// TestCSV reads records of each kind, a statement over several lines and
// a broken record, with their line numbers.
func TestCSV(t *testing.T) {
	row := func(ts, app, sev, msg, detail string) string {
		return fmt.Sprintf("%s,app,db,42,\"[local]\",65a1.2a,1,SELECT,2026-12-01 18:00:00 UTC,3/1,0,%s,00000,\"%s\",\"%s\",,,,,,,,\"%s\",client backend,,0\n",
			ts, sev, strings.ReplaceAll(msg, `"`, `""`), detail, app)
	}
	log := row("2026-12-01 18:00:01.500 UTC", "t:acme", "LOG", "duration: 2.500 ms  statement: SELECT 1\nFROM x", "") +
		row("2026-12-01 18:00:02.000 UTC", "t:acme", "LOG", "duration: 0.100 ms  parse stmtcache_1: SELECT $1", "") +
		row("2026-12-01 18:00:02.100 UTC", "t:acme", "LOG", "duration: 0.200 ms  execute stmtcache_1: SELECT $1", "parameters: $1 = 'x''y'") +
		"not,enough\n" +
		row("2026-12-01 18:00:03.000 UTC", "", "LOG", "connection authorized: user=app", "")
	r, err := NewReader(strings.NewReader(log), CSV)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		var le *LineError
		if errors.As(err, &le) {
			got = append(got, fmt.Sprintf("%d bad", le.Line))
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%d %s %s %q %s", e.Line, e.Kind, e.Application, e.Statement, e.Duration)
		if e.Params != nil {
			s += " " + *e.Params[0]
		}
		got = append(got, s)
		if e.Line == 1 && !e.Start().Equal(time.Date(2026, 12, 1, 18, 0, 1, 497500000, time.UTC)) {
			t.Errorf("start %v", e.Start())
		}
	}
	want := []string{
		`1 statement t:acme "SELECT 1\nFROM x" 2.5ms`,
		`3 parse t:acme "SELECT $1" 100µs`,
		`4 execute t:acme "SELECT $1" 200µs x'y`,
		`5 bad`,
		`6 other  "" 0s`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
