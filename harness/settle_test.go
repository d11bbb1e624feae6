package harness

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

// TestSettleWaitsForLeftovers starts a statement of the run's own role
// that runs 1.5 s, as a report a configuration gave up on would, and checks
// that settle waits for it to end and says so, while a longer statement of
// another role (another agent's, or the user's own application) does not
// hold it.
func TestSettleWaitsForLeftovers(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	primary := c.Nodes()[0]
	admin, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	sc := &scenario.Scenario{Configurations: []scenario.Configuration{{Name: "naive", Mode: scenario.ModeShared}}}
	own := roleName("", "naive", "shared")
	for _, role := range []string{own, "noisysim_other_agent"} {
		if _, err := admin.Exec(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD 'pw'`); err != nil {
			t.Fatal(err)
		}
	}
	other, err := pgx.Connect(ctx, primary.DSNFor("noisysim_other_agent", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	otherDone := make(chan error, 1)
	go func() { _, err := other.Exec(ctx, `SELECT pg_sleep(20)`); otherDone <- err }()
	defer func() { _ = other.PgConn().CancelRequest(context.Background()); <-otherDone }()
	left, err := pgx.Connect(ctx, primary.DSNFor(own, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer left.Close(context.Background())
	done := make(chan error, 1)
	go func() { _, err := left.Exec(ctx, `SELECT pg_sleep(2)`); done <- err }()
	// Settle starts once both statements are sleeping on the server, not
	// after a fixed pause: a statement not started yet would let settle
	// return at once, and a pause overslept on a loaded machine would
	// leave less of it than the second settle must wait to say so. The
	// statement of the run's role runs 2 s, so that more than 1 s of it is
	// left unless seeing it sleeping takes this a second.
	waitSleeping(ctx, t, admin, own)
	waitSleeping(ctx, t, admin, "noisysim_other_agent")

	r := &runner{sc: sc, cluster: c, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t0 := time.Now()
	if err := r.settle(ctx, "naive"); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(t0); waited < time.Second || waited > 10*time.Second {
		t.Errorf("settle returned after %s: want after the 2 s statement of the run's role ended, not after the 20 s one of another role", waited)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(r.notes) != 1 || !strings.Contains(r.notes[0], "statements naive left running to end") {
		t.Errorf("notes = %q, want one saying how long settle waited", r.notes)
	}
	// Nothing running: no wait, no note.
	t0 = time.Now()
	if err := r.settle(ctx, "naive"); err != nil || time.Since(t0) > time.Second || len(r.notes) != 1 {
		t.Errorf("idle settle: err %v after %s, notes %q", err, time.Since(t0), r.notes)
	}
}

// waitSleeping waits until a session of role is in pg_sleep on admin's
// server: its wait event, not only state active, which a session shows
// from the moment it reads the statement.
func waitSleeping(ctx context.Context, t *testing.T, admin *pgx.Conn, role string) {
	t.Helper()
	for {
		var sleeping bool
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE usename = $1 AND wait_event = 'PgSleep')`, role).Scan(&sleeping)
		if err != nil {
			t.Fatalf("wait for the statement of %s: %v", role, err)
		}
		if sleeping {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
