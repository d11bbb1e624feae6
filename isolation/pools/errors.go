package pools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/isolation/limiter"
)

// Sentinel errors returned (wrapped) by the Stack.
var (
	// ErrClosed is returned by calls made after Close.
	ErrClosed = errors.New("isolation stack closed")
	// ErrUnknownClass is returned for a class the Config does not define.
	ErrUnknownClass = errors.New("unknown workload class")
	// ErrAcquireTimeout is returned when no pool connection became free
	// within the pool's AcquireTimeout. The concrete error is an
	// *AcquireTimeoutError.
	ErrAcquireTimeout = errors.New("pool acquire timeout")
	// ErrTagFailed is returned when tagging a borrowed connection failed on
	// every attempt. The concrete error is a *TagError.
	ErrTagFailed = errors.New("tag connection failed")
)

// AcquireTimeoutError is returned when a class's pool had no free connection
// within its acquire timeout. errors.Is(err, ErrAcquireTimeout) is true.
type AcquireTimeoutError struct {
	Class Class
	Pool  string
	// Timeout is the pool's AcquireTimeout.
	Timeout time.Duration
}

// Error returns "pool <pool> (class <class>): no connection within <timeout>".
func (e *AcquireTimeoutError) Error() string {
	return fmt.Sprintf("pool %s (class %s): no connection within %s", e.Pool, e.Class, e.Timeout)
}

// Unwrap returns ErrAcquireTimeout.
func (e *AcquireTimeoutError) Unwrap() error { return ErrAcquireTimeout }

// TagError is returned when setting application_name on borrowed connections
// failed Attempts times in a row; each failed connection was destroyed.
// errors.Is(err, ErrTagFailed) is true and Unwrap gives the last failure.
type TagError struct {
	Pool     string
	Attempts int
	Err      error
}

// Error returns "tag connection from pool <pool>: failed <n> times: <last>".
func (e *TagError) Error() string {
	return fmt.Sprintf("tag connection from pool %s: failed %d times: %v", e.Pool, e.Attempts, e.Err)
}

// Unwrap returns the last failure.
func (e *TagError) Unwrap() error { return e.Err }

// Is reports whether target is ErrTagFailed.
func (e *TagError) Is(target error) bool { return target == ErrTagFailed }

// ErrorClass is the kind of failure a call ended with, as counted per tenant
// and class in Stat.
type ErrorClass string

// Error classes.
const (
	// ErrorLimitedQueueFull: the limiter rejected the call, its tenant's
	// queue was full.
	ErrorLimitedQueueFull ErrorClass = "limited_queue_full"
	// ErrorLimitedWaitExceeded: the limiter rejected the call after its
	// maximum wait.
	ErrorLimitedWaitExceeded ErrorClass = "limited_wait_exceeded"
	// ErrorLimited: a limiter rejection with another or no reason (a
	// user-supplied limiter returning limiter.ErrLimited).
	ErrorLimited ErrorClass = "limited"
	// ErrorAcquireTimeout: no pool connection within the acquire timeout.
	ErrorAcquireTimeout ErrorClass = "acquire_timeout"
	// ErrorStatementTimeout: the server cancelled the statement at its
	// statement_timeout (SQLSTATE 57014).
	ErrorStatementTimeout ErrorClass = "statement_timeout"
	// ErrorReplicaConflict: a standby cancelled the query because of a
	// conflict with recovery (SQLSTATE 40001, or 40P01, on a standby).
	ErrorReplicaConflict ErrorClass = "replica_conflict"
	// ErrorConnect: a new connection could not be opened (refused, auth,
	// too many connections, role CONNECTION LIMIT reached).
	ErrorConnect ErrorClass = "connect_failed"
	// ErrorConnectionLost: an open connection broke: the server terminated
	// the backend (pg_terminate_backend, shutdown, or the role's
	// idle_in_transaction_session_timeout, SQLSTATE 25P03), or the network
	// failed.
	ErrorConnectionLost ErrorClass = "connection_lost"
	// ErrorCancelled: the caller's context was cancelled or its deadline
	// passed, or the statement was cancelled at the client's request.
	ErrorCancelled ErrorClass = "cancelled"
	// ErrorOther: anything else (SQL errors, tagging failures, ...).
	ErrorOther ErrorClass = "other"
)

