package live

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/reports"
)

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:9464", false, true},
		{"[::1]:9464", false, true},
		{"localhost:0", false, true},
		{"0.0.0.0:9464", false, false},
		{"10.1.2.3:9464", false, false},
		{":9464", false, false},
		{"0.0.0.0:9464", true, true},
		{"127.0.0.1", false, false},
		{"127.0.0.1:99999", false, false},
	} {
		err := CheckAddr(tc.addr, tc.remote)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %v) = %v, want ok %v", tc.addr, tc.remote, err, tc.ok)
		}
	}
	if err := CheckAddr("0.0.0.0:1", false); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("got %v, want ErrNotLoopback", err)
	}
}

// TestFolding: tenants beyond the top share one label; drops and errors
// are counted apart; a point's shares replace the last point's.
func TestFolding(t *testing.T) {
	m := New(2)
	for id := 1; id <= 6; id++ {
		m.Outcome(harness.Outcome{Configuration: "c", TenantID: id, Tenant: "k" + string(rune('0'+id)), Class: "x", Latency: time.Millisecond})
	}
	m.Outcome(harness.Outcome{Configuration: "c", TenantID: 1, Tenant: "k1", Class: "x", Error: "dropped"})
	m.Outcome(harness.Outcome{Configuration: "c", TenantID: 1, Tenant: "k1", Class: "x", Error: "queue_full", Latency: time.Millisecond})
	if n := testutil.CollectAndCount(m.latency); n != 3 {
		t.Errorf("%d latency series, want 3 (k1, k2, %s)", n, OtherQuiet)
	}
	if got := testutil.ToFloat64(m.ops.WithLabelValues("c", "x")); got != 7 {
		t.Errorf("operations %g, want 7 (the drop not counted)", got)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues("c", "x")); got != 1 {
		t.Errorf("dropped %g, want 1", got)
	}
	if got := testutil.ToFloat64(m.errs.WithLabelValues("c", "x", "queue_full")); got != 1 {
		t.Errorf("queue_full errors %g, want 1", got)
	}
	m.Point("c", reports.Point{TopDBTime: []reports.Share{{Tenant: "k1", Share: 0.6}, {Tenant: "k2", Share: 0.2}}})
	m.Point("c", reports.Point{TopDBTime: []reports.Share{{Tenant: "k1", Share: 0.5}, {Tenant: "k3", Share: 0.3}}})
	want := `
# HELP noisysim_db_time_share Share of DB time in the last second of the top 5 tenants, 0..1.
# TYPE noisysim_db_time_share gauge
noisysim_db_time_share{configuration="c",tenant="k1"} 0.5
noisysim_db_time_share{configuration="c",tenant="k3"} 0.3
`
	if err := testutil.CollectAndCompare(m.share, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// Rejections add up per reason; a total a report does not split
	// counts as unknown.
	m.Point("c", reports.Point{Limiters: []reports.LimiterPoint{{Class: "heavy", Rejected: 5,
		RejectedByReason: map[string]int64{"queue_full": 3, "wait_exceeded": 2}}}})
	m.Point("c", reports.Point{Limiters: []reports.LimiterPoint{{Class: "heavy", Rejected: 5,
		RejectedByReason: map[string]int64{"queue_full": 4}}}})
	want = `
# HELP noisysim_limiter_rejections_total Requests the limiter turned away, per isolation class and reason.
# TYPE noisysim_limiter_rejections_total counter
noisysim_limiter_rejections_total{class="heavy",configuration="c",reason="queue_full"} 7
noisysim_limiter_rejections_total{class="heavy",configuration="c",reason="unknown"} 1
noisysim_limiter_rejections_total{class="heavy",configuration="c",reason="wait_exceeded"} 2
`
	if err := testutil.CollectAndCompare(m.rejected, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
