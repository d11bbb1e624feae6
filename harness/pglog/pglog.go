// Package pglog reads the statements of a PostgreSQL server log written as
// csvlog or jsonlog with log_min_duration_statement = 0: one Entry per log
// record, a record at a time (flat memory however long the log).
//
// A statement record's message is "duration: D ms  statement: SQL" (simple
// protocol) or "duration: D ms  execute NAME: SQL" with the bind parameters
// in the record's detail, "parameters: $1 = '…', $2 = NULL" (extended
// protocol); the "parse" and "bind" steps of the extended protocol are
// logged too and come as entries of their own kind, so that a caller can
// account for them. The record's time is when the statement ended, so its
// start is Time − Duration. The layout of the records and of the messages is
// PostgreSQL's (doc: "Using CSV-Format Log Output", "Using JSON-Format Log
// Output"; src/backend/tcop/postgres.c for the messages); the parameter list is
// read as pgreplay-go reads it: quoted values with ” for a quote, or NULL.
//
//	r, err := pglog.NewReader(f, pglog.CSV)
//	for e, err := r.Next(); err != io.EOF; e, err = r.Next() { ... }
package pglog

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Format is a log's format.
type Format string

// Formats.
const (
	CSV  Format = "csvlog"
	JSON Format = "jsonlog"
)

// Kind says what a record is.
type Kind string

// Kinds of entries.
const (
	// KindStatement is a statement run by the simple protocol.
	KindStatement Kind = "statement"
	// KindExecute is the execute step of the extended protocol: the
	// statement ran, with Params.
	KindExecute Kind = "execute"
	// KindParse and KindBind are the extended protocol's earlier steps,
	// logged with their own durations; the statement runs at its execute.
	KindParse Kind = "parse"
	KindBind  Kind = "bind"
	// KindOther is any other record (connections, errors, checkpoints,
	// a duration without a statement).
	KindOther Kind = "other"
)

// Entry is one log record.
type Entry struct {
	// Line is the record's first line in the file (1-based).
	Line int64
	// Time is the record's timestamp: when the statement ended.
	Time time.Time
	// Duration is the statement's recorded duration (0 for KindOther).
	Duration                             time.Duration
	User, Database, Application, Session string
	Severity                             string
	Kind                                 Kind
	// Statement is the statement's text, as logged (newlines kept).
	Statement string
	// Params are the bind parameters (KindExecute): text, or nil for NULL.
	Params []*string
	// Message is the record's message, for KindOther.
	Message string
}

// Start returns when the statement started: Time − Duration.
func (e Entry) Start() time.Time { return e.Time.Add(-e.Duration) }

// Causes a *LineError wraps, for callers that count records by cause.
var (
	// ErrTruncated is a record cut short: a jsonlog line that ends inside
	// its JSON, or a csvlog quoted field left open to the end of the file
	// (the records after its first line are lost in it).
	ErrTruncated = errors.New("truncated record")
	// ErrParams is a bind parameter list that does not parse.
	ErrParams = errors.New("bind parameters that do not parse")
)

