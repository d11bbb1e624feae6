package harness_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

// traceLine is the part of a trace line the tests compare.
type traceLine struct {
	Config string    `json:"config"`
	Seq    int64     `json:"seq"`
	AtNS   int64     `json:"at_ns"`
	Tenant string    `json:"tenant"`
	Class  string    `json:"class"`
	Script string    `json:"script"`
	SQL    string    `json:"sql"`
	Args   []*string `json:"args"`
	// LatencyNS is set on a result line.
	LatencyNS *int64 `json:"latency_ns"`
	Outcome   string `json:"outcome"`
}

// readTrace returns a trace's op lines, in order, checking its header and
// that each op has one result line after it.
func readTrace(t *testing.T, b []byte) []traceLine {
	t.Helper()
	ops, results := readTraceLines(t, b)
	pending := map[string]bool{}
	for _, l := range ops {
		pending[fmt.Sprint(l.Config, "/", l.Seq)] = true
	}
	for _, l := range results {
		k := fmt.Sprint(l.Config, "/", l.Seq)
		if !pending[k] || l.Outcome == "" || *l.LatencyNS < 0 {
			t.Fatalf("result line %+v: not one per op, or no outcome", l)
		}
		delete(pending, k)
	}
	if len(pending) > 0 {
		t.Fatalf("%d ops without a result line", len(pending))
	}
	return ops
}

// readTraceLines returns a trace's op lines and result lines, in order.
func readTraceLines(t *testing.T, b []byte) (ops, results []traceLine) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		if n == 1 {
			var h struct {
				Trace int `json:"noisysim_trace"`
			}
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Trace != harness.TraceVersion {
				t.Fatalf("trace header %s: %v", sc.Text(), err)
			}
			continue
		}
		var l traceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("trace line %d: %v", n, err)
		}
		if l.LatencyNS != nil {
			results = append(results, l)
		} else {
			ops = append(ops, l)
		}
	}
	return ops, results
}

