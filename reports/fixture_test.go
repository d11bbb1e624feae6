package reports

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/name.golden, or rewrites the file under
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n--- got ---\n%s", name, path, got)
	}
}

// sampleReport builds a deterministic run of n tenants (n >= 2): t1 is the
// dominant tenant; every tenant has an interactive row, t1 and every fourth
// tenant a heavy one too. Like the harness, every row of a tenant carries
// the tenant's total DB-time share. Each configuration has merged QuietAll
// and SoloQuietAll rows (see mergeQuiet) and a quiet_p99 assertion on them
// per class. The naive control fails its quiet p99 checks and the isolated
// configuration passes them, so the run passes.
func sampleReport(n int) *Report {
	r := &Report{
		Scenario:     "noisy-neighbor",
		File:         "scenarios/noisy-neighbor.yaml",
		Seed:         42,
		ScheduleHash: "9f2c4e1ab37d05c8",
		Passed:       true,
		StartedAt:    time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC),
		Duration:     183.25,
		Backend:      "local single (PostgreSQL 15.18)",
		Dominant:     "t1",
		Notes:        []string{"heavy class runs on the primary: topology has no replica"},
	}
	type cls struct {
		name  string
		solo  float64 // quiet solo p99, ms
		count int64   // quiet count scale
	}
	classes := func(i int) []cls {
		cs := []cls{{"interactive", 2 + 0.125*float64(i), 4000}}
		if i == 1 || i%4 == 0 {
			cs = append(cs, cls{"heavy", 180 + 2.5*float64(i), 400})
		}
		return cs
	}
	var solo []TenantRow
	for i := 2; i <= n; i++ {
		for _, c := range classes(i) {
			solo = append(solo, TenantRow{
				Tenant: fmt.Sprintf("t%d", i), Class: c.name, Count: c.count / int64(i),
				P50: c.solo / 2, P99: c.solo, Max: c.solo * 1.5, DBTimeShare: 0,
			})
		}
	}
	for _, cfg := range []struct {
		name    string
		expect  string
		factor  float64 // quiet p99 = solo × factor + add
		add     float64
		dominRj int64
	}{
		{"naive", ExpectFail, 6, 30, 0},
		{"isolated", ExpectPass, 1.25, 0.5, 150},
	} {
		c := Configuration{
			Name: cfg.name, Expect: cfg.expect, Passed: cfg.expect == ExpectPass, Duration: 60,
			Solo: solo,
		}
		var dbTotal float64
		for i := 1; i <= n; i++ {
			tenant := fmt.Sprintf("t%d", i)
			for _, k := range classes(i) {
				row := TenantRow{Tenant: tenant, Class: k.name}
				if i == 1 {
					row.Count = 6 * k.count
					row.Rejected = cfg.dominRj
					row.P50, row.P99, row.Max = k.solo*3, k.solo*9, k.solo*12
					row.DBTime = 36000
				} else {
					row.Count = k.count / int64(i)
					row.P50 = k.solo/2 + cfg.add/3
					row.P99 = k.solo*cfg.factor + cfg.add
					row.Max = row.P99 * 1.75
					row.DBTime = 24000 / float64(i*(n-1))
				}
				row.ServiceP99 = k.solo
				dbTotal += row.DBTime
				c.Tenants = append(c.Tenants, row)
			}
		}
		tenantDB := map[string]float64{}
		for _, t := range c.Tenants {
			tenantDB[t.Tenant] += t.DBTime
		}
		for i := range c.Tenants {
			c.Tenants[i].DBTimeShare = tenantDB[c.Tenants[i].Tenant] / dbTotal
		}
		for _, t := range sortedKeys(tenantDB) {
			c.TopDBTime = append(c.TopDBTime, Share{Tenant: t, DBTime: tenantDB[t], Share: tenantDB[t] / dbTotal})
		}
		for _, t := range c.Tenants {
			c.Stats.Completed += t.Count
			c.Stats.Rejected += t.Rejected
		}
		c.Stats.Issued = c.Stats.Completed + c.Stats.Rejected + 3
		c.Stats.Dropped = 3
		c.Stats.TargetRate, c.Stats.AchievedRate = 250, 249.9
		if cfg.dominRj > 0 {
			c.Stats.RejectedByReason = map[string]int64{"tenant_cap": 100, "queue_full": 50}
		}
		r.Configurations = append(r.Configurations, c)

		for i := 2; i <= n; i++ {
			for _, k := range classes(i) {
				obs := k.solo*cfg.factor + cfg.add
				limit := 1.5*k.solo + 5
				r.Assertions = append(r.Assertions, Assertion{
					Name: "quiet_p99", Configuration: cfg.name, Tenant: fmt.Sprintf("t%d", i), Class: k.name,
					Observed: obs, Limit: limit, Unit: "ms", Op: "<=", Passed: obs <= limit,
				})
			}
		}
		r.Assertions = append(r.Assertions,
			Assertion{
				Name: "noisy_rejected", Configuration: cfg.name, Tenant: "t1", Class: "interactive",
				Observed: float64(cfg.dominRj), Limit: 0, Op: ">", Passed: cfg.dominRj > 0,
			},
			Assertion{
				Name: "no_unexpected_errors", Configuration: cfg.name,
				Observed: 0, Limit: 0, Op: "==", Passed: true,
			},
			Assertion{
				Name: "replica_lag", Configuration: cfg.name, Unit: "s", Op: "<=", Limit: 1,
				Skipped: true, Detail: "topology has no replica",
			},
		)
	}
	mergeQuiet(r)
	return r
}

