package record_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/pglog"
	"github.com/noisysim/noisysim/harness/record"
	"github.com/noisysim/noisysim/internal/suitelock"
)

// The tests start PostgreSQL: they take their turn on the machine.
func TestMain(m *testing.M) { suitelock.Main(m, "harness/record") }

// settings are the server's recording settings and what ALTER SYSTEM set.
const settings = `SELECT concat_ws(' | ',
	(SELECT string_agg(name || '=' || setting, ',' ORDER BY name) FROM pg_settings WHERE name IN
		('logging_collector', 'log_destination', 'log_min_duration_statement', 'log_parameter_max_length',
		 'log_filename', 'log_truncate_on_rotation')),
	(SELECT coalesce(string_agg(name || '=' || setting, ',' ORDER BY seqno), 'auto.conf empty') FROM pg_file_settings
		WHERE sourcefile LIKE '%/postgresql.auto.conf'))`

// cancelAfter is a context canceled at the n-th call of its Done: every
// statement pgx sends watches Done, so n walks a cancellation (a first
// SIGINT) through every step of Start.
type cancelAfter struct {
	context.Context
	n    atomic.Int64
	once sync.Once
	done chan struct{}
}

func newCancelAfter(n int64) *cancelAfter {
	c := &cancelAfter{Context: context.Background(), done: make(chan struct{})}
	c.n.Store(n)
	return c
}

func (c *cancelAfter) Done() <-chan struct{} {
	if c.n.Add(-1) <= 0 {
		c.once.Do(func() { close(c.done) })
	}
	return c.done
}

func (c *cancelAfter) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

func (c *cancelAfter) fired() bool { return c.Err() != nil }

// TestStartCanceledAtEveryStep cancels Start's context at each of its
// steps in turn: Start either fails having changed nothing or finishes,
// and after Stop on the same connection the server's settings are as they
// were, every time.
func TestStartCanceledAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: starts PostgreSQL in -short mode")
	}
	c := localtest.Start(t, backend.Spec{Settings: map[string]string{"logging_collector": "on"}})
	primary, _ := backend.First(c, backend.RolePrimary)
	ctx := t.Context()
	connect := func() *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, primary.DSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	admin := connect()
	state := func() string {
		t.Helper()
		var s string
		if err := admin.QueryRow(ctx, settings).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := state()
	var node local.StartedNode
	finished, canceledAfterChange := false, 0
	for n := int64(1); n <= 400 && !finished; n++ {
		conn := connect()
		if node.DataDir == "" {
			var err error
			if node, err = record.Started(ctx, conn); err != nil {
				t.Fatal(err)
			}
		}
		cctx := newCancelAfter(n)
		rec := record.New(conn, pglog.JSON, node.DataDir)
		err := rec.Start(cctx)
		if err == nil && cctx.fired() {
			canceledAfterChange++
		}
		finished = err == nil && !cctx.fired()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("cancel at Done call %d: Start: %v (want nil or a cancellation)", n, err)
		}
		// As record does: a Start that failed put back what it set itself.
		if err == nil {
			if serr := rec.Stop(context.Background()); serr != nil {
				t.Errorf("cancel at Done call %d: Stop: %v", n, serr)
			}
		}
		conn.Close(ctx)
		if after := state(); after != before {
			t.Fatalf("cancel at Done call %d (Start: %v): settings after Stop:\n  %s\nwant as before:\n  %s", n, err, after, before)
		}
	}
	if !finished {
		t.Fatal("Start never ran to its end without its context firing in 400 tries")
	}
	if canceledAfterChange == 0 {
		t.Error("no cancellation landed after the first change: the test walked no step that puts settings back")
	}
	t.Logf("%d cancellations landed after the first change; each put back", canceledAfterChange)
}
