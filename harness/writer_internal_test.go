package harness

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// ackedWriter is a writer that acknowledged inserts of -1 (value "w1") and
// -2 ("w2"), then an update of -1 to "w3"; an update of -2 to "w4" got no
// answer (it may have committed).
func ackedWriter() *checkedWriter {
	w := &checkedWriter{acked: map[int64]string{}, possible: map[int64][]string{}}
	w.record(true, -1, "w1", 1, nil, 0, 0, 0, time.Millisecond)
	w.record(true, -2, "w2", 1, nil, 0, 10*time.Millisecond, 0, time.Millisecond)
	w.record(false, -1, "w3", 1, nil, 0, 20*time.Millisecond, 0, time.Millisecond)
	w.record(false, -2, "w4", 0, errors.New("connection reset"), 0, 30*time.Millisecond, 0, 2*time.Millisecond)
	return w
}

func (v writerVerdict) clean() bool {
	return v.Lost == 0 && v.Duplicated == 0 && v.Stale == 0 && v.Vanished == 0
}

func TestCheckerVerdict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored []storedRow
		want   func(writerVerdict) bool
		wantOK bool
	}{
		{name: "clean", stored: []storedRow{{-1, "w3"}, {-2, "w2"}},
			want: func(c writerVerdict) bool { return c.Lost+c.Duplicated+c.Stale == 0 }, wantOK: true},
		{name: "unanswered update committed", stored: []storedRow{{-1, "w3"}, {-2, "w4"}},
			want: func(c writerVerdict) bool { return c.Stale == 0 }, wantOK: true},
		{name: "lost insert", stored: []storedRow{{-1, "w3"}},
			want: func(c writerVerdict) bool { return c.Lost == 1 }},
		{name: "duplicated row", stored: []storedRow{{-1, "w3"}, {-2, "w2"}, {-2, "w2"}},
			want: func(c writerVerdict) bool { return c.Duplicated == 1 && c.Lost == 0 }},
		{name: "row three times counts once", stored: []storedRow{{-1, "w3"}, {-1, "w3"}, {-1, "w3"}, {-2, "w2"}},
			want: func(c writerVerdict) bool { return c.Duplicated == 1 }},
		{name: "stale value", stored: []storedRow{{-1, "w1"}, {-2, "w2"}},
			want: func(c writerVerdict) bool { return c.Stale == 1 && c.Lost == 0 }},
		{name: "unknown value", stored: []storedRow{{-1, "w3"}, {-2, "x"}},
			want: func(c writerVerdict) bool { return c.Stale == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ackedWriter()
			c := w.verdict(tc.stored)
			if !tc.want(c) {
				t.Errorf("verdict %+v misses the fault", c)
			}
			if c.clean() != tc.wantOK {
				t.Errorf("clean = %v, want %v (verdict %+v)", c.clean(), tc.wantOK, c)
			}
			if c.Inserts != 2 || c.Updates != 1 || c.Errors != 1 {
				t.Errorf("counted %d inserts, %d updates, %d errors; want 2, 1, 1", c.Inserts, c.Updates, c.Errors)
			}
		})
	}
}

