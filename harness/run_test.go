package harness_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

const small = `
name: small
seed: 7
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
  - {name: export, isolation_class: heavy, query: export, rate: 4, senders: dominant, batch: 100}
  - {name: sleep, isolation_class: interactive, query: sleep, sleep: 2ms, rate: 20, senders: quiet}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 1s}
configurations:
  - {name: isolated, mode: isolated}
assertions: {quiet_p99: {min_samples: 1000000}}
`

// TestRunSmall runs a small scenario end to end, open and closed loop, on a
// cluster the test starts itself.
func TestRunSmall(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	// A session of someone else's with a tenant tag (an application of the
	// user's, another run's agent): clean_after judges the run's own roles
	// only, so it must not count it.
	primary, _ := backend.First(c, backend.RolePrimary)
	cfg, err := pgx.ParseConfig(primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "t:outsider"
	outsider, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer outsider.Close(context.Background())
	for _, model := range []string{"", "load: {model: closed, users: 10, think_time: 20ms}\n"} {
		name := "open"
		if model != "" {
			name = "closed"
		}
		t.Run(name, func(t *testing.T) {
			sc, err := scenario.Parse([]byte(small+model), "small.yaml")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			// The closed model's run goes without the guard, and says so.
			maxForeign := 0.0
			if model != "" {
				maxForeign = -1
			}
			rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c, MaxForeignCPU: maxForeign})
			if err != nil {
				t.Fatal(err)
			}
			guardOff := slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, "no disturbance guard") })
			if guardOff != (maxForeign < 0) || maxForeign < 0 && rep.Machine != nil && len(rep.Machine.Windows) > 0 {
				t.Errorf("max foreign CPU %g: notes %q, machine %+v; want the guard's absence noted, and no windows judged, exactly when it is off", maxForeign, rep.Notes, rep.Machine)
			}
			if len(rep.Configurations) != 1 {
				t.Fatalf("%d configurations, want 1", len(rep.Configurations))
			}
			cfg := rep.Configurations[0]
			counts := map[string]int64{}
			for _, row := range cfg.Tenants {
				counts[row.Class] += row.Count
				if row.Class == "export" && row.Tenant != "1" {
					t.Errorf("export sent by tenant %s, want the dominant tenant only", row.Tenant)
				}
				for class, n := range row.ErrorsByClass {
					if class != "queue_full" && class != "wait_exceeded" {
						t.Errorf("tenant %s %s: %d %s errors (the shipped scripts must run)", row.Tenant, row.Class, n, class)
					}
				}
				if row.Class == "sleep" && row.Count > 0 && row.P50 < 2 {
					t.Errorf("tenant %s: sleep p50 %.2f ms, below the 2 ms pg_sleep", row.Tenant, row.P50)
				}
			}
			for _, class := range []string{"lookup", "export", "sleep"} {
				if counts[class] == 0 {
					t.Errorf("no %s requests measured", class)
				}
			}
			if len(cfg.SoloQuietAll) == 0 || len(cfg.QuietAll) == 0 {
				t.Error("no merged quiet rows")
			}
			var clean int
			for _, a := range rep.Assertions {
				switch a.Name {
				case harness.AssertCleanInFlight, harness.AssertCleanBorrowed, harness.AssertCleanTagged:
					clean++
					if !a.Passed {
						t.Errorf("%s: observed %v", a.Name, a.Observed)
					}
				case harness.AssertQuietP99:
					if !a.Skipped {
						t.Errorf("quiet_p99 %s/%s evaluated with min_samples 1e6", a.Tenant, a.Class)
					}
				}
			}
			if clean != 3 {
				t.Errorf("%d clean-after assertions, want 3", clean)
			}
			for _, pt := range cfg.Series {
				for _, pl := range pt.Pools {
					// The pools were opened to their size before the
					// timeline (Stack.Warm) and no call broke a connection:
					// none is opened during it.
					if pl.Opened != 0 || pl.Borrowed > pl.Max {
						t.Errorf("point at %.1f s: pool %s opened %d connections, borrowed %d of %d", pt.At, pl.Name, pl.Opened, pl.Borrowed, pl.Max)
					}
				}
				if len(pt.Limiters) != 2 || pt.Limiters[0].Class != "heavy" || pt.Limiters[1].Class != "interactive" {
					t.Errorf("point at %.1f s: limiters %+v, want heavy and interactive", pt.At, pt.Limiters)
				}
				for _, l := range pt.Limiters {
					if l.RejectedByReason["queue_full"]+l.RejectedByReason["wait_exceeded"] != l.Rejected {
						t.Errorf("point at %.1f s: %s rejected %d, by reason %v", pt.At, l.Class, l.Rejected, l.RejectedByReason)
					}
				}
				if len(pt.Pools) != 2 || pt.Pools[0].Node == "" || pt.Pools[0].Max < 1 || pt.Pools[0].Borrowed > pt.Pools[0].Max {
					t.Errorf("point at %.1f s: pools %+v, want interactive and heavy with their node and size", pt.At, pt.Pools)
				}
			}
			if len(cfg.Series) == 0 {
				t.Error("no series")
			}
			if rep.ScheduleHash == "" || rep.Seed != 7 {
				t.Errorf("seed %d hash %q", rep.Seed, rep.ScheduleHash)
			}
		})
	}
}

