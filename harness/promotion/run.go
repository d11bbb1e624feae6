package promotion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/directory"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// Assertion names.
const (
	AssertTriggered   = "promotion_triggered"
	AssertHotNode     = "hot_node_detected"
	AssertMoved       = "tenant_moved"
	AssertWritePause  = "write_pause"
	AssertZeroLoss    = "zero_loss"
	AssertSourceEmpty = "source_empty"
	AssertOthers      = "other_tenants_untouched"
	AssertSkewReduced = "skew_reduced"
	AssertQuietP99    = "quiet_p99_hot_node"
)

// The checked writes' order ids are negative and go down (-1, -2, …):
// apart from the data set's, and each new row sorts before every row the
// key-ordered copy has read, so a write during the copy reaches the target
// only through the move's capture of changes.

func (r *runner) run(ctx context.Context) (*reports.Report, error) {
	before, err := r.schedule(r.p.Before.Duration(), 0)
	if err != nil {
		return nil, err
	}
	after, err := r.schedule(r.p.After.Duration(), 1)
	if err != nil {
		return nil, err
	}
	chunk, err := r.schedule(2*time.Second, 2)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, s := range []string{before.Hash(), after.Hash(), chunk.Hash()} {
		h.Write([]byte(s))
	}
	r.hash = hex.EncodeToString(h.Sum(nil))[:16]

	othersBefore, err := r.othersSums(ctx)
	if err != nil {
		return nil, err
	}

	bg, stopBg := context.WithCancel(ctx)
	defer stopBg()
	smp := &sampler{sums: map[string]map[string]float64{}, counts: map[string]int{}}
	var wg sync.WaitGroup
	sampleErr := make(chan error, 1)
	wg.Go(func() { sampleErr <- r.sample(bg, smp) })
	w := &writer{r: r, rng: rand.New(rand.NewPCG(uint64(r.sc.Seed), 11)), acked: map[int64]string{}, possible: map[int64][]string{}}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	var ww sync.WaitGroup
	ww.Go(func() { w.run(wctx) })

	// The trigger: the ledger's alert for the tenant, or a request at At.
	fire := make(chan string, 1)
	triggerCtx, stopTrigger := context.WithCancel(bg)
	defer stopTrigger()
	t0 := time.Now()
	trig := r.trigger()
	wg.Go(func() { trig.watch(triggerCtx, t0, fire) })

	type moveResult struct {
		fig *directory.Figures
		err error
	}
	moved := make(chan moveResult, 1)
	moveStarted := make(chan struct{})
	snapBefore := r.router.Snapshot()
	var dbAtStart, dbAtTrigger map[string]float64
	dbAtStart = r.dbTime()
	var loadBefore Load
	var trigOnce sync.Once
	startMove := func(why string) {
		trigOnce.Do(func() {
			r.out.Triggered = time.Since(t0).Seconds()
			r.out.Trigger = why
			dbAtTrigger = r.dbTime()
			loadBefore = r.load(WindowBefore, smp, dbAtStart, dbAtTrigger, snapBefore)
			r.window.Store(WindowMove)
			r.note("promotion of tenant %s triggered at %.1f s: %s", r.tenant, r.out.Triggered, why)
			close(moveStarted)
			go func() {
				mctx, cancel := context.WithTimeout(ctx, r.p.MaxMove.Duration())
				defer cancel()
				fig, err := directory.Move(mctx, directory.MoveConfig{
					Catalog: r.cat, Nodes: r.dsn, Tables: []string{"tenants", "orders"},
					BatchRows: r.p.BatchRows, MaxPause: r.p.MaxPause.Duration(), Grace: r.graceOrNone(),
					Gates: []directory.Gate{r.router}, Logger: r.log,
				}, r.tenant, r.target)
				moved <- moveResult{fig, err}
			}()
		})
	}
	r.window.Store(WindowBefore)
	wg.Go(func() {
		select {
		case why := <-fire:
			startMove(why)
		case <-bg.Done():
		}
	})
	mBefore, err := r.runWindow(ctx, WindowBefore, before)
	if err != nil {
		return r.interrupted(ctx, WindowBefore, err)
	}
	stopTrigger()
	triggered := false
	select {
	case <-moveStarted:
		triggered = true
	default:
	}
	var mr moveResult
	if triggered {
		for done := false; !done; {
			select {
			case mr = <-moved:
				done = true
			default:
				if _, err := r.runWindow(ctx, WindowMove, chunk); err != nil {
					return r.interrupted(ctx, WindowMove, err, mBefore)
				}
			}
		}
	} else {
		r.note("the trigger did not fire within the before window (%s): no move", r.p.Before)
		loadBefore = r.load(WindowBefore, smp, dbAtStart, r.dbTime(), snapBefore)
	}
	if mr.err != nil {
		r.note("move failed: %v", mr.err)
	}
	r.out.Move = mr.fig
	if err := r.router.Refresh(ctx); err != nil {
		return r.interrupted(ctx, WindowMove, fmt.Errorf("%w: %w", ErrRun, err), mBefore)
	}
	r.window.Store(WindowAfter)
	dbAfterStart := r.dbTime()
	snapAfter := r.router.Snapshot()
	mAfter, err := r.runWindow(ctx, WindowAfter, after)
	if err != nil {
		return r.interrupted(ctx, WindowAfter, err, mBefore)
	}
	loadAfter := r.load(WindowAfter, smp, dbAfterStart, r.dbTime(), snapAfter)
	r.window.Store("")
	stopWriter()
	ww.Wait()
	stopBg()
	wg.Wait()
	if err := <-sampleErr; err != nil {
		return nil, fmt.Errorf("%w: sample pg_stat_activity: %w", ErrRun, err)
	}
	r.out.Loads = []Load{loadBefore, loadAfter}

	if err := r.check(ctx, w, othersBefore); err != nil {
		return nil, err
	}
	r.quiet(mBefore.rec, mAfter.rec, snapBefore)
	return r.report(mBefore, mAfter, triggered), nil
}

