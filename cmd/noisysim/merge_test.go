package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/reports"
)

const agentsScenario = `
name: agents
seed: 11
backend: {kind: external, primary_dsn: "${NOISYSIM_TEST_USER_DSN}"}
tenants: {count: 6}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 120}
phases: {warmup: 200ms, solo: 1s, run: 2s, drain: 500ms}
configurations:
  - {name: isolated, mode: isolated}
assertions: {quiet_p99: {min_samples: 1000000}, noisy_rejections: false}
`

// TestMergeThreeAgents runs the built binary as 3 agents (--segment 1/3,
// 2/3, 3/3, processes side by side) against one database noisysim started,
// merges their outputs and checks: every tenant × class of every window
// sent as many operations as a single agent's run of the same seed; the
// merged percentiles are those of one histogram fed all three agents'
// values. Then merge's refusals: a segment missing, one given twice, a
// different seed (exit 2 naming the directories).
func TestMergeThreeAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: scenario runs in -short mode")
	}
	needPostgres(t)
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	dir := t.TempDir()
	file := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(file, []byte(agentsScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := noisysimBinary(t)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "NOISYSIM_TEST_USER_DSN="+primary.DSN())
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}

	single := filepath.Join(dir, "single")
	if out, code := run("run", file, "--no-progress", "--allow-concurrent", "--out", single); code != 0 {
		t.Fatalf("single agent: exit %d\n%s", code, out)
	}
	startAt := time.Now().Add(12 * time.Second).UTC().Format(time.RFC3339Nano)
	agents := make([]string, 3)
	var wg sync.WaitGroup
	outs := make([]string, 3)
	codes := make([]int, 3)
	for i := range agents {
		agents[i] = filepath.Join(dir, fmt.Sprintf("agent%d", i+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], codes[i] = run("run", file, "--no-progress", "--allow-concurrent", "--segment", fmt.Sprintf("%d/3", i+1),
				"--start-at", startAt, "--out", agents[i])
		}()
	}
	wg.Wait()
	for i := range agents {
		if codes[i] != 0 {
			t.Fatalf("agent %d/3: exit %d\n%s", i+1, codes[i], outs[i])
		}
	}
	merged := filepath.Join(dir, "merged")
	if out, code := run(append([]string{"merge", "--out", merged}, agents...)...); code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, out)
	}

	want, err := readReport(filepath.Join(single, reports.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readReport(filepath.Join(merged, reports.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if got.Segments != 3 || got.ScheduleHash != want.ScheduleHash {
		t.Fatalf("merged report: segments %d, schedule %s; single run's schedule %s", got.Segments, got.ScheduleHash, want.ScheduleHash)
	}
	// Each agent's guard windows reach the merged report, by segment: a
	// disturbed agent marks the merged verdict as it marked its own.
	if got.Machine == nil || len(got.Machine.Windows) < 3 || !strings.HasPrefix(got.Machine.Windows[0].Window, "segment 1/3: ") || got.Machine.Concurrent == "" {
		t.Errorf("merged report's machine: %+v, want every agent's windows named by segment and their --allow-concurrent note", got.Machine)
	}
	// Operation counts per window × tenant × class.
	ops := func(rep *reports.Report) map[string]int64 {
		m := map[string]int64{}
		for _, w := range rep.Configurations[0].Windows {
			for _, r := range w.Tenants {
				m[w.Name+"/"+r.Tenant+"/"+r.Class] += r.Count + r.Dropped
			}
		}
		return m
	}
	gotOps, wantOps := ops(got), ops(want)
	if len(wantOps) == 0 || fmt.Sprint(gotOps) != fmt.Sprint(wantOps) {
		t.Errorf("operations per window/tenant/class:\n merged %v\n single %v", gotOps, wantOps)
	}

	// Lossless: each merged row's p50/p99 is that of one histogram fed
	// every agent's values of its tenant × class.
	var parts []*harness.SegmentOutput
	for _, d := range agents {
		o, err := harness.ReadSegment(d)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, o)
	}
	checked := 0
	for wi, w := range got.Configurations[0].Windows {
		for _, row := range w.Tenants {
			var tenant int
			fmt.Sscan(row.Tenant, &tenant)
			fed := hdr.New(int64(metrics.DefaultLowest), int64(metrics.DefaultHighest), metrics.DefaultSigFigs)
			for _, p := range parts {
				h := p.Windows["isolated"][wi].Recorder.LatencyHistogram(metrics.Key{Tenant: tenant, Class: row.Class})
				if h == nil {
					continue
				}
				dense := hdr.New(int64(metrics.DefaultLowest), int64(metrics.DefaultHighest), metrics.DefaultSigFigs)
				h.MergeInto(dense)
				for _, b := range dense.Distribution() {
					if b.Count > 0 {
						fed.RecordValues(b.From, b.Count)
					}
				}
			}
			if fed.TotalCount() != row.Count {
				t.Errorf("%s tenant %s: %d values in the agents' histograms, %d in the merged row", w.Name, row.Tenant, fed.TotalCount(), row.Count)
				continue
			}
			capped := func(q float64) float64 { return min(ms(time.Duration(fed.ValueAtQuantile(q))), row.Max) }
			if row.P99 != capped(99) || row.P50 != capped(50) {
				t.Errorf("%s tenant %s: merged p50 %v p99 %v, one histogram of every value: p50 %v p99 %v", w.Name, row.Tenant, row.P50, row.P99, capped(50), capped(99))
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no rows checked")
	}

	// The merged interval log holds every agent's histograms at their
	// absolute times (BaseTime to the millisecond).
	hlog, err := os.ReadFile(filepath.Join(merged, harness.HistogramLogFile))
	if err != nil {
		t.Fatal(err)
	}
	ml, err := harness.ReadIntervalLog(strings.NewReader(string(hlog)))
	if err != nil {
		t.Fatal(err)
	}
	var agentTotal int64
	for _, p := range parts {
		agentTotal += p.Log.Total()
	}
	if !strings.Contains(string(hlog), "#[BaseTime: ") || ml.Total() != agentTotal || ml.BaseTime.Before(time.Now().Add(-time.Hour)) {
		t.Errorf("merged histograms.hlog: base %v, %d values; want a recent base and the agents' %d", ml.BaseTime, ml.Total(), agentTotal)
	}

	// Refusals.
	otherRun := filepath.Join(dir, "other-run")
	if err := os.CopyFS(otherRun, os.DirFS(agents[2])); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(otherRun, harness.SegmentFile))
	if err != nil {
		t.Fatal(err)
	}
	meta = []byte(strings.Replace(string(meta), `"start_at": "`, `"start_at": "1`, 1))
	if err := os.WriteFile(filepath.Join(otherRun, harness.SegmentFile), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dirs []string
		want string
	}{
		{"missing", agents[:2], "segment 3/3 is missing"},
		{"twice", []string{agents[0], agents[1], agents[1], agents[2]}, "segment 2/3 is given twice"},
		{"not an agent", []string{agents[0], single}, single + ": it holds report.json but no segment.json"},
		{"another run", []string{agents[0], agents[1], otherRun}, "are agents of different runs (--start-at"},
	} {
		out, code := run(append([]string{"merge"}, tc.dirs...)...)
		if code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("merge %s: exit %d, want 2 naming %q:\n%s", tc.name, code, tc.want, out)
		}
	}
	htmlOnly := filepath.Join(dir, "html-only")
	if err := os.MkdirAll(htmlOnly, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(htmlOnly, reports.HTMLFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(append([]string{"merge", "--out", htmlOnly}, agents...)...); code != exitUsage || !strings.Contains(out, "report.html") {
		t.Errorf("merge --out over a report.html: exit %d, want 2 naming it:\n%s", code, out)
	}
	local := filepath.Join(dir, "local.yaml")
	if err := os.WriteFile(local, []byte(strings.Replace(agentsScenario, `{kind: external, primary_dsn: "${NOISYSIM_TEST_USER_DSN}"}`, "{kind: local}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run("run", local, "--segment", "1/2", "--out", filepath.Join(dir, "bad")); code != exitUsage || !strings.Contains(out, "backend.kind local") {
		t.Errorf("run --segment on backend.kind local: exit %d, want 2 naming backend.kind:\n%s", code, out)
	}
	for _, seg := range []string{"3/2", "0/0", "junk", ""} {
		out, code := run("run", file, "--segment", seg, "--out", filepath.Join(dir, "bad"))
		if code != exitUsage || !strings.Contains(out, "--segment") {
			t.Errorf("run --segment %s: exit %d, want 2 naming --segment:\n%s", seg, code, out)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
