package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

const externalScenario = `
name: external
seed: 5
backend: {kind: external, primary_dsn: "${NOISYSIM_TEST_USER_DSN}"}
tenants: {count: 5}
data: {orders: 2000}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 100}
phases: {warmup: 200ms, solo: 1s, run: 3s, drain: 500ms}
configurations:
  - {name: isolated, mode: isolated}
assertions: {quiet_p99: {min_samples: 1000000}}
`

// footprintState is what a run could leave or change on the user's
// database: the user's table and role, and anything named noisysim*.
const footprintState = `SELECT concat_ws(' | ',
	(SELECT string_agg(id || ' ' || customer, ',') FROM public.orders),
	(SELECT rolname || ' ' || rolconnlimit || ' ' || array_to_string(rolconfig, ',') FROM pg_roles WHERE rolname = 'app_user'),
	(SELECT string_agg(nspname, ',') FROM pg_namespace WHERE nspname LIKE 'noisysim%'),
	(SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'noisysim%'),
	(SELECT string_agg(usename, ',') FROM pg_stat_activity WHERE usename LIKE 'noisysim%'))`

// TestRunExternalLeavesUserData runs the binary against a database it did
// not start, holding a table orders and a role of the user's: stopped by
// SIGINT or SIGTERM mid-run (exit 1), it leaves the user's table, row and
// role as they were and nothing of its own; with a schema noisysim of the
// user's, it refuses to start (exit 2, one line) and touches nothing.
func TestRunExternalLeavesUserData(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: scenario runs in -short mode")
	}
	needPostgres(t)
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	admin, err := pgx.Connect(t.Context(), primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(t.Context(), `
		CREATE TABLE public.orders (id int PRIMARY KEY, customer text NOT NULL);
		INSERT INTO public.orders VALUES (1, 'mine');
		CREATE ROLE app_user LOGIN CONNECTION LIMIT 7;
		ALTER ROLE app_user SET statement_timeout = '1234ms'`); err != nil {
		t.Fatal(err)
	}
	state := func(t *testing.T) string {
		t.Helper()
		var s string
		if err := admin.QueryRow(t.Context(), footprintState).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	const clean = "1 mine | app_user 7 statement_timeout=1234ms"
	if got := state(t); got != clean {
		t.Fatalf("state before any run: %q", got)
	}
	file := filepath.Join(t.TempDir(), "external.yaml")
	if err := os.WriteFile(file, []byte(externalScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := noisysimBinary(t)
	start := func(args ...string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(bin, append([]string{"run", file}, args...)...)
		cmd.Env = append(os.Environ(), "NOISYSIM_TEST_USER_DSN="+primary.DSN())
		var errOut syncBuffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &errOut
	}
	exit := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, errOut := start()
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(errOut.String(), "noisysim: run (isolated)") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the run phase never started:\n%s", errOut.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := exit(cmd.Wait()); code != exitError {
				t.Errorf("exit %d, want 1; stderr:\n%s", code, errOut.String())
			}
			if got := state(t); got != clean {
				t.Errorf("after %v: %q, want %q; stderr:\n%s", sig, got, clean, errOut.String())
			}
		})
	}
	t.Run("keep", func(t *testing.T) {
		// A completed run: its assertions may pass or not (0 or 99).
		cmd, errOut := start("--keep", "--no-progress")
		if code := exit(cmd.Wait()); code != 0 && code != exitAssertion {
			t.Fatalf("exit %d, want 0 or 99; stderr:\n%s", code, errOut.String())
		}
		// Kept roles' sessions end on their own once the process is gone:
		// nothing waits for them.
		want := clean + " | noisysim | noisysim_isolated_heavy,noisysim_isolated_interactive"
		got := state(t)
		for deadline := time.Now().Add(5 * time.Second); got != want && time.Now().Before(deadline); got = state(t) {
			time.Sleep(20 * time.Millisecond)
		}
		if got != want {
			t.Errorf("after --keep: %q, want %q", got, want)
		}
		cmd, errOut = start("--no-progress")
		if code := exit(cmd.Wait()); code != 0 && code != exitAssertion {
			t.Fatalf("exit %d, want 0 or 99; stderr:\n%s", code, errOut.String())
		}
		if got := state(t); got != clean {
			t.Errorf("after a run following --keep: %q, want %q", got, clean)
		}
	})
	t.Run("refuses a schema of the user's", func(t *testing.T) {
		if _, err := admin.Exec(t.Context(), "CREATE SCHEMA noisysim; CREATE TABLE noisysim.t (id int)"); err != nil {
			t.Fatal(err)
		}
		defer admin.Exec(context.Background(), "DROP SCHEMA noisysim CASCADE")
		cmd, errOut := start("--no-progress")
		if code := exit(cmd.Wait()); code != exitUsage {
			t.Errorf("exit %d, want 2", code)
		}
		// The run's sample plan may come first; the refusal is one line,
		// the last.
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		naming := 0
		for _, l := range lines {
			if strings.Contains(l, `schema "noisysim"`) {
				naming++
			}
		}
		if last := lines[len(lines)-1]; naming != 1 || !strings.Contains(last, `schema "noisysim" exists`) {
			t.Errorf("stderr %q, want one line naming the schema, the last", errOut.String())
		}
		var tables int
		if err := admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'noisysim' AND tablename = 't'").Scan(&tables); err != nil || tables != 1 {
			t.Errorf("the user's schema noisysim lost its table: %d, %v", tables, err)
		}
		if got := state(t); got != clean+" | noisysim" {
			t.Errorf("after a refused run: %q", got)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a process writing while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRunExternalWrongPassword: a scenario whose external DSN has a wrong
// password says what the server said (authentication failed), not that
// the server is unreachable, shows no password, and exits 2.
func TestRunExternalWrongPassword(t *testing.T) {
	needPostgres(t)
	c := localtest.Start(t, backend.Spec{})
	primary, _ := backend.First(c, backend.RolePrimary)
	primary.Password = "s3cret-never-shown"
	file := filepath.Join(t.TempDir(), "external.yaml")
	if err := os.WriteFile(file, []byte(externalScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOISYSIM_TEST_USER_DSN", primary.DSN())
	var out, errOut bytes.Buffer
	code := realMain([]string{"run", "--no-progress", file}, &out, &errOut)
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	last := lines[len(lines)-1]
	if code != exitUsage || !strings.Contains(last, "authentication failed") || strings.Contains(errOut.String(), "unreachable") ||
		strings.Contains(errOut.String(), primary.Password) {
		t.Errorf("exit %d, last line on stderr %q; want 2 and \"authentication failed\", no \"unreachable\", no password:\n%s", code, last, errOut.String())
	}
}
