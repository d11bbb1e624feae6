package pools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
)

// A cancel storm: 30 goroutines run pg_sleep(0.5) for 3 s with a 10 ms
// deadline through a pool of 3 whose role has CONNECTION LIMIT 3. Every
// call gives its connection up mid-statement. The pool must not open a
// replacement while the old backend still runs (and counts against the
// role's limit): no connect is ever refused with 53300, the role never has
// more than 3 backends, and slots and connections all come back.
func TestCancelStormStaysWithinConnectionLimit(t *testing.T) {
	const (
		size       = 3
		goroutines = 30
		runFor     = 3 * time.Second
		deadline   = 10 * time.Millisecond
		role       = "storm"
	)
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologySingle, Settings: map[string]string{
		// %e puts each message's SQLSTATE in the log.
		"log_line_prefix": "%m [%p] %e %q%a ",
	}})
	primary, _ := backend.First(c, backend.RolePrimary)
	logPath := c.Stat().Nodes[0].LogPath
	db := &testDB{primary: primary, admin: connect(t, primary.DSN())}
	r := testRole(role, 0)
	r.ConnectionLimit = size
	dsns, _ := db.roles(t, r)

	for _, withLimiter := range []bool{false, true} {
		t.Run(fmt.Sprintf("limiter=%v", withLimiter), func(t *testing.T) {
			logFrom := fileSize(t, logPath)
			cfg := onePool(dsns[role], size)
			var lim *limiter.Limiter
			if withLimiter {
				var err error
				lim, err = limiter.New(limiter.Config{MaxPerTenant: 2, MaxQueue: 4, MaxWait: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				cfg.Classes[Interactive] = ClassConfig{Pool: string(Interactive), Limiter: isolation.Limiter(lim)}
			}
			s := newStack(t, cfg)

			// Sample the role's backends every 10 ms on a connection of
			// its own (a superuser's, outside the role's limit).
			sampler := connect(t, primary.DSN())
			stop := make(chan struct{})
			var maxBackends, samples atomic.Int64
			var sampleErr error
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					var n int64
					if err := sampler.QueryRow(context.Background(),
						"SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n); err != nil {
						sampleErr = err
						return
					}
					samples.Add(1)
					if n > maxBackends.Load() {
						maxBackends.Store(n)
					}
				}
			}()

			t.Logf("storm starts at %s", time.Now().Format("15:04:05.000"))
			var calls, refused atomic.Int64
			var wg sync.WaitGroup
			end := time.Now().Add(runFor)
			for g := range goroutines {
				wg.Go(func() {
					tenant := fmt.Sprintf("t%d", g%10)
					for time.Now().Before(end) {
						ctx, cancel := context.WithTimeout(context.Background(), deadline)
						_, err := s.Query(ctx, Interactive, tenant, "SELECT pg_sleep(0.5)")
						cancel()
						calls.Add(1)
						if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "53300" {
							refused.Add(1)
						}
					}
				})
			}
			wg.Wait()
			t.Logf("storm ended at %s", time.Now().Format("15:04:05.000"))
			close(stop)
			<-sampled
			if sampleErr != nil {
				t.Fatalf("sample pg_stat_activity: %v", sampleErr)
			}

			if n := refused.Load(); n != 0 {
				t.Errorf("%d of %d calls failed with 53300 (too many connections for role)", n, calls.Load())
			}
			if lines := grepLines(logSince(t, logPath, logFrom), " 53300 "); len(lines) != 0 {
				t.Errorf("the server refused %d connections with 53300 (its log), the first: %q", len(lines), lines[:min(len(lines), 3)])
			}
			if m := maxBackends.Load(); m > size {
				t.Errorf("the role had %d backends at once (%d samples), want ≤ %d", m, samples.Load(), size)
			}
			if samples.Load() < 20 { // 300 on an idle machine; the sampler must have run
				t.Errorf("only %d samples in %s", samples.Load(), runFor)
			}
			if lim != nil {
				if st := lim.Stat().Total; st.InFlight != 0 || st.Queued != 0 {
					t.Errorf("limiter after the storm: %+v, want empty", st)
				}
			}
			if st := s.Stat().Pools[0]; st.Borrowed != 0 {
				t.Errorf("pool after the storm: %+v, want nothing borrowed", st)
			}
			waitClosed(t, s)
			if st := s.Stat().Pools[0]; st.Closing != 0 || st.AcquiredConns != 0 || st.TotalConns > size || st.Destroyed == 0 {
				t.Errorf("pool after its connections closed: %+v, want nothing acquired and some destroyed", st)
			}
			// The stack still works, and every backend it gave up is gone.
			if _, err := s.Query(t.Context(), Interactive, "after", "SELECT 1"); err != nil {
				t.Errorf("a call after the storm: %v", err)
			}
			if n := scalar[int64](t, db.admin, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND state = 'active'", role); n != 0 {
				t.Errorf("%d backends of the role still active after the storm", n)
			}
			t.Logf("%d calls, %d samples, at most %d backends", calls.Load(), samples.Load(), maxBackends.Load())
			s.Close()
		})
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// waitClosed waits for s's destroyed connections to be closed, at most 20 s.
func waitClosed(t *testing.T, s *Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := s.WaitClosed(ctx); err != nil {
		t.Fatal(err)
	}
}

// logSince returns the server log from offset on.
func logSince(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}