// TestCheckerWriterRecord: an update of an acknowledged row that matched no row
// (routed to a node without it) is a vanished update; an update of a row
// never acknowledged that matched none is not. The longest write is kept
// with its intended start.
func TestCheckerWriterRecord(t *testing.T) {
	w := ackedWriter()
	w.record(false, -1, "w5", 0, nil, 0, 40*time.Millisecond, 0, time.Millisecond)
	w.record(false, -9, "w6", 0, nil, 0, 50*time.Millisecond, 0, time.Millisecond)
	w.record(false, -2, "w7", 1, nil, 0, 60*time.Millisecond, 0, 30*time.Millisecond)
	c := w.verdict([]storedRow{{-1, "w3"}, {-2, "w7"}})
	if c.Vanished != 1 {
		t.Errorf("vanished %d, want 1", c.Vanished)
	}
	if c.clean() {
		t.Errorf("a vanished update passes the checker: %+v", c)
	}
	if c.Stale != 0 || c.Lost != 0 {
		t.Errorf("verdict %+v: want no stale or lost rows", c)
	}
	if len(w.possible[-2]) != 0 {
		t.Errorf("an acknowledged update keeps older unanswered values possible: %v", w.possible[-2])
	}
	if c.Longest != 30*time.Millisecond || w.longAt != 60*time.Millisecond {
		t.Errorf("longest write %s at %s, want 30ms at 60ms", c.Longest, w.longAt)
	}
	// The value of the unanswered write acknowledged since is stale now.
	if c := w.verdict([]storedRow{{-1, "w3"}, {-2, "w4"}}); c.Stale != 1 {
		t.Errorf("an unanswered value older than the last acknowledged one passes: %+v", c)
	}
}

