package workload

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrInvalid marks a configuration or schedule that cannot be used.
	// Every *FieldError unwraps to it.
	ErrInvalid = errors.New("invalid workload configuration")

	// ErrDropped is the Err of a Result for an arrival that was not issued
	// because OpenLoopConfig.MaxInFlight ops were already in flight.
	ErrDropped = errors.New("op dropped: too many ops in flight")

	// ErrIncomplete is wrapped by the Err of a Result for an op that was
	// still queued or running when the run ended (drain expired or the
	// caller's context was cancelled). Such errors also wrap
	// context.Canceled.
	ErrIncomplete = errors.New("op incomplete at end of run")
)

// FieldError says which configuration field is wrong and why. It unwraps to
// ErrInvalid. Field is named as in Go, e.g. "DominantShare", "Shares[3]",
// "classes[1].Rate", so that a scenario decoder can map it to a file:line.
type FieldError struct {
	Field  string
	Value  any
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s = %v: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field string, value any, format string, args ...any) error {
	return &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
}
