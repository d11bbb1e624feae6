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

// TestBadRecords: records that cannot be read come as *LineError with
// their first line, by cause (ErrTruncated, ErrParams), and the reader
// goes on with the next record; a csvlog quoted field left open to the end
// of the file is one truncated record.
func TestBadRecords(t *testing.T) {
	csvRow := func(ts, msg, detail string) string {
		return fmt.Sprintf("%s,app,db,42,\"[local]\",65a1.2a,1,SELECT,2026-12-01 18:00:00 UTC,3/1,0,LOG,00000,\"%s\",\"%s\",,,,,,,,\"t:acme\",client backend,,0\n",
			ts, msg, detail)
	}
	jsonRow := func(ts, msg, detail string) string {
		return fmt.Sprintf(`{"timestamp":"%s","error_severity":"LOG","application_name":"t:acme","message":%q,"detail":%q}`+"\n", ts, msg, detail)
	}
	ok := "duration: 1.000 ms  statement: SELECT 1"
	for _, tc := range []struct {
		name   string
		format Format
		log    string
		want   []string
	}{
		{"csvlog", CSV, csvRow("2026-12-01 18:00:01 UTC", ok, "") +
			csvRow("2026-12-01 18:00:02 UTC", "duration: 1.000 ms  execute s1: SELECT $1", "parameters: $1 = 'open") +
			"2026-12-01 18:00:03 UTC,app,\"d\"b,x\n" + // interleaved: a quote inside a field
			csvRow("2026-12-01 18:00:04 UTC", ok, "") +
			"2026-12-01 18:00:05 UTC,app,db,42,\"[local]\",65a1.2a,1,SELECT,2026-12-01 18:00:00 UTC,3/1,0,LOG,00000,\"duration: 1.000 ms  statement: SELECT\n'cut",
			[]string{"1 ok", "2 bind parameters that do not parse", "3 bad", "4 ok", "5 truncated record"}},
		{"jsonlog", JSON, jsonRow("2026-12-01 18:00:01 UTC", ok, "") +
			jsonRow("2026-12-01 18:00:02 UTC", "duration: 1.000 ms  execute s1: SELECT $1", "parameters: $2 = 'x'") +
			`{"timestamp":"2026-12-01 18:00:03 UTC"}{"timestamp":"2026-12-01 18:00:03 UTC"}` + "\n" + // interleaved
			jsonRow("2026-12-01 18:00:04 UTC", ok, "") +
			`{"timestamp":"2026-12-01 18:00:05 UTC","message":"duration: 1.000 ms  stat`,
			[]string{"1 ok", "2 bind parameters that do not parse", "3 bad", "4 ok", "5 truncated record"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(tc.log), tc.format)
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
				switch {
				case errors.Is(err, ErrTruncated) || errors.Is(err, ErrParams):
					errors.As(err, &le)
					cause := ErrTruncated
					if errors.Is(err, ErrParams) {
						cause = ErrParams
					}
					got = append(got, fmt.Sprintf("%d %v", le.Line, cause))
				case errors.As(err, &le):
					got = append(got, fmt.Sprintf("%d bad", le.Line))
				case err != nil:
					t.Fatalf("Next: %v (want a *LineError)", err)
				default:
					got = append(got, fmt.Sprintf("%d ok", e.Line))
				}
				if err != nil {
					t.Log(err)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
