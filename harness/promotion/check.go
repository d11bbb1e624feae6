package promotion

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/isolation/directory"
	"github.com/noisysim/noisysim/reports"
)

// check is the zero-loss checker: it reads back the tenant's checked rows
// at the tenant's node (the target after a move), the tenant's rows left at
// the source after a move and the other tenants' checksums, and hands them
// to verdict.
func (r *runner) check(ctx context.Context, w *writer, othersBefore map[string]string) error {
	node, _, _, err := r.cat.Lookup(ctx, r.tenant)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	conn, err := pgx.Connect(ctx, r.dsn[node])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT id, note FROM orders WHERE tenant_id = $1::bigint AND id < 0`, r.tenant)
	if err != nil {
		return fmt.Errorf("%w: read written rows: %w", ErrRun, err)
	}
	stored, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storedRow, error) {
		var s storedRow
		err := row.Scan(&s.id, &s.note)
		return s, err
	})
	if err != nil {
		return fmt.Errorf("%w: read written rows: %w", ErrRun, err)
	}
	var left int64
	if node != r.out.Source {
		src, err := pgx.Connect(ctx, r.dsn[r.out.Source])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRun, err)
		}
		defer src.Close(context.Background())
		if err := src.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE tenant_id = $1::bigint) +
			(SELECT count(*) FROM tenants WHERE tenant_id = $1::bigint)`, r.tenant).Scan(&left); err != nil {
			return fmt.Errorf("%w: count rows left at the source: %w", ErrRun, err)
		}
	}
	after, err := r.othersSums(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(r.nodes))
	for i, n := range r.nodes {
		names[i] = n.Name
	}
	r.out.Checker = w.verdict(stored, left, othersBefore, after, names)
	return nil
}

// storedRow is one checked row as read back at the tenant's node.
type storedRow struct {
	id   int64
	note string
}

// verdict is the checker's pure part. stored are the tenant's checked rows
// at its node (duplicates included), left its rows still at the source,
// before and after the other tenants' checksums per node. Every
// acknowledged write must be stored exactly once with its last
// acknowledged value, or a value written later without an answer (a write
// cut off may have committed).
func (w *writer) verdict(stored []storedRow, left int64, before, after map[string]string, nodes []string) Checker {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.c
	c.OthersChanged = nil
	seen := map[int64]int{}
	got := map[int64]string{}
	for _, s := range stored {
		seen[s.id]++
		if seen[s.id] == 2 {
			c.Duplicated++
		}
		got[s.id] = s.note
	}
	for id, want := range w.acked {
		v, ok := got[id]
		switch {
		case !ok:
			c.Lost++
		case v != want && !slices.Contains(w.possible[id], v):
			c.Stale++
		}
	}
	c.LeftAtSource = left
	for _, n := range nodes {
		if after[n] != before[n] {
			c.OthersChanged = append(c.OthersChanged, n)
		}
	}
	return c
}

// quiet merges the quiet tenants of the formerly hot node (the source).
func (r *runner) quiet(before, after *metrics.Recorder, snap directory.Snapshot) {
	var ids []int
	for _, t := range r.pop.Tenants {
		if strconv.Itoa(t.ID) != r.tenant && snap.Resolve(strconv.Itoa(t.ID)) == r.out.Source {
			ids = append(ids, t.ID)
		}
	}
	r.out.QuietTenants = ids
	filter := func(tenant int, _ string) bool { return slices.Contains(ids, tenant) }
	r.out.QuietBefore = before.Merged(filter)
	r.out.QuietAfter = after.Merged(filter)
}

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

