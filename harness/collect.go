package harness

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// cleanState is what is left over after a configuration's run.
type cleanState struct {
	inFlight int64 // limiter slots still held
	borrowed int64 // pool connections still borrowed
	tagged   int64 // t:* sessions in pg_stat_activity, over every node
}

// cleanAfter reads what the run left behind, with the stack still open: its
// idle connections must show their class name, never a tenant.
func (r *runner) cleanAfter(ctx context.Context, st *stack) (cleanState, error) {
	var cs cleanState
	for _, l := range st.limiters {
		cs.inFlight += int64(l.Stat().Total.InFlight)
	}
	// Connections given up on (requests cut off at the end) are closed
	// after their calls return: wait for them before counting.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	werr := st.WaitClosed(wctx)
	cancel()
	if werr != nil && ctx.Err() != nil {
		return cs, ctx.Err()
	}
	for _, p := range st.Stat().Pools {
		cs.borrowed += int64(p.AcquiredConns)
	}
	for _, n := range r.cluster.Nodes() {
		n, err := taggedSessions(ctx, n, r.roleNames())
		if err != nil {
			return cs, fmt.Errorf("%w: %w", ErrRun, err)
		}
		cs.tagged += n
	}
	return cs, nil
}

// settleLimit bounds the wait for the previous configuration's statements
// to end before the next configuration's timeline starts.
const settleLimit = time.Minute