// mergeQuiet sets every configuration's QuietAll and SoloQuietAll rows from
// its per-tenant rows, and a quiet_p99 assertion on each QuietAll row (limit
// 1.5 × merged solo p99 + 5 ms), replacing earlier ones. Without histograms
// to merge, a merged percentile stands in as the count-weighted mean of the
// tenants' percentiles (rounded to 0.01 ms): like a real merge it lies
// between the best and the worst tenant, so it differs from the worst-of
// fallback. Max is the largest max, counts are sums and the DB-time share
// counts each quiet tenant's share once.
func mergeQuiet(r *Report) {
	merge := func(rows []TenantRow) []TenantRow {
		type acc struct {
			row           TenantRow
			p50, p99, svc float64 // count-weighted sums
			weight        float64
			shares        map[string]float64
		}
		byClass := map[string]*acc{}
		for _, t := range rows {
			if t.Tenant == r.Dominant {
				continue
			}
			a := byClass[t.Class]
			if a == nil {
				a = &acc{row: TenantRow{Tenant: QuietAll, Class: t.Class}, shares: map[string]float64{}}
				byClass[t.Class] = a
			}
			a.row.Count += t.Count
			a.row.Rejected += t.Rejected
			a.row.Errors += t.Errors
			a.row.Dropped += t.Dropped
			a.row.Incomplete += t.Incomplete
			a.row.Max = max(a.row.Max, t.Max)
			a.row.DBTime += t.DBTime
			w := float64(t.Count)
			a.p50, a.p99, a.svc, a.weight = a.p50+w*t.P50, a.p99+w*t.P99, a.svc+w*t.ServiceP99, a.weight+w
			a.shares[t.Tenant] = t.DBTimeShare
		}
		round := func(v float64) float64 { return math.Round(v*100) / 100 }
		var out []TenantRow
		for _, class := range sortedKeys(byClass) {
			a := byClass[class]
			a.row.P50, a.row.P99, a.row.ServiceP99 = round(a.p50/a.weight), round(a.p99/a.weight), round(a.svc/a.weight)
			for _, tenant := range sortedKeys(a.shares) {
				a.row.DBTimeShare += a.shares[tenant]
			}
			out = append(out, a.row)
		}
		return out
	}
	r.Assertions = slices.DeleteFunc(r.Assertions, func(a Assertion) bool { return a.Tenant == QuietAll })
	for i := range r.Configurations {
		c := &r.Configurations[i]
		c.QuietAll, c.SoloQuietAll = merge(c.Tenants), merge(c.Solo)
		solo := map[string]float64{}
		for _, s := range c.SoloQuietAll {
			solo[s.Class] = s.P99
		}
		for _, q := range c.QuietAll {
			limit := 1.5*solo[q.Class] + 5
			r.Assertions = append(r.Assertions, Assertion{
				Name: "quiet_p99", Configuration: c.Name, Tenant: QuietAll, Class: q.Class,
				Observed: q.P99, Limit: limit, Unit: "ms", Op: "<=", Passed: q.P99 <= limit,
			})
		}
	}
}

// withoutMerged returns r without merged QuietAll rows and their
// assertions, as a harness that cannot merge histograms would report it.
func withoutMerged(r *Report) *Report {
	for i := range r.Configurations {
		r.Configurations[i].QuietAll, r.Configurations[i].SoloQuietAll = nil, nil
	}
	r.Assertions = slices.DeleteFunc(r.Assertions, func(a Assertion) bool { return a.Tenant == QuietAll })
	return r
}
