package harness

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/pglog"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/workload"
)

// Skip causes of a replayed log's records.
const (
	skipUnreadable   = "unreadable record"
	skipTruncated    = "truncated record"
	skipParams       = "bind parameters that do not parse"
	skipNotStmt      = "not a statement (connection, error, other message)"
	skipProtocol     = "parse or bind step (the statement runs at its execute)"
	skipLate         = "started before a statement already replayed, beyond replay.reorder"
	skipUntaggedOut  = "untagged, and no tenant \"untagged\" in tenants.keys"
	skipHousekeeping = "the isolation stack's own tag or reset (the replaying stack sends its own)"
)

// logRule is a compiled replay.rules entry.
type logRule struct {
	name, class, user, suffix string
	stmt                      *regexp.Regexp
	min                       time.Duration
}

func (lr *logRule) matches(e *pglog.Entry) bool {
	return (lr.user == "" || e.User == lr.user) && (lr.suffix == "" || strings.HasSuffix(e.Application, lr.suffix)) &&
		(lr.stmt == nil || lr.stmt.MatchString(e.Statement)) && e.Duration >= lr.min
}

// pending is a logged statement waiting in the reorder window.
type pending struct {
	op    workload.Op
	start time.Time
	line  int64
}

type pendingHeap []pending

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	return h[i].start.Before(h[j].start) || h[i].start.Equal(h[j].start) && h[i].line < h[j].line
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// logReader reads a PostgreSQL log's statements as ops: the tenant from
// replay.tenant, the class from replay.rules, the start from the record's
// time less its duration, put in order of start within replay.reorder.
// It holds the statements of one reorder window and a counter per session.
type logReader struct {
	readCounts
	in       *replayFile
	rd       *pglog.Reader
	speed    float64
	reorder  time.Duration
	end      time.Duration
	tenant   map[string]int
	appRe    *regexp.Regexp
	stmtRe   *regexp.Regexp
	rules    []logRule
	defClass string
	window   pendingHeap
	eof      bool
	t0       time.Time // the first statement's start: At 0
	lastAt   time.Duration
	started  bool
	last     time.Time
	seq      int64
	sessions map[string]*sessionLog
}

// sessionLog is what a logReader keeps of a session: the statements it
// sent so far and the latest start it gave one.
type sessionLog struct {
	sent int64
	last time.Time
}

func (r *runner) openLog() (*logReader, error) {
	rp := r.sc.Replay
	path := r.sc.Path(rp.Log)
	in, err := openReplayFile(path, "replay.log")
	if err != nil {
		return nil, err
	}
	rd, err := pglog.NewReader(in, pglog.Format(rp.LogFormat()))
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("%w: replay.format: %w", scenario.ErrInvalid, err)
	}
	lr := &logReader{readCounts: newReadCounts(path), in: in, rd: rd, speed: rp.Speed, reorder: rp.Reorder.Duration(),
		tenant: map[string]int{}, defClass: rp.DefaultClass, sessions: map[string]*sessionLog{}}
	if rp.Tenant.ApplicationName != "" {
		lr.appRe = regexp.MustCompile(rp.Tenant.ApplicationName) // validated
	} else {
		lr.stmtRe = regexp.MustCompile(rp.Tenant.Statement)
	}
	for i, rule := range rp.Rules {
		c := logRule{name: rule.Name(i), class: rule.Class, user: rule.User, suffix: rule.ApplicationSuffix, min: rule.MinDuration.Duration()}
		if rule.Statement != "" {
			c.stmt = regexp.MustCompile(rule.Statement)
		}
		lr.rules = append(lr.rules, c)
	}
	for n := 1; n <= r.pop.Len(); n++ {
		lr.tenant[r.key(n)] = n
	}
	if len(r.steps) > 0 {
		lr.end = r.steps[len(r.steps)-1].end
	}
	return lr, nil
}

func (lr *logReader) Close() error { return lr.in.Close() }

