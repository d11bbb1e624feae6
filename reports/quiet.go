package reports

import "strings"

// Footnotes on the QuietAll rows of the terminal tables.
const (
	quietMergedNote = "merged over all quiet tenants' requests"
	quietWorstNote  = "each latency and ratio is the worst over the quiet tenants"
)

// quietClasses adds to set the classes of rows not of the dominant tenant
// and the classes of merged.
func quietClasses(set map[string]bool, rows, merged []TenantRow, dominant string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	for _, t := range rows {
		if t.Tenant != dominant {
			set[t.Class] = true
		}
	}
	for _, t := range merged {
		set[t.Class] = true
	}
	return set
}

// byClass indexes merged QuietAll rows by class.
func byClass(merged []TenantRow) map[string]TenantRow {
	m := make(map[string]TenantRow, len(merged))
	for _, t := range merged {
		m[t.Class] = t
	}
	return m
}

// mergedClasses returns the quiet classes whose QuietAll rows the terminal
// tables take from the report's merged rows: a merged row exists for the
// class, every configuration that ran quiet tenants of the class has a
// QuietAll row for it and, if the solo baseline ran the class, a
// SoloQuietAll row for it exists. A class missing a merged row anywhere
// falls back to the worst-of rows everywhere, so exact values and upper
// bounds never share a row or a class.
func mergedClasses(r *Report, dominant string) map[string]bool {
	out := map[string]bool{}
	missing := map[string]bool{}
	soloRan := map[string]bool{}
	soloMerged := map[string]bool{}
	for _, c := range r.Configurations {
		have := byClass(c.QuietAll)
		for class := range quietClasses(nil, c.Tenants, c.QuietAll, dominant) {
			if _, ok := have[class]; ok {
				out[class] = true
			} else {
				missing[class] = true
			}
		}
		for class := range quietClasses(nil, c.Solo, nil, dominant) {
			soloRan[class] = true
		}
		for _, t := range c.SoloQuietAll {
			soloMerged[t.Class] = true
			out[t.Class] = true
		}
	}
	for class := range out {
		if missing[class] || soloRan[class] && !soloMerged[class] {
			delete(out, class)
		}
	}
	return out
}

// worstQuiet returns the fallback QuietAll row of each class over the quiet
// tenants' rows: counts and DB time summed, latencies the worst row's (an
// upper bound of the merged value, not the merged value), and the DB-time
// share of each distinct tenant counted once, since every row of a tenant
// carries the tenant's total share.
func worstQuiet(rows []TenantRow, dominant string) map[string]TenantRow {
	out := map[string]TenantRow{}
	shares := map[string]map[string]float64{} // class → tenant → share
	for _, tr := range rows {
		if tr.Tenant == dominant {
			continue
		}
		a, ok := out[tr.Class]
		if !ok {
			a = TenantRow{Tenant: QuietAll, Class: tr.Class}
			shares[tr.Class] = map[string]float64{}
		}
		a.Count += tr.Count
		a.Rejected += tr.Rejected
		a.Errors += tr.Errors
		a.Dropped += tr.Dropped
		a.Incomplete += tr.Incomplete
		a.P50 = max(a.P50, tr.P50)
		a.P99 = max(a.P99, tr.P99)
		a.Max = max(a.Max, tr.Max)
		a.ServiceP99 = max(a.ServiceP99, tr.ServiceP99)
		a.DBTime += tr.DBTime
		shares[tr.Class][tr.Tenant] = max(shares[tr.Class][tr.Tenant], tr.DBTimeShare)
		out[tr.Class] = a
	}
	for class, byTenant := range shares {
		a := out[class]
		for _, tenant := range sortedKeys(byTenant) { // a fixed order keeps the float sum stable
			a.DBTimeShare += byTenant[tenant]
		}
		out[class] = a
	}
	return out
}

// quietRows returns the QuietAll rows of one phase in class order: the
// merged row for the classes in merged, the worst-of row for the others.
func quietRows(rows, merged []TenantRow, dominant string, useMerged map[string]bool) []TenantRow {
	worst := worstQuiet(rows, dominant)
	exact := byClass(merged)
	var out []TenantRow
	for _, class := range sortedKeys(quietClasses(nil, rows, merged, dominant)) {
		if useMerged[class] {
			if t, ok := exact[class]; ok {
				out = append(out, t)
			}
		} else if t, ok := worst[class]; ok {
			out = append(out, t)
		}
	}
	return out
}

// quietNote is the footnote on the QuietAll rows of the given classes,
// saying which are merged and which are worst-of.
func quietNote(classes []string, useMerged map[string]bool) string {
	var merged, worst []string
	for _, class := range classes {
		if useMerged[class] {
			merged = append(merged, class)
		} else {
			worst = append(worst, class)
		}
	}
	switch {
	case len(worst) == 0:
		return quietMergedNote
	case len(merged) == 0:
		return quietWorstNote
	}
	return quietMergedNote + " for " + strings.Join(merged, ", ") + "; " +
		quietWorstNote + " for " + strings.Join(worst, ", ")
}
