package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/redisserver"
	"github.com/noisysim/noisysim/internal/runlock"
)

// TestRunAppInstances runs scenarios/app-instances.yaml's global
// configuration: 3 app instances on one Redis limiter; the noisy tenant's
// heavy calls never exceed the cap of 4, by the limiters' admissions and
// by pg_stat_activity, and it did reach the cap (the load is there). An
// unreachable redis_url exits 2 naming the key.
func TestRunAppInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	if _, err := local.FindBinaries(context.Background(), ""); errors.Is(err, backend.ErrNotInstalled) {
		t.Skipf("skipping: PostgreSQL server binaries not found: %v", err)
	}
	if _, err := redisserver.Find(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	bin := noisysimBinary(t)
	lock := filepath.Join(t.TempDir(), "lock")

	t.Run("global holds the cap", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "report")
		_, code := runCommand(t, bin, lock, "run", "--no-progress", "../../scenarios/app-instances.yaml", "--only", "global", "--out", dir)
		if code != 0 && code != exitAssertion {
			t.Fatalf("exit %d", code)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Assertions []struct {
				Name, Tenant, Class string
				Observed, Limit     float64
				Passed              bool
			} `json:"assertions"`
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range rep.Assertions {
			if !strings.HasPrefix(a.Name, "app_peak") {
				// Latency verdicts are the machine's as much as the system's.
				if !a.Passed && a.Name != "quiet_p99" {
					t.Errorf("%s %s/%s failed: observed %v, limit %v", a.Name, a.Tenant, a.Class, a.Observed, a.Limit)
				}
				continue
			}
			if !a.Passed {
				t.Errorf("%s %s/%s: observed %v over the limit %v", a.Name, a.Tenant, a.Class, a.Observed, a.Limit)
			}
			if a.Tenant != "1" {
				continue
			}
			// The noisy tenant sends only the heavy class: cap 4 globally.
			if a.Limit != 4 || a.Observed > 4 {
				t.Errorf("%s: the noisy tenant peaked at %v, limit %v; want <= 4", a.Name, a.Observed, a.Limit)
			}
			if a.Observed < 2 {
				t.Errorf("%s: the noisy tenant peaked at %v: the scenario did not load the cap", a.Name, a.Observed)
			}
			seen[a.Name] = true
		}
		if !seen["app_peak_concurrency"] || !seen["app_peak_active_backends"] {
			t.Errorf("peak assertions missing: %v", seen)
		}
	})

	t.Run("unreachable redis_url", func(t *testing.T) {
		raw, err := os.ReadFile("../../scenarios/app-instances.yaml")
		if err != nil {
			t.Fatal(err)
		}
		bad := strings.Replace(string(raw), "app: {instances: 3, limiter: global}", `app: {instances: 3, limiter: global, redis_url: "redis://127.0.0.1:1/0"}`, 1)
		path := filepath.Join(t.TempDir(), "app.yaml")
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--no-progress", path)
		cmd.Env = append(os.Environ(), runlock.EnvPath+"="+lock)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
			t.Fatalf("exit %v, want 2: %s", err, out)
		}
		// The third configuration's key, by its place in the file.
		if want := path + ":80:"; !strings.Contains(string(out), want) || !strings.Contains(string(out), "configurations[2].app.redis_url") {
			t.Errorf("error does not name %s...configurations[2].app.redis_url:\n%s", want, out)
		}
	})

	t.Run("no redis-server", func(t *testing.T) {
		cmd := exec.Command(bin, "run", "--no-progress", "../../scenarios/app-instances.yaml")
		cmd.Env = append(os.Environ(), runlock.EnvPath+"="+lock, redisserver.EnvBinary+"=/nonexistent/redis-server")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
			t.Fatalf("exit %v, want 2: %s", err, out)
		}
		if !strings.Contains(string(out), "redis-server not found") {
			t.Errorf("no one-line reason:\n%s", out)
		}
	})
}
