package harness

import (
	"math"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// msAt is n milliseconds.
func msAt(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// baseline returns n successful ops of class with latency lat, issued
// every 50 ms from 100 ms on, for tenant 9.
func baseline(class string, n int, lat time.Duration) []opEvent {
	var out []opEvent
	for i := range n {
		s := msAt(100 + 50*float64(i))
		out = append(out, opEvent{start: s, end: s + lat, tenant: 9, class: class})
	}
	return out
}

// TestFaultBurst checks what one fault reports from a phase's ops: errors,
// stalled ops (in flight or issued during the fault, done after the restore,
// slower than 2× their class's median before it, or than the whole fault
// window without one) and the worst latency per tenant, and
// the time to recover (to the first op issued after the restore that
// succeeds within 2× its class's median before the fault).
func TestFaultBurst(t *testing.T) {
	tests := []struct {
		name   string
		f      scenario.Fault
		ft     faultTimes
		events []opEvent
		want   reports.Fault
	}{
		{
			// A pause: nothing fails, requests hang until the unpause.
			name: "pause hangs",
			f:    scenario.Fault{Node: "primary", Action: scenario.FaultPause},
			ft:   faultTimes{injected: msAt(1000), restored: msAt(3000)},
			events: append(append(baseline("lookup", 9, msAt(5)), baseline("report", 3, msAt(50))...),
				opEvent{start: msAt(990), end: msAt(3010), tenant: 1, class: "lookup"},                // stalled, 2020 ms
				opEvent{start: msAt(995), end: msAt(3005), tenant: 2, class: "lookup"},                // stalled, 2010 ms
				opEvent{start: msAt(2000), end: msAt(3010), tenant: 1, class: "lookup"},               // stalled, issued mid-fault
				opEvent{start: msAt(2990), end: msAt(3004), tenant: 2, class: "lookup"},               // across the restore, 14 ms
				opEvent{start: msAt(2995), end: msAt(3003), tenant: 3, class: "lookup"},               // across the restore, within 2×5 ms
				opEvent{start: msAt(3001), end: msAt(3030), tenant: 1, class: "lookup"},               // after: 29 ms > 2×5 ms
				opEvent{start: msAt(3002), end: msAt(3009), tenant: 3, class: "lookup", failed: true}, // after, failed
				opEvent{start: msAt(3010), end: msAt(3018), tenant: 2, class: "lookup"},               // recovery: 8 ms
				opEvent{start: msAt(3005), end: msAt(3060), tenant: 3, class: "report"},               // within 2×50 ms, but later
			),
			want: reports.Fault{Node: "primary", Action: "pause", At: 1, Restored: 3, Recovered: true,
				TimeToRecover: 18, Errors: 1, Stalled: 4, WorstLatency: 2020,
				Tenants: []reports.FaultTenant{
					{Tenant: "1", Stalled: 2, WorstLatency: 2020},
					{Tenant: "2", Stalled: 2, WorstLatency: 2010},
					{Tenant: "3", Errors: 1, WorstLatency: 8, ByClass: map[string]int64{"lookup": 1}},
				}},
		},
		{
			// A pause whose restore took 40 ms: the ops it held were let go
			// during the restore and answered before it returned; they were
			// held across it all the same. One that ended before the
			// restore began was not.
			name: "pause answered during the restore",
			f:    scenario.Fault{Node: "primary", Action: scenario.FaultPause},
			ft:   faultTimes{injected: msAt(1000), restoring: msAt(2000), restored: msAt(2040)},
			events: append(baseline("lookup", 9, msAt(5)),
				opEvent{start: msAt(990), end: msAt(2010), tenant: 1, class: "lookup"},  // stalled, answered mid-restore
				opEvent{start: msAt(1500), end: msAt(2020), tenant: 2, class: "lookup"}, // stalled, issued mid-fault
				opEvent{start: msAt(1000), end: msAt(1990), tenant: 3, class: "lookup"}, // ended before the restore began
				opEvent{start: msAt(2050), end: msAt(2054), tenant: 1, class: "lookup"}, // recovery
			),
			want: reports.Fault{Node: "primary", Action: "pause", At: 1, Restored: 2.04, Recovered: true,
				TimeToRecover: 14, Stalled: 2, WorstLatency: 1020,
				Tenants: []reports.FaultTenant{
					{Tenant: "1", Stalled: 1, WorstLatency: 1020},
					{Tenant: "2", Stalled: 1, WorstLatency: 520},
				}},
		},
		{
			// A stop: sessions fail; the first success after the restart is
			// slow (a new connection), so it is not yet the recovery.
			name: "stop fails then slow",
			f:    scenario.Fault{Node: "replica1", Action: scenario.FaultStop},
			ft:   faultTimes{injected: msAt(1000), restored: msAt(2000)},
			events: append(baseline("lookup", 9, msAt(5)),
				opEvent{start: msAt(1199), end: msAt(1200), tenant: 1, class: "lookup", failed: true},
				opEvent{start: msAt(1300), end: msAt(1301), tenant: 2, class: "lookup", failed: true},
				opEvent{start: msAt(1400), end: msAt(1402), tenant: 2, class: "lookup", failed: true},
				opEvent{start: msAt(2050), end: msAt(2200), tenant: 1, class: "lookup"},               // 150 ms: slow
				opEvent{start: msAt(2100), end: msAt(2100), tenant: 1, class: "lookup", failed: true}, // still failing
				opEvent{start: msAt(2300), end: msAt(2304), tenant: 2, class: "lookup"},               // recovery
				opEvent{start: msAt(2400), end: msAt(2401), tenant: 1, class: "lookup", failed: true}, // after recovery
			),
			want: reports.Fault{Node: "replica1", Action: "stop", At: 1, Restored: 2, Recovered: true,
				TimeToRecover: 304, Errors: 4, WorstLatency: 2,
				Tenants: []reports.FaultTenant{
					{Tenant: "1", Errors: 2, WorstLatency: 1, ByClass: map[string]int64{"lookup": 2}},
					{Tenant: "2", Errors: 2, WorstLatency: 2, ByClass: map[string]int64{"lookup": 2}},
				}},
		},
		{
			// No op of the class finished before the fault: any success
			// issued after the restore is the recovery.
			name: "no baseline",
			f:    scenario.Fault{Node: "primary", Action: scenario.FaultDisconnect},
			ft:   faultTimes{injected: 0, restored: msAt(500)},
			events: []opEvent{
				{start: msAt(10), end: msAt(600), tenant: 4, class: "lookup"}, // stalled: 590 ms > 500 ms
				{start: msAt(520), end: msAt(700), tenant: 4, class: "lookup"},
			},
			want: reports.Fault{Node: "primary", Action: "disconnect", At: 0, Restored: 0.5, Recovered: true,
				TimeToRecover: 200, Stalled: 1, WorstLatency: 590,
				Tenants: []reports.FaultTenant{{Tenant: "4", Stalled: 1, WorstLatency: 590}}},
		},
		{
			// Nothing issued after the restore succeeds: not recovered.
			name: "not recovered",
			f:    scenario.Fault{Node: "primary", Action: scenario.FaultStop},
			ft:   faultTimes{injected: msAt(1000), restored: msAt(2000)},
			events: append(baseline("lookup", 3, msAt(5)),
				opEvent{start: msAt(1500), end: msAt(1501), tenant: 1, class: "lookup", failed: true},
				opEvent{start: msAt(2100), end: msAt(2101), tenant: 1, class: "lookup", failed: true},
			),
			want: reports.Fault{Node: "primary", Action: "stop", At: 1, Restored: 2, Errors: 2, WorstLatency: 1,
				Tenants: []reports.FaultTenant{{Tenant: "1", Errors: 2, WorstLatency: 1, ByClass: map[string]int64{"lookup": 2}}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := burst(tc.f, tc.ft, tc.events)
			checkFault(t, got, tc.want)
		})
	}
}

func checkFault(t *testing.T, got, want reports.Fault) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if got.Node != want.Node || got.Action != want.Action || !near(got.At, want.At) || !near(got.Restored, want.Restored) ||
		got.Recovered != want.Recovered || !near(got.TimeToRecover, want.TimeToRecover) || got.Errors != want.Errors ||
		got.Stalled != want.Stalled || !near(got.WorstLatency, want.WorstLatency) || got.Error != want.Error {
		t.Errorf("fault =\n  %+v\nwant\n  %+v", got, want)
	}
	if len(got.Tenants) != len(want.Tenants) {
		t.Fatalf("tenants = %+v, want %+v", got.Tenants, want.Tenants)
	}
	for i, g := range got.Tenants {
		w := want.Tenants[i]
		if g.Tenant != w.Tenant || g.Errors != w.Errors || g.Stalled != w.Stalled || !near(g.WorstLatency, w.WorstLatency) ||
			len(g.ByClass) != len(w.ByClass) {
			t.Errorf("tenant %d = %+v, want %+v", i, g, w)
			continue
		}
		for k, v := range w.ByClass {
			if g.ByClass[k] != v {
				t.Errorf("tenant %s by class = %v, want %v", g.Tenant, g.ByClass, w.ByClass)
			}
		}
	}
}
