package bench_test

import (
	"errors"
	"os"
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
		Duration: time.Second, FixedRate: 500, Tenants: 5, Orders: 2000,
		MemTenants: 100, MemClasses: 3, MemRate: 300, MemDuration: 2 * time.Second, SampleEvery: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.PgBenchMax.Rate <= 0 || res.NoisysimMax.Rate <= 0 || res.MaxRatio != res.NoisysimMax.Rate/res.PgBenchMax.Rate {
		t.Errorf("maximum: pgbench %+v, noisysim %+v, ratio %v", res.PgBenchMax, res.NoisysimMax, res.MaxRatio)
	}
	if res.NoisysimMax.Offered != 1.5*res.PgBenchMax.Rate {
		t.Errorf("noisysim offered %v, want 1.5 × pgbench's %v", res.NoisysimMax.Offered, res.PgBenchMax.Rate)
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
		{"too few orders", bench.Config{Orders: 10}, "--orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, bench.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrInvalid naming %s", err, tc.want)
			}
		})
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