// report turns the outcome into a report with assertions.
func (r *runner) report(before, after *measured, triggered bool) *reports.Report {
	o := &r.out
	rep := &reports.Report{
		Scenario: r.sc.Name, File: r.sc.File, Seed: r.sc.Seed, ScheduleHash: r.hash,
		Backend:  fmt.Sprintf("local shards (%d nodes)", len(r.nodes)),
		Dominant: r.tenant,
	}
	rep.Configurations = append(rep.Configurations, r.configuration(WindowBefore, before), r.configuration(WindowAfter, after))
	add := func(name string, observed, limit float64, unit, op, detail string, pass bool) {
		rep.Assertions = append(rep.Assertions, reports.Assertion{Name: name, Configuration: WindowAfter, Tenant: r.tenant,
			Observed: observed, Limit: limit, Unit: unit, Op: op, Detail: detail, Passed: pass})
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	add(AssertTriggered, b2f(triggered), 1, "", "==", map[bool]string{true: o.Trigger, false: "did not fire"}[triggered], triggered)
	lb, la := o.Loads[0], o.Loads[1]
	add(AssertHotNode, lb.Skew, r.p.Skew, "", ">", fmt.Sprintf("hot node %s (max/median of active sessions over the ring); the tenant's node is %s", lb.Hot, o.Source),
		lb.Hot == o.Source && lb.Skew > r.p.Skew)
	movedOK := o.Move != nil && triggered
	node := o.Source
	if movedOK {
		node = o.Move.Target
	}
	add(AssertMoved, b2f(movedOK && node == o.Target), 1, "", "==", fmt.Sprintf("tenant %s on %s, want %s", r.tenant, node, o.Target), movedOK && node == o.Target)
	if o.Move != nil {
		add(AssertWritePause, o.Move.PauseSeconds*1000, ms(r.p.MaxPause.Duration()), "ms", "<=",
			fmt.Sprintf("%d pause attempts", o.Move.PauseAttempts), o.Move.PauseSeconds <= r.p.MaxPause.Duration().Seconds())
	}
	c := o.Checker
	add(AssertZeroLoss, float64(c.Lost+c.Duplicated+c.Stale+c.Vanished), 0, "", "==",
		fmt.Sprintf("%d acknowledged writes (%d inserts, %d updates): %d lost, %d duplicated, %d stale, %d updates found no row",
			c.Inserts+c.Updates, c.Inserts, c.Updates, c.Lost, c.Duplicated, c.Stale, c.Vanished),
		c.Lost == 0 && c.Duplicated == 0 && c.Stale == 0 && c.Vanished == 0 && c.Inserts > 0)
	if movedOK {
		add(AssertSourceEmpty, float64(c.LeftAtSource), 0, "", "==", "rows of the tenant left at "+o.Source+" after the grace delete", c.LeftAtSource == 0)
	}
	add(AssertOthers, float64(len(c.OthersChanged)), 0, "", "==", fmt.Sprintf("nodes whose other tenants' rows changed: %v", c.OthersChanged), len(c.OthersChanged) == 0)
	add(AssertSkewReduced, la.Skew, lb.Skew, "", "<", fmt.Sprintf("skew after vs before (%.2f)", lb.Skew), movedOK && la.Skew < lb.Skew)
	slack := r.sc.Assertions.QuietP99.Slack.Duration()
	limit := r.p.QuietP99Factor*ms(o.QuietBefore.P99) + ms(slack)
	add(AssertQuietP99, ms(o.QuietAfter.P99), limit, "ms", "<=",
		fmt.Sprintf("quiet tenants of %s after the move (before: %.1f ms; %d/%d samples)", o.Source, ms(o.QuietBefore.P99), o.QuietAfter.Count, o.QuietBefore.Count),
		o.QuietAfter.Count > 0 && ms(o.QuietAfter.P99) <= limit)
	// A configuration passed when the assertions made against it did.
	rep.Passed = true
	for _, a := range rep.Assertions {
		rep.Passed = rep.Passed && a.Passed
		for i := range rep.Configurations {
			if rep.Configurations[i].Name == a.Configuration && !a.Passed {
				rep.Configurations[i].Passed = false
			}
		}
	}
	rep.Notes = append(r.notes, r.figureNotes()...)
	return rep
}

// figureNotes are the move's figures and the loads, as notes.
func (r *runner) figureNotes() []string {
	o := &r.out
	var out []string
	if f := o.Move; f != nil {
		out = append(out, fmt.Sprintf("move of tenant %s %s → %s: copied %d rows (%.2f MB) in %.2f s: %.2f MB/s, %.0f rows/s; %d captured changes in %d rounds; write pause %.1f ms (%d attempts); total %.2f s; %d rows deleted at the source",
			f.Tenant, f.Source, f.Target, f.CopiedRows, float64(f.CopiedBytes)/(1<<20), f.CopySeconds, f.MBPerSecond, f.RowsPerSecond,
			f.Changes, f.CatchUpRounds, f.PauseSeconds*1000, f.PauseAttempts, f.TotalSeconds, f.DeletedRows))
	}
	for _, l := range o.Loads {
		s := fmt.Sprintf("%s: %d samples, skew %.2f (DB time %.2f), hot %s:", l.Window, l.Samples, l.Skew, l.DBTimeSkew, l.Hot)
		for _, n := range l.Nodes {
			s += fmt.Sprintf(" %s %.2f active/%.1f s", n.Name, n.Active, n.DBTime)
		}
		out = append(out, s)
	}
	c := o.Checker
	out = append(out, fmt.Sprintf("checker: %d inserts and %d updates acknowledged, %d writes failed (not acknowledged), longest write %.0f ms; %d lost, %d duplicated, %d stale, %d updates found no row, %d left at the source",
		c.Inserts, c.Updates, c.Errors, c.MaxWait*1000, c.Lost, c.Duplicated, c.Stale, c.Vanished, c.LeftAtSource))
	return out
}