// key returns the statement's tenant key, or "" when the expression does
// not find one.
func (lr *logReader) key(e *pglog.Entry) string {
	re, s := lr.appRe, e.Application
	if re == nil {
		re, s = lr.stmtRe, e.Statement
	}
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// read takes the next statement record into the window; false at the end
// of the log or at an error that ends it.
func (lr *logReader) read() bool {
	for {
		e, err := lr.rd.Next()
		if err == io.EOF {
			return false
		}
		if err == nil || errors.As(err, new(*pglog.LineError)) {
			lr.records++
		}
		var le *pglog.LineError
		if errors.As(err, &le) {
			lr.line = le.Line
			switch {
			case errors.Is(err, pglog.ErrTruncated):
				lr.skip(skipTruncated)
			case errors.Is(err, pglog.ErrParams):
				lr.skip(skipParams)
			default:
				lr.skip(skipUnreadable)
			}
			continue
		}
		if err != nil {
			lr.err = fmt.Errorf("%s: %w", lr.path, err)
			return false
		}
		lr.line = e.Line
		switch e.Kind {
		case pglog.KindOther:
			lr.skip(skipNotStmt)
			continue
		case pglog.KindParse, pglog.KindBind:
			lr.skip(skipProtocol)
			continue
		}
		if pools.Housekeeping(e.Statement) {
			lr.skip(skipHousekeeping)
			continue
		}
		key := lr.key(&e)
		if key == "" {
			lr.untagged++
			key = scenario.Untagged
		}
		n, ok := lr.tenant[key]
		if !ok {
			if key == scenario.Untagged {
				lr.skip(skipUntaggedOut)
			} else {
				lr.skip(skipTenant)
			}
			continue
		}
		class, rule := lr.defClass, "default_class "+lr.defClass
		for i := range lr.rules {
			if lr.rules[i].matches(&e) {
				class, rule = lr.rules[i].class, lr.rules[i].name
				break
			}
		}
		lr.readCounts.rules[rule]++
		args := make([]any, len(e.Params))
		for i, p := range e.Params {
			if p != nil {
				args[i] = *p
			}
		}
		rec := &recorded{SQL: e.Statement, Args: args, Session: e.Session, Duration: e.Duration}
		start := e.Start()
		if rec.Session != "" {
			// A session's statements keep their logged order: log_time
			// has ms precision, so a statement may seem to start before
			// the one logged above it; it starts no earlier.
			s := lr.sessions[rec.Session]
			if s == nil {
				s = &sessionLog{}
				lr.sessions[rec.Session] = s
			}
			if start.Before(s.last) {
				start = s.last
			}
			s.last = start
		}
		op := workload.Op{Tenant: n, Class: class, Payload: rec}
		heap.Push(&lr.window, pending{op: op, start: start, line: e.Line})
		if !lr.started || e.Time.After(lr.last) {
			lr.last = e.Time // the latest end read
		}
		lr.started = true
		return true
	}
}

// next returns the next statement in order of start: the earliest in the
// window once the log has been read reorder past it.
func (lr *logReader) next() (workload.Op, bool) {
	for {
		for !lr.eof && (len(lr.window) == 0 || !lr.window[0].start.Before(lr.last.Add(-lr.reorder))) {
			if !lr.read() {
				lr.eof = true
			}
		}
		if len(lr.window) == 0 {
			return workload.Op{}, false
		}
		p := heap.Pop(&lr.window).(pending)
		if lr.t0.IsZero() {
			lr.t0 = p.start
		}
		at := time.Duration(math.Round(float64(p.start.Sub(lr.t0)) / lr.speed))
		if at < lr.lastAt || at >= lr.end {
			line := lr.line
			lr.line = p.line
			if at < lr.lastAt {
				lr.skip(skipLate)
			} else {
				lr.skip(skipAfter)
			}
			lr.line = line
			continue
		}
		lr.lastAt = at
		p.op.At = at
		p.op.Seq = lr.seq
		lr.seq++
		if rec := p.op.Payload.(*recorded); rec.Session != "" {
			// Numbered as sent, in order of start: the session's logged
			// order, as read kept it.
			s := lr.sessions[rec.Session]
			rec.Index = s.sent
			s.sent++
		}
		return p.op, true
	}
}

// sessionTurns runs each logged session's statements one at a time, in
// their order in the session (recorded.Index): a statement waits for the
// ones before it to finish, or to be dropped.
type sessionTurns struct {
	mu sync.Mutex
	m  map[string]*turn
}

// turn is one session's: the index whose turn it is, the indexes after it
// that already finished (dropped), and a channel closed at each advance.
type turn struct {
	next int64
	done map[int64]bool
	wake chan struct{}
	// tx holds the session's open transaction block, if any.
	tx *txHolder
}

func (st *sessionTurns) get(session string) *turn {
	if st.m == nil {
		st.m = map[string]*turn{}
	}
	t := st.m[session]
	if t == nil {
		t = &turn{done: map[int64]bool{}, wake: make(chan struct{})}
		st.m[session] = t
	}
	return t
}

// wait returns when it is rec's turn in its session, or ctx.Err().
func (st *sessionTurns) wait(ctx context.Context, rec *recorded) error {
	for {
		st.mu.Lock()
		t := st.get(rec.Session)
		if t.next >= rec.Index {
			st.mu.Unlock()
			return nil
		}
		ch := t.wake
		st.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// finish marks rec done (run or dropped): the session's next statement
// may start.
func (st *sessionTurns) finish(rec *recorded) {
	st.mu.Lock()
	defer st.mu.Unlock()
	t := st.get(rec.Session)
	t.done[rec.Index] = true
	advanced := false
	for t.done[t.next] {
		delete(t.done, t.next)
		t.next++
		advanced = true
	}
	if advanced {
		close(t.wake)
		t.wake = make(chan struct{})
	}
}

// txBegin and txEnd match the statements that open and close a
// transaction block.
var (
	txBegin = regexp.MustCompile(`(?is)^\s*(BEGIN|START\s+TRANSACTION)\b`)
	txEnd   = regexp.MustCompile(`(?is)^\s*(COMMIT|END|ROLLBACK|ABORT|PREPARE\s+TRANSACTION)\b`)
)

// errTxGone is a statement of a transaction block whose connection is gone.
var errTxGone = errors.New("replay: the session's transaction has ended")

// txHolder holds one connection of the stack for a logged session's
// transaction block, from its BEGIN to its COMMIT or ROLLBACK: the block's
// statements run on it in order.
type txHolder struct {
	reqs chan txReq
	done chan struct{}
}

type txReq struct {
	rec   *recorded
	reply chan error
}

// runLogged runs a logged statement of a session in its turn: a BEGIN
// borrows a connection through the stack and keeps it for the block, the
// block's statements run on it, its COMMIT or ROLLBACK gives it back; any
// other statement runs through the stack alone.
func (e *executor) runLogged(ctx context.Context, class pools.Class, tenant string, rec *recorded) error {
	if err := e.sessions.wait(ctx, rec); err != nil {
		e.sessions.finish(rec)
		return err
	}
	defer e.sessions.finish(rec)
	e.sessions.mu.Lock()
	t := e.sessions.get(rec.Session)
	h := t.tx
	e.sessions.mu.Unlock()
	switch {
	case h != nil:
		req := txReq{rec: rec, reply: make(chan error, 1)}
		var err error
		select {
		case h.reqs <- req:
			select {
			case err = <-req.reply:
			case <-ctx.Done():
				err = ctx.Err()
			}
		case <-h.done:
			err = errTxGone
		case <-ctx.Done():
			err = ctx.Err()
		}
		if txEnd.MatchString(rec.SQL) {
			e.sessions.mu.Lock()
			t.tx = nil
			e.sessions.mu.Unlock()
		}
		return err
	case txBegin.MatchString(rec.SQL):
		h, err := e.beginTx(ctx, class, tenant, rec)
		if h != nil {
			e.sessions.mu.Lock()
			t.tx = h
			e.sessions.mu.Unlock()
		}
		return err
	default:
		_, err := e.stack.Query(ctx, class, tenant, rec.SQL, rec.Args...)
		return err
	}
}

// beginTx borrows a connection for a transaction block and runs its BEGIN
// on it; nil when the connection or the BEGIN failed.
func (e *executor) beginTx(ctx context.Context, class pools.Class, tenant string, rec *recorded) (*txHolder, error) {
	h := &txHolder{reqs: make(chan txReq), done: make(chan struct{})}
	first := make(chan error, 1)
	e.txMu.Lock()
	if e.txCtx == nil {
		e.txCtx, e.txCancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	txCtx := e.txCtx
	e.txs = append(e.txs, h)
	e.txMu.Unlock()
	go func() {
		defer close(h.done)
		_, err := e.stack.WithConn(txCtx, class, tenant, func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, rec.SQL, rec.Args...); err != nil {
				first <- err
				return err
			}
			first <- nil
			for req := range h.reqs {
				_, err := conn.Exec(ctx, req.rec.SQL, req.rec.Args...)
				req.reply <- err
				if txEnd.MatchString(req.rec.SQL) {
					return nil
				}
			}
			// The run ended inside the block: roll it back, so the
			// connection goes back clean.
			rctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
			defer cancel()
			_, err := conn.Exec(rctx, "ROLLBACK")
			return err
		})
		select {
		case first <- err: // the connection was not had
		default:
		}
	}()
	select {
	case err := <-first:
		if err != nil {
			return nil, err
		}
		return h, nil
	case <-ctx.Done():
		return h, ctx.Err()
	}
}

// endTxs ends the transaction blocks still open when the run ended (their
// COMMIT was dropped, or never came): each is rolled back and its
// connection given back. It returns when every one has.
func (e *executor) endTxs() {
	e.txMu.Lock()
	txs := e.txs
	e.txs = nil
	e.txMu.Unlock()
	for _, h := range txs {
		select {
		case <-h.done:
			continue
		default:
		}
		close(h.reqs)
		<-h.done
	}
	e.txMu.Lock()
	if e.txCancel != nil {
		e.txCancel()
		e.txCtx, e.txCancel = nil, nil
	}
	e.txMu.Unlock()
}
