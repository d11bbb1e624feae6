package harness

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// AssertTaggedOnly is the assertion that every active backend of the
// configuration's roles carried a tenant tag.
const AssertTaggedOnly = "tagged_only"

// activityEvery is the step of the pg_stat_activity sampler.
const activityEvery = 100 * time.Millisecond

// maxUntaggedQueries bounds the query texts kept of untagged activity.
const maxUntaggedQueries = 10

// activitySQL reads the client backends of the given roles (the sampling
// session excluded): tag, state, whether waiting, how long the current
// query has run (ms) and its text.
const activitySQL = `SELECT coalesce(application_name, ''), coalesce(state, ''),
	wait_event_type IS NOT NULL AND wait_event_type <> 'Client',
	coalesce(extract(epoch FROM clock_timestamp() - query_start) * 1000, 0)::float8,
	left(coalesce(query, ''), 200)
FROM pg_stat_activity
WHERE usename = ANY($1) AND pid <> pg_backend_pid() AND backend_type = 'client backend'`

// tagStatement matches a statement that only sets or resets a session's
// application_name (or resets the whole session), whatever the service's
// language or driver: SELECT set_config('application_name', 't:7', false),
// SET [SESSION|LOCAL] application_name = 't:7', RESET application_name,
// RESET ALL, DISCARD ALL. A tag takes effect while its statement runs and a
// reset ends it while its statement runs, so pg_stat_activity may show
// either active without a tenant tag: it is the tagging itself, not work
// around it. Only a whole statement matches; work sent with it in one query
// string does not.
var tagStatement = regexp.MustCompile(`(?is)^\s*(?:` +
	`select\s+(?:pg_catalog\.)?set_config\s*\(\s*'application_name'\s*,\s*(?:'(?:[^']|'')*'|\$\d+)\s*,\s*(?:true|false|\$\d+)\s*\)` +
	`|set\s+(?:session\s+|local\s+)?application_name\s*(?:=|to)\s*(?:'(?:[^']|'')*'|"[^"]*"|\$\d+|default)` +
	`|reset\s+(?:all|application_name)` +
	`|discard\s+all` +
	`)\s*;?\s*$`)

// housekeeping reports whether an untagged active backend's query is the
// tagging around a tenant's work: noisysim's own stack's statements, or
// any service's tag and reset statements (tagStatement).
func housekeeping(query string) bool {
	return pools.Housekeeping(query) || tagStatement.MatchString(query)
}

// activitySampler samples pg_stat_activity for a set of roles every
// activityEvery: a ledger of what a black-box service does on the
// database, per tenant tag.
type activitySampler struct {
	mu   sync.Mutex
	rows map[string]*reports.ActivityRow // by tag; "" untagged
	// phase names the timeline's phase running; windows counts active
	// backends per phase and tag, phases lists the phases in order seen.
	phase    func() string
	windows  map[string]map[string]int64
	wsamples map[string]int64
	phases   []string
	queries  []string
	samples  int64
	failures int64
	lastErr  error
	stop     func()
	// origin is when sampling started; seconds counts active backends per
	// tag in each second from it, for the share alerts.
	origin  time.Time
	seconds []activitySecond
	alert   shareAlertRule
}

// activitySecond is one second of samples: the phase at its first sample,
// and active backends seen per tag ("" untagged).
type activitySecond struct {
	phase  string
	active map[string]int64
}

// shareAlertRule is service.share_alert: a tenant above threshold of the
// active-backend time in every second of window seconds.
type shareAlertRule struct {
	threshold float64
	window    int
}

// startActivity samples the roles' backends on dsn until stop is called.
func startActivity(ctx context.Context, dsn string, roles []string, phase func() string, alert shareAlertRule) (*activitySampler, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to sample pg_stat_activity: %w", ErrRun, err)
	}
	s := &activitySampler{rows: map[string]*reports.ActivityRow{}, phase: phase,
		windows: map[string]map[string]int64{}, wsamples: map[string]int64{}, origin: time.Now(), alert: alert}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close(context.Background())
		tick := time.NewTicker(activityEvery)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				s.sample(sctx, conn, roles)
			}
		}
	}()
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); <-done }) }
	return s, nil
}

