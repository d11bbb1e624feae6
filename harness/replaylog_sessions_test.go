package harness

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/pglog"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

// sessionsLog describes a generated PostgreSQL log of many sessions, as an
// app that opens a connection per request writes it: Sessions sessions
// opened PerSecond a second of log time, each sending Statements
// statements Spacing apart (0.5 ms each) and, with Disconnections
// (log_disconnections), its disconnection record. A session's backend pid
// is the next one free after the last given, cycling through Pids of them
// as the kernel does through pid_max (0: 1<<22), so with few pids a
// session id ("%x.%x" of the second it started and its pid) recurs within
// a second. Statement n of session i reads "SELECT i AS session, n AS n";
// session i is tenant 1 + i%Tenants ("t:<n>").
type sessionsLog struct {
	Format         pglog.Format
	Sessions       int
	PerSecond      int
	Statements     int
	Spacing        time.Duration
	Tenants        int
	Pids           int
	Disconnections bool
}

// sessionEvent is a generated session's next record: statement n, or its
// disconnection when n == Statements.
type sessionEvent struct {
	at      time.Time
	session int
	n       int
	pid     int
	started time.Time
}

type sessionEvents []sessionEvent

func (h sessionEvents) Len() int { return len(h) }
func (h sessionEvents) Less(i, j int) bool {
	return h[i].at.Before(h[j].at) || h[i].at.Equal(h[j].at) && h[i].session < h[j].session
}
func (h sessionEvents) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sessionEvents) Push(x any)   { *h = append(*h, x.(sessionEvent)) }
func (h *sessionEvents) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sessionsLogStart is a generated log's first session's start.
var sessionsLogStart = time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)

// write writes the log to w in order of record time, holding only the
// sessions open at once; it returns the statement records written.
func (sl sessionsLog) write(w io.Writer) (int, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	cw := csv.NewWriter(bw)
	var events sessionEvents
	pids := sl.Pids
	if pids == 0 {
		pids = 1 << 22
	}
	inUse := map[int]bool{}
	lastPID, opened, statements := pids-1, 0, 0
	open := func() {
		pid := -1
		for k := 1; k <= pids && pid < 0; k++ {
			if p := (lastPID + k) % pids; !inUse[p] {
				pid = p
			}
		}
		if pid < 0 {
			panic("sessionsLog: more sessions open than pids")
		}
		lastPID, inUse[pid] = pid, true
		start := sessionsLogStart.Add(time.Duration(opened) * time.Second / time.Duration(sl.PerSecond))
		heap.Push(&events, sessionEvent{at: start.Add(time.Millisecond), session: opened, pid: pid, started: start})
		opened++
	}
	for opened < sl.Sessions || len(events) > 0 {
		// Open the sessions that start before the next record.
		for opened < sl.Sessions && (len(events) == 0 ||
			!sessionsLogStart.Add(time.Duration(opened)*time.Second/time.Duration(sl.PerSecond)).After(events[0].at)) {
			open()
		}
		ev := heap.Pop(&events).(sessionEvent)
		app := fmt.Sprintf("t:%d", 1+ev.session%sl.Tenants)
		id := fmt.Sprintf("%x.%x", ev.started.Unix(), 1000+ev.pid)
		msg := fmt.Sprintf("duration: 0.500 ms  statement: SELECT %d AS session, %d AS n", ev.session, ev.n)
		if ev.n == sl.Statements {
			msg = fmt.Sprintf("disconnection: session time: 0:00:%06.3f user=app database=app host=[local]", ev.at.Sub(ev.started).Seconds())
		} else {
			statements++
		}
		ts := ev.at.Format("2006-01-02 15:04:05.000 MST")
		if sl.Format == pglog.JSON {
			b, _ := json.Marshal(map[string]any{"timestamp": ts, "user": "app", "dbname": "app", "pid": 1000 + ev.pid, "session_id": id,
				"error_severity": "LOG", "message": msg, "application_name": app, "backend_type": "client backend"})
			bw.Write(append(b, '\n'))
		} else {
			cw.Write([]string{ts, "app", "app", strconv.Itoa(1000 + ev.pid), "[local]", id, strconv.Itoa(ev.n + 1), "SELECT",
				ev.started.Format("2006-01-02 15:04:05 MST"), "3/0", "0", "LOG", "00000", msg, "", "", "", "", "", "", "", "",
				app, "client backend", "", "0"})
		}
		switch {
		case ev.n+1 < sl.Statements:
			ev.n++
			ev.at = ev.at.Add(sl.Spacing)
			heap.Push(&events, ev)
		case ev.n+1 == sl.Statements && sl.Disconnections:
			ev.n++
			ev.at = ev.at.Add(time.Millisecond)
			heap.Push(&events, ev)
		default:
			delete(inUse, ev.pid)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return statements, err
	}
	return statements, bw.Flush()
}

// writeFile writes the log into dir and returns its path and statements.
func (sl sessionsLog) writeFile(tb testing.TB, dir string) (string, int) {
	tb.Helper()
	ext := map[pglog.Format]string{pglog.CSV: "csv", pglog.JSON: "json"}[sl.Format]
	path := filepath.Join(dir, "sessions."+ext)
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	n, err := sl.write(f)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		tb.Fatal(err)
	}
	return path, n
}

