package reports

import (
	"strings"
	"testing"
)

func TestServiceLines(t *testing.T) {
	c := Configuration{
		Service: &ServiceRun{Instances: []string{"http://127.0.0.1:1"}, Logs: []string{"out/service-gate-0.log"}, Ready: 0.25},
		HTTP: &HTTPStats{Arrivals: 10, Requests: 15, Retries: 5, Amplification: 1.5,
			Outcomes: map[string]int64{"429": 6, "2xx": 9}, RetryAfter: map[string]int64{"seconds": 5, "malformed": 1}, RetryAfterMean: 1},
		Activity: &Activity{Interval: 100, Samples: 50,
			Tenants:        []ActivityRow{{Tenant: "1", Active: 2.5, Share: 0.5}},
			Untagged:       &ActivityRow{Active: 2.5, Share: 0.5, ActiveSamples: 25, MaxActive: 3, Longest: 812},
			Windows:        []ActivityWindow{{Window: "run", Samples: 30, Shares: []Share{{Tenant: "1", DBTime: 2500, Share: 0.5}}, Untagged: 2.5}},
			AlertThreshold: 0.3, AlertWindow: 3,
			Alerts: []ActivityAlert{{Tenant: "1", Share: 0.72, Threshold: 0.3, Window: 3, Fired: 14, Phase: "run", Cleared: 23},
				{Tenant: "2", Share: 0.4, Threshold: 0.3, Window: 3, Fired: 25, Phase: "after"}}},
	}
	got := strings.Join(serviceLines(c), "\n")
	for _, want := range []string{
		"service http://127.0.0.1:1 (ready in 0.25 s), logs out/service-gate-0.log",
		"http 10 arrivals, 15 requests (amplification 1.50x, 5 retries): 2xx 9, 429 6 (429 Retry-After: malformed 1, seconds 5; mean 1.0 s)",
		"UNTAGGED 2.5 s 50.0% (max 3 at once, longest 812 ms), t:1 2.5 s 50.0%",
		"  in run: UNTAGGED 2.5 s, t:1 50.0%",
		"share alerts (a tenant above 30.0% of active-backend time for 3.0 s): t:1 72.0% from 14.0 s (run) to 23.0 s; t:2 40.0% from 25.0 s (after) to the end",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lines lack %q:\n%s", want, got)
		}
	}
	c.HTTP.RetryAfter, c.HTTP.RetryAfterMean = map[string]int64{"malformed": 20}, 0
	if got := strings.Join(serviceLines(c), "\n"); !strings.Contains(got, "(429 Retry-After: malformed 20)\n") {
		t.Errorf("a mean of no well-formed Retry-After shown:\n%s", got)
	}
	c.Activity.Alerts = nil
	if got := strings.Join(serviceLines(c), "\n"); !strings.Contains(got, "for 3.0 s): none") {
		t.Errorf("no alert:\n%s", got)
	}
	if lines := serviceLines(Configuration{}); len(lines) != 0 {
		t.Errorf("no service: %q", lines)
	}
}
