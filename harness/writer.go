package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/directory"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// Assertion names of the checked writer.
const (
	AssertZeroLoss   = "zero_loss"
	AssertWritePause = "write_pause"
)

// The checked writes' order ids are negative and go down (-1, -2, …):
// apart from the data set's, and each new row sorts before every row a
// key-ordered copy has read, so a write during a move's copy reaches the
// target only through the move's capture of changes.

// checkedWriter writes one tenant's orders at a fixed rate over a
// configuration's timeline, through a pool of its own per node (the
// configuration's role, routed like the configuration's calls), and keeps
// every acknowledged write for the checker.
type checkedWriter struct {
	cfg     scenario.Writer
	tenant  string
	stack   *pools.Stack
	routing *Routing
	rng     *rand.Rand
	t0      time.Time
	stop    context.CancelFunc
	done    chan struct{}

	mu       sync.Mutex
	acked    map[int64]string
	possible map[int64][]string
	inFlight map[int64]bool // rows with a write in flight (next, record)
	last     int64          // the last row inserted (ids go down from -1)
	v        writerVerdict
	longAt   time.Duration // intended start of the longest write
	// longBy is the longest write intended in each writeBucket of the
	// timeline (by intended start), for write_pause.from.
	longBy map[int64]longWrite
}

// longWrite is one write's time, from its intended start at to its
// answer, with its lock reruns and the part before it was sent.
type longWrite struct {
	took, at, late time.Duration
	retries        int64
}

// writeBucket is the grain of the longest writes kept over the timeline:
// write_pause.from judges the buckets that end after its phase starts.
const writeBucket = 100 * time.Millisecond

// writerVerdict is the checker's counts.
type writerVerdict struct {
	Inserts, Updates, Errors int64
	// LockRetries are statements that waited writerLockTimeout for a
	// lock, failed and were run again (not errors); LongestRetries those
	// of the longest write, whose time (Longest) covers them.
	LockRetries, LongestRetries int64
	// LongestLate is the part of Longest before the write was sent.
	LongestLate             time.Duration
	Lost, Duplicated, Stale int64
	Vanished                int64
	Longest                 time.Duration
	node                    string
}

// writerPoolSize is the writer's connections per node: 100 writes/s of up
// to 40 ms each, and within a role's connection limit beside the
// configuration's own pool (the interactive role's 40 over a pool of 30).
// A write waiting for one of them waits from its intended start (its time
// counts the wait).
const writerPoolSize = 4

// writerMaxInFlight bounds the writes sent and not yet answered (those
// waiting for a connection included): 2.5 s of writes at 100 writes/s.
const writerMaxInFlight = 256

// writerLockTimeout is the writer sessions' lock_timeout. A write that
// waits longer for a lock fails with SQLSTATE 55P03 before it changes
// anything and is run again, after writerRetryDelay, until it is answered:
// the wait still counts in its time from its intended start (the write
// pause), but the writer never sits in a lock queue for the whole of an
// operation that takes its shard's lock (Citus blocks writes to a shard
// at the end of a move or split, shard_transfer.c BlockWritesToShardList:
// the shard's metadata lock in ExclusiveLock until the operation
// commits), and the report says how often it had to wait (lock_retries).
const (
	writerLockTimeout = 250 * time.Millisecond
	writerRetryDelay  = 20 * time.Millisecond
)

// lockNotAvailable is lock_timeout's SQLSTATE.
const lockNotAvailable = "55P03"

// newWriter opens the writer's pools for configuration c (its shared or
// interactive role) and removes the checked rows an earlier
// configuration left.
func (r *runner) newWriter(ctx context.Context, c *scenario.Configuration) (*checkedWriter, error) {
	w := &checkedWriter{cfg: *r.sc.Writer, tenant: strconv.Itoa(r.sc.Writer.Tenant), routing: r.routing,
		rng: rand.New(rand.NewPCG(uint64(r.sc.Seed), 11)), acked: map[int64]string{}, possible: map[int64][]string{}, inFlight: map[int64]bool{}}
	pool := "shared"
	if c.Mode == scenario.ModeIsolated {
		pool = string(pools.Interactive)
	}
	role := roleName(r.roleTag, c.Name, pool)
	cfg := pools.Config{Classes: map[pools.Class]pools.ClassConfig{pools.Interactive: {Pool: "writer"}}, Logger: r.log}
	for _, n := range r.dataNodes() {
		n = writerNode(n)
		dsn := n.DSNFor(role, r.passwords[role])
		pc := pools.PoolConfig{Name: "writer", DSN: dsn, Size: writerPoolSize, AcquireTimeout: 30 * time.Second}
		if r.routing != nil {
			pc.Node = n.Name
			cfg.Router = r.routing.Router
		}
		cfg.Pools = append(cfg.Pools, pc)
	}
	for _, n := range r.dataNodes() {
		err := withConn(ctx, n, func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "DELETE FROM orders WHERE tenant_id = $1 AND id < 0", r.sc.Writer.Tenant)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("%w: remove the checked rows of an earlier configuration on %s: %w", ErrRun, n.Name, err)
		}
	}
	s, err := pools.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: configuration %s: open the writer's pools: %w", ErrRun, c.Name, err)
	}
	w.stack = s
	return w, nil
}

