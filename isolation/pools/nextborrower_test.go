package pools

import (
	"fmt"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
)

// These tests hold for any way Query resets its connection: in its
// statement's flight (now) or after the call returns (measured slower on
// the 2-core machine, see README: a next borrower calling at once must
// still find nothing of the previous one).

// leftover is a statement that fails (division by zero) when the session
// still holds the setting or the advisory lock the previous borrower's
// statement left, or runs under a tag other than t:<$1>.
const leftover = `SELECT 1 / (current_setting('work_mem') <> '77MB'
	AND NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
	AND current_setting('application_name') = 't:' || $1::text)::int`

// leave sets work_mem for the session and takes an advisory lock.
const leave = "SELECT set_config('work_mem', '77MB', false), pg_advisory_lock(7)"

// The next borrower, calling at once, never finds the previous borrower's
// setting or lock, on the same connection (pool of 1) or either of two, and
// its statement runs under its own tag.
func TestQueryNextBorrowerAtOnce(t *testing.T) {
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
			if st.Destroyed != 0 || st.TotalConns > size || st.TotalConns < 1 || st.Borrowed != 0 {
				t.Errorf("pool stat %+v: want ≤ %d connections, none destroyed or borrowed", st, size)
			}
		})
	}
}

// L5 through Query: a sequential caller sees its own tag on every call and,
// the reset being synchronous, the pool holds exactly 1 connection.
func TestL5SequentialQueriesUseOneConnection(t *testing.T) {
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
	if maxConns != 1 {
		t.Errorf("pool held up to %d connections, want exactly 1 (synchronous reset)", maxConns)
	}
	if st := s.Stat().Pools[0]; st.Destroyed != 0 || st.Borrowed != 0 {
		t.Errorf("pool stat %+v: want nothing destroyed or borrowed", st)
	}
}
