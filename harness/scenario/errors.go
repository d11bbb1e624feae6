package scenario

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error Load, Parse and Only return
// for bad input: an unreadable file, malformed YAML, an unknown key or a value
// out of range. The CLI maps it to exit code 2.
var ErrInvalid = errors.New("invalid scenario")

// Problem is one thing wrong with a scenario file.
type Problem struct {
	// File is the scenario file's path as given to Load or Parse; empty for a
	// Scenario built in Go.
	File string
	// Line and Col are 1-based; 0 when the problem has no place in the file
	// (a required top-level key that is missing, an unreadable file).
	Line, Col int
	// Field is the dotted path of the field, list items by 0-based index:
	// "tenants.dominant_share", "classes[2].rate". Empty for problems with the
	// file as a whole (malformed YAML).
	Field string
	// Msg says what is wrong and what is expected, e.g.
	// "must be in (0, 1), got 1.2".
	Msg string
}

// Error returns "file:line:col: field: msg", leaving out the parts that are
// empty or zero.
func (p Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
		if p.Col > 0 {
			fmt.Fprintf(&b, ":%d", p.Col)
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (p Problem) Is(target error) bool { return target == ErrInvalid }

// Error is the error Load, Parse and Only return for bad input. It lists every
// problem found, sorted by line, and matches ErrInvalid.
type Error struct {
	// File is the scenario file's path as given to Load or Parse.
	File string
	// Problems are sorted by line and column, then in schema order; never
	// empty.
	Problems []Problem
	// Err is the underlying error when there is one, e.g. the *fs.PathError
	// of an unreadable file; nil otherwise.
	Err error
}

// Error returns the single problem, or a count followed by one problem per
// line, each starting with file:line:col.
func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems", e.File, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns ErrInvalid and, when set, Err.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// sortProblems orders problems by line and column, keeping the order they
// were found in (schema order) among equals, and drops exact duplicates.
func sortProblems(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return slices.Compact(ps)
}
