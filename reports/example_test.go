package reports_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/noisysim/noisysim/reports"
)

// exampleReport is a tiny run: one dominant and two quiet tenants, with the
// quiet tenants' rows also merged into QuietAll rows; the naive control
// fails its p99 checks, the isolated configuration passes them.
func exampleReport() *reports.Report {
	solo := []reports.TenantRow{
		{Tenant: "t2", Class: "interactive", Count: 900, P50: 1.1, P99: 2.4, Max: 3},
		{Tenant: "t3", Class: "interactive", Count: 400, P50: 1.2, P99: 2.6, Max: 3.5},
	}
	soloAll := []reports.TenantRow{
		{Tenant: reports.QuietAll, Class: "interactive", Count: 1300, P50: 1.1, P99: 2.5, Max: 3.5},
	}
	config := func(name, expect string, quietP99, mergedP99 float64, rejected int64) reports.Configuration {
		return reports.Configuration{
			Name: name, Expect: expect, Passed: expect == reports.ExpectPass, Solo: solo, SoloQuietAll: soloAll,
			// From the quiet tenants' merged histograms: exact, not the worst tenant's.
			QuietAll: []reports.TenantRow{
				{Tenant: reports.QuietAll, Class: "interactive", Count: 1300, P50: 1.5, P99: mergedP99, Max: quietP99 * 2, DBTimeShare: 0.18},
			},
			Tenants: []reports.TenantRow{
				{Tenant: "t1", Class: "heavy", Count: 3000, Rejected: rejected, P50: 90, P99: 420, Max: 610, DBTimeShare: 0.82},
				{Tenant: "t2", Class: "interactive", Count: 900, P50: 1.5, P99: quietP99, Max: quietP99 * 1.5, DBTimeShare: 0.12},
				{Tenant: "t3", Class: "interactive", Count: 400, P50: 1.6, P99: quietP99 + 0.5, Max: quietP99 * 2, DBTimeShare: 0.06},
			},
			Stats: reports.RunStats{Issued: 4300 + rejected, Completed: 4300, Rejected: rejected},
		}
	}
	quiet := func(cfg, tenant string, observed, solo float64) reports.Assertion {
		limit := 1.5*solo + 5
		return reports.Assertion{
			Name: "quiet_p99", Configuration: cfg, Tenant: tenant, Class: "interactive",
			Observed: observed, Limit: limit, Unit: "ms", Op: "<=", Passed: observed <= limit,
		}
	}
	return &reports.Report{
		Scenario: "ci-gate", Seed: 7, ScheduleHash: "5be0c1d2", Passed: true,
		StartedAt: time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC), Duration: 41.5,
		Backend: "local single (PostgreSQL 15.18)", Dominant: "t1",
		Configurations: []reports.Configuration{
			config("naive", reports.ExpectFail, 38, 38.1, 0),
			config("isolated", reports.ExpectPass, 3.1, 3.2, 120),
		},
		Assertions: []reports.Assertion{
			quiet("naive", "t2", 38, 2.4), quiet("naive", "t3", 38.5, 2.6),
			quiet("isolated", "t2", 3.1, 2.4), quiet("isolated", "t3", 3.6, 2.6),
			quiet("naive", reports.QuietAll, 38.1, 2.5), quiet("isolated", reports.QuietAll, 3.2, 2.5),
		},
	}
}

func ExampleWriteText() {
	if err := reports.WriteText(os.Stdout, exampleReport(), reports.TextOptions{TopQuiet: 2}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// == noisysim ci-gate ==
	// seed      7
	// schedule  5be0c1d2
	// backend   local single (PostgreSQL 15.18)
	// started   2025-05-01T12:00:00Z, duration 41.5 s
	//
	// == Side by side: p99 ms ==
	// tenant         class        solo p99  naive p99  vs solo  isolated p99  vs solo  limit
	// t1 (dominant)  heavy        -         420.00     -        420.00        -        -
	// t2             interactive  2.40      38.00*     15.83x   3.10          1.29x    8.60
	// t3             interactive  2.60      38.50*     14.81x   3.60          1.38x    8.90
	// quiet (all)    interactive  2.50      38.10*     15.24x   3.20          1.28x    8.75
	// * an assertion on this tenant and class failed in that configuration
	// quiet (all): merged over all quiet tenants' requests
	//
	// == naive: expect fail, assertions FAIL, as expected ==
	// issued 4300, completed 4300, dropped 0, incomplete 0, rejected 0, errors 0
	// tenant         class        count  rejected  errors  p50 ms  p99 ms  max ms  DB time
	// t1 (dominant)  heavy        3000   0         0       90.00   420.00  610.00  82.0%
	// t2             interactive  900    0         0       1.50    38.00*  57.00   12.0%
	// t3             interactive  400    0         0       1.60    38.50*  76.00   6.0%
	// quiet (all)    interactive  1300   0         0       1.50    38.10*  76.00   18.0%
	// * an assertion on this tenant and class failed in that configuration
	//
	// == isolated: expect pass, assertions PASS, as expected ==
	// issued 4420, completed 4300, dropped 0, incomplete 0, rejected 120, errors 0
	// tenant         class        count  rejected  errors  p50 ms  p99 ms  max ms  DB time
	// t1 (dominant)  heavy        3000   120       0       90.00   420.00  610.00  82.0%
	// t2             interactive  900    0         0       1.50    3.10    4.65    12.0%
	// t3             interactive  400    0         0       1.60    3.60    6.20    6.0%
	// quiet (all)    interactive  1300   0         0       1.50    3.20    6.20    18.0%
	//
	// == Assertions: 6 assertions: 3 passed, 3 failed (3 in configurations expected to fail), 0 skipped ==
	// XFAIL  naive     quiet_p99  quiet (all)/interactive  observed 38.10 ms, want <= 8.75 ms
	// XFAIL  naive     quiet_p99  t2/interactive           observed 38.00 ms, want <= 8.60 ms
	// XFAIL  naive     quiet_p99  t3/interactive           observed 38.50 ms, want <= 8.90 ms
	// PASS   isolated  quiet_p99                           3 of 3 passed
	//
	// == Verdict ==
	// naive     expect fail  assertions FAIL  as expected
	// isolated  expect pass  assertions PASS  as expected
	// RESULT: PASS
}

func ExampleWriteDir() {
	dir, err := os.MkdirTemp("", "report-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	if err := reports.WriteDir(filepath.Join(dir, "out"), exampleReport()); err != nil {
		fmt.Println(err)
		return
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "out"))
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	// Output:
	// junit.xml
	// report.html
	// report.json
	// report.md
}

func ExampleReport_Validate() {
	r := exampleReport()
	r.Configurations[1].Tenants[0].DBTimeShare = 82 // a percentage where a 0..1 share belongs
	fmt.Println(r.Validate())
	// Output:
	// invalid report: configurations[1].tenants[0].db_time_share: share 82 outside 0..1
}