// TestTraceReplay runs a short scenario with a trace, then replays the
// trace through naive and isolated: the replay hands the open loop the
// same operations (tenant, class, seq, statement, parameters, intended
// start within 1 ms), and every one of them is measured.
func TestTraceReplay(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"multi.sql": "\\set id random(1, :rows_orders)\nSELECT id AS found FROM orders WHERE tenant_id = :tenant AND id = :id \\gset\nSELECT 1;\n",
		"s.yaml": `name: traced
seed: 7
tenants: {count: 4}
data: {orders: 2000}
classes:
  - {name: point, isolation_class: interactive, query: lookup, rate: 60}
  - {name: count, isolation_class: heavy, sql: "SELECT count(*) FROM orders WHERE tenant_id = $1 AND id <= $2", args: [":tenant", "random(1, :rows_orders)"], rate: 8}
  - {name: multi, isolation_class: interactive, script: multi.sql, rate: 10}
phases: {warmup: 200ms, solo: 1s, run: 1s, drain: 2s}
configurations:
  - {name: naive, mode: shared, shared: {pool_size: 4}}
assertions: {quiet_p99: {min_samples: 1000000}}
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyReplica})
	var recorded bytes.Buffer
	orig, err := harness.Run(t.Context(), sc, harness.Options{Cluster: c, Trace: &recorded})
	if err != nil {
		t.Fatal(err)
	}
	want := readTrace(t, recorded.Bytes())
	if len(want) < 50 {
		t.Fatalf("trace of %d ops, want a run's worth", len(want))
	}
	var withSQL, scriptOnly int
	for _, l := range want {
		switch {
		case l.SQL != "" && len(l.Args) > 0:
			withSQL++
		case l.Class == "multi" && l.Script == "multi.sql" && l.SQL == "":
			scriptOnly++
		default:
			t.Fatalf("trace line %+v: want a statement with parameters, or a script of several statements by name", l)
		}
	}
	if scriptOnly == 0 || withSQL == 0 {
		t.Fatalf("trace: %d statements, %d scripts", withSQL, scriptOnly)
	}
	if err := os.WriteFile(filepath.Join(dir, "incident.jsonl"), recorded.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	// The replay: same tenants and classes, naive and isolated, its own
	// trace written to compare.
	replay := strings.Replace(strings.Replace(string(mustRead(t, filepath.Join(dir, "s.yaml"))), "name: traced", "name: replayed\nreplay: {trace: incident.jsonl}", 1),
		"  - {name: naive, mode: shared, shared: {pool_size: 4}}", "  - {name: naive, mode: shared, shared: {pool_size: 4}}\n  - {name: isolated, mode: isolated}", 1)
	// Another seed: replayed statements keep their recorded parameters.
	replay = strings.Replace(replay, "seed: 7", "seed: 8", 1)
	if err := os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(replay), 0o644); err != nil {
		t.Fatal(err)
	}
	rsc, err := scenario.Load(filepath.Join(dir, "r.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var replayed bytes.Buffer
	rep, err := harness.Run(t.Context(), rsc, harness.Options{Cluster: c, Trace: &replayed})
	if err != nil {
		t.Fatal(err)
	}
	got := readTrace(t, replayed.Bytes())
	byConfig := map[string][]traceLine{}
	for _, l := range got {
		byConfig[l.Config] = append(byConfig[l.Config], l)
	}
	for _, cfg := range []string{"naive", "isolated"} {
		g := byConfig[cfg]
		if len(g) != len(want) {
			t.Errorf("%s replayed %d ops, recorded %d", cfg, len(g), len(want))
			continue
		}
		for i, w := range want {
			r := g[i]
			d := time.Duration(r.AtNS - w.AtNS)
			if r.Seq != w.Seq || r.Tenant != w.Tenant || r.Class != w.Class || r.SQL != w.SQL ||
				fmt.Sprint(deref(r.Args)) != fmt.Sprint(deref(w.Args)) || d < -time.Millisecond || d > time.Millisecond {
				t.Fatalf("%s op %d replayed as %+v %v, recorded %+v %v", cfg, i, r, deref(r.Args), w, deref(w.Args))
			}
		}
	}
	// Every replayed op is measured, per tenant × class as recorded.
	count := map[string]int64{}
	for _, l := range want {
		count[l.Tenant+"/"+l.Class]++
	}
	for _, cfg := range rep.Configurations {
		measured := map[string]int64{}
		for _, w := range cfg.Windows {
			for _, row := range w.Tenants {
				measured[row.Tenant+"/"+row.Class] += row.Count + row.Dropped
			}
		}
		if fmt.Sprint(measured) != fmt.Sprint(count) {
			t.Errorf("%s measured per tenant/class %v, recorded %v", cfg.Name, measured, count)
		}
	}
	// The recorded figures are the traced run's own: per measured window,
	// each tenant × class and the quiet tenants merged, the same count and
	// p99 as its report.
	if rep.Replay == nil || rep.Replay.Results != int64(len(want)) {
		t.Fatalf("replay section %+v, want %d recorded results", rep.Replay, len(want))
	}
	got99 := map[string]string{}
	for _, row := range rep.Replay.Recorded {
		got99[row.Window+"/"+row.Tenant+"/"+row.Class] = fmt.Sprintf("%d %.3f", row.Count, row.P99)
	}
	want99 := map[string]string{}
	for _, w := range orig.Configurations[0].Windows {
		if !w.Measured {
			continue
		}
		for _, row := range append(w.Tenants, w.QuietAll...) {
			if row.Count > 0 {
				want99[w.Name+"/"+row.Tenant+"/"+row.Class] = fmt.Sprintf("%d %.3f", row.Count, row.P99)
			}
		}
	}
	if len(want99) == 0 || fmt.Sprint(got99) != fmt.Sprint(want99) {
		t.Errorf("recorded rows (count, p99 ms)\n%v\nthe traced run's report\n%v", got99, want99)
	}
}

func deref(args []*string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == nil {
			out[i] = "NULL"
		} else {
			out[i] = *a
		}
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplayBadTrace: a trace with nothing to replay is bad input naming
// the file, its lines and why each was skipped.
func TestReplayBadTrace(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"bad.jsonl": "{\"noisysim_trace\":1}\nnot json\n{\"config\":\"naive\",\"seq\":1,\"at_ns\":5,\"tenant\":\"99\",\"class\":\"point\"}\n{\"config\":\"naive\",\"seq\":2,\"at_ns\":6,\"tenant\":\"1\",\"class\":\"nope\"}\n",
		"s.yaml": `name: bad-replay
tenants: {count: 4}
classes: [{name: point, isolation_class: interactive, query: lookup, rate: 10}]
replay: {trace: bad.jsonl}
configurations: [{name: naive, mode: shared}]
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = harness.Run(t.Context(), sc, harness.Options{})
	if !errors.Is(err, scenario.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	for _, want := range []string{"bad.jsonl:4: nothing to replay in 4 lines", "not a JSON trace line: 1 (line 2)",
		"tenant not in the scenario: 1 (line 3)", "class not in the scenario: 1 (line 4)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %v\nwant it to say %q", err, want)
		}
	}
}

