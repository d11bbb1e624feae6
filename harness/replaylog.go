package harness

import (
	"container/heap"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
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
// It holds the statements of one reorder window and the sessions that may
// still send one (see sessionLog): its memory does not grow with the log.
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
	// sessions are the sessions kept, by session id; active lists those
	// not idle, least recently active first; lingering are idle ones the
	// replay still needs (a statement not done, a transaction block open),
	// looked at again once sinceLinger statements have been read.
	sessions    map[string]*sessionLog
	active      list.List
	lingering   []*sessionLog
	sinceLinger int
}

// logSessionIdle is how long (log time: the latest statement end read) a
// session may send no statement before its reader takes it for idle: its
// statements' starts are no longer held to its logged order (a session
// runs one statement at a time, so one sent after a pause starts after the
// one before ended anyway), and it is forgotten once its latest statement
// is done and it has no transaction block open. A session seen again
// after that is new to the replay: it has nothing left to wait for.
const logSessionIdle = 10 * time.Second

// sessionLog is what a logReader keeps of a session while it may send a
// statement: the replay's state shared by its statements (logSession),
// the done channel of its latest (the next one waits for it), the latest
// start it gave one, and the log's horizon (logReader.last) at its latest.
type sessionLog struct {
	id   string
	sess *logSession
	tail chan struct{}
	last time.Time
	seen time.Time
	// elem is the session in logReader.active; nil once idle.
	elem *list.Element
	// lingering: in logReader.lingering; gone: forgotten.
	lingering, gone bool
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
			if e.Session != "" && strings.HasPrefix(e.Message, "disconnection: ") {
				lr.disconnected(e.Session) // log_disconnections
			}
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
		if !lr.started || e.Time.After(lr.last) {
			lr.last = e.Time // the latest end read
		}
		lr.started = true
		lr.idle()
		rec := &recorded{SQL: e.Statement, Args: args, Duration: e.Duration}
		start := e.Start()
		if e.Session != "" {
			start, rec.turn = lr.session(e.Session, start)
		}
		op := workload.Op{Tenant: n, Class: class, Payload: rec}
		heap.Push(&lr.window, pending{op: op, start: start, line: e.Line})
		return true
	}
}

// session returns the turn of a statement of session id read now, and its
// start: no earlier than the session's statement read before (log_time
// has ms precision, so a statement may seem to start before the one
// logged above it). The window gives a session's statements in the order
// read, as it orders by start, then line.
func (lr *logReader) session(id string, start time.Time) (time.Time, *sessionTurn) {
	s := lr.sessions[id]
	if s == nil {
		s = &sessionLog{id: id, sess: &logSession{}}
		lr.sessions[id] = s
	}
	if s.elem == nil {
		s.elem = lr.active.PushBack(s)
	} else {
		lr.active.MoveToBack(s.elem)
	}
	s.seen = lr.last
	if start.Before(s.last) {
		start = s.last
	}
	s.last = start
	t := &sessionTurn{sess: s.sess, after: s.tail, done: make(chan struct{})}
	s.tail = t.done
	return start, t
}

// disconnected forgets session id at its disconnection: a statement of the
// same id read after it (the server reused the backend's pid within the
// second) is of a new session.
func (lr *logReader) disconnected(id string) {
	s := lr.sessions[id]
	if s == nil {
		return
	}
	if s.elem != nil {
		lr.active.Remove(s.elem)
		s.elem = nil
	}
	delete(lr.sessions, id)
	s.gone = true
}

// idle takes the sessions that sent nothing for logSessionIdle (log time)
// off the active list, forgetting each the replay no longer needs and
// keeping the others as lingering, which it looks at again once as many
// statements have been read as there are lingering (amortized O(1) a
// statement).
func (lr *logReader) idle() {
	horizon := lr.last.Add(-logSessionIdle)
	for f := lr.active.Front(); f != nil; f = lr.active.Front() {
		s := f.Value.(*sessionLog)
		if !s.seen.Before(horizon) {
			break
		}
		lr.active.Remove(f)
		s.elem = nil
		s.last = time.Time{}
		if !lr.forget(s) && !s.lingering {
			s.lingering = true
			lr.lingering = append(lr.lingering, s)
		}
	}
	if lr.sinceLinger++; lr.sinceLinger < len(lr.lingering) {
		return
	}
	lr.sinceLinger = 0
	kept := lr.lingering[:0]
	for _, s := range lr.lingering {
		if s.elem == nil && !s.gone && !lr.forget(s) {
			kept = append(kept, s)
			continue
		}
		s.lingering = false // active again, or forgotten
	}
	clear(lr.lingering[len(kept):])
	lr.lingering = kept
}

// forget drops idle session s if the replay no longer needs it: its latest
// statement is done (and so every one before it) and it holds no
// transaction block open (none, or one whose connection is gone). It
// reports whether it did.
func (lr *logReader) forget(s *sessionLog) bool {
	if s.tail != nil {
		select {
		case <-s.tail:
		default:
			return false
		}
	}
	if h := s.sess.holder(); h != nil {
		select {
		case <-h.done:
		default:
			return false
		}
	}
	delete(lr.sessions, s.id)
	s.gone = true
	return true
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
			if rec := p.op.Payload.(*recorded); rec.turn != nil {
				rec.turn.finish() // never sent: the session goes on
			}
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
		return p.op, true
	}
}

// sessionTurn places a logged statement in its session: it runs once the
// statement read before it in the session is done (run, dropped, skipped
// or given up), one at a time in the order read, and is done at finish.
// Each statement holds the done channel of the one before it, not the
// statement itself, so a session's state is no more than its statements
// in flight and the logSession they share: nothing is kept per session
// once they are done, and a waiter never depends on what its reader keeps.
type sessionTurn struct {
	sess *logSession
	// after is the previous statement's done; nil for the session's first.
	after <-chan struct{}
	done  chan struct{}
	over  atomic.Bool
}

// wait returns when it is the statement's turn in its session (at once
// if it is already, whatever ctx), or ctx.Err().
func (t *sessionTurn) wait(ctx context.Context) error {
	if t.after == nil {
		return nil
	}
	select {
	case <-t.after:
		return nil
	default:
	}
	select {
	case <-t.after:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish marks the statement done (run or not): the session's next may
// start. Calls after the first do nothing.
func (t *sessionTurn) finish() {
	if t.over.CompareAndSwap(false, true) {
		close(t.done)
	}
}

// logSession is what a logged session's statements share in a replay: the
// transaction block it holds open, if any.
type logSession struct {
	mu sync.Mutex
	tx *txHolder
}

func (s *logSession) holder() *txHolder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tx
}

func (s *logSession) hold(h *txHolder) {
	s.mu.Lock()
	s.tx = h
	s.mu.Unlock()
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
	t := rec.turn
	defer t.finish()
	if err := t.wait(ctx); err != nil {
		return err
	}
	switch h := t.sess.holder(); {
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
			t.sess.hold(nil)
		}
		return err
	case txBegin.MatchString(rec.SQL):
		h, err := e.beginTx(ctx, class, tenant, rec)
		if h != nil {
			t.sess.hold(h)
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
