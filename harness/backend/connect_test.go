package backend

import (
	"context"
	"errors"
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
