package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrUnreachable marks a server given by the caller (a DSN) that could not
// be connected to: refused, unknown host, timed out, or authentication
// failed. It wraps ErrBadInput: the noisysim CLI exits 2 on it.
var ErrUnreachable = fmt.Errorf("server unreachable: %w", ErrBadInput)

// ConnectError returns the error of connecting to what (e.g. a node or
// "coordinator") on one line — pgx lists each address it tried on a line
// of its own — wrapping err and ErrUnreachable; err alone, wrapped, when
// ctx ended (an interrupted connect is not bad input) or when the server
// refused for its own state rather than the DSN's: SQLSTATE class 53
// (insufficient resources: too many clients, disk full, out of memory),
// 57P01 (shutting down) or 57P03 (starting up, in recovery) — see
// PostgreSQL, Appendix A, "PostgreSQL Error Codes".
func ConnectError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return fmt.Errorf("connect to %s: %w", what, err)
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		if s := st.SQLState(); strings.HasPrefix(s, "53") || s == "57P01" || s == "57P03" {
			return &connectError{what: what, err: err}
		}
	}
	return &connectError{what: what, err: err, unreachable: true}
}

// connectError is ConnectError's error: err's text on one line, unwrapping
// to err (a *pgconn.PgError stays reachable with errors.As) and, when
// unreachable, to ErrUnreachable.
type connectError struct {
	what        string
	err         error
	unreachable bool
}

func (e *connectError) Error() string {
	if e.unreachable {
		return fmt.Sprintf("connect to %s: %s: %v", e.what, OneLine(e.err), ErrUnreachable)
	}
	return fmt.Sprintf("connect to %s: %s", e.what, OneLine(e.err))
}

func (e *connectError) Unwrap() []error {
	if e.unreachable {
		return []error{e.err, ErrUnreachable}
	}
	return []error{e.err}
}

// OneLine returns err's text on one line: its lines joined by "; " (by a
// space after a line ending in ":"), a line repeated in a row once.
func OneLine(err error) string {
	var b strings.Builder
	prev := ""
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l == "" || l == prev {
			continue
		}
		switch {
		case b.Len() == 0:
		case strings.HasSuffix(prev, ":"):
			b.WriteString(" ")
		default:
			b.WriteString("; ")
		}
		b.WriteString(l)
		prev = l
	}
	return b.String()
}
