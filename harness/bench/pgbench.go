package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// ErrNoPgBench marks a pgbench binary that cannot be run; the CLI exits 2
// on it.
var ErrNoPgBench = errors.New("pgbench not available")

// PgBenchRun is one pgbench run.
type PgBenchRun struct {
	// Args are pgbench's arguments (the DSN left out).
	Args []string
	// Offered is the rate pgbench was held at (-R), 0 when unthrottled.
	Offered float64
	// Rate is pgbench's tps (without initial connection time).
	Rate         float64
	Transactions int64
	Failed       int64
	// Unstarted estimates the transactions of pgbench's -R schedule
	// that it had not started when its -T ran out (a generator that fell
	// behind): Offered × -T, less three standard deviations of the Poisson
	// count, less Transactions; 0 when none or unthrottled. They count in
	// P50 and P99 at the largest latency logged, a lower bound (each
	// would have waited behind every logged one), as noisysim's open loop
	// waits for its queued ops and counts their latencies.
	Unstarted int64
	// LatencyAvg is pgbench's "latency average"; at a fixed rate it is
	// measured from each transaction's scheduled start.
	LatencyAvg time.Duration
	// P50 and P99 come from the per-transaction log (throttled runs
	// only, all transactions or a --sampling-rate share of them): each
	// transaction's time plus its schedule lag, i.e. from its scheduled
	// start, as noisysim measures from the intended start.
	P50, P99 time.Duration
	// Sustained (a probe of the search for pgbench's sustained maximum
	// only): P99 within Config.SustainP99, as for noisysim's probes.
	Sustained bool
	// CPU is the user and system CPU time of the pgbench process (its
	// rusage at exit), and CPUPerKOp that per 1,000 transactions.
	CPU, CPUPerKOp time.Duration
}

// pgBench runs one script with pgbench.
type pgBench struct {
	bin, dsn         string
	clients, threads int
	script           string
}

// run runs pgbench for d, unthrottled when rate is 0 and held at rate
// transactions/s otherwise, then with a per-transaction log for P50/P99 of
// every transaction (sampling 1) or of that share of them (pgbench's
// --sampling-rate, so that writing the log costs pgbench little CPU).
func (p pgBench) run(ctx context.Context, d time.Duration, rate, sampling float64) (PgBenchRun, error) {
	dir, err := os.MkdirTemp("", "noisysim-bench-")
	if err != nil {
		return PgBenchRun{}, fmt.Errorf("bench: pgbench: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "lookup.sql")
	if err := os.WriteFile(script, []byte(p.script), 0o600); err != nil {
		return PgBenchRun{}, fmt.Errorf("bench: pgbench: %w", err)
	}
	secs := max(1, int(d.Round(time.Second).Seconds()))
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(p.clients), "-j", strconv.Itoa(p.threads), "-T", strconv.Itoa(secs)}
	if rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(rate, 'f', -1, 64), "-l", "--log-prefix", filepath.Join(dir, "log"))
		if sampling < 1 {
			args = append(args, "--sampling-rate", strconv.FormatFloat(sampling, 'f', -1, 64))
		}
	}
	out := PgBenchRun{Offered: rate, Args: append(slices.Clone(args), "-f", "lookup.sql")}
	if rate > 0 {
		out.Args = slices.DeleteFunc(out.Args, func(a string) bool { return strings.HasPrefix(a, dir) })
		out.Args = slices.DeleteFunc(out.Args, func(a string) bool { return a == "--log-prefix" })
	}
	args = append(args, "-f", script)
	dsn, password := splitPassword(p.dsn)
	cmd := exec.CommandContext(ctx, p.bin, append(args, dsn)...)
	cmd.Env = os.Environ()
	if password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+password)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return out, fmt.Errorf("bench: pgbench: %w", ctx.Err())
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return out, fmt.Errorf("bench: run %s: %w: %w", p.bin, ErrNoPgBench, err)
		}
		return out, fmt.Errorf("bench: pgbench %s: %w: %s", strings.Join(out.Args, " "), err, lastLines(stderr.String(), 3))
	}
	if err := parsePgBench(stdout.String(), &out); err != nil {
		return out, fmt.Errorf("bench: pgbench output: %w", err)
	}
	out.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	out.CPUPerKOp = perKOp(out.CPU, out.Transactions)
	if rate > 0 {
		expected := rate * float64(secs)
		out.Unstarted = max(0, int64(expected-3*math.Sqrt(expected))-out.Transactions)
		if err := readPgBenchLogs(dir, out.Unstarted, min(sampling, 1), &out); err != nil {
			return out, fmt.Errorf("bench: pgbench log: %w", err)
		}
	}
	return out, nil
}

// splitPassword moves the password out of a URL DSN, so that it is passed
// in PGPASSWORD rather than on pgbench's command line.
func splitPassword(dsn string) (string, string) {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn, ""
	}
	pw, ok := u.User.Password()
	if !ok {
		return dsn, ""
	}
	u.User = url.User(u.User.Username())
	return u.String(), pw
}

var (
	tpsLine     = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	txLine      = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	failedLine  = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
	latencyLine = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

// parsePgBench reads pgbench's summary (PostgreSQL 15's format).
func parsePgBench(s string, out *PgBenchRun) error {
	m := tpsLine.FindStringSubmatch(s)
	if m == nil {
		return fmt.Errorf("no tps line in %q", lastLines(s, 5))
	}
	out.Rate, _ = strconv.ParseFloat(m[1], 64)
	if m = txLine.FindStringSubmatch(s); m != nil {
		out.Transactions, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = failedLine.FindStringSubmatch(s); m != nil {
		out.Failed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = latencyLine.FindStringSubmatch(s); m != nil {
		ms, _ := strconv.ParseFloat(m[1], 64)
		out.LatencyAvg = time.Duration(ms * float64(time.Millisecond))
	}
	return nil
}

// readPgBenchLogs reads the per-transaction logs pgbench -l wrote in dir
// (one per thread): "client_id transaction_no time script_no time_epoch
// time_us schedule_lag", times in µs; a transaction's latency is time +
// schedule_lag. The logs hold a sampling share of the transactions;
// unstarted transactions count at the largest latency logged.
func readPgBenchLogs(dir string, unstarted int64, sampling float64, out *PgBenchRun) error {
	files, err := filepath.Glob(filepath.Join(dir, "log.*"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no per-transaction log in %s", dir)
	}
	h := hdr.New(1, int64(5*time.Minute/time.Microsecond), 3)
	for _, f := range files {
		if err := func() error {
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			defer fh.Close()
			sc := bufio.NewScanner(fh)
			for sc.Scan() {
				fs := strings.Fields(sc.Text())
				if len(fs) < 7 {
					continue // "skipped" or a malformed line
				}
				us, err1 := strconv.ParseInt(fs[2], 10, 64)
				lag, err2 := strconv.ParseInt(fs[6], 10, 64)
				if err1 != nil || err2 != nil {
					continue
				}
				_ = h.RecordValue(max(1, us+lag))
			}
			return sc.Err()
		}(); err != nil {
			return err
		}
	}
	if h.TotalCount() == 0 {
		return fmt.Errorf("per-transaction logs in %s hold no transaction", dir)
	}
	if n := int64(math.Round(float64(unstarted) * sampling)); n > 0 {
		_ = h.RecordValues(h.Max(), n)
	}
	out.P50 = time.Duration(h.ValueAtQuantile(50)) * time.Microsecond
	out.P99 = time.Duration(h.ValueAtQuantile(99)) * time.Microsecond
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