// interrupted returns, for a run whose ctx ended during window (the first
// Ctrl-C), a report of the windows measured until then (done: before,
// then after), marked incomplete and with no assertions, beside err; for
// any other error, err alone.
func (r *runner) interrupted(ctx context.Context, window string, err error, done ...*measured) (*reports.Report, error) {
	if ctx.Err() == nil {
		return nil, err
	}
	rep := &reports.Report{
		Scenario: r.sc.Name, File: r.sc.File, Seed: r.sc.Seed, ScheduleHash: r.hash,
		Backend:  fmt.Sprintf("local shards (%d nodes)", len(r.nodes)),
		Dominant: r.tenant, Incomplete: "interrupted during the " + window + " window",
	}
	names := []string{WindowBefore, WindowAfter}
	for i, m := range done {
		c := r.configuration(names[i], m)
		c.Passed = false
		rep.Configurations = append(rep.Configurations, c)
	}
	rep.Notes = r.notes
	return rep, err
}

func (r *runner) graceOrNone() time.Duration {
	if g := r.p.Grace.Duration(); g > 0 {
		return g
	}
	return -1
}

// trigger decides when the promotion fires: at a requested time, or once
// the ledger raised a share alert for the tenant.
type trigger struct {
	tenant string
	// request fires at at (from the start); otherwise the ledger's alerts
	// are read every poll.
	request bool
	at      time.Duration
	poll    time.Duration
	ledger  *pools.Ledger
}

func (r *runner) trigger() trigger {
	return trigger{tenant: r.tenant, request: r.p.Trigger == scenario.TriggerRequest, at: r.p.At.Duration(),
		poll: min(r.p.Bucket.Duration(), 100*time.Millisecond), ledger: r.stack.Ledger()}
}

// watch sends on fire, once, why the promotion fires, with t0 the start of
// the before window. It returns when it fired or ctx is done.
func (t trigger) watch(ctx context.Context, t0 time.Time, fire chan<- string) {
	if t.request {
		select {
		case <-time.After(time.Until(t0.Add(t.at))):
			fire <- fmt.Sprintf("requested at %s", t.at)
		case <-ctx.Done():
		}
		return
	}
	tick := time.NewTicker(t.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if a, ok := shareAlert(t.ledger.Alerts(), t.tenant, t0); ok {
			fire <- fmt.Sprintf("ledger share %.2f > %.2f for %s", a.Share, a.Threshold, a.Window)
			return
		}
	}
}