// LineError is a record that cannot be read, with its line.
type LineError struct {
	Line int64
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Reader reads a log's records in file order.
type Reader struct {
	format Format
	csv    *csv.Reader
	peeked *csvRead // a record read ahead
	sc     *bufio.Scanner
	line   int64
}

// MaxRecord bounds one jsonlog record (a line): 16 MiB.
const MaxRecord = 16 << 20

// NewReader returns a Reader of r's records in format f.
func NewReader(r io.Reader, f Format) (*Reader, error) {
	rd := &Reader{format: f}
	switch f {
	case CSV:
		rd.csv = csv.NewReader(r)
		rd.csv.FieldsPerRecord = -1
		rd.csv.ReuseRecord = true
	case JSON:
		rd.sc = bufio.NewScanner(r)
		rd.sc.Buffer(make([]byte, 0, 64<<10), MaxRecord)
	default:
		return nil, fmt.Errorf("pglog: unknown format %q; want csvlog or jsonlog", f)
	}
	return rd, nil
}

// Next returns the next record. A record that cannot be read returns a
// *LineError (wrapping ErrTruncated or ErrParams where that is why) and
// the reader goes on with the next; io.EOF at the end; any other error
// (of the underlying reader, or a jsonlog line over MaxRecord) ends the
// reading.
func (r *Reader) Next() (Entry, error) {
	if r.format == CSV {
		return r.nextCSV()
	}
	return r.nextJSON()
}

// csvlog columns (PostgreSQL 13..17; 14 added backend_type's neighbours
// leader_pid and query_id at the end).
const (
	colTime        = 0
	colUser        = 1
	colDatabase    = 2
	colSession     = 5
	colSeverity    = 11
	colMessage     = 13
	colDetail      = 14
	colApplication = 22
	minColumns     = 23
)

// csvRead is one csv.Reader.Read: the record (ReuseRecord: valid until
// the next read), its error and its first line.
type csvRead struct {
	rec  []string
	err  error
	line int
}

func (r *Reader) readCSV() csvRead {
	if p := r.peeked; p != nil {
		r.peeked = nil
		return *p
	}
	rec, err := r.csv.Read()
	line := 0
	if err == nil {
		line, _ = r.csv.FieldPos(0)
	}
	return csvRead{rec, err, line}
}

func (r *Reader) nextCSV() (Entry, error) {
	rd := r.readCSV()
	rec, err, line := rd.rec, rd.err, rd.line
	if err == io.EOF {
		return Entry{}, io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if !errors.As(err, &pe) {
			return Entry{}, err
		}
		// The reader goes on at the line after a bad one; a quoted field
		// left open runs to the end of the file.
		if pe.Err == csv.ErrQuote && pe.Line > pe.StartLine {
			next := r.readCSV()
			next.rec = slices.Clone(next.rec)
			r.peeked = &next
			if next.err == io.EOF {
				return Entry{}, &LineError{Line: int64(pe.StartLine), Err: fmt.Errorf("%w: a quoted field opened on line %d is still open at the end of the file (line %d): %w",
					ErrTruncated, pe.StartLine, pe.Line, err)}
			}
		}
		return Entry{}, &LineError{Line: int64(pe.StartLine), Err: err}
	}
	if len(rec) < minColumns {
		return Entry{}, &LineError{Line: int64(line), Err: fmt.Errorf("%d columns, a csvlog record has at least %d", len(rec), minColumns)}
	}
	t, err := ParseTime(rec[colTime])
	if err != nil {
		return Entry{}, &LineError{Line: int64(line), Err: err}
	}
	e := Entry{Line: int64(line), Time: t, User: rec[colUser], Database: rec[colDatabase], Session: rec[colSession],
		Severity: rec[colSeverity], Application: rec[colApplication]}
	if err := e.message(rec[colMessage], rec[colDetail]); err != nil {
		return Entry{}, &LineError{Line: e.Line, Err: err}
	}
	return e, nil
}

// jsonRecord is the part of a jsonlog record read.
type jsonRecord struct {
	Timestamp   string `json:"timestamp"`
	User        string `json:"user"`
	Database    string `json:"dbname"`
	Session     string `json:"session_id"`
	Severity    string `json:"error_severity"`
	Message     string `json:"message"`
	Detail      string `json:"detail"`
	Application string `json:"application_name"`
}

func (r *Reader) nextJSON() (Entry, error) {
	for r.sc.Scan() {
		r.line++
		b := r.sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var j jsonRecord
		if err := json.Unmarshal(b, &j); err != nil {
			if se := (*json.SyntaxError)(nil); errors.As(err, &se) && se.Offset == int64(len(b)) {
				err = fmt.Errorf("%w: the line ends inside its JSON record", ErrTruncated)
			}
			return Entry{}, &LineError{Line: r.line, Err: fmt.Errorf("not a JSON record: %w", err)}
		}
		t, err := ParseTime(j.Timestamp)
		if err != nil {
			return Entry{}, &LineError{Line: r.line, Err: err}
		}
		e := Entry{Line: r.line, Time: t, User: j.User, Database: j.Database, Session: j.Session, Severity: j.Severity,
			Application: j.Application}
		if err := e.message(j.Message, j.Detail); err != nil {
			return Entry{}, &LineError{Line: e.Line, Err: err}
		}
		return e, nil
	}
	if err := r.sc.Err(); err != nil {
		return Entry{}, fmt.Errorf("pglog: line %d: %w", r.line+1, err)
	}
	return Entry{}, io.EOF
}

// statementMessage is a duration record with its statement.
var statementMessage = regexp.MustCompile(`(?s)^duration: ([0-9]+(?:\.[0-9]+)?) ms  (statement|execute|parse|bind)(?: ([^:]*))?: (.*)$`)

// message sets the entry's kind, duration, statement and parameters from
// a record's message and detail.
func (e *Entry) message(msg, detail string) error {
	m := statementMessage.FindStringSubmatch(msg)
	if m == nil || e.Severity != "" && e.Severity != "LOG" {
		e.Kind, e.Message = KindOther, msg
		return nil
	}
	ms, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return fmt.Errorf("duration %q: %w", m[1], err)
	}
	e.Duration = time.Duration(ms * float64(time.Millisecond))
	e.Kind, e.Statement = Kind(m[2]), m[4]
	if e.Kind == KindExecute && strings.HasPrefix(detail, "parameters: ") {
		p, err := ParseParams(strings.TrimPrefix(detail, "parameters: "))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrParams, err)
		}
		e.Params = p
	}
	return nil
}