const timelineScenario = `
name: timeline
seed: 3
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 200}
  - {name: page, isolation_class: interactive, query: page, rate: 50}
  - {name: hold, isolation_class: heavy, query: sleep, sleep: 1s, rate: 10, senders: dominant}
phases: {drain: 1s}
timeline:
  - {name: warm, length: 300ms, measure: false}
  - {name: base, length: 1s, senders: quiet}
  - {name: two, length: 1s, senders: [2, 3], rates: {page: 0}}
  - name: burst
    length: 1s
    rates: {lookup: 2}
    actions: [{type: terminate_sessions, at: 500ms, tenant: 1}]
  - {name: tail, length: 4s, senders: dominant, rates: {lookup: 0, page: 0}, measure: false}
configurations:
  - {name: shared, mode: shared}
assertions: {quiet_p99: {window: burst, baseline: base, min_samples: 10, factor: 100, slack: 1s}}
`

// TestRunTimeline runs a timeline of four phases and checks that each
// window holds what its phase sent: its senders, its rate factors, and
// that assertions name the windows they read.
func TestRunTimeline(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	sc, err := scenario.Parse([]byte(timelineScenario), "timeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rep.Configurations[0]
	if len(cfg.Windows) != 5 {
		t.Fatalf("%d windows, want 5", len(cfg.Windows))
	}
	byWindow := map[string]map[string]int64{} // window → "tenant/class" → count
	for _, w := range cfg.Windows {
		m := map[string]int64{}
		for _, row := range w.Tenants {
			m[row.Tenant+"/"+row.Class] += row.Count
			m[row.Class] += row.Count
			m[row.Tenant] += row.Count
		}
		byWindow[w.Name] = m
	}
	if w := cfg.Windows[0]; w.Name != "warm" || w.Measured || w.Start != 0 || w.End != 0.3 {
		t.Errorf("window 0 = %s measured %v [%v, %v), want warm, false, [0, 0.3)", w.Name, w.Measured, w.Start, w.End)
	}
	if n := byWindow["base"]["1"]; n != 0 {
		t.Errorf("base: tenant 1 sent %d requests, want 0 (senders quiet)", n)
	}
	two := byWindow["two"]
	if two["page"] != 0 || two["1"] != 0 || two["4"] != 0 || two["5"] != 0 || two["2"]+two["3"] == 0 {
		t.Errorf("two: %v; want lookups of tenants 2 and 3 only", two)
	}
	// lookup at twice its rate: about 400 per second against 200 in base.
	if b, l := byWindow["burst"]["lookup"], byWindow["base"]["lookup"]; b < l*3/2 {
		t.Errorf("burst: %d lookups, base %d; want about twice as many (base has no tenant 1)", b, l)
	}
	var quiet, perWindow int
	for _, a := range rep.Assertions {
		switch a.Name {
		case harness.AssertQuietP99:
			quiet++
			if a.Window != "burst" || a.Baseline != "base" {
				t.Errorf("quiet_p99 window %q baseline %q, want burst and base", a.Window, a.Baseline)
			}
		case harness.AssertNoUnexpectedError:
			if a.Tenant == "" {
				perWindow++
				if a.Window == "warm" {
					t.Error("no_unexpected_errors asserted on the warm-up")
				}
			}
		}
	}
	if quiet == 0 || perWindow != 3 {
		t.Errorf("%d quiet_p99 assertions, %d no_unexpected_errors totals; want > 0 and 3 (one per measured window)", quiet, perWindow)
	}
	// Per window and second: quiet (all), the dominant tenant and the 3
	// busiest quiet tenants, each of those within quiet (all)'s count.
	type sec struct {
		window, class string
		start         float64
	}
	merged, own := map[sec]int64{}, map[string]bool{}
	for _, iv := range cfg.Intervals {
		if iv.Window == "" {
			t.Fatalf("interval at %v s has no window", iv.Start)
		}
		if iv.Tenant == "quiet (all)" {
			merged[sec{iv.Window, iv.Class, iv.Start}] = iv.Count
		}
	}
	for _, iv := range cfg.Intervals {
		if iv.Tenant == "quiet (all)" || iv.Tenant == rep.Dominant {
			continue
		}
		own[iv.Tenant] = true
		if n := merged[sec{iv.Window, iv.Class, iv.Start}]; iv.Count > n {
			t.Errorf("tenant %s %s at %v s: %d requests, more than quiet (all)'s %d", iv.Tenant, iv.Class, iv.Start, iv.Count, n)
		}
	}
	if len(own) != 3 {
		t.Errorf("quiet tenants with a series of their own: %v, want the 3 busiest", own)
	}
	if len(cfg.Solo) == 0 || len(cfg.Tenants) == 0 {
		t.Error("the configuration's rows are not those of the quiet_p99 window and baseline")
	}
	// The action ran in burst, 0.5 s after its start (2.3 s), and ended
	// tenant 1's sessions, busy with 1 s sleeps (about 10 at a time, for
	// 4 s more: time for the action to connect on a loaded machine).
	if len(cfg.Actions) != 1 {
		t.Fatalf("%d actions in the report, want 1", len(cfg.Actions))
	}
	if a := cfg.Actions[0]; a.Phase != "burst" || a.Type != "terminate_sessions" || a.Error != "" ||
		a.At < 2.79 || a.At > 7.3 || a.Before["sessions"] < 1 || !strings.Contains(a.Detail, "terminated") {
		// Never before 2.8 s; late on a loaded machine, but within the timeline.
		t.Errorf("action = %+v; want terminate_sessions in burst from 2.8 s, sessions before >= 1", a)
	}
	ok := false
	for _, a := range rep.Assertions {
		ok = ok || a.Name == harness.AssertActionsOK && a.Passed
	}
	if !ok {
		t.Error("no passed actions_ok assertion")
	}
	// A point per second over the 7.3 s timeline, each in a phase, with
	// requests and DB time.
	if len(cfg.Series) < 7 {
		t.Fatalf("%d points in the series, want one per second of the timeline (7)", len(cfg.Series))
	}
	phases := map[string]bool{"warm": true, "base": true, "two": true, "burst": true, "tail": true}
	withDBTime := 0
	for _, pt := range cfg.Series {
		if !phases[pt.Window] || len(pt.Limiters) != 0 || len(pt.Pools) != 1 {
			t.Errorf("point %+v: want a phase, no limiter and one pool (mode shared)", pt)
		}
		if pt.At <= 3.3 && pt.Rate <= 0 {
			t.Errorf("point %+v: no request issued during the timeline", pt)
		}
		if len(pt.TopDBTime) > 0 {
			withDBTime++ // a second may see no request finish on a loaded machine
		}
	}
	if withDBTime == 0 {
		t.Error("no point ranks tenants by DB time")
	}
}