// writerNode returns n with the writer sessions' settings: lock_timeout
// writerLockTimeout.
func writerNode(n backend.Node) backend.Node {
	params := maps.Clone(n.Params)
	if params == nil {
		params = map[string]string{}
	}
	params["lock_timeout"] = strconv.FormatInt(writerLockTimeout.Milliseconds(), 10) + "ms"
	n.Params = params
	return n
}

// dataNodes are the nodes that hold the data set: every node of topology
// shards, the primary otherwise.
func (r *runner) dataNodes() []backend.Node {
	if r.routing != nil {
		return r.shardNodes
	}
	return []backend.Node{r.primary}
}

// start begins the writes, their intended starts counted from t0 (the
// timeline's start).
func (w *checkedWriter) start(ctx context.Context, t0 time.Time) {
	ctx, w.stop = context.WithCancel(ctx)
	w.t0, w.done = t0, make(chan struct{})
	go func() {
		defer close(w.done)
		w.run(ctx)
	}()
}

// finish stops the writes and closes the writer's pools. It is
// idempotent.
func (w *checkedWriter) finish() {
	if w.stop != nil {
		w.stop()
		<-w.done
	}
	w.stack.Close()
}

// run sends the writes on their schedule, open loop: each write is sent
// at its intended start whether or not the ones before it have been
// answered, so a write held up (a lock, a slow worker) delays no other
// write's sending, and each write's time, from its intended start to its
// answer, is its own wait. At most writerMaxInFlight writes are in
// flight; past that the next one is sent late, and its lateness counts in
// its time. run returns once every write it sent has ended.
func (w *checkedWriter) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, writerMaxInFlight)
	every := time.Duration(float64(time.Second) / w.cfg.Rate)
	for i := int64(0); ; i++ {
		// Intended times come from the start, never from the previous
		// write's answer.
		intended := time.Duration(i) * every
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(w.t0.Add(intended))):
		}
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		insert, id := w.next()
		val := "w" + strconv.FormatInt(i, 10)
		late := max(time.Since(w.t0.Add(intended)), 0) // the writer's own delay in sending it
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			rows, retries, err := w.write(ctx, insert, id, val)
			if ctx.Err() != nil && err != nil {
				// The run is over: an unanswered write is not acked nor
				// counted, but it may have committed.
				w.mu.Lock()
				w.possible[id] = append(w.possible[id], val)
				delete(w.inFlight, id)
				w.mu.Unlock()
				return
			}
			w.record(insert, id, val, rows, err, retries, intended, late, time.Since(w.t0.Add(intended)))
		}()
	}
}

// next draws the next write: an insert of a new row, or, for
// cfg.UpdateShare of the writes once a write was acknowledged, an update
// of a row written before. A row with a write in flight is not updated
// (the write is an insert instead): two writes of one row in flight at
// once could commit in one order and be answered in the other, and the
// checker could not tell the row's last value. The row is marked in
// flight until record.
func (w *checkedWriter) next() (insert bool, id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	insert = len(w.acked) == 0 || w.rng.Float64() >= w.cfg.UpdateShare
	if !insert {
		id = -1 - w.rng.Int64N(-w.last)
		insert = w.inFlight[id]
	}
	if insert {
		w.last--
		id = w.last
	}
	w.inFlight[id] = true
	return insert, id
}

// answered returns the writes acknowledged and failed so far.
func (w *checkedWriter) answered() (acked, errors int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.v.Inserts + w.v.Updates, w.v.Errors
}