// TestReplayBadLog: a PostgreSQL log with no statement to replay is bad
// input naming the file and its last line, and why each record was skipped.
func TestReplayBadLog(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"pg.json": `{"timestamp":"2026-12-01 18:00:00.000 UTC","error_severity":"LOG","message":"connection authorized: user=app"}
not json
{"timestamp":"2026-12-01 18:00:01.000 UTC","error_severity":"LOG","application_name":"t:zz","message":"duration: 1.000 ms  statement: SELECT 1"}
`,
		"s.sql": "SELECT 1;\n",
		"s.yaml": `name: bad-log
tenants: {count: 2, keys: {type: text, list: [acme, globex]}}
data: {setup: [s.sql]}
classes: [{name: lookup, isolation_class: interactive, sql: "SELECT 1", rate: 10}]
replay: {log: pg.json}
configurations: [{name: naive, mode: shared}]
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = harness.Run(t.Context(), sc, harness.Options{})
	if !errors.Is(err, scenario.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
	for _, want := range []string{"replay.log: ", "pg.json:3: nothing to replay", "unreadable record: 1 (line 2)",
		"not a statement (connection, error, other message): 1 (line 1)", "tenant not in the scenario: 1 (line 3)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %v\nwant it to say %q", err, want)
		}
	}
}

// TestReplayEmptyWindowNoted: a replay whose speed puts every statement
// before a measured window says that window gets none, rather than
// replaying nothing there in silence.
func TestReplayEmptyWindowNoted(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: runs a real PostgreSQL in -short mode")
	}
	dir := writeFiles(t, map[string]string{
		"pg.json": `{"timestamp":"2026-12-01 18:00:00.000 UTC","error_severity":"LOG","application_name":"t:acme","session_id":"a","message":"duration: 1.000 ms  statement: SELECT 1"}
{"timestamp":"2026-12-01 18:00:03.000 UTC","error_severity":"LOG","application_name":"t:acme","session_id":"a","message":"duration: 1.000 ms  statement: SELECT 2"}
`,
		"s.sql": "SELECT 1;\n",
		"s.yaml": `name: empty-window
tenants: {count: 2, keys: {type: text, list: [acme, globex]}}
data: {setup: [s.sql]}
classes: [{name: lookup, isolation_class: interactive, sql: "SELECT 1", rate: 1}]
replay: {log: pg.json, speed: 4}
timeline: [{name: solo, length: 1s}, {name: run, length: 1s}]
phases: {drain: 1s}
configurations: [{name: isolated, mode: isolated}]
assertions: {quiet_p99: {min_samples: 1000000, baseline: run}}
`,
	})
	sc, err := scenario.Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(t.Context(), sc, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(rep.Notes, "\n")
	if !strings.Contains(notes, "no statements fall in window run (after replay.speed 4") || strings.Contains(notes, "window solo") {
		t.Errorf("notes do not say window run (alone) gets no statements:\n%s", notes)
	}
}