// shareAlert returns the first alert for tenant that is active or fired at
// or after since. An alert that fired and cleared between two polls still
// counts: the share was above the threshold for the whole window.
func shareAlert(alerts []pools.Alert, tenant string, since time.Time) (pools.Alert, bool) {
	for _, a := range alerts {
		if a.Tenant == tenant && (a.Cleared.IsZero() || !a.Fired.Before(since)) {
			return a, true
		}
	}
	return pools.Alert{}, false
}

// writer writes the moving tenant's rows at a fixed rate through the
// routed stack and keeps what was acknowledged.
type writer struct {
	r   *runner
	rng *rand.Rand

	mu       sync.Mutex
	acked    map[int64]string
	possible map[int64][]string
	c        Checker
}

func (w *writer) run(ctx context.Context) {
	every := time.Duration(float64(time.Second) / w.r.p.WriterRate)
	start := time.Now()
	next := int64(0)
	for i := int64(0); ; i++ {
		// Intended times come from the start: a stalled write is followed
		// by the ones it held up, at once.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(time.Duration(i) * every))):
		}
		insert := len(w.acked) == 0 || w.rng.Float64() >= w.r.p.UpdateShare
		var id int64
		if insert {
			next--
			id = next
		} else {
			id = -1 - w.rng.Int64N(-next)
		}
		val := "w" + strconv.FormatInt(i, 10)
		t0 := time.Now()
		rows, err := w.write(ctx, insert, id, val)
		if ctx.Err() != nil && err != nil {
			// The run is over: an unanswered write is not acked nor
			// counted, but it may have committed.
			w.mu.Lock()
			w.possible[id] = append(w.possible[id], val)
			w.mu.Unlock()
			return
		}
		w.record(insert, id, val, rows, err, time.Since(t0))
	}
}

// record keeps the answer to one write: rows is the number of rows it
// matched, took how long it took.
func (w *writer) record(insert bool, id int64, val string, rows int64, err error, took time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.c.MaxWait = max(w.c.MaxWait, took.Seconds())
	_, acked := w.acked[id]
	switch {
	case err != nil:
		w.c.Errors++
		w.possible[id] = append(w.possible[id], val)
	case rows == 0 && !insert && acked:
		// The row was acknowledged: an update that finds none went
		// to a node without it and was answered as a no-op.
		w.c.Vanished++
	case rows == 1:
		w.acked[id] = val
		delete(w.possible, id)
		if insert {
			w.c.Inserts++
		} else {
			w.c.Updates++
		}
	}
}

// write runs one write; a write refused by a fenced node is retried after
// the router refreshes (the app's side of the move protocol).
func (w *writer) write(ctx context.Context, insert bool, id int64, val string) (int64, error) {
	tenant, _ := strconv.ParseInt(w.r.tenant, 10, 64)
	for attempt := 0; ; attempt++ {
		var res pools.Result
		var err error
		if insert {
			res, err = w.r.stack.Query(ctx, pools.Interactive, w.r.tenant,
				`INSERT INTO orders (tenant_id, id, created_at, amount, status, customer, note) VALUES ($1, $2, now(), 1, 'paid', 'writer', $3)`,
				tenant, id, val)
		} else {
			res, err = w.r.stack.Query(ctx, pools.Interactive, w.r.tenant,
				`UPDATE orders SET note = $3 WHERE tenant_id = $1 AND id = $2`, tenant, id, val)
		}
		if directory.IsFenced(err) && attempt < 5 {
			_ = w.r.router.Refresh(ctx)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		return res.Rows, err
	}
}

// othersSums returns, per node, the checksum of every row of tenants other
// than the moving one.
func (r *runner) othersSums(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range r.nodes {
		c, err := pgx.Connect(ctx, n.DSN())
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRun, err)
		}
		var v string
		err = c.QueryRow(ctx, `SELECT count(*) || '/' || `+directory.ChecksumSQL+` FROM (
			SELECT tenant_id, id, created_at AT TIME ZONE 'UTC', amount, status, customer, note FROM orders WHERE tenant_id <> $1::bigint) t`, r.tenant).Scan(&v)
		c.Close(context.Background())
		if err != nil {
			return nil, fmt.Errorf("%w: checksum other tenants on %s: %w", ErrRun, n.Name, err)
		}
		out[n.Name] = v
	}
	return out, nil
}