// record keeps the answer to one write: rows is the number of rows it
// matched, retries the times it was run again after a lock timeout (each
// already counted in LockRetries), took how long it took from its
// intended start at to its answer, its reruns included, of which late
// before it was sent (the writer's own delay: writerMaxInFlight reached,
// or the Go scheduler). The row is no longer in flight.
func (w *checkedWriter) record(insert bool, id int64, val string, rows int64, err error, retries int64, at, late, took time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inFlight, id)
	if took > w.v.Longest {
		w.v.Longest, w.longAt, w.v.LongestRetries, w.v.LongestLate = took, at, retries, late
	}
	if b := int64(at / writeBucket); took > w.longBy[b].took {
		if w.longBy == nil {
			w.longBy = map[int64]longWrite{}
		}
		w.longBy[b] = longWrite{took: took, at: at, late: late, retries: retries}
	}
	_, acked := w.acked[id]
	switch {
	case err != nil:
		w.v.Errors++
		w.possible[id] = append(w.possible[id], val)
	case rows == 0 && !insert && acked:
		// The row was acknowledged: an update that finds none went to a
		// node without it and was answered as a no-op.
		w.v.Vanished++
	case rows == 1:
		w.acked[id] = val
		delete(w.possible, id)
		if insert {
			w.v.Inserts++
		} else {
			w.v.Updates++
		}
	}
}

