package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// pythonInterpreter is the interpreter examples/orders-api-python's
// scenario names: Debian's, the one python3-psycopg2 installs for.
const pythonInterpreter = "/usr/bin/python3"

// TestServiceGatePython puts a service in another language than Go under
// the gate: examples/orders-api-python (Python 3, psycopg2, nothing of
// noisysim's) run by examples/orders-api-python/scenario.yaml. As
// built it passes (exit 0): every backend tagged, 2xx answers and the
// heavy limiter's 429s with a whole-seconds Retry-After. With
// ORDERS_API_BYPASS_REPORT=1 (its report route on a psycopg2 pool of its
// own, no limiter, no tag) it fails (exit 99) on tagged_only, the untagged
// backends reported with the report's query. The seam is HTTP in front
// and pg_stat_activity behind, whatever the service is written in.
//
// As in TestServiceGate, a quiet_p99 failing alone as built is the
// machine's latency, logged rather than failed.
func TestServiceGatePython(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	if _, err := local.FindBinaries(context.Background(), ""); errors.Is(err, backend.ErrNotInstalled) {
		t.Skipf("skipping: PostgreSQL server binaries not found: %v", err)
	}
	if out, err := exec.Command(pythonInterpreter, "-c", "import psycopg2").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s with psycopg2 not found (Debian: apt-get install python3-psycopg2): %v %s",
			pythonInterpreter, err, strings.TrimSpace(lastLine(string(out))))
	}
	bin := noisysimBinary(t)
	lock := filepath.Join(t.TempDir(), "lock")
	const sc = "../../examples/orders-api-python/scenario.yaml"
	t.Run("as built", func(t *testing.T) {
		rep, out, code := runServiceGate(t, bin, lock, sc, false)
		failed := rep.failed()
		if code == exitAssertion && len(failed) > 0 && strings.Join(failed, ",") == strings.Repeat("quiet_p99,", len(failed)-1)+"quiet_p99" {
			t.Logf("only quiet_p99 failed (the machine's latency moved): %s", out)
		} else if code != 0 {
			t.Fatalf("exit %d, want 0; failed %v\n%s", code, failed, out)
		}
		if !rep.has("tagged_only", true) {
			t.Errorf("tagged_only not passed:\n%s", out)
		}
		c := rep.Configurations[0]
		if c.HTTP == nil || c.HTTP.Outcomes["2xx"] == 0 || c.HTTP.Outcomes["429"] == 0 {
			t.Fatalf("http %+v: want 2xx and the report's 429s\n%s", c.HTTP, out)
		}
		// Every 429 carried Retry-After in whole seconds (none missing,
		// malformed or an HTTP date).
		if c.HTTP.RetryAfter["seconds"] != c.HTTP.Outcomes["429"] {
			t.Errorf("Retry-After forms %v of %d 429s: want all in seconds", c.HTTP.RetryAfter, c.HTTP.Outcomes["429"])
		}
		if c.Activity == nil || len(c.Activity.Tenants) == 0 || c.Activity.Tenants[0].Tenant != "1" || c.Activity.Untagged != nil {
			t.Errorf("activity %+v: want tagged tenants only, tenant 1 first", c.Activity)
		}
	})
	t.Run("bypass", func(t *testing.T) {
		rep, out, code := runServiceGate(t, bin, lock, sc, true)
		if code != exitAssertion {
			t.Fatalf("exit %d, want 99\n%s", code, out)
		}
		const reportQuery = "SELECT date_trunc('month', created_at) AS month"
		if !rep.has("tagged_only", false) || !strings.Contains(rep.detail("tagged_only"), reportQuery) {
			t.Errorf("tagged_only did not fail naming the report's query:\n%s", out)
		}
		a := rep.Configurations[0].Activity
		if a == nil || a.Untagged == nil || a.Untagged.ActiveSamples == 0 ||
			!slices.ContainsFunc(a.UntaggedQueries, func(q string) bool { return strings.HasPrefix(q, reportQuery) }) {
			t.Errorf("activity %+v: want the untagged report backends and their query", a)
		}
		if !rep.has("quiet_p99", false) {
			t.Logf("quiet_p99 held with the bypass on this machine; tagged_only caught it:\n%s", out)
		}
	})
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
