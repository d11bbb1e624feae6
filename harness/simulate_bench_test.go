package harness_test

import (
	"runtime"
	"testing"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

// BenchmarkSimulate10k simulates scenarios/simulate-10k.yaml (10,000
// tenants, 20 Citus workers, 6 minutes of traffic per configuration) from a
// hand-made calibration of ci-gate's shape (lookups and pages 0.5-2 ms, a
// report 100 ms alone). It reports the calls simulated per second of
// wall time and the heap in use at the end of a run (peak_heap_MB: the
// largest HeapInuse seen after each run, with the report held).
func BenchmarkSimulate10k(b *testing.B) {
	sc, err := scenario.Load("../scenarios/simulate-10k.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var ps []reports.Percentile
	for _, p := range []float64{0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.99} {
		ps = append(ps, reports.Percentile{P: p, Ms: 0.5 + 1.5*p/100})
	}
	cal := &reports.Report{
		Scenario: "ci-gate", Seed: 41,
		Configurations: []reports.Configuration{{Name: "naive", SoloQuietAll: []reports.TenantRow{
			{Tenant: reports.QuietAll, Class: "lookup", Count: 500, Max: 2, Percentiles: ps},
			{Tenant: reports.QuietAll, Class: "page", Count: 200, Max: 2, Percentiles: ps}}}},
		Calibrations: []reports.Calibration{{Class: "report", Samples: 20, ServiceMean: 100, ServiceP50: 95}},
	}
	var calls int64
	var peak uint64
	b.ReportAllocs()
	for b.Loop() {
		rep, err := harness.Simulate(b.Context(), sc, harness.SimulateOptions{Calibration: cal, CalibrationFile: "cal.json"})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range rep.Configurations {
			for _, w := range c.Windows {
				calls += w.Stats.Issued + w.Stats.Dropped
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		runtime.KeepAlive(rep)
	}
	b.ReportMetric(float64(calls)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MB")
}