// logRunner returns a runner replaying the log at path (tenants "1".."n",
// one class) over an hour, its replay planned.
func logRunner(tb testing.TB, path string, format pglog.Format, tenants int, reorder time.Duration) *runner {
	tb.Helper()
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: tenants}, 1)
	if err != nil {
		tb.Fatal(err)
	}
	sc := &scenario.Scenario{Replay: &scenario.Replay{Log: path, Format: string(format), Speed: 1, Reorder: scenario.Duration(reorder),
		Tenant: scenario.ReplayTenant{ApplicationName: scenario.DefaultTenantApplicationName}, DefaultClass: "q"}}
	r := &runner{sc: sc, pop: pop, log: slog.New(slog.DiscardHandler), classes: map[string]*scenario.Class{"q": {Name: "q"}},
		steps: []step{{Phase: scenario.Phase{Name: "run"}, start: 0, end: time.Hour}}}
	for n := 1; n <= tenants; n++ {
		r.keys = append(r.keys, strconv.Itoa(n))
	}
	if err := r.planReplay(); err != nil {
		tb.Fatal(err)
	}
	return r
}

// loggedStatement returns the session and number a generated statement
// carries.
func loggedStatement(tb testing.TB, op workload.Op) (session, n int) {
	tb.Helper()
	sql := op.Payload.(*recorded).SQL
	if _, err := fmt.Sscanf(sql, "SELECT %d AS session, %d AS n", &session, &n); err != nil {
		tb.Fatalf("statement %q: %v", sql, err)
	}
	return session, n
}

// TestLogSessionsBounded streams logs of 12,000 short sessions (500 a
// second, 24 s of log, 300 pids: a session id recurs within its
// second, 7,200 ids in all) through a replay's reader
// and its session turns, each statement done before the next is read: the
// sessions the reader keeps stay bounded by the sessions open at once
// (with log_disconnections) or active within logSessionIdle (without),
// never by the sessions in the log, and every session's statements come
// out in its order, each one's turn already there.
func TestLogSessionsBounded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		log     sessionsLog
		maxKept int
	}{
		// 500 sessions a second of 3 statements 1 ms apart: about 2 open.
		{"disconnections", sessionsLog{Format: pglog.CSV, Disconnections: true}, 10},
		// 300 ids a second, idle after logSessionIdle of log time: about
		// 3,000 active at once; 7,200 if none is forgotten.
		{"idle", sessionsLog{Format: pglog.CSV}, 4000},
		{"idle-jsonlog", sessionsLog{Format: pglog.JSON}, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := tc.log
			sl.Sessions, sl.PerSecond, sl.Statements, sl.Spacing, sl.Tenants, sl.Pids = 12000, 500, 3, time.Millisecond, 10, 300
			path, statements := sl.writeFile(t, t.TempDir())
			r := logRunner(t, path, sl.Format, sl.Tenants, time.Second)
			if r.replay.total != int64(statements) {
				t.Fatalf("plan: %d statements, the log has %d", r.replay.total, statements)
			}
			rs, err := r.newReplaySource()
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			lr := rs.tr.(*logReader)
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			next := map[int]int{} // session → its next statement
			kept, sent := 0, 0
			for op, ok := rs.Next(); ok; op, ok = rs.Next() {
				sent++
				session, n := loggedStatement(t, op)
				if n != next[session] {
					t.Fatalf("session %d: statement %d sent, want %d", session, n, next[session])
				}
				next[session]++
				turn := op.Payload.(*recorded).turn
				if err := turn.wait(cancelled); err != nil {
					t.Fatalf("session %d statement %d: its turn is not there (%v) though every statement before it is done", session, n, err)
				}
				turn.finish()
				kept = max(kept, len(lr.sessions))
			}
			if err := rs.Close(); err != nil || sent != statements {
				t.Fatalf("replay: %v, %d sent of %d", err, sent, statements)
			}
			if kept > tc.maxKept || kept == 0 {
				t.Errorf("the reader kept up to %d sessions; want 1..%d (the log has %d)", kept, tc.maxKept, sl.Sessions)
			}
			t.Logf("sessions kept: at most %d of %d", kept, sl.Sessions)
		})
	}
}