// write runs one write and returns the rows it matched and how many
// times it was run again after a lock timeout; a write refused by a
// fenced node is retried after the router refreshes (the application's
// side of a move), one that timed out waiting for a lock after
// writerRetryDelay (see writerLockTimeout).
func (w *checkedWriter) write(ctx context.Context, insert bool, id int64, val string) (rows, retries int64, err error) {
	for attempt := 0; ; attempt++ {
		var res pools.Result
		var err error
		if insert {
			res, err = w.stack.Query(ctx, pools.Interactive, w.tenant,
				`INSERT INTO orders (tenant_id, id, created_at, amount, status, customer, note) VALUES ($1, $2, now(), 1, 'paid', 'writer', $3)`,
				w.cfg.Tenant, id, val)
		} else {
			res, err = w.stack.Query(ctx, pools.Interactive, w.tenant,
				`UPDATE orders SET note = $3 WHERE tenant_id = $1 AND id = $2`, w.cfg.Tenant, id, val)
		}
		if directory.IsFenced(err) && attempt < 5 && w.routing != nil {
			_ = w.routing.Router.Refresh(ctx)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == lockNotAvailable && ctx.Err() == nil {
			// Nothing was written: the statement failed waiting.
			w.mu.Lock()
			w.v.LockRetries++
			w.mu.Unlock()
			retries++
			if !sleepUntil(ctx, time.Now().Add(writerRetryDelay)) {
				return 0, retries, ctx.Err()
			}
			continue
		}
		return res.Rows, retries, err
	}
}

// storedRow is one checked row as read back at the tenant's node.
type storedRow struct {
	id   int64
	note string
}

// checkWriter reads the tenant's checked rows back at its node (the
// catalog's, with topology shards) and returns the verdict.
func (r *runner) checkWriter(ctx context.Context, w *checkedWriter) (writerVerdict, error) {
	node := r.primary
	if r.routing != nil {
		name, _, _, err := r.routing.Catalog.Lookup(ctx, w.tenant)
		if err != nil {
			return writerVerdict{}, fmt.Errorf("%w: look up the writer's tenant: %w", ErrRun, err)
		}
		for _, n := range r.shardNodes {
			if n.Name == name {
				node = n
			}
		}
	}
	var stored []storedRow
	err := withConn(ctx, node, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT id, note FROM orders WHERE tenant_id = $1 AND id < 0`, w.cfg.Tenant)
		if err != nil {
			return err
		}
		stored, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (storedRow, error) {
			var s storedRow
			err := row.Scan(&s.id, &s.note)
			return s, err
		})
		return err
	})
	if err != nil {
		return writerVerdict{}, fmt.Errorf("%w: read the checked rows back on %s: %w", ErrRun, node.Name, err)
	}
	v := w.verdict(stored)
	v.node = node.Name
	return v, nil
}

// verdict is the checker's pure part. stored are the tenant's checked rows
// at its node (duplicates included). Every acknowledged write must be
// stored exactly once with its last acknowledged value, or a value written
// later without an answer (a write cut off may have committed).
func (w *checkedWriter) verdict(stored []storedRow) writerVerdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.v
	seen := map[int64]int{}
	got := map[int64]string{}
	for _, s := range stored {
		seen[s.id]++
		if seen[s.id] == 2 {
			v.Duplicated++
		}
		got[s.id] = s.note
	}
	for id, want := range w.acked {
		val, ok := got[id]
		switch {
		case !ok:
			v.Lost++
		case val != want && !slices.Contains(w.possible[id], val):
			v.Stale++
		}
	}
	return v
}

// writerReport is the writer's part of a configuration's report.
func (w *checkedWriter) report(v writerVerdict, tr *timelineRun) *reports.WriterCheck {
	w.mu.Lock()
	at := w.longAt
	w.mu.Unlock()
	wc := &reports.WriterCheck{Tenant: w.tenant, Rate: w.cfg.Rate, Inserts: v.Inserts, Updates: v.Updates, Errors: v.Errors, LockRetries: v.LockRetries,
		Lost: v.Lost, Duplicated: v.Duplicated, Stale: v.Stale, Vanished: v.Vanished,
		LongestWrite: ms(v.Longest), LongestWriteAt: at.Seconds(), LongestWriteLockRetries: v.LongestRetries,
		LongestWriteLate: ms(v.LongestLate), Node: v.node}
	wc.LongestWriteWindow = tr.windowAt(at)
	return wc
}

// from returns wc with its longest write replaced by the longest write
// intended from start on (the buckets that end after start: up to one
// bucket of earlier writes counts), its window named from tr.
func (w *checkedWriter) from(wc *reports.WriterCheck, start time.Duration, tr *timelineRun) *reports.WriterCheck {
	w.mu.Lock()
	var lw longWrite
	for b, l := range w.longBy {
		if time.Duration(b+1)*writeBucket > start && l.took > lw.took {
			lw = l
		}
	}
	w.mu.Unlock()
	out := *wc
	out.LongestWrite, out.LongestWriteAt, out.LongestWriteLockRetries, out.LongestWriteLate = ms(lw.took), lw.at.Seconds(), lw.retries, ms(lw.late)
	out.LongestWriteWindow = tr.windowAt(lw.at)
	return &out
}

// windowAt names the phase whose span holds at ("" for none).
func (tr *timelineRun) windowAt(at time.Duration) string {
	name := ""
	for _, win := range tr.windows {
		if at >= win.start && at < win.end {
			name = win.step.Name
		}
	}
	return name
}

// writerAssertions are zero_loss and write_pause, as the scenario asks.
// wc is the writer's report; judged, with write_pause.from, is wc as
// checkedWriter.from gives it (nil: wc).
func (r *runner) writerAssertions(config string, wc, judged *reports.WriterCheck) []reports.Assertion {
	a := r.sc.Assertions
	var out []reports.Assertion
	if a.ZeroLoss {
		bad := wc.Lost + wc.Duplicated + wc.Stale + wc.Vanished
		acked := wc.Inserts + wc.Updates
		out = append(out, reports.Assertion{Name: AssertZeroLoss, Configuration: config, Tenant: wc.Tenant,
			Observed: float64(bad), Limit: 0, Op: "==", Passed: bad == 0 && acked > 0,
			Detail: fmt.Sprintf("%d acknowledged writes (%d inserts, %d updates), %d failed: %d lost, %d duplicated, %d stale, %d updates found no row",
				acked, wc.Inserts, wc.Updates, wc.Errors, wc.Lost, wc.Duplicated, wc.Stale, wc.Vanished)})
	}
	if maxPause := a.WritePause.Max.Duration(); maxPause > 0 {
		scope := ""
		if f := a.WritePause.From; f != "" && judged != nil {
			scope = fmt.Sprintf(" intended from %s on (the whole timeline's: %.0f ms at %.2f s in %s)", f, wc.LongestWrite, wc.LongestWriteAt, wc.LongestWriteWindow)
			wc = judged
		}
		sent := "sent on time"
		if wc.LongestWriteLate >= 1 {
			sent = fmt.Sprintf("sent %.0f ms late: waiting for one of the %d writes in flight to end, or the Go scheduler", wc.LongestWriteLate, writerMaxInFlight)
		}
		out = append(out, reports.Assertion{Name: AssertWritePause, Configuration: config, Tenant: wc.Tenant,
			Observed: wc.LongestWrite, Limit: ms(maxPause), Unit: "ms", Op: "<=", Passed: wc.LongestWrite <= ms(maxPause),
			Detail: fmt.Sprintf("longest write%s, from its intended start to its answer (writes sent on schedule, open loop; its %d lock waits of %v and reruns included; %s), at %.2f s in %s; %d lock waits retried over the run",
				scope, wc.LongestWriteLockRetries, writerLockTimeout, sent, wc.LongestWriteAt, wc.LongestWriteWindow, wc.LockRetries)})
	}
	return out
}
