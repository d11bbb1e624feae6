package directory

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Errors callers branch on; test with errors.Is.
var (
	// ErrUnknownNode is returned for a node name the catalog does not list.
	ErrUnknownNode = errors.New("unknown node")
	// ErrMoveInProgress is returned when another mover holds the tenant's
	// move lock on the control node.
	ErrMoveInProgress = errors.New("move already in progress")
	// ErrValidation is returned when the copy at the target does not match
	// the source (row count or checksum of a table); see *ValidationError.
	ErrValidation = errors.New("copy does not match source")
	// ErrPauseExceeded is returned when the write pause would exceed
	// MoveConfig.MaxPause; the move is rolled back to catch-up and can be
	// run again.
	ErrPauseExceeded = errors.New("write pause exceeded its bound")
	// ErrFenced is matched by the error of a write that reached a node that
	// no longer (or not yet) holds the tenant: the write was refused, not
	// applied. Retrying through a refreshed Router succeeds.
	ErrFenced = errors.New("tenant fenced on this node")
	// ErrInvalidConfig is returned (wrapped) for a configuration that cannot
	// work.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrTargetNotEmpty is returned when a move's target already holds rows
	// of the tenant that no earlier attempt of the move copied there; see
	// *TargetNotEmptyError.
	ErrTargetNotEmpty = errors.New("target already holds rows of the tenant")
	// ErrInvalidTenant is returned for a tenant id that is not the text
	// form of a value of the tenant column; see *TenantError.
	ErrInvalidTenant = errors.New("invalid tenant id")
)

// TenantError says why a tenant id cannot name a tenant of a table. It
// unwraps to ErrInvalidTenant and the database's error, if any.
type TenantError struct {
	Tenant string
	// Table and Column name the tenant column, Type its type.
	Table, Column, Type string
	// Canonical is the column's text form of Tenant when it has one that
	// differs (" 7" or "007" for a bigint is "7").
	Canonical string
	// Err is the database's error converting Tenant, or nil.
	Err error
}

func (e *TenantError) Error() string {
	s := fmt.Sprintf("tenant id %q is not a value of %s.%s (%s)", e.Tenant, e.Table, e.Column, e.Type)
	switch {
	case e.Err != nil:
		s += ": " + e.Err.Error()
	case e.Canonical != "":
		s += fmt.Sprintf(": its text form is %q", e.Canonical)
	case e.Tenant == "":
		s += ": empty"
	}
	return s
}

// Unwrap returns ErrInvalidTenant and the database's error.
func (e *TenantError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidTenant}
	}
	return []error{ErrInvalidTenant, e.Err}
}

// FencedSQLState is the SQLSTATE the capture trigger raises for a write
// to a fenced tenant ("tenant moved"). IsFenced recognises it.
const FencedSQLState = "NSMOV"

// TableDiff is one table's figures at the source and the target.
type TableDiff struct {
	Table                  string
	SourceRows, TargetRows int64
	// SourceSum and TargetSum are the order-independent checksums (the sum
	// of the first 64 bits of md5 of each row's text, as a decimal).
	SourceSum, TargetSum string
}

// ValidationError lists the tables whose copy differs. It unwraps to
// ErrValidation.
type ValidationError struct {
	Tenant string
	Diffs  []TableDiff
}

func (e *ValidationError) Error() string {
	d := e.Diffs[0]
	return fmt.Sprintf("validate tenant %s: table %s: %d rows (sum %s) at the source, %d rows (sum %s) at the target (%d tables differ)",
		e.Tenant, d.Table, d.SourceRows, d.SourceSum, d.TargetRows, d.TargetSum, len(e.Diffs))
}

// Unwrap returns ErrValidation.
func (e *ValidationError) Unwrap() error { return ErrValidation }

// StepError says at which step a move failed. It unwraps to the cause.
type StepError struct {
	Tenant string
	Step   Step
	Err    error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("move tenant %s: step %s: %v", e.Tenant, e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// TargetNotEmptyError is a move refused because its target already holds
// rows of the tenant that no earlier attempt of the move copied there (a
// fresh move would delete them). It unwraps to ErrTargetNotEmpty.
type TargetNotEmptyError struct {
	Tenant, Target string
	// Rows counts the tenant's rows at the target by table; tables without
	// any are left out.
	Rows map[string]int64
}

func (e *TargetNotEmptyError) Error() string {
	var parts []string
	var n int64
	for _, t := range slices.Sorted(maps.Keys(e.Rows)) {
		parts = append(parts, fmt.Sprintf("%s %d", t, e.Rows[t]))
		n += e.Rows[t]
	}
	return fmt.Sprintf("target %s already holds %d rows of tenant %s (%s) that no earlier attempt of this move copied there: refusing to delete them",
		e.Target, n, e.Tenant, strings.Join(parts, ", "))
}

// Unwrap returns ErrTargetNotEmpty.
func (e *TargetNotEmptyError) Unwrap() error { return ErrTargetNotEmpty }
