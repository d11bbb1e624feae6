package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// tracedOp is what TestRunReplayIncident compares of a trace's operation.
type tracedOp struct {
	Seq    int64  `json:"seq"`
	AtNS   int64  `json:"at_ns"`
	Tenant string `json:"tenant"`
	Class  string `json:"class"`
}

// readTraceOps returns a trace's operation lines per configuration, in
// file order (result lines left out).
func readTraceOps(t *testing.T, path string) map[string][]tracedOp {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		in = gz
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20)
	out := map[string][]tracedOp{}
	for n := 1; sc.Scan(); n++ {
		var l struct {
			tracedOp
			Config    string `json:"config"`
			Trace     int    `json:"noisysim_trace"`
			LatencyNS *int64 `json:"latency_ns"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		if l.Trace != 0 || l.LatencyNS != nil {
			continue
		}
		out[l.Config] = append(out[l.Config], l.tracedOp)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameOps checks that got are the operations of want: the same count per
// tenant and class, and each recorded operation (by seq) at the same
// intended start within 1 ms.
func sameOps(t *testing.T, what string, got, want []tracedOp) {
	t.Helper()
	count := func(ops []tracedOp) map[string]int {
		m := map[string]int{}
		for _, o := range ops {
			m[o.Tenant+"/"+o.Class]++
		}
		return m
	}
	if g, w := count(got), count(want); len(want) == 0 || fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("%s: %d operations per tenant/class %v, recorded %d: %v", what, len(got), g, len(want), w)
		return
	}
	at := map[int64]tracedOp{}
	for _, o := range want {
		at[o.Seq] = o
	}
	var worst time.Duration
	for _, o := range got {
		w, ok := at[o.Seq]
		if !ok || w.Tenant != o.Tenant || w.Class != o.Class {
			t.Errorf("%s: operation %+v not recorded as such (%+v)", what, o, w)
			return
		}
		worst = max(worst, (time.Duration(o.AtNS - w.AtNS)).Abs())
	}
	if worst > time.Millisecond {
		t.Errorf("%s: intended starts up to %s from the recorded ones, want within 1 ms", what, worst)
	}
	t.Logf("%s: %d operations, %d tenant/class pairs, intended starts within %s", what, len(got), len(count(got)), worst)
}

// TestRunReplayIncident replays the shipped incident end to end against a
// real PostgreSQL, and a fresh trace of ci-gate:
//
//   - scenarios/replay-incident.yaml exits 0: naive fails (the control),
//     isolated passes (where the isolated latency check alone fails, its
//     verdict is taken against the control as TestRunCIGate does); both
//     configurations are handed the shipped trace's operations; the report
//     shows the recorded, naive and isolated p99 side by side.
//   - run --trace of scenarios/ci-gate.yaml, replayed, hands the open loop
//     the same operations: the same count per tenant and class, the same
//     intended starts within 1 ms.
func TestRunReplayIncident(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario runs in -short mode")
	}
	if _, err := local.FindBinaries(t.Context(), ""); errors.Is(err, backend.ErrNotInstalled) {
		t.Skipf("skipping: PostgreSQL server binaries not found: %v", err)
	}
	bin := noisysimBinary(t) // without -race: its overhead would be measured as latency
	lock := filepath.Join(t.TempDir(), "lock")
	run := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		return runCommand(t, bin, lock, append([]string{"run", "--no-progress"}, args...)...)
	}

	t.Run("shipped", func(t *testing.T) {
		dir := t.TempDir()
		out, trace := filepath.Join(dir, "report"), filepath.Join(dir, "replayed.jsonl")
		text, code := run(t, "../../scenarios/replay-incident.yaml", "--out", out, "--trace", trace)
		if code != 0 && code != exitAssertion {
			t.Fatalf("exit %d, want 0", code)
		}
		verdict := latencyVerdict(t, out)
		if code == exitAssertion {
			if !verdict.isolatedLatencyOnly() {
				t.Fatalf("exit 99, want 0: failed %v", verdict.unexpected)
			}
			verdict.againstControl(t, verdict)
		}
		if !(verdict.ratio["naive"] > 1) {
			t.Errorf("the naive control's quiet p99 is %.2fx its limit: the replayed incident did not happen again", verdict.ratio["naive"])
		}
		shipped := readTraceOps(t, "../../scenarios/incidents/ci-gate-naive.jsonl.gz")["naive"]
		replayed := readTraceOps(t, trace)
		for _, cfg := range []string{"naive", "isolated"} {
			sameOps(t, "replay through "+cfg, replayed[cfg], shipped)
		}

		raw, err := os.ReadFile(filepath.Join(out, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep reports.Report
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		rp := rep.Replay
		if rp == nil || rp.Replayed != int64(len(shipped)) || rp.Results != int64(len(shipped)) {
			t.Fatalf("replay section %+v, want %d operations replayed and as many recorded results", rp, len(shipped))
		}
		// Side by side: the recorded run's quiet lookups in the run window,
		// then the naive and isolated p99 of the same window.
		var rec *reports.RecordedRow
		for i, row := range rp.Recorded {
			if row.Window == "run" && row.Tenant == reports.QuietAll && row.Class == "lookup" {
				rec = &rp.Recorded[i]
			}
		}
		if rec == nil || rec.Count == 0 {
			t.Fatalf("no recorded quiet (all) lookup row in the run window: %+v", rp.Recorded)
		}
		line := regexp.MustCompile(`(?m)^run\s+quiet \(all\)\s+lookup\s+\d+\s+[\d.]+ ms\s+([\d.]+) ms\s+([\d.]+) ms\s+([\d.]+) ms\s*$`).FindStringSubmatch(text)
		if line == nil {
			t.Fatalf("the terminal report lacks the run window's quiet (all) lookup row beside naive and isolated:\n%s", text)
		}
		t.Logf("quiet (all) lookups, run window p99: recorded %s ms, naive %s ms, isolated %s ms", line[1], line[2], line[3])
	})

	t.Run("ci-gate traced and replayed", func(t *testing.T) {
		dir := t.TempDir()
		recorded := filepath.Join(dir, "incident.jsonl.gz")
		if _, code := run(t, "../../scenarios/ci-gate.yaml", "--only", "naive", "--trace", recorded); code != exitAssertion {
			t.Fatalf("ci-gate --only naive: exit %d, want 99 (the control fails)", code)
		}
		// The shipped replay scenario with the fresh trace.
		sc, err := os.ReadFile("../../scenarios/replay-incident.yaml")
		if err != nil {
			t.Fatal(err)
		}
		y := strings.Replace(string(sc), "trace: incidents/ci-gate-naive.jsonl.gz", "trace: "+recorded, 1)
		if y == string(sc) {
			t.Fatal("replay-incident.yaml has no trace: incidents/ci-gate-naive.jsonl.gz line to replace")
		}
		// Its run phase as long as ci-gate's, whose run the trace holds
		// (the shipped trace was recorded when ci-gate's run was 10 s).
		gate, err := scenario.Load("../../scenarios/ci-gate.yaml")
		if err != nil {
			t.Fatal(err)
		}
		runLine := regexp.MustCompile(`(?m)^  run: \S+`)
		if !runLine.MatchString(y) {
			t.Fatal("replay-incident.yaml has no phases.run line to replace")
		}
		y = runLine.ReplaceAllLiteralString(y, "  run: "+gate.Phases.Run.Duration().String())
		path := filepath.Join(dir, "replay.yaml")
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		replayed := filepath.Join(dir, "replayed.jsonl")
		if _, code := run(t, path, "--only", "isolated", "--trace", replayed); code != 0 && code != exitAssertion {
			t.Fatalf("replay: exit %d, want 0 or 99", code)
		}
		sameOps(t, "ci-gate's trace replayed", readTraceOps(t, replayed)["isolated"], readTraceOps(t, recorded)["naive"])
	})
}
