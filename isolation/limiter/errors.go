package limiter

import (
	"errors"
	"fmt"
	"time"
)

// ErrLimited is matched (errors.Is) by every rejection the limiter returns.
// A rejection is a *LimitError carrying the reason and a Retry-After hint.
var ErrLimited = errors.New("limited")

// ErrInvalidConfig is matched (errors.Is) by every *ConfigError.
var ErrInvalidConfig = errors.New("invalid limiter config")

// Reason says why a call was rejected.
type Reason string

// Rejection reasons.
const (
	// ReasonQueueFull: the tenant was at its cap (or the global cap was
	// reached) and its queue already held MaxQueue waiters.
	ReasonQueueFull Reason = "queue_full"
	// ReasonWaitExceeded: the call waited MaxWait without being admitted.
	ReasonWaitExceeded Reason = "wait_exceeded"
	// ReasonUnavailable: the limiter's shared state (a distributed
	// limiter's store, e.g. Redis) could not be reached and the limiter
	// fails closed. The local Limiter never gives it.
	ReasonUnavailable Reason = "unavailable"
)

// LimitError is the rejection the limiter returns. errors.Is(err, ErrLimited)
// recognises it; errors.As gives the detail.
type LimitError struct {
	// Tenant is the tenant whose call was rejected.
	Tenant string
	// Reason is queue_full or wait_exceeded.
	Reason Reason
	// RetryAfter estimates when a retry can be admitted (see Limiter for how
	// it is computed). HTTPError turns it into whole seconds, at least 1.
	RetryAfter time.Duration
}

// Error describes the rejection.
func (e *LimitError) Error() string {
	return fmt.Sprintf("limit tenant %q: %s, retry after %v", e.Tenant, e.Reason, e.RetryAfter)
}

// Unwrap returns ErrLimited.
func (e *LimitError) Unwrap() error { return ErrLimited }

// ConfigError names a Config field whose value New rejects.
type ConfigError struct {
	// Field is the Config field name, e.g. "MaxPerTenant".
	Field string
	// Value is the rejected value.
	Value any
	// Rule says what the field must be, e.g. "must be >= 1".
	Rule string
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("limiter config %s = %v: %s", e.Field, e.Value, e.Rule)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }
