package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/live"
	"github.com/noisysim/noisysim/internal/runlock"
	"github.com/noisysim/noisysim/reports"
)

// freePort returns a loopback address with a port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestLiveMetricsScrapedByPrometheus starts a real Prometheus on loopback
// scraping noisysim run --metrics-addr every second through a short run,
// then asks Prometheus over its HTTP API (PromQL) for the series the run
// served: latency histograms per tenant with the quiet tenants beyond the
// top 3 folded into one label, operations per class, limiter gauges, the
// DB-time share of the dominant tenant and the phases.
func TestLiveMetricsScrapedByPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	needPostgres(t)
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("skipping: prometheus not installed (Debian: apt-get install prometheus)")
	}
	bin := noisysimBinary(t)
	dir := t.TempDir()
	metricsAddr, promAddr := freePort(t), freePort(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 900ms}\n"+
		"scrape_configs:\n  - job_name: noisysim\n    static_configs: [{targets: [%q]}]\n", metricsAddr)), 0o644)
	var promLog bytes.Buffer
	pc := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr)
	pc.Stdout, pc.Stderr = &promLog, &promLog
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pc.Process.Kill()
		pc.Wait()
	})
	ready := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get("http://" + promAddr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = true
				break
			}
		}
	}
	if !ready {
		t.Fatalf("prometheus not ready after 60 s:\n%s", promLog.String())
	}

	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "run", "--no-progress", "--allow-concurrent", "--metrics-addr", metricsAddr, "--metrics-top", "3",
		"--out", out, "testdata/html-short.yaml")
	cmd.Env = append(os.Environ(), runlock.EnvPath+"="+filepath.Join(dir, "lock"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != exitAssertion {
		t.Fatalf("noisysim run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "live metrics at http://"+metricsAddr+"/metrics") {
		t.Errorf("the run does not say where its metrics are:\n%s", stderr.String())
	}

	// query returns the label named by of each series PromQL q returns,
	// with its value. The run is over: its series are stale, so queries
	// read the last value within 5 minutes.
	query := func(q, by string) map[string]float64 {
		t.Helper()
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Value  [2]any            `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
			t.Fatalf("query %s: %v %s %s", q, err, body.Status, body.Error)
		}
		out := map[string]float64{}
		for _, r := range body.Data.Result {
			var v float64
			fmt.Sscan(fmt.Sprint(r.Value[1]), &v)
			out[r.Metric[by]] = v
		}
		return out
	}
	keys := func(m map[string]float64) []string {
		var k []string
		for s := range m {
			k = append(k, s)
		}
		slices.Sort(k)
		return k
	}

	tenants := query(`sum by (tenant) (last_over_time(noisysim_request_latency_seconds_count{configuration="isolated"}[5m]))`, "tenant")
	if want := []string{"1", "2", "3", live.OtherQuiet}; !slices.Equal(keys(tenants), want) {
		t.Errorf("latency histogram tenants %v, want %v (the top 3, the rest folded)", keys(tenants), want)
	}
	for tenant, n := range tenants {
		if n <= 0 {
			t.Errorf("tenant %s: %g requests in the histogram", tenant, n)
		}
	}
	ops := query(`last_over_time(noisysim_operations_total{configuration="naive"}[5m])`, "class")
	if ops["lookup"] < 100 || ops["report"] < 1 {
		t.Errorf("operations by class %v: want lookup >= 100 and reports", ops)
	}
	// The quiet tenants' lookup p99 from the histogram, over the whole
	// timeline, against the report's: a mixture's p99 lies between its
	// parts' (the report's windows: warm-up, solo, run), and
	// histogram_quantile interpolates inside the bucket holding the true
	// p99, whose bounds are a factor 2 apart.
	raw, err := os.ReadFile(filepath.Join(out, reports.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep reports.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	lo, hi := math.Inf(1), 0.0
	for _, c := range rep.Configurations {
		for _, w := range c.Windows {
			for _, row := range w.QuietAll {
				if c.Name == "naive" && row.Class == "lookup" && row.Count > 0 {
					lo, hi = min(lo, row.P99), max(hi, row.P99)
				}
			}
		}
	}
	if hi == 0 {
		t.Fatalf("report.json has no quiet lookup p99 of naive")
	}
	p99 := query(fmt.Sprintf(`histogram_quantile(0.99, sum by (le) (last_over_time(noisysim_request_latency_seconds_bucket{configuration="naive",class="lookup",tenant!=%q}[5m])))`, rep.Dominant), "")
	got := p99[""] * 1000
	t.Logf("naive quiet lookup p99: %.1f ms from Prometheus, %.1f..%.1f ms in the report's windows (disturbed: shared machine)", got, lo, hi)
	if !(got >= lo/2 && got <= hi*2) {
		t.Errorf("naive quiet lookup p99 from the histogram: %.1f ms, want within a bucket of the report's %.1f..%.1f ms", got, lo, hi)
	}
	if lim := query(`last_over_time(noisysim_limiter_in_flight{configuration="isolated"}[5m])`, "class"); !slices.Equal(keys(lim), []string{"heavy", "interactive"}) {
		t.Errorf("limiter classes %v, want heavy and interactive", keys(lim))
	}
	if lim := query(`last_over_time(noisysim_limiter_in_flight{configuration="naive"}[5m])`, "class"); len(lim) != 0 {
		t.Errorf("naive has no limiter, yet the metrics have %v", lim)
	}
	if share := query(`max_over_time(noisysim_db_time_share{tenant="1"}[5m])`, "configuration"); !(share["naive"] > 0.1) || !(share["isolated"] > 0.1) {
		t.Errorf("dominant tenant's DB-time share by configuration %v, want > 0.1 in both", share)
	}
	// The limiter's rejections by reason: those of report.json's series,
	// all of them but what the last scrape missed.
	var rejected int64
	for _, c := range rep.Configurations {
		for _, pt := range c.Series {
			for _, l := range pt.Limiters {
				rejected += l.Rejected
			}
		}
	}
	rej := query(`sum by (reason) (last_over_time(noisysim_limiter_rejections_total[5m]))`, "reason")
	scraped := 0.0
	for reason, n := range rej {
		if reason != "queue_full" && reason != "wait_exceeded" {
			t.Errorf("limiter rejections of reason %q, want queue_full or wait_exceeded", reason)
		}
		scraped += n
	}
	t.Logf("limiter rejections: %d in report.json, by reason %v scraped", rejected, rej)
	if scraped > float64(rejected) || rejected > 0 && len(rej) == 0 {
		t.Errorf("limiter rejections by reason %v scraped, %d in report.json", rej, rejected)
	}
	// Every query of the Grafana dashboard is PromQL Prometheus accepts.
	raw, err = os.ReadFile("../../deploy/grafana/noisysim.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/noisysim.json: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			query(strings.NewReplacer("$configuration", ".*", "$__rate_interval", "5s").Replace(tg.Expr), "")
			exprs++
		}
	}
	if exprs < 8 {
		t.Errorf("the dashboard has %d queries, want one per metric at least", exprs)
	}
	if phases := query(`max_over_time(noisysim_phase{configuration="isolated"}[5m])`, "phase"); !slices.Contains(keys(phases), "run") || !slices.Contains(keys(phases), "solo") {
		t.Errorf("phases seen %v, want solo and run among them", keys(phases))
	}
}

// TestMetricsAddrLoopbackOnly: a non-loopback --metrics-addr is refused
// (exit 2) unless --metrics-remote.
func TestMetricsAddrLoopbackOnly(t *testing.T) {
	var out, errOut bytes.Buffer
	code := realMain([]string{"run", "--metrics-addr", "0.0.0.0:9464", "testdata/html-short.yaml"}, &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "--metrics-remote") {
		t.Errorf("exit %d, stderr %q; want 2 naming --metrics-remote", code, errOut.String())
	}
}

// TestMetricsAddrMalformed: an address that is not host:port is refused
// (exit 2) with an example, and without pointing at --metrics-remote,
// which would not help.
func TestMetricsAddrMalformed(t *testing.T) {
	for _, addr := range []string{"garbage", "127.0.0.1:99999", "http://127.0.0.1:9464"} {
		var out, errOut bytes.Buffer
		code := realMain([]string{"run", "--metrics-addr", addr, "testdata/html-short.yaml"}, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "want host:port, e.g. 127.0.0.1:9464") || strings.Contains(errOut.String(), "--metrics-remote") {
			t.Errorf("%s: exit %d, stderr %q; want 2 with an example and no --metrics-remote", addr, code, errOut.String())
		}
	}
}

// TestMetricsAddrInUseBeforeLock: a --metrics-addr whose port is taken is
// said at once (exit 2 naming the address), not after waiting for another
// measured run's lock.
func TestMetricsAddrInUseBeforeLock(t *testing.T) {
	lockPath := filepath.Join(t.TempDir(), "lock")
	t.Setenv(runlock.EnvPath, lockPath)
	l, err := runlock.Acquire(context.Background(), lockPath, runlock.Options{What: "another run", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errOut bytes.Buffer
	code := realMain([]string{"run", "--no-wait", "--no-progress", "--metrics-addr", ln.Addr().String(), "testdata/html-short.yaml"}, &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), ln.Addr().String()+": bind: address already in use") || strings.Contains(errOut.String(), "another measured run") {
		t.Errorf("exit %d, stderr %q; want 2 naming the address in use, not the lock", code, errOut.String())
	}
}

// TestBenchLock: noisysim bench is a measurement: with --no-wait beside a
// measured run it exits 2 naming that run, before starting anything;
// --no-wait with --allow-concurrent is a usage error.
func TestBenchLock(t *testing.T) {
	lockPath := filepath.Join(t.TempDir(), "lock")
	t.Setenv(runlock.EnvPath, lockPath)
	l, err := runlock.Acquire(context.Background(), lockPath, runlock.Options{What: "another run", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	var out, errOut bytes.Buffer
	code := realMain([]string{"bench", "--no-wait", "--memory-duration", "-1s"}, &out, &errOut)
	if lines := strings.Split(strings.TrimSpace(errOut.String()), "\n"); code != exitUsage || len(lines) != 1 || !strings.Contains(errOut.String(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("bench --no-wait beside a measured run: exit %d, stderr %q; want 2 with one line naming pid %d", code, errOut.String(), os.Getpid())
	}
	if strings.Contains(out.String(), "local cluster") {
		t.Errorf("bench started a cluster while another run measured:\n%s", out.String())
	}
	out.Reset()
	errOut.Reset()
	code = realMain([]string{"bench", "--no-wait", "--allow-concurrent"}, &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "--no-wait and --allow-concurrent") {
		t.Errorf("bench --no-wait --allow-concurrent: exit %d, stderr %q; want 2 naming both", code, errOut.String())
	}
}
