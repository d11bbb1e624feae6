package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Errors of connecting to a server given by the caller (a DSN). Each wraps
// ErrBadInput: the noisysim CLI exits 2 on them.
var (
	// ErrUnreachable: no server answered (refused, unknown host, timed
	// out).
	ErrUnreachable = fmt.Errorf("server unreachable: %w", ErrBadInput)
	// ErrAuthFailed: the server refused the DSN's user or password
	// (SQLSTATE class 28, invalid authorization).
	ErrAuthFailed = fmt.Errorf("authentication failed: %w", ErrBadInput)
	// ErrLoginRefused: the server refused the login for another reason of
	// the DSN's (e.g. 3D000, the database does not exist).
	ErrLoginRefused = fmt.Errorf("login refused: %w", ErrBadInput)
)

// ConnectError returns the error of connecting to what (e.g. a node or
// "coordinator") on one line — pgx lists each address it tried on a line
// of its own — wrapping err and what the failure says of the DSN:
// ErrAuthFailed when the server refused the user or password (SQLSTATE
// class 28), ErrLoginRefused when it refused the login otherwise,
// ErrUnreachable when no server answered. err alone, wrapped, when ctx
// ended (an interrupted connect is not bad input) or when the server
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
		switch s := st.SQLState(); {
		case strings.HasPrefix(s, "53") || s == "57P01" || s == "57P03":
			return &connectError{what: what, err: err}
		case strings.HasPrefix(s, "28"):
			return &connectError{what: what, err: err, kind: ErrAuthFailed, verdict: "authentication failed"}
		default:
			return &connectError{what: what, err: err, kind: ErrLoginRefused, verdict: "login refused"}
		}
	}
	return &connectError{what: what, err: err, kind: ErrUnreachable}
}

// connectError is ConnectError's error: err's text on one line, unwrapping
// to err (a *pgconn.PgError stays reachable with errors.As) and to kind
// when the DSN is at fault. A verdict leads the text; without one, kind's
// text ends it.
type connectError struct {
	what    string
	err     error
	kind    error
	verdict string
}

func (e *connectError) Error() string {
	switch {
	case e.verdict != "":
		return fmt.Sprintf("connect to %s: %s: %s", e.what, e.verdict, OneLine(e.err))
	case e.kind != nil:
		return fmt.Sprintf("connect to %s: %s: %v", e.what, OneLine(e.err), e.kind)
	}
	return fmt.Sprintf("connect to %s: %s", e.what, OneLine(e.err))
}

func (e *connectError) Unwrap() []error {
	if e.kind != nil {
		return []error{e.err, e.kind}
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