// TestPromoteCheck: the promote policy fires move_tenant once the
// tenant's share stayed above the threshold for the window, never for a
// shorter burst or a share at or below it, and is then done.
func TestPromoteCheck(t *testing.T) {
	const every = 250 * time.Millisecond
	for _, tc := range []struct {
		name   string
		shares []float64 // the tenant's share at each check
		fireAt int       // the check (from 1) that fires; 0 for none
	}{
		{"sustained share", []float64{0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6}, 8},
		{"below the threshold", []float64{0.2, 0.25, 0.1, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2}, 0},
		{"bursts shorter than the window", []float64{0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.1, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.2}, 0},
		{"burst then sustained", []float64{0.6, 0.6, 0.1, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6}, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &scenario.Promote{Tenant: 1, Target: "primary4", Threshold: 0.25, Window: scenario.Duration(2 * time.Second),
				BatchRows: 10, MaxPause: scenario.Duration(time.Second)}
			p := &promote{cfg: cfg}
			env := ActionEnv{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			fired := 0
			for i, sh := range tc.shares {
				s := Sample{Phase: "move", Check: i + 1, Interval: every, Elapsed: time.Duration(i+1) * every,
					Last: map[string]*pools.Window{"1": {Share: sh}, "2": {Share: 1 - sh}}}
				fire, done, err := p.Check(t.Context(), env, s)
				if err != nil {
					t.Fatal(err)
				}
				if len(fire) > 0 {
					fired = i + 1
					m, ok := fire[0].Config.(*scenario.MoveTenant)
					if len(fire) != 1 || fire[0].Type != scenario.ActionMoveTenant || !ok || m.Tenant != 1 || m.Target != "primary4" || m.BatchRows != 10 {
						t.Errorf("fired %+v, want one move_tenant of tenant 1 to primary4 with the policy's settings", fire)
					}
					if !done {
						t.Error("not done after it fired")
					}
					break
				}
				if done {
					t.Fatalf("done at check %d without firing", i+1)
				}
			}
			if fired != tc.fireAt {
				t.Errorf("fired at check %d, want %d", fired, tc.fireAt)
			}
		})
	}
	t.Run("detect_within", func(t *testing.T) {
		cfg := &scenario.Promote{Tenant: 1, Target: "primary4", Threshold: 0.25, Window: scenario.Duration(time.Second),
			DetectWithin: scenario.Duration(time.Second)}
		p := &promote{cfg: cfg}
		env := ActionEnv{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		for i := 1; i <= 4; i++ {
			s := Sample{Check: i, Interval: every, Elapsed: time.Duration(i) * every, Last: map[string]*pools.Window{"1": {Share: 0.1}}}
			fire, done, err := p.Check(t.Context(), env, s)
			if len(fire) > 0 || done {
				t.Fatalf("check %d fired %v done %v at a share below the threshold", i, fire, done)
			}
			if (err != nil) != (i == 4) {
				t.Errorf("check %d (%s): err %v; want an error from 1 s on only", i, s.Elapsed, err)
			}
		}
	})
}

// TestWriterLockRetry: a write that waits for a lock longer than the
// writer's lock_timeout is run again until answered, counted as a lock
// retry and not an error, its time covering the whole wait.
func TestWriterLockRetry(t *testing.T) {
	ctx := t.Context()
	admin, st := writerDB(t)
	w := &checkedWriter{cfg: scenario.Writer{Tenant: 1}, tenant: "1", stack: st, acked: map[int64]string{}, possible: map[int64][]string{}}

	// The lock is held until the write has timed out waiting for it
	// timeouts times, not for a fixed time: how many lock_timeouts fit in
	// a fixed hold depends on how fast each round trip is, which a loaded
	// machine decides.
	const timeouts = 4
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE orders IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	wrote := make(chan struct{})
	released := make(chan time.Duration, 1) // when the commit was sent, from t0
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-wrote:
				break wait // answered without its timeouts: failed below
			case <-tick.C:
				w.mu.Lock()
				n := w.v.LockRetries
				w.mu.Unlock()
				if n >= timeouts {
					break wait
				}
			}
		}
		at := time.Since(t0)
		tx.Commit(context.Background())
		released <- at
	}()
	rows, retries, err := w.write(ctx, true, -1, "w0")
	took := time.Since(t0)
	close(wrote)
	release := <-released
	if err != nil || rows != 1 {
		t.Fatalf("write: %d rows, %v; want 1 row, no error", rows, err)
	}
	if took < release {
		t.Errorf("write answered after %v, before the lock was released (%v)", took, release)
	}
	// Each timeout counted once: a retry more only if the commit took
	// longer than the retry's own lock_timeout to come through.
	if w.v.LockRetries < timeouts || w.v.LockRetries > timeouts+1 {
		t.Errorf("%d lock retries, want %d (the lock was released after as many timeouts)", w.v.LockRetries, timeouts)
	}
	// Each retry waited its lock_timeout and the delay after it.
	if floor := time.Duration(w.v.LockRetries) * (writerLockTimeout + writerRetryDelay); took < floor {
		t.Errorf("write answered after %v with %d lock retries, less than their %v of waits", took, w.v.LockRetries, floor)
	}
	if w.v.Errors != 0 {
		t.Errorf("%d errors counted for lock waits", w.v.Errors)
	}
	if retries != w.v.LockRetries {
		t.Errorf("the write says it was run again %d times, the writer counted %d", retries, w.v.LockRetries)
	}
	// Its answer, recorded: the longest write, its time covering the
	// waits once, its retries its own.
	w.record(true, -1, "w0", rows, nil, retries, 0, 0, took)
	w.record(true, -2, "w1", 1, nil, 0, 10*time.Millisecond, 0, time.Millisecond)
	if w.v.Longest != took || w.v.LongestRetries != retries || w.v.LockRetries != retries {
		t.Errorf("longest %v with %d retries, %d retries in all; want %v with %d, %d", w.v.Longest, w.v.LongestRetries, w.v.LockRetries, took, retries, retries)
	}
}

// TestWriterNextSkipsRowsInFlight: an update is drawn only for a row with
// no write in flight; one drawn for a row in flight is an insert of a new
// row instead, and every drawn row is marked in flight until its answer
// is recorded.
func TestWriterNextSkipsRowsInFlight(t *testing.T) {
	w := &checkedWriter{cfg: scenario.Writer{UpdateShare: 0.9}, rng: rand.New(rand.NewPCG(1, 11)),
		acked: map[int64]string{}, possible: map[int64][]string{}, inFlight: map[int64]bool{}}
	var ins, upd int
	for i := range 400 {
		held := maps.Clone(w.inFlight)
		insert, id := w.next()
		if insert {
			ins++
			if held[id] || id != w.last {
				t.Fatalf("write %d: insert of row %d, in flight before or not a new row (last %d)", i, id, w.last)
			}
		} else {
			upd++
			if held[id] {
				t.Fatalf("write %d: update of row %d, which had a write in flight", i, id)
			}
		}
		if !w.inFlight[id] {
			t.Fatalf("write %d: row %d not marked in flight", i, id)
		}
		if i%3 != 0 { // a third of the writes stay in flight
			w.record(insert, id, "v", 1, nil, 0, 0, 0, time.Millisecond)
		}
	}
	if ins == 0 || upd == 0 {
		t.Fatalf("%d inserts, %d updates; want both", ins, upd)
	}
	if len(w.inFlight) != 134 {
		t.Errorf("%d rows in flight, want the 134 never answered", len(w.inFlight))
	}
}

