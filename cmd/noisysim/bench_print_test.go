package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/bench"
)

// TestBenchPrintSustained: bench prints pgbench's sustained maximum and its
// probes, and judges the goal on the ratio of the sustained maxima, printing
// the ratio to pgbench unthrottled beside it.
func TestBenchPrintSustained(t *testing.T) {
	ms := time.Millisecond
	res := bench.Result{
		Query:            "SELECT 1",
		PgBenchMax:       bench.PgBenchRun{Rate: 70000, CPUPerKOp: 7 * ms, SwitchesPerOp: 0.1},
		PgBenchSustained: bench.PgBenchRun{Offered: 52500, Rate: 52000, P99: 20 * ms, CPUPerKOp: 10 * ms, Sustained: true, SwitchesPerOp: 0.4},
		PgBenchProbes: []bench.PgBenchRun{{Offered: 70000, Rate: 61000, P99: 900 * ms, Unstarted: 20000}, {Offered: 70000, Rate: 60000, P99: 950 * ms, Retry: true},
			{Offered: 35000, Rate: 35000, P99: 2 * ms, Sustained: true}, {Offered: 52500, Rate: 52000, P99: 20 * ms, Sustained: true}},
		NoisysimMax:    bench.OpenLoopRun{Offered: 48000, Rate: 47840, Sustained: true, CPUPerKOp: 12 * ms, SwitchesPerOp: 1.25},
		NoisysimProbes: []bench.OpenLoopRun{{Offered: 70000, Rate: 50000}, {Offered: 35000, Rate: 35000, Sustained: true}, {Offered: 48000, Rate: 47840, Sustained: true}},
	}
	res.MaxRatio = res.NoisysimMax.Rate / res.PgBenchSustained.Rate
	res.UnthrottledRatio = res.NoisysimMax.Rate / res.PgBenchMax.Rate
	var out bytes.Buffer
	printBench(&out, res)
	for _, want := range []string{
		"maximum    pgbench      52000 tps    client CPU 10.00 ms per 1,000  (sustained -R: offered 52500/s, p99 20.00 ms, 0 unstarted)",
		"maximum    pgbench  probes offered→done sustained (a missed probe runs again: \"again\"): 70000→61000 no, again 70000→60000 no, 35000→35000 yes, 52500→52000 yes",
		"maximum    ratio         0.92        sustained ÷ pgbench's sustained, both open loops judged alike; goal ≥ 0.90: ok; client CPU per op 1.20 × pgbench's; context switches per op 1.25, pgbench's 0.40",
		"maximum    ratio         0.68        sustained ÷ pgbench unthrottled (a closed loop, judged by no p99); client CPU per op 1.71 × pgbench's; context switches per op pgbench's 0.10",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if missed := benchMissed(res); len(missed) != 0 {
		t.Errorf("missed %v, want none at 0.92 × pgbench's sustained", missed)
	}
	res.MaxRatio = 0.89
	if missed := benchMissed(res); !slices.Contains(missed, "maximum rate ≥ 0.9 × pgbench") {
		t.Errorf("missed %v at 0.89 × pgbench's sustained, want the maximum", missed)
	}
}

// A skipped memory step is said in one line, and kept in --json: here on a
// database that cannot be reached, so no step runs but the skip is known.
func TestBenchSaysMemorySkipped(t *testing.T) {
	if _, err := os.Stat(bench.DefaultPgBench); err != nil {
		t.Skipf("skipping: pgbench not available: %v", err)
	}
	js := filepath.Join(t.TempDir(), "bench.json")
	var out, errOut bytes.Buffer
	code := realMain([]string{"bench", "--dsn", "postgres://noisysim@127.0.0.1:1/none?connect_timeout=5", "--memory-duration", "-1s", "--json", js}, &out, &errOut)
	if code == exitOK {
		t.Fatalf("bench on a closed port: exit 0\n%s\n%s", out.String(), errOut.String())
	}
	if want := "memory     skipped: --memory-duration -1s: a negative length skips it\n"; !strings.Contains(out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, out.String(), errOut.String())
	}
	var res struct{ Memory struct{ Skipped string } }
	if b, err := os.ReadFile(js); err != nil || json.Unmarshal(b, &res) != nil || !strings.Contains(res.Memory.Skipped, "--memory-duration -1s") {
		t.Errorf("--json: Memory.Skipped %q (%v), want the reason", res.Memory.Skipped, err)
	}
	// A memory step that runs says no such thing.
	out.Reset()
	printBench(&out, bench.Result{Memory: bench.MemoryRun{Samples: []bench.MemorySample{{RSS: 1 << 20}}}})
	if strings.Contains(out.String(), "skipped") {
		t.Errorf("a memory step that ran is said skipped:\n%s", out.String())
	}
}