func (s *activitySampler) sample(ctx context.Context, conn *pgx.Conn, roles []string) {
	rows, err := conn.Query(ctx, activitySQL, roles)
	if err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		return
	}
	type backend struct {
		tag, state, query string
		waiting           bool
		ms                float64
	}
	var seen []backend
	for rows.Next() {
		var b backend
		if err := rows.Scan(&b.tag, &b.state, &b.waiting, &b.ms, &b.query); err != nil {
			rows.Close()
			s.fail(err)
			return
		}
		seen = append(seen, b)
	}
	if err := rows.Err(); err != nil {
		s.fail(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	active := map[string]int64{}
	ph := ""
	if s.phase != nil {
		ph = s.phase()
	}
	if s.windows[ph] == nil {
		s.windows[ph] = map[string]int64{}
		s.phases = append(s.phases, ph)
	}
	s.wsamples[ph]++
	sec := int(time.Since(s.origin) / time.Second)
	for len(s.seconds) <= sec {
		s.seconds = append(s.seconds, activitySecond{phase: ph, active: map[string]int64{}})
	}
	for _, b := range seen {
		tag := ""
		if t, ok := strings.CutPrefix(b.tag, pools.TagPrefix); ok {
			tag = t
		}
		if tag == "" && (housekeeping(b.query) || strings.HasPrefix(b.tag, pools.AppNamePrefix)) {
			// A service's tag or reset statement caught as it runs; or
			// the stack's own connection around a tagged call: its tag
			// and reset, or the instant between a statement's commit
			// (which ends a transaction-local tag) and its backend going
			// idle. The stack runs no work untagged.
			continue
		}
		row := s.rows[tag]
		switch b.state {
		case "active":
			if row == nil {
				row = &reports.ActivityRow{Tenant: tag}
				s.rows[tag] = row
			}
			row.ActiveSamples++
			active[tag]++
			s.windows[ph][tag]++
			s.seconds[sec].active[tag]++
			if b.waiting {
				row.Waiting++
			}
			row.Longest = max(row.Longest, b.ms)
			if tag == "" && len(s.queries) < maxUntaggedQueries && !slices.Contains(s.queries, b.query) {
				s.queries = append(s.queries, b.query)
			}
		case "idle in transaction", "idle in transaction (aborted)":
			if row == nil {
				row = &reports.ActivityRow{Tenant: tag}
				s.rows[tag] = row
			}
			row.IdleInTx++
		}
	}
	for tag, n := range active {
		s.rows[tag].MaxActive = max(s.rows[tag].MaxActive, n)
	}
}

func (s *activitySampler) fail(err error) {
	s.mu.Lock()
	s.failures++
	s.lastErr = err
	s.mu.Unlock()
}

// report returns the sampled activity: per tenant tag, most active first,
// and the untagged backends apart.
func (s *activitySampler) report() *reports.Activity {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &reports.Activity{Interval: float64(activityEvery.Milliseconds()), Samples: s.samples, Tenants: []reports.ActivityRow{}}
	var total int64
	for _, r := range s.rows {
		total += r.ActiveSamples
	}
	step := activityEvery.Seconds()
	for tag, r := range s.rows {
		row := *r
		row.Active = float64(row.ActiveSamples) * step
		if total > 0 {
			row.Share = float64(row.ActiveSamples) / float64(total)
		}
		if tag == "" {
			a.Untagged = &row
			continue
		}
		a.Tenants = append(a.Tenants, row)
	}
	slices.SortFunc(a.Tenants, func(x, y reports.ActivityRow) int {
		if x.ActiveSamples != y.ActiveSamples {
			return int(y.ActiveSamples - x.ActiveSamples)
		}
		return strings.Compare(x.Tenant, y.Tenant)
	})
	a.UntaggedQueries = slices.Clone(s.queries)
	for _, ph := range s.phases {
		w := reports.ActivityWindow{Window: ph, Samples: s.wsamples[ph], Shares: []reports.Share{}}
		var total int64
		for _, n := range s.windows[ph] {
			total += n
		}
		for tag, n := range s.windows[ph] {
			sh := reports.Share{Tenant: tag, DBTime: float64(n) * float64(activityEvery.Milliseconds())}
			if total > 0 {
				sh.Share = float64(n) / float64(total)
			}
			if tag == "" {
				w.Untagged = sh.DBTime / 1000
				continue
			}
			w.Shares = append(w.Shares, sh)
		}
		slices.SortFunc(w.Shares, func(x, y reports.Share) int {
			if x.DBTime != y.DBTime {
				if x.DBTime > y.DBTime {
					return -1
				}
				return 1
			}
			return strings.Compare(x.Tenant, y.Tenant)
		})
		a.Windows = append(a.Windows, w)
	}
	a.AlertThreshold, a.AlertWindow = s.alert.threshold, float64(s.alert.window)
	a.Alerts = shareAlerts(s.seconds, s.alert)
	return a
}

// shareAlerts finds, per tenant tag, each run of consecutive seconds in
// which the tag held more than rule.threshold of all active backends seen
// (untagged included); a run of rule.window seconds fires an alert at its
// end, which clears at the start of the first second not above. A second
// with no active backend is not above. Alerts in firing order.
func shareAlerts(seconds []activitySecond, rule shareAlertRule) []reports.ActivityAlert {
	if rule.window <= 0 || rule.threshold <= 0 {
		return nil
	}
	tags := map[string]bool{}
	totals := make([]int64, len(seconds))
	for i, sec := range seconds {
		for tag, n := range sec.active {
			totals[i] += n
			if tag != "" {
				tags[tag] = true
			}
		}
	}
	var out []reports.ActivityAlert
	for _, tag := range sortedKeys(tags) {
		run := 0
		var fired *reports.ActivityAlert
		for i, sec := range seconds {
			if totals[i] > 0 && float64(sec.active[tag]) > rule.threshold*float64(totals[i]) {
				run++
			} else {
				if fired != nil {
					fired.Cleared = float64(i)
					fired = nil
				}
				run = 0
				continue
			}
			if run == rule.window {
				var n, total int64
				for j := i - rule.window + 1; j <= i; j++ {
					n, total = n+seconds[j].active[tag], total+totals[j]
				}
				out = append(out, reports.ActivityAlert{Tenant: tag, Share: float64(n) / float64(total), Threshold: rule.threshold,
					Window: float64(rule.window), Fired: float64(i + 1), Phase: sec.phase})
				fired = &out[len(out)-1]
			}
		}
	}
	slices.SortStableFunc(out, func(x, y reports.ActivityAlert) int {
		if x.Fired != y.Fired {
			if x.Fired < y.Fired {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Tenant, y.Tenant)
	})
	return out
}

// taggedOnly is the tagged_only assertion over a configuration's sampled
// activity: no active backend of its roles without a tenant tag.
func taggedOnly(config string, a *reports.Activity) reports.Assertion {
	var n int64
	detail := fmt.Sprintf("every active backend of the roles carried a tenant tag (%d samples every %.0f ms)", a.Samples, a.Interval)
	if a.Untagged != nil && a.Untagged.ActiveSamples > 0 {
		n = a.Untagged.ActiveSamples
		detail = fmt.Sprintf("%d active backends seen without a tenant tag (%.1f s of backend time, %.0f%% of all); queries: %s",
			n, a.Untagged.Active, 100*a.Untagged.Share, strings.Join(a.UntaggedQueries, " | "))
	}
	as := countAssert(AssertTaggedOnly, config, "", "", "<=", n, 0, detail)
	if n == 0 && !slices.ContainsFunc(a.Tenants, func(r reports.ActivityRow) bool { return r.ActiveSamples > 0 }) {
		// Nothing seen is nothing checked, not a pass: a service that
		// logs in as other roles than the configuration's shows none.
		as.Skipped = true
		as.Detail = fmt.Sprintf("no active backend of the roles seen in %d samples every %.0f ms: nothing to check; "+
			"does the service log in with the configuration's DSNs (interactive_dsn, heavy_dsn)?", a.Samples, a.Interval)
	}
	return as
}
