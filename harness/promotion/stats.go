package promotion

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// configuration is one measured window as a report configuration: its
// rows with the ledger's DB time and share over the window, the
// generator's counters and rates, and the DB-time ranking.
func (r *runner) configuration(name string, m *measured) reports.Configuration {
	cfg := reports.Configuration{Name: name, Expect: reports.ExpectPass, Passed: true, Duration: m.seconds}
	shares := pools.UsageWindow(m.usage0, m.usage1)
	sums := m.rec.Summary()
	row := func(s metrics.Summary, tenant string) reports.TenantRow {
		return reports.TenantRow{
			Tenant: tenant, Class: s.Class, Count: s.Count,
			Rejected: s.ErrorsByClass[string(pools.ErrorLimitedQueueFull)] + s.ErrorsByClass[string(pools.ErrorLimitedWaitExceeded)] +
				s.ErrorsByClass[string(pools.ErrorLimited)],
			Errors: s.Errors, ErrorsByClass: s.ErrorsByClass, Dropped: s.Dropped, Incomplete: s.Incomplete,
			P50: ms(s.P50), P99: ms(s.P99), Max: ms(s.Max), ServiceP99: ms(s.ServiceP99),
		}
	}
	for _, s := range sums {
		tenant := strconv.Itoa(s.Tenant)
		row := row(s, tenant)
		if sh, ok := shares[tenant]; ok {
			row.DBTimeShare = sh.Share
			// The ledger knows the isolation class only; several
			// workload classes may share one.
			if c, ok := r.classes[s.Class]; ok {
				row.DBTime = ms(sh.ByClass[pools.Class(c.IsolationClass)])
			}
		}
		cfg.Tenants = append(cfg.Tenants, row)
	}
	// The quiet tenants (all but the promoted one) merged per class, with
	// their combined share of DB time.
	var quietShare float64
	for t, sh := range shares {
		if t != r.tenant {
			quietShare += sh.Share
		}
	}
	for _, c := range r.sc.Classes {
		if c.Senders == scenario.SendersDominant {
			continue
		}
		merged := m.rec.Merged(func(t int, class string) bool { return strconv.Itoa(t) != r.tenant && class == c.Name })
		if merged.Count == 0 && merged.Dropped == 0 {
			continue
		}
		merged.Class = c.Name
		q := row(merged, reports.QuietAll)
		q.DBTimeShare = min(quietShare, 1)
		cfg.QuietAll = append(cfg.QuietAll, q)
	}
	st := reports.RunStats{
		Issued: m.stats.Issued, Completed: m.stats.Completed, Dropped: m.stats.Dropped, Incomplete: m.stats.Incomplete,
		RejectedByReason: map[string]int64{}, ErrorsByClass: map[string]int64{},
	}
	for _, s := range sums {
		st.Errors += s.Errors
		for k, v := range s.ErrorsByClass {
			st.ErrorsByClass[k] += v
			switch pools.ErrorClass(k) {
			case pools.ErrorLimitedQueueFull, pools.ErrorLimitedWaitExceeded, pools.ErrorLimited:
				st.Rejected += v
				st.RejectedByReason[k] += v
			}
		}
	}
	if m.sched.Duration > 0 {
		st.TargetRate = float64(len(m.sched.Ops)) / m.sched.Duration.Seconds()
	}
	if d := m.stats.End.Sub(m.stats.Start); d > 0 {
		st.AchievedRate = float64(m.stats.Issued) / d.Seconds()
	}
	cfg.Stats = st
	for t, sh := range shares {
		cfg.TopDBTime = append(cfg.TopDBTime, reports.Share{Tenant: t, DBTime: ms(sh.Total), Share: sh.Share})
	}
	slices.SortFunc(cfg.TopDBTime, func(a, b reports.Share) int {
		if c := cmp.Compare(b.DBTime, a.DBTime); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(len(a.Tenant), len(b.Tenant)), cmp.Compare(a.Tenant, b.Tenant))
	})
	cfg.TopDBTime = cfg.TopDBTime[:min(len(cfg.TopDBTime), 10)]
	return cfg
}