// timeLayouts are log_time's layouts: csvlog's "%m" and jsonlog's.
var timeLayouts = []string{"2006-01-02 15:04:05.999999 MST", "2006-01-02 15:04:05.999999 -0700", "2006-01-02 15:04:05.999999-07"}

// ParseTime reads a log timestamp ("2026-12-01 18:40:00.123 UTC").
func ParseTime(s string) (time.Time, error) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %q: want a log_time such as 2026-12-01 18:40:00.123 UTC", s)
}

var paramPrefix = regexp.MustCompile(`^\$([0-9]+) = `)

// ParseParams reads a bind parameter list, "$1 = 'a”b', $2 = NULL":
// values in order, nil for NULL. The numbers must run 1, 2, …
func ParseParams(s string) ([]*string, error) {
	var out []*string
	for i := 1; s != ""; i++ {
		if i > 1 {
			if !strings.HasPrefix(s, ", ") {
				return nil, fmt.Errorf("parameters: want \", \" after $%d, got %.20q", i-1, s)
			}
			s = s[2:]
		}
		m := paramPrefix.FindStringSubmatch(s)
		if m == nil || m[1] != strconv.Itoa(i) {
			return nil, fmt.Errorf("parameters: want $%d = …, got %.20q", i, s)
		}
		s = s[len(m[0]):]
		if strings.HasPrefix(s, "NULL") {
			out = append(out, nil)
			s = s[4:]
			continue
		}
		if !strings.HasPrefix(s, "'") {
			return nil, fmt.Errorf("parameters: $%d: want a quoted value or NULL, got %.20q", i, s)
		}
		var b strings.Builder
		j := 1
		for {
			k := strings.IndexByte(s[j:], '\'')
			if k < 0 {
				return nil, fmt.Errorf("parameters: $%d: no closing quote", i)
			}
			b.WriteString(s[j : j+k])
			j += k + 1
			if j < len(s) && s[j] == '\'' {
				b.WriteByte('\'')
				j++
				continue
			}
			break
		}
		v := b.String()
		out = append(out, &v)
		s = s[j:]
	}
	return out, nil
}