// TestWriterOpenLoop: while a lock holds the tenant's writes, the writer
// goes on sending writes on schedule (open loop): the longest write is the
// one that waited for the lock, timed from its intended start, and it was
// not sent late; every write is answered and checked once the lock goes.
func TestWriterOpenLoop(t *testing.T) {
	ctx := t.Context()
	admin, st := writerDB(t)
	w := &checkedWriter{cfg: scenario.Writer{Tenant: 1, Rate: 100, UpdateShare: 0.3}, tenant: "1", stack: st,
		rng: rand.New(rand.NewPCG(1, 11)), acked: map[int64]string{}, possible: map[int64][]string{}, inFlight: map[int64]bool{}}

	// The lock from 300 ms to 1.5 s of the writer's timeline.
	const hold = 1200 * time.Millisecond
	w.start(ctx, time.Now())
	time.Sleep(300 * time.Millisecond)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE orders IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hold)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	w.finish()

	var stored []storedRow
	rows, err := admin.Query(ctx, `SELECT id, note FROM orders WHERE tenant_id = 1`)
	if err == nil {
		stored, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (storedRow, error) {
			var s storedRow
			return s, row.Scan(&s.id, &s.note)
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	v := w.verdict(stored)
	if !v.clean() || v.Errors != 0 || v.Inserts+v.Updates < 100 {
		t.Fatalf("verdict %+v; want over 100 writes acknowledged, none lost, stale or failed", v)
	}
	// A closed loop would send the writes after the first held one only
	// once it is answered: late by about the whole hold.
	if v.Longest < hold/2 || v.LongestLate > hold/2 {
		t.Errorf("longest write %v, sent %v late; want one that waited the lock (%v), sent on time", v.Longest, v.LongestLate, hold)
	}
}

// TestWriterLongestLate: the longest write keeps the part of its time
// before it was sent (waiting for the write before it), and its own lock
// retries; a later, shorter write does not replace them.
func TestWriterLongestLate(t *testing.T) {
	w := &checkedWriter{acked: map[int64]string{}, possible: map[int64][]string{}}
	w.record(true, -1, "w1", 1, nil, 3, 0, 0, 900*time.Millisecond)
	w.record(true, -2, "w2", 1, nil, 0, 10*time.Millisecond, 880*time.Millisecond, 1100*time.Millisecond)
	w.record(true, -3, "w3", 1, nil, 0, 20*time.Millisecond, 870*time.Millisecond, 875*time.Millisecond)
	if w.v.Longest != 1100*time.Millisecond || w.v.LongestLate != 880*time.Millisecond || w.v.LongestRetries != 0 || w.longAt != 10*time.Millisecond {
		t.Errorf("longest %v (late %v, %d retries) at %v; want 1.1s (late 880ms, 0 retries) at 10ms", w.v.Longest, w.v.LongestLate, w.v.LongestRetries, w.longAt)
	}
}

// TestWritePauseDetail: the write_pause assertion says whether its write
// was sent on time or late behind the writes in flight.
func TestWritePauseDetail(t *testing.T) {
	r := &runner{sc: &scenario.Scenario{}}
	r.sc.Assertions.WritePause.Max = scenario.Duration(time.Second)
	for _, tc := range []struct {
		name string
		late float64
		want string
	}{
		{"on time", 0.4, "sent on time"},
		{"late", 4610, "sent 4610 ms late: waiting for one of the 256 writes in flight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := r.writerAssertions("c", &reports.WriterCheck{Tenant: "1", LongestWrite: 1100, LongestWriteLate: tc.late}, nil)
			if len(as) != 1 || as[0].Passed || !strings.Contains(as[0].Detail, tc.want) {
				t.Fatalf("assertions %+v; want one failed write_pause saying %q", as, tc.want)
			}
		})
	}
}

