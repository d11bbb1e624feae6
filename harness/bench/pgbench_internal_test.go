package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadPgBenchLogsUnstarted: transactions pgbench left unstarted count in
// its p50 and p99 at the largest latency logged, scaled by the share of
// transactions the logs hold.
func TestReadPgBenchLogsUnstarted(t *testing.T) {
	// 1,000 logged transactions of 1..1,000 µs (time + schedule lag), split
	// over two threads' logs.
	dir := t.TempDir()
	var a, b strings.Builder
	for i := 1; i <= 1000; i++ {
		w := &a
		if i%2 == 0 {
			w = &b
		}
		fmt.Fprintf(w, "%d %d %d 0 1700000000 0 %d\n", i%8, i, i/2, i-i/2)
	}
	for name, s := range map[string]string{"log.1": a.String(), "log.1.1": b.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		unstarted int64
		sampling  float64
		p50, p99  time.Duration
	}{
		{"none unstarted", 0, 1, 500 * time.Microsecond, 990 * time.Microsecond},
		// 5 of 1,005 at 1,000 µs: the p50 moves to the 503rd, the p99 to
		// the 995th.
		{"a few unstarted", 5, 1, 503 * time.Microsecond, 995 * time.Microsecond},
		// 50 unstarted, a tenth logged: 5 more at 1,000 µs, as above.
		{"a few unstarted, sampled", 50, 0.1, 503 * time.Microsecond, 995 * time.Microsecond},
		// 20 of 1,020 at 1,000 µs: more than 1%, the p99 is the largest.
		{"many unstarted", 20, 1, 510 * time.Microsecond, 1000 * time.Microsecond},
		// 1,500 of 2,500: the p50 too.
		{"most unstarted", 1500, 1, 1000 * time.Microsecond, 1000 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out PgBenchRun
			if err := readPgBenchLogs(dir, tc.unstarted, tc.sampling, &out); err != nil {
				t.Fatal(err)
			}
			if out.P50 != tc.p50 || out.P99 != tc.p99 {
				t.Errorf("p50 %v, p99 %v; want %v, %v", out.P50, out.P99, tc.p50, tc.p99)
			}
		})
	}
}