// TestLogSessionEviction: a session idle for logSessionIdle is forgotten
// once its statements are done (seen again, it waits for nothing); one
// whose statement is not done, or that holds a transaction block, is kept
// (its next statement waits for the one before, the block stays its);
// after its disconnection record a reused session id is a new session.
func TestLogSessionEviction(t *testing.T) {
	rec := func(at, session, msg string) string {
		return fmt.Sprintf(`{"timestamp":"2026-12-01 18:00:%s UTC","error_severity":"LOG","application_name":"t:1","session_id":%q,"message":%q}`,
			at, session, msg)
	}
	stmt := func(sql string) string { return "duration: 1.000 ms  statement: " + sql }
	log := strings.Join([]string{
		rec("00.001", "a", stmt("SELECT 'a1'")),
		rec("00.002", "b", stmt("SELECT 'b1'")),
		rec("00.003", "e", stmt("BEGIN")),
		rec("20.001", "c", stmt("SELECT 'c1'")), // a, b and e are idle
		rec("20.002", "a", stmt("SELECT 'a2'")),
		rec("20.003", "b", stmt("SELECT 'b2'")),
		rec("20.004", "e", stmt("SELECT 'e2'")),
		rec("20.005", "d", stmt("SELECT 'd1'")),
		rec("20.006", "d", "disconnection: session time: 0:00:00.010 user=app database=app host=[local]"),
		rec("20.007", "d", stmt("SELECT 'd2'")), // the pid reused within the second
		rec("40.000", "c", stmt("SELECT 'c2'")), // all idle
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "pg.json")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	r := logRunner(t, path, pglog.JSON, 2, 0)
	rs, err := r.newReplaySource()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	lr := rs.tr.(*logReader)
	turns := map[string]*sessionTurn{}
	next := func(want string) *sessionTurn {
		t.Helper()
		op, ok := rs.Next()
		if !ok || op.Payload.(*recorded).SQL != want {
			t.Fatalf("next: %v %v, want %s", op.Payload, ok, want)
		}
		turns[want] = op.Payload.(*recorded).turn
		return turns[want]
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	waits := func(t *sessionTurn) bool { return t.wait(cancelled) != nil }

	next("SELECT 'a1'").finish()
	next("SELECT 'b1'") // not done
	e1 := next("BEGIN")
	h := &txHolder{reqs: make(chan txReq), done: make(chan struct{})}
	e1.sess.hold(h) // the block is open
	e1.finish()

	next("SELECT 'c1'")
	if a2 := next("SELECT 'a2'"); a2.after != nil || a2.sess == turns["SELECT 'a1'"].sess || waits(a2) {
		t.Errorf("a, idle with its statements done: forgotten, so a2 is a new session's first; got after %v", a2.after)
	}
	b2 := next("SELECT 'b2'")
	if b2.sess != turns["SELECT 'b1'"].sess || !waits(b2) {
		t.Errorf("b, idle with b1 not done: kept, so b2 waits for b1")
	}
	turns["SELECT 'b1'"].finish()
	if waits(b2) {
		t.Errorf("b1 done: b2's turn")
	}
	if e2 := next("SELECT 'e2'"); e2.sess != e1.sess || e2.sess.holder() != h || waits(e2) {
		t.Errorf("e, idle in its transaction block: kept, so e2 runs in the block")
	}
	d1 := next("SELECT 'd1'") // not done
	if d2 := next("SELECT 'd2'"); d2.sess == d1.sess || d2.after != nil || waits(d2) {
		t.Errorf("d2 after d's disconnection: a new session, not waiting for d1")
	}
	for sql, turn := range turns {
		if sql != "BEGIN" {
			turn.finish()
		}
	}
	next("SELECT 'c2'")
	// At 40 s every session is idle: the statements done, each is
	// forgotten but e (its block open) and c (c2 just read).
	var ids []string
	for id := range lr.sessions {
		ids = append(ids, id)
	}
	if len(ids) != 2 || lr.sessions["e"] == nil || lr.sessions["c"] == nil || lr.sessions["c"].sess == turns["SELECT 'c1'"].sess {
		t.Errorf("sessions kept %v; want e (its block open) and c (a new one)", ids)
	}
	if len(lr.lingering) != 1 || lr.lingering[0].id != "e" {
		t.Errorf("%d lingering; want e", len(lr.lingering))
	}
	close(h.done) // the block's connection is gone: nothing holds e
	if !lr.forget(lr.sessions["e"]) || len(lr.sessions) != 1 {
		t.Errorf("e, its block over: forgotten")
	}
}

// TestLogSessionTurns replays a log's sessions concurrently, each
// statement in a goroutine of its own that comes to its turn after a
// random pause, while the reader reads on and forgets idle sessions: a
// session's statements run one at a time, in its order, across idle
// gaps longer than logSessionIdle and pids reused after disconnections,
// and none waits forever.
func TestLogSessionTurns(t *testing.T) {
	for _, disc := range []bool{true, false} {
		t.Run(fmt.Sprintf("disconnections=%v", disc), func(t *testing.T) {
			// 600 sessions 20 a second, statements 12 s apart: each idles
			// between its statements; about 480 are open at once of 490
			// pids, so a pid is reused within the second.
			sl := sessionsLog{Format: pglog.CSV, Sessions: 600, PerSecond: 20, Statements: 3, Spacing: 12 * time.Second,
				Tenants: 3, Pids: 490, Disconnections: disc}
			path, statements := sl.writeFile(t, t.TempDir())
			r := logRunner(t, path, sl.Format, sl.Tenants, time.Second)
			rs, err := r.newReplaySource()
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var (
				mu      sync.Mutex
				running = map[int]bool{}
				order   = map[int][]int{}
				wg      sync.WaitGroup
				errs    = make(chan error, statements)
			)
			rng := rand.New(rand.NewPCG(1, 2))
			for op, ok := rs.Next(); ok; op, ok = rs.Next() {
				session, n := loggedStatement(t, op)
				turn := op.Payload.(*recorded).turn
				pause := time.Duration(rng.IntN(200)) * time.Microsecond
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer turn.finish()
					time.Sleep(pause)
					if err := turn.wait(ctx); err != nil {
						errs <- fmt.Errorf("session %d statement %d: %w", session, n, err)
						return
					}
					mu.Lock()
					if running[session] {
						errs <- fmt.Errorf("session %d statement %d ran beside another of its session", session, n)
					}
					running[session] = true
					order[session] = append(order[session], n)
					mu.Unlock()
					time.Sleep(50 * time.Microsecond)
					mu.Lock()
					running[session] = false
					mu.Unlock()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for session := range sl.Sessions {
				if fmt.Sprint(order[session]) != "[0 1 2]" {
					t.Errorf("session %d ran its statements in order %v", session, order[session])
				}
			}
		})
	}
}
