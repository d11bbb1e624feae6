package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/internal/runlock"
	"github.com/noisysim/noisysim/reports"
)

// The story tests run a shipped scenario with shorter phases, render its
// report.html in headless Chromium and check that the page tells the
// scenario's story: every figure the scenario needs, drawn for each
// configuration, with its phases and actions marked, and a screenshot that
// shows plots. NOISYSIM_KEEP_SCREENSHOT=DIR keeps the screenshots.

// shortened writes the shipped scenario name with each old text replaced
// by its new one (phases shortened, less data) to a temporary file; a
// text the file no longer holds fails the test, so the shortening follows
// the shipped file.
func shortened(t *testing.T, name string, pairs ...string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../scenarios", name))
	if err != nil {
		t.Fatal(err)
	}
	src := string(raw)
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.Count(src, pairs[i]) != 1 {
			t.Fatalf("scenarios/%s holds %q %d times, want once", name, pairs[i], strings.Count(src, pairs[i]))
		}
		src = strings.Replace(src, pairs[i], pairs[i+1], 1)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runForStory runs file with --out (extra flags before it) and returns the
// report and the path of its report.html; exit 0 and 99 (an assertion
// failed: the page shows it) are both a run.
func runForStory(t *testing.T, file string, flags ...string) (*reports.Report, string) {
	t.Helper()
	bin := noisysimBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	args := append([]string{"run", "--no-progress", "--allow-concurrent", "--out", out}, flags...)
	cmd := exec.Command(bin, append(args, file)...)
	cmd.Env = append(os.Environ(), runlock.EnvPath+"="+filepath.Join(dir, "lock"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != exitAssertion {
		t.Fatalf("noisysim run %s: %v\n%s\n%s", filepath.Base(file), err, stdout.String(), stderr.String())
	}
	t.Logf("noisysim run %s:\n%s", filepath.Base(file), stdout.String())
	raw, err := os.ReadFile(filepath.Join(out, reports.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep reports.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return &rep, filepath.Join(out, reports.HTMLFile)
}

// figureWant is a figure a story needs: its panels with a plot, and texts
// its plots must show (phase names, action marks, legend entries).
type figureWant struct {
	id    string
	plots int
	texts []string
}

// checkStory checks the DOM's figures against want, and that it has no
// figure of absent.
func checkStory(t *testing.T, dom string, want []figureWant, absent ...string) {
	t.Helper()
	got := figureSections(dom)
	for _, w := range want {
		sec, ok := got[w.id]
		if !ok {
			t.Errorf("report.html has no figure %s", w.id)
			continue
		}
		if n := strings.Count(sec, "<svg"); n != w.plots {
			t.Errorf("figure %s: %d plots, want %d", w.id, n, w.plots)
		}
		if n := drawnLines(sec); n < w.plots {
			t.Errorf("figure %s: %d drawn lines, want at least one per plot", w.id, n)
		}
		for _, s := range w.texts {
			if !strings.Contains(sec, s) {
				t.Errorf("figure %s does not show %q", w.id, s)
			}
		}
	}
	for _, id := range absent {
		if _, ok := got[id]; ok {
			t.Errorf("report.html has a figure %s, want none", id)
		}
	}
	for _, s := range []string{`id="verdict"`, `id="assertions"`, "schedule hash"} {
		if !strings.Contains(dom, s) {
			t.Errorf("report.html lacks %s", s)
		}
	}
}

// TestStoryCIGate: scenarios/ci-gate.yaml's page shows naive and isolated
// side by side: the quiet tenants' and the dominant tenant's latency with
// the solo and run phases shaded, the DB-time shares, the isolated
// limiter's rejections (naive has none), and the quiet tenants' latency
// distribution, solo against each configuration, a panel per class.
func TestStoryCIGate(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	needPostgres(t)
	browser := chromium(t)
	file := shortened(t, "ci-gate.yaml",
		"orders: 100000", "orders: 20000",
		"warmup: 2s", "warmup: 1s",
		"solo: 6s", "solo: 3s",
		"run: 20s", "run: 5s",
		"drain: 4s", "drain: 2s")
	rep, page := runForStory(t, file)
	dom, img := browse(t, browser, page)
	checkStory(t, dom, []figureWant{
		{id: "latency", plots: 2, texts: []string{"solo", "run", "quiet (all) lookup p99", "tenant 1 (dominant) report p99", "tenant 2 (quiet) lookup p99"}},
		{id: "distribution", plots: 2, texts: []string{"quiet (all) lookup", "quiet (all) page", "solo (naive)", "isolated", "99.9%"}},
		{id: "db_time", plots: 2, texts: []string{"tenant 1 (dominant)"}},
		{id: "limiter", plots: 1, texts: []string{"naive: no limiter in this configuration", "heavy in flight", "interactive queued"}},
		{id: "rejections", plots: 1, texts: []string{"naive: no limiter in this configuration", "heavy rejected: "}},
	}, "nodes", "writer")
	checkScreenshot(t, img)
	// The story in the data the page draws: the isolated limiter turned
	// the dominant tenant's reports away.
	// Each second's rejections add up by reason.
	rejected := int64(0)
	for _, c := range rep.Configurations {
		for _, pt := range c.Series {
			for _, l := range pt.Limiters {
				rejected += l.Rejected
				split := int64(0)
				for reason, n := range l.RejectedByReason {
					if reason != "queue_full" && reason != "wait_exceeded" {
						t.Errorf("%s at %gs: limiter reason %q", c.Name, pt.At, reason)
					}
					split += n
				}
				if split != l.Rejected {
					t.Errorf("%s %s at %gs: %d rejected, %d by reason %v", c.Name, l.Class, pt.At, l.Rejected, split, l.RejectedByReason)
				}
			}
		}
	}
	if rejected == 0 {
		t.Errorf("no limiter rejected a request: the limiter figure shows nothing")
	}
}

// TestStoryIncidentDrill: scenarios/incident-drill.yaml's page shows the
// drill on directory shards: the latency with the promote policy's
// move_tenant marked, the big tenant's DB-time share, the checked writer's
// acknowledgements through the move, and the load per node (busy
// connections), the spare node primary3 idle before the move and busy
// after it.
func TestStoryIncidentDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	needPostgres(t)
	browser := chromium(t)
	file := shortened(t, "incident-drill.yaml",
		"orders: 20000", "orders: 5000",
		"length: 8s, senders: quiet}", "length: 3s, senders: quiet}",
		"{name: after, length: 8s}", "{name: after, length: 3s}",
		"drain: 10s", "drain: 3s")
	rep, page := runForStory(t, file)
	dom, img := browse(t, browser, page)
	checkStory(t, dom, []figureWant{
		{id: "latency", plots: 1, texts: []string{"solo", "incident", "after", "move_tenant (promote)"}},
		{id: "distribution", plots: 2, texts: []string{"solo (sharded)", "sharded"}},
		{id: "db_time", plots: 1, texts: []string{"tenant 1 (dominant)", "share alert: promote acts on tenant 1 above 0.3"}},
		{id: "writer", plots: 1, texts: []string{"acknowledged", "move_tenant (promote)", "longest write"}},
		{id: "nodes", plots: 1, texts: []string{"primary1", "primary2", "primary3", "move_tenant (promote)"}},
	}, "limiter", "rejections")
	checkScreenshot(t, img)
	c := rep.Configurations[0]
	var moved float64 = -1
	for _, a := range c.Actions {
		if a.Type == "move_tenant" && a.Error == "" {
			moved = a.At
		}
	}
	if moved < 0 {
		t.Fatalf("actions %+v: no move_tenant", c.Actions)
	}
	// What the load-per-node figure draws: primary3's busy connections.
	var before, after float64
	for _, pt := range c.Series {
		for _, pl := range pt.Pools {
			if pl.Node != "primary3" {
				continue
			}
			if pt.At < moved {
				before += pl.Busy
			} else {
				after += pl.Busy
			}
		}
	}
	if before != 0 || after == 0 {
		t.Errorf("primary3's busy connections: %g before the move, %g after; want 0, then some", before, after)
	}
}

// TestStoryHotShard: scenarios/hot-shard.yaml's page (on 2 workers, with
// --apply) shows the ladder: isolate_tenant and dedicate_worker marked at
// their own times, each worker's load per second against the skew limit,
// and the checked writer's acknowledgements through the shard moves. In
// the data the page draws: a load for every worker in each second, tenant
// 1's worker carrying most of it before the ladder, and marked dedicated
// in the seconds after dedicate_worker ended.
func TestStoryHotShard(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	needPostgres(t)
	bins, err := local.FindBinaries(context.Background(), "")
	if err == nil {
		err = local.CheckCitus(context.Background(), bins)
	}
	if errors.Is(err, local.ErrCitusNotInstalled) {
		t.Skip("skipping: the citus extension is not installed")
	}
	browser := chromium(t)
	file := shortened(t, "hot-shard.yaml",
		"workers: 4", "workers: 2",
		"  node_cpu: 0.4 ", "  # node_cpu: 0.4 ",
		"  node_cpu_roles:", "  # node_cpu_roles:",
		"orders: 20000", "orders: 5000",
		"shards: 32", "shards: 8",
		"length: 12s, senders: quiet}", "length: 2s, senders: quiet}",
		"length: 12s\n", "length: 3s\n",
		"{name: after, length: 5s}", "{name: after, length: 3s}",
		"isolate: 0.05 ", "isolate: 0.15 ",
		"max: 300s ", "max: 150s ")
	rep, page := runForStory(t, file, "--apply")
	dom, img := browse(t, browser, page)
	checkStory(t, dom, []figureWant{
		{id: "latency", plots: 1, texts: []string{"solo", "before", "after", "isolate_tenant", "dedicate_worker"}},
		{id: "writer", plots: 1, texts: []string{"acknowledged", "isolate_tenant", "longest write"}},
		{id: "nodes", plots: 1, texts: []string{"worker1", "worker2", "skew limit", "isolate_tenant", "dedicate_worker", "ladder"}},
	}, "limiter", "rejections")
	checkScreenshot(t, img)

	c := rep.Configurations[0]
	marks := map[string]reports.ActionResult{}
	for _, a := range c.Actions {
		marks[a.Type] = a
	}
	iso, ok1 := marks["isolate_tenant"]
	ded, ok2 := marks["dedicate_worker"]
	if !ok1 || !ok2 || iso.Error != "" || ded.Error != "" || ded.At < iso.At+iso.Took {
		t.Fatalf("actions %+v: want isolate_tenant, then dedicate_worker, both done", c.Actions)
	}
	hot := ""
	for _, w := range c.Windows {
		if w.Name == "before" {
			hot = w.HotWorker
		}
	}
	var seconds, before, hotBefore, after, dedicatedAfter int
	for _, pt := range c.Series {
		if len(pt.Workers) == 0 {
			continue
		}
		seconds++
		if len(pt.Workers) != 2 {
			t.Errorf("second at %gs: workers %+v, want both", pt.At, pt.Workers)
		}
		top := pt.Workers[0]
		for _, w := range pt.Workers {
			if w.Load > top.Load {
				top = w
			}
		}
		switch {
		case pt.Window == "before":
			before++
			if top.Worker == hot && top.Load > 0 {
				hotBefore++
			}
		case pt.At > ded.At+ded.Took+1.5:
			after++
			for _, w := range pt.Workers {
				if w.Dedicated {
					dedicatedAfter++
				}
			}
		}
	}
	if seconds < len(c.Series)/2 || before == 0 || hotBefore < before/2 {
		t.Errorf("%d of %d seconds with worker loads, %d in before, %d of them with tenant 1's worker (%q) the most loaded; want most", seconds, len(c.Series), before, hotBefore, hot)
	}
	if after == 0 || dedicatedAfter != after {
		t.Errorf("%d seconds after dedicate_worker, %d with a worker marked dedicated; want every one", after, dedicatedAfter)
	}
}
