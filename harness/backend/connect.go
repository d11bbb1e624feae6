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
// of its own — wrapping ErrUnreachable, or err itself wrapped when ctx
// ended (an interrupted connect is not bad input).
func ConnectError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return fmt.Errorf("connect to %s: %w", what, err)
	}
	return fmt.Errorf("connect to %s: %s: %w", what, OneLine(err), ErrUnreachable)
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