// writerDB starts PostgreSQL with the orders table and returns an admin
// connection and a stack of one interactive pool for a writer, both closed
// when t ends.
func writerDB(t *testing.T) (*pgx.Conn, *pools.Stack) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: starts PostgreSQL (-short)")
	}
	c := localtest.Start(t, backend.Spec{})
	n, _ := backend.First(c, backend.RolePrimary)
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, `CREATE TABLE orders (tenant_id bigint, id bigint, created_at timestamptz, amount numeric,
		status text, customer text, note text, PRIMARY KEY (tenant_id, id))`); err != nil {
		t.Fatal(err)
	}
	st, err := pools.New(ctx, pools.Config{Classes: map[pools.Class]pools.ClassConfig{pools.Interactive: {Pool: "writer"}},
		Pools: []pools.PoolConfig{{Name: "writer", DSN: writerNode(n).DSN(), Size: writerPoolSize}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return admin, st
}

// TestWritePauseFrom: write_pause.from judges the longest write intended
// from its phase's start on, and says what the whole timeline's was.
func TestWritePauseFrom(t *testing.T) {
	w := &checkedWriter{acked: map[int64]string{}, possible: map[int64][]string{}, inFlight: map[int64]bool{}}
	// A 4 s write in before (harm, not the remedy), 600 ms in ladder.
	w.record(true, -1, "a", 1, nil, 0, 2*time.Second, 0, 4*time.Second)
	w.record(true, -2, "b", 1, nil, 1, 12*time.Second+30*time.Millisecond, 0, 600*time.Millisecond)
	w.record(true, -3, "c", 1, nil, 0, 13*time.Second, 0, 20*time.Millisecond)
	tr := &timelineRun{windows: []*window{
		{step: &step{Phase: scenario.Phase{Name: "before"}}, start: 0, end: 12 * time.Second},
		{step: &step{Phase: scenario.Phase{Name: "ladder"}}, start: 12 * time.Second, end: 20 * time.Second},
	}}
	wc := w.report(w.v, tr)
	if wc.LongestWrite != 4000 || wc.LongestWriteWindow != "before" {
		t.Fatalf("report: longest %v ms in %s, want 4000 in before", wc.LongestWrite, wc.LongestWriteWindow)
	}
	judged := w.from(wc, 12*time.Second, tr)
	if judged.LongestWrite != 600 || judged.LongestWriteWindow != "ladder" || judged.LongestWriteLockRetries != 1 {
		t.Fatalf("from ladder: %+v, want 600 ms in ladder with its 1 lock retry", judged)
	}
	r := &runner{sc: &scenario.Scenario{}}
	r.sc.Assertions.WritePause = scenario.WritePause{Max: scenario.Duration(time.Second), From: "ladder"}
	as := r.writerAssertions("c", wc, judged)
	if len(as) != 1 || !as[0].Passed || as[0].Observed != 600 || !strings.Contains(as[0].Detail, "intended from ladder on (the whole timeline's: 4000 ms at 2.00 s in before)") {
		t.Fatalf("write_pause from ladder = %+v, want 600 ms passing, the whole timeline's 4 s named", as)
	}
	if as := r.writerAssertions("c", wc, nil); as[0].Passed || as[0].Observed != 4000 {
		t.Errorf("write_pause without from = %+v, want the 4 s write failing", as)
	}
}
