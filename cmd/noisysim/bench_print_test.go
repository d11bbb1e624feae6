package main

import (
	"bytes"
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
		PgBenchMax:       bench.PgBenchRun{Rate: 70000, CPUPerKOp: 7 * ms},
		PgBenchSustained: bench.PgBenchRun{Offered: 52500, Rate: 52000, P99: 20 * ms, CPUPerKOp: 10 * ms, Sustained: true},
		PgBenchProbes: []bench.PgBenchRun{{Offered: 70000, Rate: 61000, P99: 900 * ms, Unstarted: 20000},
			{Offered: 35000, Rate: 35000, P99: 2 * ms, Sustained: true}, {Offered: 52500, Rate: 52000, P99: 20 * ms, Sustained: true}},
		NoisysimMax:    bench.OpenLoopRun{Offered: 48000, Rate: 47840, Sustained: true, CPUPerKOp: 12 * ms},
		NoisysimProbes: []bench.OpenLoopRun{{Offered: 70000, Rate: 50000}, {Offered: 35000, Rate: 35000, Sustained: true}, {Offered: 48000, Rate: 47840, Sustained: true}},
	}
	res.MaxRatio = res.NoisysimMax.Rate / res.PgBenchSustained.Rate
	res.UnthrottledRatio = res.NoisysimMax.Rate / res.PgBenchMax.Rate
	var out bytes.Buffer
	printBench(&out, res)
	for _, want := range []string{
		"maximum    pgbench      52000 tps    client CPU 10.00 ms per 1,000  (sustained -R: offered 52500/s, p99 20.00 ms, 0 unstarted)",
		"maximum    pgbench  probes offered→done sustained: 70000→61000 no, 35000→35000 yes, 52500→52000 yes",
		"maximum    ratio         0.92        sustained ÷ pgbench's sustained, both open loops judged alike; goal ≥ 0.90: ok; client CPU per op 1.20 × pgbench's",
		"maximum    ratio         0.68        sustained ÷ pgbench unthrottled (a closed loop, judged by no p99); client CPU per op 1.71 × pgbench's",
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