// settle waits until no session of noisysim's roles runs a statement on any
// node (what the previous configuration, prev, left running, such as
// reports its clients gave up on, would load the next one's baseline), for
// at most settleLimit; it notes how long it waited, or that it gave up.
func (r *runner) settle(ctx context.Context, prev string) error {
	t0 := time.Now()
	for {
		var busy int64
		for _, n := range r.cluster.Nodes() {
			b, err := activeSessions(ctx, n, r.roleNames())
			if err != nil {
				return fmt.Errorf("%w: %w", ErrRun, err)
			}
			busy += b
		}
		waited := time.Since(t0)
		switch {
		case busy == 0:
			if waited > time.Second {
				r.note("waited %.1f s for the statements %s left running to end", waited.Seconds(), prev)
			}
			return nil
		case waited > settleLimit:
			r.note("%d statements %s left running still ran after %s: the next configuration starts beside them", busy, prev, settleLimit)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrRun, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// activeSessions counts the sessions of roles (the run's own: another run's
// agents may share the database) running a statement on node.
func activeSessions(ctx context.Context, node backend.Node, roles []string) (int64, error) {
	conn, err := pgx.Connect(ctx, node.DSN())
	if err != nil {
		return 0, fmt.Errorf("connect to %s: %w", node.Name, err)
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = ANY($1) AND state <> 'idle' AND pid <> pg_backend_pid()`, roles).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read pg_stat_activity on %s: %w", node.Name, err)
	}
	return n, nil
}

// taggedSessions counts the sessions of roles on node (the run's own: on
// a shared database another run's agents, or the user's own application,
// may tag sessions of theirs) whose application_name carries a tenant tag.
func taggedSessions(ctx context.Context, node backend.Node, roles []string) (int64, error) {
	conn, err := pgx.Connect(ctx, node.DSN())
	if err != nil {
		return 0, fmt.Errorf("connect to %s: %w", node.Name, err)
	}
	defer conn.Close(context.Background())
	var n int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1 || '%' AND usename = ANY($2)`, pools.TagPrefix, roles).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read pg_stat_activity on %s: %w", node.Name, err)
	}
	return n, nil
}

func topShares(shares map[string]*pools.Window, n int) []reports.Share {
	var out []reports.Share
	for t, s := range shares {
		out = append(out, reports.Share{Tenant: t, DBTime: ms(s.Total), Share: s.Share})
	}
	slices.SortFunc(out, func(a, b reports.Share) int {
		if a.DBTime != b.DBTime {
			if a.DBTime > b.DBTime {
				return -1
			}
			return 1
		}
		if tenantLess(a.Tenant, b.Tenant) {
			return -1
		}
		return 1
	})
	return out[:min(n, len(out))]
}

// rows turns metrics summaries into report rows. The DB-time share of a row
// is the tenant's share of all DB time (over all its classes), as the
// ledger ranks tenants; DBTime is the row's isolation class's DB time.
func (r *runner) rows(sums []metrics.Summary, shares map[string]*pools.Window) []reports.TenantRow {
	out := make([]reports.TenantRow, 0, len(sums))
	for _, s := range sums {
		tenant := r.key(s.Tenant)
		row := reports.TenantRow{
			Tenant: tenant, Class: s.Class, Count: s.Count,
			Rejected:      s.ErrorsByClass[string(scenario.ErrorQueueFull)] + s.ErrorsByClass[string(scenario.ErrorWaitExceeded)],
			Errors:        s.Errors,
			ErrorsByClass: s.ErrorsByClass,
			Dropped:       s.Dropped, Incomplete: s.Incomplete,
			P50: ms(s.P50), P99: ms(s.P99), Max: ms(s.Max), ServiceP99: ms(s.ServiceP99),
			SigFigs: s.SigFigs,
		}
		if sh, ok := shares[tenant]; ok {
			row.DBTimeShare = sh.Share
			if c, ok := r.classes[s.Class]; ok {
				// Several workload classes may share an isolation class; the
				// ledger knows the isolation class only.
				row.DBTime = ms(sh.ByClass[pools.Class(c.IsolationClass)])
			}
		}
		out = append(out, row)
	}
	return out
}

// quietAllRows merges every quiet tenant's histograms, one row per class.
// DB-time share is the quiet tenants' combined share, each counted once.
func (r *runner) quietAllRows(rec *metrics.Recorder, shares map[string]*pools.Window) []reports.TenantRow {
	return r.quietRows(rec, shares, r.quietGroups()[:1])
}

// quietWorkerRows merges the quiet tenants on the dominant tenant's worker
// apart from the others (topology citus), one row per class and group
// with requests.
func (r *runner) quietWorkerRows(rec *metrics.Recorder, shares map[string]*pools.Window) []reports.TenantRow {
	return r.quietRows(rec, shares, r.quietGroups()[1:])
}

func (r *runner) quietRows(rec *metrics.Recorder, shares map[string]*pools.Window, groups []quietGroup) []reports.TenantRow {
	var out []reports.TenantRow
	for _, class := range r.quietClasses() {
		for _, g := range groups {
			m := quietMerged(rec, g, class)
			if g.label != reports.QuietAll && m.Count == 0 {
				continue
			}
			m.Tenant, m.Class = 0, class
			rows := r.rows([]metrics.Summary{m}, nil)
			rows[0].Tenant = g.label
			for i, v := range m.Spectrum {
				rows[0].Percentiles = append(rows[0].Percentiles, reports.Percentile{P: metrics.SpectrumPercentiles[i], Ms: ms(v)})
			}
			share := 0.0
			for id := 1; id <= r.pop.Len() && len(shares) > 0; id++ {
				if w, ok := shares[r.key(id)]; ok && g.in(id) {
					share += w.Share
				}
			}
			rows[0].DBTimeShare = min(share, 1)
			out = append(out, rows...)
		}
	}
	return out
}

// quietGroup is a set of quiet tenants merged into one row.
type quietGroup struct {
	label string
	in    func(tenant int) bool
}

// aggregate is g's tenants' series of class, named as rec's aggregate
// and merge of them.
func (g quietGroup) aggregate(class string) metrics.Aggregate {
	return metrics.Aggregate{Name: g.label + "\x00" + class, In: func(t int, c string) bool { return g.in(t) && c == class }}
}

// quietMerged returns the Summary of g's tenants' series of class: rec's
// aggregate of them when it records one (at its SigFigs), else their
// series merged (at its SeriesSigFigs).
func quietMerged(rec *metrics.Recorder, g quietGroup, class string) metrics.Summary {
	a := g.aggregate(class)
	if m, ok := rec.Aggregate(a.Name); ok {
		return m
	}
	return rec.MergedAs(a.Name, a.In)
}

// windowMetrics is the metrics configuration of a timeline's windows: the
// tenant × class series at metrics.TenantSigFigs (2 significant digits,
// which bounds their memory, see metrics.TenantSigFigs) and quiet (all)
// of each quiet class recorded apart at metrics.DefaultSigFigs (3), so that
// the merged quiet rows, their interval series and the quiet_p99 verdicts
// on them keep the precision they had. Every series keeps 3 digits where
// an aggregate cannot be recorded apart: the agents of a segmented run or
// a run whose histograms are written out (noisysim merge rebuilds
// quiet (all) from the series) and topology citus (its worker groups are
// known only once the noise starts).
func (r *runner) windowMetrics() metrics.Config {
	cfg := metrics.Config{Classify: errorClass}
	if !r.opts.Segment.Whole() || r.opts.OnWindows != nil || r.citus != nil {
		return cfg
	}
	cfg.SeriesSigFigs = metrics.TenantSigFigs
	all := r.quietGroups()[0]
	for _, class := range r.quietClasses() {
		cfg.Aggregates = append(cfg.Aggregates, all.aggregate(class))
	}
	return cfg
}

// quietGroups returns the merged quiet rows' groups: all quiet tenants,
// and on topology citus (once the dominant tenant's worker is known) those
// on its worker apart from the others.
func (r *runner) quietGroups() []quietGroup {
	quiet := func(t int) bool { return t != scenario.DominantTenant }
	out := []quietGroup{{reports.QuietAll, quiet}}
	if r.citus != nil && r.citus.hotQuiet != nil {
		hot := r.citus.hotQuiet
		out = append(out,
			quietGroup{reports.QuietHotWorker, func(t int) bool { return quiet(t) && hot[t] }},
			quietGroup{reports.QuietOtherWorkers, func(t int) bool { return quiet(t) && !hot[t] }})
	}
	return out
}

// windowStats counts a window's requests from its rows: each request is
// recorded in the window it was intended in. planned is the schedule's
// arrivals in the window (0 when users set the pace).
func windowStats(sums []metrics.Summary, planned int64, length time.Duration) reports.RunStats {
	out := reports.RunStats{RejectedByReason: map[string]int64{}, ErrorsByClass: map[string]int64{}}
	for _, x := range sums {
		out.Issued += x.Count
		out.Completed += x.Count - x.Incomplete
		out.Dropped += x.Dropped
		out.Incomplete += x.Incomplete
		out.Errors += x.Errors
		for k, v := range x.ErrorsByClass {
			out.ErrorsByClass[k] += v
			if k == string(scenario.ErrorQueueFull) || k == string(scenario.ErrorWaitExceeded) {
				out.Rejected += v
				out.RejectedByReason[k] += v
			}
		}
	}
	if length > 0 {
		if planned > 0 {
			out.TargetRate = float64(planned) / length.Seconds()
		}
		out.AchievedRate = float64(out.Issued) / length.Seconds()
	}
	return out
}

// configurationReport turns one configuration's timeline into its report:
// every window, and the quiet_p99 window and baseline as the
// configuration's own rows.
func (r *runner) configurationReport(c *scenario.Configuration, tr *timelineRun, took time.Duration) reports.Configuration {
	out := reports.Configuration{Name: c.Name, Expect: string(c.Expect), Duration: took.Seconds(), Series: tr.series, Actions: tr.actions}
	planned := r.planned
	if r.sc.Load.Model == scenario.ModelClosed {
		planned = make([]int64, len(r.steps)) // users set the pace: no target rate
	}
	window, baseline := r.sc.Assertions.QuietP99.QuietWindows()
	top := topQuietTenants(tr.windows, topQuietSeries)
	shown := shownWindow(tr.windows, window)
	for i, w := range tr.windows {
		shares := tr.shares(i)
		sums := w.rec.Summary()
		rw := reports.Window{
			Name: w.step.Name, Start: w.start.Seconds(), End: w.end.Seconds(),
			Senders: w.step.Senders.String(), Measured: w.step.Measure,
			Tenants: r.rows(sums, shares), QuietAll: r.quietAllRows(w.rec, shares), QuietWorkers: r.quietWorkerRows(w.rec, shares),
			Stats: windowStats(sums, plannedIn(w, planned[i]), w.end-w.start), TopDBTime: topShares(shares, 10),
		}
		if wa := w.step.Watch; wa != nil {
			if sw, ok := wa.Config.(scenario.ShareWatcher); ok {
				tenant, threshold := sw.ShareThreshold()
				rw.ShareAlert = &reports.ShareAlert{Policy: wa.Policy, Tenant: r.key(tenant), Threshold: threshold}
			}
		}
		out.Windows = append(out.Windows, rw)
		for _, iv := range intervals(w.rec, r.key, top) {
			iv.Window = w.step.Name
			out.Intervals = append(out.Intervals, iv)
		}
		if i == shown {
			out.Tenants, out.QuietAll, out.Stats, out.TopDBTime = rw.Tenants, rw.QuietAll, rw.Stats, rw.TopDBTime
		}
		if w.step.Name == baseline {
			out.Solo, out.SoloQuietAll = r.rows(sums, nil), r.quietAllRows(w.rec, nil)
		}
	}
	r.citusWindows(tr, out.Windows)
	out.Recovery = r.recovery(tr, &out)
	return out
}

// shownWindow returns the index of the window whose rows are the
// configuration's own (Configuration.Tenants, Stats): the window named
// name (quiet_p99's), or the one an interruption cut short before it was
// reached; -1 when there is neither.
func shownWindow(windows []*window, name string) int {
	for i, w := range windows {
		if w.step.Name == name || w.cut {
			return i
		}
	}
	return -1
}

// topQuietSeries is how many quiet tenants have a latency series of
// their own (Configuration.Intervals) beside the quiet tenants merged.
const topQuietSeries = 3

// topQuietTenants returns the n quiet tenants with the most requests over
// windows, most first (ties by id).
func topQuietTenants(windows []*window, n int) []int {
	count := map[int]int64{}
	for _, w := range windows {
		for _, s := range w.rec.Summary() {
			if s.Tenant != scenario.DominantTenant {
				count[s.Tenant] += s.Count
			}
		}
	}
	ids := slices.SortedFunc(maps.Keys(count), func(a, b int) int { return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(a, b)) })
	return ids[:min(n, len(ids))]
}

// intervals returns the per-second latencies of the dominant tenant, of
// all quiet tenants merged and of each quiet tenant of top, per class;
// times from the timeline's start.
func intervals(rec *metrics.Recorder, key func(int) string, top []int) []reports.Interval {
	width := rec.Config().Interval
	if width <= 0 {
		return nil
	}
	conv := func(tenant string, iv metrics.IntervalSnapshot) reports.Interval {
		return reports.Interval{
			Start: iv.Start.Seconds(), End: (iv.Start + width).Seconds(), Tenant: tenant, Class: iv.Class,
			Count: iv.Count, P50: ms(iv.P50), P99: ms(iv.P99), Max: ms(iv.Max),
		}
	}
	var out []reports.Interval
	classes := map[string]bool{}
	for _, s := range rec.Summary() {
		classes[s.Class] = true
	}
	for _, class := range sortedKeys(classes) {
		for _, iv := range rec.MergedIntervals(func(t int, c string) bool { return t == scenario.DominantTenant && c == class }) {
			iv.Class = class
			out = append(out, conv(key(scenario.DominantTenant), iv))
		}
		ivs, ok := rec.AggregateIntervals(quietAll + "\x00" + class)
		if !ok {
			ivs = rec.MergedIntervals(func(t int, c string) bool { return t != scenario.DominantTenant && c == class })
		}
		for _, iv := range ivs {
			iv.Class = class
			out = append(out, conv(quietAll, iv))
		}
		for _, id := range top {
			for _, iv := range rec.MergedIntervals(func(t int, c string) bool { return t == id && c == class }) {
				iv.Class = class
				out = append(out, conv(key(id), iv))
			}
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// quietClasses are the classes quiet tenants send.
func (r *runner) quietClasses() []string {
	var out []string
	for _, c := range r.sc.Classes {
		if c.Senders != scenario.SendersDominant {
			out = append(out, c.Name)
		}
	}
	return out
}

// p99Samples returns the quiet tenants' figures of rec for the quiet
// classes: one per tenant × class and one merged over them per class.
func (r *runner) p99Samples(rec *metrics.Recorder) []p99Sample {
	quiet := map[string]bool{}
	for _, n := range r.quietClasses() {
		quiet[n] = true
	}
	var ps []p99Sample
	for _, s := range rec.Summary() {
		if s.Tenant != scenario.DominantTenant && quiet[s.Class] {
			ps = append(ps, p99Sample{Tenant: r.key(s.Tenant), Class: s.Class, Count: s.Count, P99: s.P99, CI: s.P99CI})
		}
	}
	for _, class := range r.quietClasses() {
		for _, g := range r.quietGroups() {
			m := quietMerged(rec, g, class)
			if g.label == quietAll || m.Count > 0 {
				ps = append(ps, p99Sample{Tenant: g.label, Class: class, Count: m.Count, P99: m.P99, CI: m.P99CI})
			}
		}
	}
	return ps
}

// assertions evaluates the scenario's assertions on one configuration's
// timeline: quiet_p99 over its window against its baseline, the others
// over every measured window or the whole timeline.
func (r *runner) assertions(c *scenario.Configuration, tr *timelineRun, clean cleanState) []reports.Assertion {
	a := r.sc.Assertions
	var out []reports.Assertion

	// Quiet tenants' p99 in the window against the baseline's.
	rule := p99Rule{Factor: a.QuietP99.Factor, Slack: a.QuietP99.Slack.Duration(), MinSamples: int64(a.QuietP99.MinSamples)}
	wname, bname := a.QuietP99.QuietWindows()
	if w, ok := tr.window(wname); ok {
		if b, ok := tr.window(bname); ok {
			out = append(out, quietP99(c.Name, rule, wname, bname, r.p99Samples(b.rec), r.p99Samples(w.rec))...)
		}
	}

	out = append(out, r.verdicts(c, tr, rule, bname)...)
	// Matched A/B blocks: each B against the A just before it.
	if ab := a.QuietP99AB; ab.Blocks > 0 {
		var blocks []abBlock
		for i := 1; i <= ab.Blocks; i++ {
			wa, okA := tr.window(scenario.ABPhase(i, scenario.ABA))
			wb, okB := tr.window(scenario.ABPhase(i, scenario.ABB))
			if okA && okB {
				blocks = append(blocks, abBlock{a: quietAllOf(r.p99Samples(wa.rec)), b: quietAllOf(r.p99Samples(wb.rec))})
			}
		}
		out = append(out, quietP99AB(c.Name, rule, blocks,
			fmt.Sprintf("%s..%s", scenario.ABPhase(1, scenario.ABB), scenario.ABPhase(ab.Blocks, scenario.ABB)),
			fmt.Sprintf("%s..%s", scenario.ABPhase(1, scenario.ABA), scenario.ABPhase(ab.Blocks, scenario.ABA)))...)
	}

	// The noisy tenant is rejected, and every rejection reached its client.
	ex := tr.ex
	if a.NoisyRejections && len(ex.stack.limiters) > 0 && r.dominantSendsLimited(c) {
		dom := r.key(scenario.DominantTenant)
		b, e := tr.limitsBefore[dom], tr.limitsAt[dom]
		qf, we := e.RejectedQueueFull-b.RejectedQueueFull, e.RejectedWaitExceeded-b.RejectedWaitExceeded
		seenQF, seenWE := ex.seenBy(dom)
		out = append(out,
			countAssert(AssertNoisyRejections, c.Name, dom, "", ">", qf+we, 0, "limiter rejections of the noisy tenant"),
			countAssert(AssertRejectionsCounted, c.Name, dom, string(scenario.ErrorQueueFull), "==", qf, seenQF,
				fmt.Sprintf("limiter counted %d, clients saw %d", qf, seenQF)),
			countAssert(AssertRejectionsCounted, c.Name, dom, string(scenario.ErrorWaitExceeded), "==", we, seenWE,
				fmt.Sprintf("limiter counted %d, clients saw %d", we, seenWE)),
		)
	}

	for _, w := range tr.measured() {
		out = append(out, inWindow(w.step.Name, quietRejections(c.Name, w.rec.Summary(), r.key))...)
		out = append(out, inWindow(w.step.Name, r.unexpectedErrors(c.Name, w.rec.Summary()))...)
	}

	if len(tr.actions) > 0 {
		var failed, notStarted int64
		var errs []string
		for _, act := range tr.actions {
			if act.NotStarted {
				notStarted++
			}
			if act.Error != "" {
				failed++
				errs = append(errs, act.Type+": "+act.Error)
			}
		}
		detail := fmt.Sprintf("%d actions", len(tr.actions))
		if len(errs) > 0 {
			detail = strings.Join(errs, "; ")
		}
		if notStarted > 0 {
			detail += fmt.Sprintf(" (%d not started: the run stopped first)", notStarted)
		}
		out = append(out, countAssert(AssertActionsOK, c.Name, "", "", "<=", failed, 0, detail))
	}

	if a.CleanAfter {
		out = append(out,
			countAssert(AssertCleanInFlight, c.Name, "", "", "<=", clean.inFlight, 0, "limiter slots held after the run"),
			countAssert(AssertCleanBorrowed, c.Name, "", "", "<=", clean.borrowed, 0, "pool connections borrowed after the run"),
			countAssert(AssertCleanTagged, c.Name, "", "", "<=", clean.tagged, 0, "t:* sessions in pg_stat_activity after the run"),
		)
	}
	return out
}

// inWindow sets the window of each assertion.
func inWindow(window string, as []reports.Assertion) []reports.Assertion {
	for i := range as {
		as[i].Window = window
	}
	return as
}

// unexpectedErrors asserts that no error falls outside allowed_errors:
// drops and ops cut off at the end count as errors (the system did not
// serve them), unless allowed.
func (r *runner) unexpectedErrors(config string, sums []metrics.Summary) []reports.Assertion {
	allowed := map[string]bool{}
	for _, e := range r.sc.Assertions.AllowedErrors {
		allowed[string(e)] = true
	}
	var out []reports.Assertion
	var total int64
	for _, s := range sums {
		var n int64
		var kinds []string
		for k, v := range s.ErrorsByClass {
			if !allowed[k] {
				n += v
				kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
			}
		}
		if s.Dropped > 0 && !allowed["dropped"] {
			n += s.Dropped
			kinds = append(kinds, fmt.Sprintf("dropped %d", s.Dropped))
		}
		if s.Incomplete > 0 && !allowed["incomplete"] {
			n += s.Incomplete
			kinds = append(kinds, fmt.Sprintf("incomplete %d", s.Incomplete))
		}
		if n > 0 {
			slices.Sort(kinds)
			out = append(out, countAssert(AssertNoUnexpectedError, config, r.key(s.Tenant), s.Class, "<=", n, 0,
				fmt.Sprint(kinds)))
		}
		total += n
	}
	return append(out, countAssert(AssertNoUnexpectedError, config, "", "", "<=", total, 0, "all tenants and classes"))
}

// quietRejections asserts that no quiet tenant was rejected: isolation that
// rejects the quiet tenants fails them another way, whatever allowed_errors
// says (and a rejected request is fast, so it would flatter their p99).
func quietRejections(config string, sums []metrics.Summary, key func(int) string) []reports.Assertion {
	var out []reports.Assertion
	var total int64
	for _, s := range sums {
		if s.Tenant == scenario.DominantTenant {
			continue
		}
		n := s.ErrorsByClass[string(scenario.ErrorQueueFull)] + s.ErrorsByClass[string(scenario.ErrorWaitExceeded)] +
			s.ErrorsByClass[string(scenario.ErrorHTTP429)]
		if n > 0 {
			out = append(out, countAssert(AssertQuietNotRejected, config, key(s.Tenant), s.Class, "<=", n, 0,
				"limiter rejections of a quiet tenant"))
		}
		total += n
	}
	return append(out, countAssert(AssertQuietNotRejected, config, quietAll, "", "<=", total, 0,
		"limiter rejections of all quiet tenants"))
}

// dominantSendsLimited reports whether the dominant tenant sends a class
// whose isolation class has a limiter in configuration c.
func (r *runner) dominantSendsLimited(c *scenario.Configuration) bool {
	if c.Mode != scenario.ModeIsolated {
		return false
	}
	for _, cl := range r.sc.Classes {
		if cl.Senders == scenario.SendersQuiet || cl.HTTP != nil {
			// An HTTP class's requests meet the service's limiter, not
			// noisysim's.
			continue
		}
		if p := c.Pool(cl.IsolationClass); p != nil && p.Limiter.Enabled {
			return true
		}
	}
	return false
}

// expectations adds, in a full run, one assertion per control (expect:
// fail): it must have failed at least one of its own assertions.
func (r *runner) expectations(rep *reports.Report) []reports.Assertion {
	if r.opts.Only != "" {
		return nil
	}
	var out []reports.Assertion
	for _, c := range rep.Configurations {
		if c.Expect != string(scenario.ExpectFail) {
			continue
		}
		var failed, marginal, passedMarginal int64
		for _, a := range rep.Assertions {
			if a.Configuration != c.Name || a.Skipped {
				continue
			}
			switch {
			case !a.Passed:
				failed++
				if a.Marginal {
					marginal++
				}
			case a.Marginal:
				passedMarginal++
			}
		}
		a := countAssert(AssertControlFails, c.Name, "", "", ">", failed, 0,
			"a control must fail its assertions: proof the scenario can see the problem")
		switch {
		case failed > 0 && marginal == failed:
			// Every failure could be noise: so could the proof.
			a.Marginal = true
			a.Detail += "; marginal: each of its failures is marginal (the limit inside the p99's 95% CI)"
		case failed == 0 && passedMarginal > 0:
			// A pass that could as well have been a failure: so could
			// the missing proof.
			a.Marginal = true
			are := "are"
			if passedMarginal == 1 {
				are = "is"
			}
			a.Detail += fmt.Sprintf("; marginal: it passed, but %s %s marginal (the limit inside the p99's 95%% CI): it could as well have failed",
				reports.Plural(int(passedMarginal), "verdict"), are)
		}
		out = append(out, a)
	}
	return out
}

// setPhase starts a new phase for progress reporting.
func (r *runner) setPhase(phase, config string, total time.Duration) {
	r.progressMu.Lock()
	r.progress = Progress{Phase: phase, Configuration: config, Total: total}
	r.phaseStart = time.Now()
	r.issued.Store(0)
	r.progressMu.Unlock()
	if r.guard != nil {
		r.guard.Begin(r.guardWindow(phase, config))
	}
	if o := r.opts.Observer; o != nil {
		o.Phase(r.observedPhase(phase, config))
	}
}

// observedPhase is what an Observer is told of a phase: config only when
// it names one of the scenario's configurations. Otherwise (calibrate's
// class, hot-shard's load or warmup) it goes into the phase, e.g.
// "calibrate (report)", so that a configuration label never names a class.
func (r *runner) observedPhase(phase, config string) (string, string) {
	if config == "" {
		return "", phase
	}
	for _, c := range r.sc.Configurations {
		if c.Name == config {
			return config, phase
		}
	}
	return "", phase + " (" + config + ")"
}

func (r *runner) snapshot(last *int64, lastAt *time.Time) Progress {
	r.progressMu.Lock()
	p := r.progress
	p.Elapsed = time.Since(r.phaseStart)
	r.progressMu.Unlock()
	p.Issued = r.issued.Load()
	if now := time.Now(); last != nil && now.After(*lastAt) {
		if p.Issued >= *last {
			p.Rate = float64(p.Issued-*last) / now.Sub(*lastAt).Seconds()
		}
		*last, *lastAt = p.Issued, now
	}
	return p
}

// startProgress reports progress every ProgressEvery until the returned
// func is called.
func (r *runner) startProgress() (stop func()) {
	if r.opts.Progress == nil {
		return func() {}
	}
	every := r.opts.ProgressEvery
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		var last int64
		lastAt := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.opts.Progress(r.snapshot(&last, &lastAt))
			}
		}
	}()
	return func() { close(done); <-finished }
}

// plannedIn returns the arrivals window w was to send: planned, or for a
// phase with until (drawn over its max) or one an interruption cut short
// the arrivals it sent before it ended.
func plannedIn(w *window, planned int64) int64 {
	if (w.step.Until != "" || w.cut) && planned > 0 {
		return w.sent
	}
	return planned
}

// quietAllOf keeps the samples merged over the quiet tenants.
func quietAllOf(ps []p99Sample) []p99Sample {
	var out []p99Sample
	for _, p := range ps {
		if p.Tenant == quietAll {
			out = append(out, p)
		}
	}
	return out
}
