package bench_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/bench"
)

// TestRunShort runs every step for a second or two against a local cluster:
// the figures are there and add up (not how fast: that is the bench
// command's job).
func TestRunShort(t *testing.T) {
	if _, err := os.Stat(bench.DefaultPgBench); err != nil {
		t.Skipf("skipping: pgbench not available: %v", err)
	}
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	res, err := bench.Run(t.Context(), primary.DSN(), bench.Config{
		Duration: time.Second, SearchStep: time.Second, SearchSteps: 3, FixedRate: 500, Tenants: 5, Orders: 2000,
		MemTenants: 100, MemClasses: 3, MemRate: 300, MemDuration: 2 * time.Second, SampleEvery: 500 * time.Millisecond,
		MemWarmup: time.Second, MemProfile: filepath.Join(t.TempDir(), "mem"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.PgBenchMax.Rate <= 0 || res.NoisysimMax.Rate <= 0 || res.UnthrottledRatio != res.NoisysimMax.Rate/res.PgBenchMax.Rate {
		t.Errorf("maximum: pgbench %+v, noisysim %+v, ratio %v", res.PgBenchMax, res.NoisysimMax, res.UnthrottledRatio)
	}
	if res.PgBenchSustained.Rate <= 0 || res.MaxRatio != res.NoisysimMax.Rate/res.PgBenchSustained.Rate ||
		res.StackMaxRatio != res.StackMax.Rate/res.PgBenchSustained.Rate {
		t.Errorf("sustained maximum: pgbench %+v, noisysim %+v, ratio %v, stack ratio %v", res.PgBenchSustained, res.NoisysimMax, res.MaxRatio, res.StackMaxRatio)
	}
	// pgbench's sustained maximum is searched as noisysim's: three probes
	// held at a rate (-R, a tenth of them logged), the first at its
	// unthrottled rate, then bisection; each judged by its p99.
	if len(res.PgBenchProbes) < 3 || len(res.PgBenchProbes) > 6 || res.PgBenchProbes[0].Offered != res.PgBenchMax.Rate {
		t.Fatalf("pgbench probes %+v, want 3 to 6, the first at its unthrottled %v", res.PgBenchProbes, res.PgBenchMax.Rate)
	}
	// A probe that missed runs once more at its rate (Retry); the second's
	// outcome moves the search.
	var rates int
	lo, hi, best := 0.0, 1.5*res.PgBenchMax.Rate, -1
	for i, p := range res.PgBenchProbes {
		retry := i > 0 && !res.PgBenchProbes[i-1].Sustained && !res.PgBenchProbes[i-1].Retry
		if p.Retry != retry || (retry && p.Offered != res.PgBenchProbes[i-1].Offered) {
			t.Errorf("pgbench probe %d (retry %v) offered %v after %+v", i, p.Retry, p.Offered, res.PgBenchProbes[i-1])
		}
		if !retry {
			rates++
		}
		if i > 0 && !retry && p.Offered != (lo+hi)/2 {
			t.Errorf("pgbench probe %d offered %v, want (%v+%v)/2", i, p.Offered, lo, hi)
		}
		if p.Transactions <= 0 || p.P99 <= 0 || p.P50 > p.P99 || p.Sustained != (p.P99 <= bench.DefaultSustainP99) || p.Switches <= 0 ||
			p.Unstarted < 0 || !slices.Contains(p.Args, "-R") || !slices.Contains(p.Args, "--sampling-rate") {
			t.Errorf("pgbench probe %d: %+v", i, p)
		}
		if p.Sustained {
			lo, best = p.Offered, i
		} else if p.Retry {
			hi = p.Offered
		}
	}
	if rates != 3 {
		t.Errorf("pgbench probes %+v: %d rates, want 3", res.PgBenchProbes, rates)
	}
	if best >= 0 && (res.PgBenchSustained.Offered != res.PgBenchProbes[best].Offered || !res.PgBenchSustained.Sustained) {
		t.Errorf("pgbench sustained maximum %+v, want probe %d", res.PgBenchSustained, best)
	}
	if res.PgBenchMax.CPU <= 0 || res.PgBenchMax.CPUPerKOp <= 0 || res.PgBenchMax.Switches <= 0 ||
		res.PgBenchMax.SwitchesPerOp != float64(res.PgBenchMax.Switches)/float64(res.PgBenchMax.Transactions) {
		t.Errorf("pgbench's client CPU: %+v", res.PgBenchMax)
	}
	// The search: three rates, the first at pgbench's rate, each next one
	// halfway between the highest sustained and the lowest not (0 and 1.5 ×
	// pgbench's at first), a missed probe run once more; the maximum is the
	// best sustained probe.
	for name, probes := range map[string][]bench.OpenLoopRun{"noisysim": res.NoisysimProbes, "stack": res.StackProbes} {
		if len(probes) < 3 || len(probes) > 6 || probes[0].Offered != res.PgBenchMax.Rate {
			t.Fatalf("%s probes %+v, want 3 to 6, the first at pgbench's %v", name, probes, res.PgBenchMax.Rate)
		}
		lo, hi := 0.0, 1.5*res.PgBenchMax.Rate
		var best float64
		rates := 0
		for i, p := range probes {
			retry := i > 0 && !probes[i-1].Sustained && !probes[i-1].Retry
			if p.Retry != retry || (retry && p.Offered != probes[i-1].Offered) {
				t.Errorf("%s probe %d (retry %v) offered %v after %+v", name, i, p.Retry, p.Offered, probes[i-1])
			}
			if !retry {
				rates++
			}
			if i > 0 && !retry && p.Offered != (lo+hi)/2 {
				t.Errorf("%s probe %d offered %v, want (%v+%v)/2", name, i, p.Offered, lo, hi)
			}
			if p.Sustained != (p.DropShare < 0.001 && p.P99 <= bench.DefaultSustainP99) {
				t.Errorf("%s probe %d: sustained %v with %+v", name, i, p.Sustained, p)
			}
			if p.CPU <= 0 || p.CPUPerKOp <= 0 || p.Switches <= 0 || p.SwitchesPerOp != float64(p.Switches)/float64(p.Completed) {
				t.Errorf("%s probe %d: client CPU %v, %v per 1,000, %d context switches, %v per op", name, i, p.CPU, p.CPUPerKOp, p.Switches, p.SwitchesPerOp)
			}
			if p.Sustained {
				lo, best = p.Offered, max(best, p.Offered)
			} else if p.Retry {
				hi = p.Offered
			}
		}
		if rates != 3 {
			t.Errorf("%s probes %+v: %d rates, want 3", name, probes, rates)
		}
		if m := map[string]bench.OpenLoopRun{"noisysim": res.NoisysimMax, "stack": res.StackMax}[name]; best > 0 && (m.Offered != best || !m.Sustained) {
			t.Errorf("%s maximum %+v, want the probe at %v", name, m, best)
		}
	}
	f := res.NoisysimFixed
	if f.Completed+f.Dropped > f.Scheduled || f.Scheduled < 300 || f.P99 <= 0 || f.Errors != 0 {
		t.Errorf("noisysim at 500/s: %+v", f)
	}
	if p := res.PgBenchFixed; p.Transactions < 10 || p.P99 <= 0 || p.P50 > p.P99 || res.P99Ratio <= 0 {
		t.Errorf("pgbench at 500/s: %+v, p99 ratio %v", p, res.P99Ratio)
	}
	m := res.Memory
	if len(m.Samples) < 3 || m.MaxRSS == 0 || m.Run.Completed < 300 || m.Run.Errors != 0 {
		t.Errorf("memory: %d samples, max RSS %d, run %+v", len(m.Samples), m.MaxRSS, m.Run)
	}
	// Every sample reads the runtime and the recorder; the last is taken
	// at the end of the run, with every series that recorded (at most
	// tenants × classes: the reserved ones that did not are not counted).
	for i, s := range m.Samples {
		if s.HeapAlloc == 0 || s.HeapSys < s.HeapInuse || s.HeapIdle < s.HeapReleased || s.StackInuse == 0 || s.Goroutines == 0 ||
			s.Series < 1 || s.Series > 300 || (i > 0 && (s.NumGC < m.Samples[i-1].NumGC || s.Series < m.Samples[i-1].Series)) {
			t.Errorf("memory sample %d: %+v", i, s)
		}
	}
	if last := m.Samples[len(m.Samples)-1]; last.Elapsed < 2*time.Second || m.LastRSS != last.RSS {
		t.Errorf("last memory sample %+v at %v, LastRSS %d: want the run's end", last, last.Elapsed, m.LastRSS)
	}
	if m.WarmRSS == 0 || m.Growth != float64(m.LastRSS)/float64(m.WarmRSS) {
		t.Errorf("memory growth %v, warm %d, last %d", m.Growth, m.WarmRSS, m.LastRSS)
	}
	// --memprofile: a heap profile at the warm-up and one at the end.
	if len(m.Profiles) != 2 || !strings.HasSuffix(m.Profiles[0], "mem-warmup.pprof") || !strings.HasSuffix(m.Profiles[1], "mem-end.pprof") {
		t.Fatalf("memory profiles %v, want mem-warmup.pprof and mem-end.pprof", m.Profiles)
	}
	for _, p := range m.Profiles {
		// pprof's format: gzipped protocol buffers naming the sample types.
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		var b []byte
		if err == nil {
			b, err = io.ReadAll(zr)
		}
		f.Close()
		if err != nil || !bytes.Contains(b, []byte("inuse_space")) {
			t.Errorf("heap profile %s: %v, %d bytes without inuse_space", p, err, len(b))
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  bench.Config
		want string
	}{
		{"short duration", bench.Config{Duration: time.Millisecond}, "--duration"},
		{"threads above clients", bench.Config{PoolSize: 2, Threads: 4}, "--threads"},
		{"overload not above 1", bench.Config{Overload: 0.5}, "--overload"},
		{"one tenant", bench.Config{Tenants: 1}, "--tenants"},
		{"short search step", bench.Config{SearchStep: time.Millisecond}, "--search-step"},
		{"no search steps", bench.Config{SearchSteps: -1}, "--search-steps"},
		{"negative sustain p99", bench.Config{SustainP99: -time.Millisecond}, "--sustain-p99"},
		{"too few orders", bench.Config{Orders: 10}, "--orders"},
		{"negative procs", bench.Config{Procs: -1}, "--procs"},
		{"memory profile in no directory", bench.Config{MemProfile: "/nonexistent-dir/mem"}, "--memprofile"},
		{"memory profile in a directory not writable", bench.Config{MemProfile: "/proc/mem"}, "not writable"},
		{"memory profile of a skipped memory step", bench.Config{MemProfile: filepath.Join(t.TempDir(), "mem"), MemDuration: -1}, "no profile would be written"},
		{"both steps skipped", bench.Config{SkipThroughput: true, MemDuration: -1}, "nothing to measure"},
		{"negative memory warm-up", bench.Config{MemWarmup: -time.Second}, "--memory-warmup"},
		{"warm-up as long as the memory step", bench.Config{MemDuration: time.Minute, MemWarmup: time.Minute}, "shorter than the memory step"},
		{"both steps skipped names the memory step's flag", bench.Config{SkipThroughput: true, MemDuration: -1}, "(--memory-duration)"},
		{"no sample between the warm-up and the end", bench.Config{MemDuration: 100 * time.Second, MemWarmup: time.Minute, SampleEvery: 55 * time.Second}, "--sample-every"},
		{"sampled only at the end", bench.Config{MemDuration: time.Minute, SampleEvery: time.Minute}, "comes at 1m0s"},
		{"sampled every microsecond", bench.Config{SampleEvery: time.Microsecond}, "(--sample-every) = 1µs: must be at least 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, bench.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, tc.want)
			}
		})
	}
}

// A memory step with a sample after its warm-up and before its end is
// judged, however coarse the sampling.
func TestConfigSamplesAfterWarmup(t *testing.T) {
	for _, cfg := range []bench.Config{
		{},
		{MemDuration: 100 * time.Second, MemWarmup: time.Minute, SampleEvery: 45 * time.Second}, // 90 s
		{MemDuration: 100 * time.Second, MemWarmup: time.Minute, SampleEvery: 60 * time.Second}, // 60 s
		{MemDuration: -1, SampleEvery: time.Hour},                                               // skipped: nothing to judge
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// A negative MemDuration skips the memory step, and the result says so
// even when no step could run.
func TestRunSaysMemorySkipped(t *testing.T) {
	res, err := bench.Run(t.Context(), "postgres://noisysim@127.0.0.1:1/none?connect_timeout=5", bench.Config{MemDuration: -time.Second})
	if err == nil || res.Memory.Skipped != "--memory-duration -1s: a negative length skips it" {
		t.Errorf("Run on a closed port: %v, Memory.Skipped %q; want an error and the skip said", err, res.Memory.Skipped)
	}
	if res, _ := bench.Run(t.Context(), "postgres://noisysim@127.0.0.1:1/none?connect_timeout=5", bench.Config{}); res.Memory.Skipped != "" {
		t.Errorf("the default memory step said skipped: %q", res.Memory.Skipped)
	}
}

// A DSN with a wrong password is bad input, said as the server said it.
func TestRunWrongPassword(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	_, err := bench.Run(t.Context(), primary.DSNFor(primary.User, "wrong-password"), bench.Config{Duration: time.Second})
	if !errors.Is(err, backend.ErrAuthFailed) || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("err = %v, want backend.ErrAuthFailed", err)
	}
}
