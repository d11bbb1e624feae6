package pools

import (
	"context"
	"testing"
	"time"
)

// TestWarm opens every pool to its size before any call, untagged and
// idle; under a role's connection limit it opens what the limit allows,
// says why it stopped, and the Stack still serves calls.
func TestWarm(t *testing.T) {
	db := startDB(t, "")
	role := testRole("warm_small", 5*time.Second)
	role.ConnectionLimit = 2
	dsns, _ := db.roles(t, testRole("warm_app", 5*time.Second), role)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s := newStack(t, onePool(dsns["warm_app"], 6))
	before := backends(t, db.admin, "warm_app")
	opened, err := s.Warm(ctx)
	if err != nil || opened[string(Interactive)] != 6 {
		t.Fatalf("Warm() = %v, %v; want the interactive pool at 6", opened, err)
	}
	if n := backends(t, db.admin, "warm_app"); n != 6 || before > 1 {
		t.Errorf("%d backends of warm_app after Warm (%d before), want 6", n, before)
	}
	if tagged := scalar[int64](t, db.admin, `SELECT count(*) FROM pg_stat_activity WHERE usename = 'warm_app' AND (state <> 'idle' OR application_name LIKE 't:%')`); tagged != 0 {
		t.Errorf("%d warm connections active or tagged, want all idle and untagged", tagged)
	}
	st := s.Stat().Pools[0]
	if st.TotalConns != 6 || st.IdleConns != 6 || st.Borrowed != 0 {
		t.Errorf("pool after Warm: %+v, want 6 connections, all idle, none borrowed", st)
	}
	// A second Warm opens nothing more.
	if again, err := s.Warm(ctx); err != nil || again[string(Interactive)] != 6 || s.Stat().Pools[0].NewConns != st.NewConns {
		t.Errorf("second Warm() = %v, %v (new conns %d → %d), want nothing opened", again, err, st.NewConns, s.Stat().Pools[0].NewConns)
	}

	small := newStack(t, onePool(dsns["warm_small"], 4))
	opened, err = small.Warm(ctx)
	if err == nil || opened[string(Interactive)] != 2 {
		t.Errorf("Warm() under connection_limit 2 = %v, %v; want 2 opened and the limit's error", opened, err)
	}
	if _, err := small.Query(ctx, Interactive, "acme", "SELECT 1"); err != nil {
		t.Errorf("Query after a partial Warm: %v", err)
	}
}