// numErrorClasses is len(errorClasses).
const numErrorClasses = 10

// errorClasses lists every class, in the order Stat reports them.
var errorClasses = [numErrorClasses]ErrorClass{
	ErrorLimitedQueueFull, ErrorLimitedWaitExceeded, ErrorLimited, ErrorAcquireTimeout,
	ErrorStatementTimeout, ErrorReplicaConflict, ErrorConnect, ErrorConnectionLost,
	ErrorCancelled, ErrorOther,
}

// SQLSTATE codes Classify looks at (PostgreSQL manual, appendix A).
const (
	sqlstateQueryCanceled        = "57014" // statement timeout or cancel request
	sqlstateSerializationFailure = "40001" // also: conflict with recovery on a standby
	sqlstateDeadlockDetected     = "40P01" // also: buffer-pin deadlock on a standby
	sqlstateAdminShutdown        = "57P01" // pg_terminate_backend, fast shutdown
	sqlstateIdleInTxTimeout      = "25P03" // idle_in_transaction_session_timeout (FATAL)
	sqlstateIdleSessionTimeout   = "57P05" // idle_session_timeout (FATAL)
	sqlstateCrashShutdown        = "57P02"
	sqlstateCannotConnectNow     = "57P03"
	sqlstateTooManyConnections   = "53300" // max_connections or role CONNECTION LIMIT
	sqlstateInvalidPassword      = "28P01"
	sqlstateInvalidAuthorization = "28000"
)

// Classify returns the class of err; nil gives "". It knows limiter
// rejections (errors.Is limiter.ErrLimited), *AcquireTimeoutError, context
// errors and *pgconn.PgError by SQLSTATE.
//
// Without knowing the caller's context or the server, two codes are read
// from the message as well: 57014 is a statement timeout unless the message
// says the cancel was a user request, and 40001 is a replica conflict only
// when the message says "conflict with recovery". The Stack does better: it
// counts any failure after its caller's context ended as ErrorCancelled and
// any 40001/40P01 from a standby pool as ErrorReplicaConflict, whatever the
// server's message language.
func Classify(err error) ErrorClass {
	return classify(err, false)
}

func classify(err error, standby bool) ErrorClass {
	if err == nil {
		return ""
	}
	if errors.Is(err, limiter.ErrLimited) {
		var le *limiter.LimitError
		if errors.As(err, &le) {
			switch le.Reason {
			case limiter.ReasonQueueFull:
				return ErrorLimitedQueueFull
			case limiter.ReasonWaitExceeded:
				return ErrorLimitedWaitExceeded
			}
		}
		return ErrorLimited
	}
	if errors.Is(err, ErrAcquireTimeout) {
		return ErrorAcquireTimeout
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateQueryCanceled:
			if strings.Contains(pgErr.Message, "user request") {
				return ErrorCancelled
			}
			return ErrorStatementTimeout
		case sqlstateSerializationFailure, sqlstateDeadlockDetected:
			if standby || strings.Contains(pgErr.Message, "conflict with recovery") {
				return ErrorReplicaConflict
			}
			return ErrorOther
		case sqlstateAdminShutdown, sqlstateCrashShutdown, sqlstateIdleInTxTimeout, sqlstateIdleSessionTimeout:
			return ErrorConnectionLost
		case sqlstateCannotConnectNow, sqlstateTooManyConnections, sqlstateInvalidPassword, sqlstateInvalidAuthorization:
			return ErrorConnect
		}
		if strings.HasPrefix(pgErr.Code, "08") { // connection exception
			return ErrorConnectionLost
		}
		return ErrorOther
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ErrorCancelled
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return ErrorConnect
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "conn closed") {
		return ErrorConnectionLost
	}
	return ErrorOther
}
