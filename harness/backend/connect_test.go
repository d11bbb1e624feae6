package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestConnectError(t *testing.T) {
	multi := errors.New("failed to connect to `user=app database=app`:\n\t127.0.0.1:1 (localhost): dial error\n\t[::1]:1 (localhost): dial error")
	err := ConnectError(context.Background(), "coordinator", multi)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrBadInput) || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %q: want one line wrapping ErrUnreachable and ErrBadInput", err)
	}
	if !strings.Contains(err.Error(), "`user=app database=app`: 127.0.0.1:1 (localhost): dial error; [::1]:1 (localhost): dial error") {
		t.Errorf("err = %q: want every attempt, joined", err)
	}
	if got := OneLine(errors.New("a:\n\tb\n\tb\nc")); got != "a: b; c" {
		t.Errorf("OneLine = %q, want %q", got, "a: b; c")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ConnectError(ctx, "coordinator", context.Canceled); errors.Is(err, ErrBadInput) || !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted connect: err = %v, want context.Canceled and not bad input", err)
	}
}

// stateErr is a server error with a SQLSTATE, as pgconn.PgError has.
type stateErr string

func (e stateErr) Error() string    { return "server error (SQLSTATE " + string(e) + ")" }
func (e stateErr) SQLState() string { return string(e) }

// TestConnectErrorServerState: a server that refuses for its own state
// (too many clients, starting up, shutting down) is not bad input; a
// refused login or an unknown database is.
func TestConnectErrorServerState(t *testing.T) {
	for _, tc := range []struct {
		state string
		bad   bool
	}{{"53300", false}, {"53100", false}, {"57P03", false}, {"57P01", false}, {"28P01", true}, {"28000", true}, {"3D000", true}} {
		err := ConnectError(context.Background(), "coordinator", fmt.Errorf("failed to connect to `user=app`:\n\t127.0.0.1:5432: %w", stateErr(tc.state)))
		if errors.Is(err, ErrBadInput) != tc.bad || strings.Contains(err.Error(), "\n") || !errors.Is(err, stateErr(tc.state)) {
			t.Errorf("SQLSTATE %s: err = %q, bad input %v; want bad input %v, one line, wrapping the server error", tc.state, err, errors.Is(err, ErrBadInput), tc.bad)
		}
	}
}

// TestConnectErrorAuthentication: a login the server refuses says so —
// authentication failed, or the login refused — never "server unreachable";
// it is still bad input (exit 2).
func TestConnectErrorAuthentication(t *testing.T) {
	for _, tc := range []struct {
		state, want string
		sentinel    error
	}{
		{"28P01", "authentication failed", ErrAuthFailed},
		{"28000", "authentication failed", ErrAuthFailed},
		{"3D000", "login refused", ErrLoginRefused},
	} {
		err := ConnectError(context.Background(), "primary", fmt.Errorf("failed to connect to `user=app`:\n\t127.0.0.1:5432: %w", stateErr(tc.state)))
		if !errors.Is(err, tc.sentinel) || !errors.Is(err, ErrBadInput) || errors.Is(err, ErrUnreachable) {
			t.Errorf("SQLSTATE %s: err = %v; want %v, bad input, not unreachable", tc.state, err, tc.sentinel)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "connect to primary: "+tc.want+": ") || strings.Contains(msg, "unreachable") {
			t.Errorf("SQLSTATE %s: err = %q; want it to start %q and not say unreachable", tc.state, msg, "connect to primary: "+tc.want+": ")
		}
	}
}
