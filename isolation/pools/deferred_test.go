package pools

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

// Query returns once its statement's replies are read; the reset it sent
// after them is read afterwards. These tests check that nothing of a
// borrower reaches the next one all the same, that a failed reset gives the
// connection up, and that Close and WaitClosed wait for the replies.

// leftover is a statement that fails (division by zero) when the session
// still holds the setting or the advisory lock the previous borrower's
// statement left, or runs under a tag other than t:<$1>.
const leftover = `SELECT 1 / (current_setting('work_mem') <> '77MB'
	AND NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
	AND current_setting('application_name') = 't:' || $1::text)::int`

// leave sets work_mem for the session and takes an advisory lock.
const leave = "SELECT set_config('work_mem', '77MB', false), pg_advisory_lock(7)"

// The next borrower of the same connection, calling at once, never finds
// the previous borrower's setting or lock: its statement waits behind the
// reset on the same connection (pool of 1), or runs on another connection
// while the reset's replies are read (pool of 2).
func TestDeferredResetNextBorrowerAtOnce(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	for _, size := range []int32{1, 2} {
		t.Run(fmt.Sprint("pool of ", size), func(t *testing.T) {
			s := newStack(t, onePool(dsns["app"], size))
			for i := range 300 {
				if _, err := s.Query(t.Context(), Interactive, "A", leave); err != nil {
					t.Fatalf("call %d: A: %v", i, err)
				}
				if _, err := s.Query(t.Context(), Interactive, "B", leftover, "B"); err != nil {
					t.Fatalf("call %d: B found A's state or the wrong tag: %v", i, err)
				}
			}
			waitClosed(t, s)
			st := s.Stat().Pools[0]
			if st.Destroyed != 0 || st.TotalConns > size || st.TotalConns < 1 || st.Resetting != 0 || st.Borrowed != 0 {
				t.Errorf("pool stat %+v: want ≤ %d connections, none destroyed, none resetting", st, size)
			}
		})
	}
}

// A reset that fails in the part read after the call returns gives the
// connection up: the call itself succeeded (its statement committed), and
// the next call gets a new connection without the setting, the lock or
// anything else the failed reset left (its commands were rolled back with
// the failure).
func TestDeferredResetFailureDestroysConnection(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 1))
	ctx := t.Context()
	// The first call of a statement prepares it and is reset as WithConn
	// is: warm both statements up, so that the calls below are batched.
	for range 2 {
		if _, err := s.Query(ctx, Interactive, "A", leave); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Query(ctx, Interactive, "B", leftover, "B"); err != nil {
			t.Fatal(err)
		}
	}
	// The first call with the failing command prepares it and is reset
	// as WithConn is; the second sends it after its statement.
	s.queryReset = append(slices.Clone(queryReset), "SELECT 1/0")
	for i := range 2 {
		if _, err := s.Query(ctx, Interactive, "A", leave); err != nil {
			t.Fatalf("call %d: the statement committed before the reset failed, want no error: %v", i+1, err)
		}
	}
	s.queryReset = queryReset
	before := s.Stat().Pools[0]
	if _, err := s.Query(ctx, Interactive, "B", leftover, "B"); err != nil {
		t.Fatalf("next call after a failed reset: %v", err)
	}
	waitClosed(t, s)
	st := s.Stat().Pools[0]
	if st.Destroyed != 1 || st.NewConns != before.NewConns+1 || st.TotalConns != 1 {
		t.Errorf("pool stat %+v (before the next call %+v): want the connection whose reset failed destroyed and one new", st, before)
	}
	if n := backends(t, db.admin, "app"); n != 1 {
		t.Errorf("%d backends of the role, want 1", n)
	}
}

// Close and WaitClosed wait for a reset whose replies are still to come:
// the call returns before its reset has run (the reset sleeps), and its
// DB time in the ledger does not include the reset.
func TestDeferredResetCloseWaits(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	const sleep = 300 * time.Millisecond
	for _, wait := range []string{"WaitClosed", "Close"} {
		t.Run(wait, func(t *testing.T) {
			s := newStack(t, onePool(dsns["app"], 2))
			if _, err := s.Query(t.Context(), Interactive, "A", "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			s.queryReset = append(slices.Clone(queryReset), fmt.Sprintf("SELECT pg_sleep(%g)", sleep.Seconds()))
			// The first call with the new command prepares it, reset
			// synchronously; the second sends it after its statement.
			for range 2 {
				if _, err := s.Query(t.Context(), Interactive, "A", "SELECT 1"); err != nil {
					t.Fatal(err)
				}
			}
			waitClosed(t, s)
			start := time.Now()
			res, err := s.Query(t.Context(), Interactive, "A", "SELECT 1")
			returned := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if st := s.Stat().Pools[0]; st.Resetting != 1 || st.AcquiredConns != 1 {
				t.Errorf("right after the call: pool stat %+v, want one connection resetting and acquired", st)
			}
			if returned >= sleep || res.DBTime >= sleep {
				t.Errorf("call returned after %s with DB time %s: want both < %s (the reset is not waited for)", returned, res.DBTime, sleep)
			}
			if wait == "Close" {
				s.Close()
			} else {
				waitClosed(t, s)
			}
			if took := time.Since(start); took < sleep {
				t.Errorf("%s returned %s after the call, before the reset's %s", wait, took, sleep)
			}
			if st := s.Stat().Pools[0]; st.Resetting != 0 || st.Destroyed != 0 || st.AcquiredConns != 0 {
				t.Errorf("after %s: pool stat %+v, want nothing resetting or acquired, nothing destroyed", wait, st)
			}
			if wait == "Close" && !eventually(2*time.Second, func() bool { return backends(t, db.admin, "app") == 0 }) {
				t.Errorf("%d backends left after Close", backends(t, db.admin, "app"))
			}
		})
	}
}

// L5 through Query: a sequential caller sees its own tag on every call and
// the pool holds at most 2 connections (one whose reset is being read, one
// for the next call), however soon the next call comes.
func TestL5SequentialQueriesUseAtMostTwo(t *testing.T) {
	db := startDB(t, backend.TopologySingle)
	dsns, _ := db.roles(t, testRole("app", 0))
	s := newStack(t, onePool(dsns["app"], 10))
	const tagged = "SELECT 1 / (current_setting('application_name') = 't:' || $1::text)::int"
	var maxConns int32
	for i := range 1000 {
		tenant := fmt.Sprint(i % 5)
		if _, err := s.Query(t.Context(), Interactive, tenant, tagged, tenant); err != nil {
			t.Fatalf("cycle %d: statement did not run as t:%s: %v", i, tenant, err)
		}
		maxConns = max(maxConns, s.Stat().Pools[0].TotalConns)
	}
	if maxConns > 2 {
		t.Errorf("pool held up to %d connections, want at most 2", maxConns)
	}
	waitClosed(t, s)
	if st := s.Stat().Pools[0]; st.Destroyed != 0 || st.Borrowed != 0 || st.Resetting != 0 {
		t.Errorf("pool stat %+v: want nothing destroyed, borrowed or resetting", st)
	}
}
