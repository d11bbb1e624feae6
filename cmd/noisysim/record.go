package main

import (
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/pglog"
	"github.com/noisysim/noisysim/harness/record"
)

// recordConnectTimeout bounds reaching --dsn.
const recordConnectTimeout = 10 * time.Second

// recordCheckEvery is how often record checks that the server still
// answers while it waits.
const recordCheckEvery = 2 * time.Second

func runRecord(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: noisysim record --dsn DSN --for DURATION --out FILE [--format csvlog|jsonlog] [--force]

record logs every statement a PostgreSQL server runs for DURATION and writes
that log to FILE (csvlog or jsonlog; .gz: compressed), for a scenario's
replay: {log: FILE}.

On a server noisysim started (noisysim cluster up --setting logging_collector=on)
it sets log_destination, log_min_duration_statement = 0,
log_parameter_max_length = -1 and a log file of its own with ALTER SYSTEM and
pg_reload_conf, waits, puts every setting back as it was and copies the file.
Ctrl-C (SIGINT) or SIGTERM stops early and keeps what was recorded.

On any other server it changes nothing: it prints the settings to set and
how to collect the file, and exits 2.

Flags:
`)
		fs.PrintDefaults()
	}
	dsn := fs.String("dsn", "", "the server to record (a superuser's DSN of a noisysim cluster)")
	dur := fs.Duration("for", 0, "how long to record, e.g. 10m")
	out := fs.String("out", "", "the file to write: its name gives the format (.csv csvlog, .json jsonlog, then .gz to compress)")
	format := fs.String("format", "", "csvlog or jsonlog (default: from --out's name)")
	force := fs.Bool("force", false, "overwrite --out if it exists")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("record: unexpected argument %q", fs.Arg(0))
	case *dsn == "":
		return usagef("record: --dsn is missing")
	case !flagSet(fs, "for"):
		return usagef("record: --for is missing: how long to record, e.g. --for 10m")
	case *dur <= 0:
		return usagef("record: --for %s: want a duration above 0, e.g. --for 10m", *dur)
	case *out == "":
		return usagef("record: --out is missing")
	}
	f, err := recordFormat(*out, *format)
	if err != nil {
		return err
	}
	if st, err := os.Stat(*out); err == nil && st.IsDir() {
		return usagef("record: --out %s is a directory: give a file name in it (.csv or .json, then .gz)", *out)
	}
	if _, err := os.Stat(*out); err == nil && !*force {
		return usagef("record: --out %s exists; give --force to overwrite it", *out)
	}
	if st, err := os.Stat(filepath.Dir(*out)); err != nil || !st.IsDir() {
		return usagef("record: --out %s: no directory %s", *out, filepath.Dir(*out))
	}

	cfg, err := pgx.ParseConfig(*dsn)
	if err != nil {
		return usagef("record: --dsn: %v", err)
	}
	cfg.RuntimeParams["application_name"] = record.ApplicationName
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	cctx, cancel := context.WithTimeout(ctx, recordConnectTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return usagef("record: --dsn: cannot connect: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	node, err := record.Started(ctx, conn)
	if errors.Is(err, record.ErrNotStarted) {
		needed, nerr := record.Needed(ctx, conn, f)
		if nerr != nil {
			return fmt.Errorf("record: %w", nerr)
		}
		fmt.Fprintf(a.stdout, "noisysim did not start this server, so record changes nothing on it.\n")
		record.Guidance(a.stdout, needed, f)
		return fmt.Errorf("record: %w; nothing was changed: set the settings printed above and collect the log as shown", err)
	}
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}

	// The output is written to a file of its own beside --out, renamed
	// onto it once complete.
	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".partial-*")
	if err != nil {
		return usagef("record: --out %s: %v", *out, err)
	}
	defer tmp.Close()
	// Removed on every path, a second signal's included (renamed onto --out:
	// already gone).
	removeTmp := func() error {
		if err := os.Remove(tmp.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	defer a.teardown.finish(a.teardown.add(removeTmp, removeTmp))

	// The restore is registered before anything changes: a second signal
	// during Start waits for it and puts back what it set.
	rec := record.New(conn, f, node.DataDir)
	stop := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return rec.Stop(sctx)
	}
	td := a.teardown.add(stop, stop)
	err = rec.Start(ctx)
	if err != nil {
		// Start left the settings as they were.
		a.teardown.forget(td)
	}
	if errors.Is(err, record.ErrCollectorOff) {
		needed, _ := record.Needed(context.WithoutCancel(ctx), conn, f)
		record.Guidance(a.stdout, needed, f)
		return usagef("%v; nothing was changed", err)
	}
	if errors.Is(err, record.ErrBusy) || errors.Is(err, record.ErrLeftover) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	started := time.Now()
	fmt.Fprintf(a.stdout, "recording %s of %s for %s (set: %s); Ctrl-C stops early and keeps what was recorded\n",
		f, node.Name, *dur, strings.Join(rec.Changed(), ", "))
	timer := time.NewTimer(*dur)
	defer timer.Stop()
	check := time.NewTicker(recordCheckEvery)
	defer check.Stop()
	early := false
wait:
	for {
		select {
		case <-timer.C:
			break wait
		case <-ctx.Done():
			early = true
			break wait
		case <-check.C:
			cctx, cancel := context.WithTimeout(ctx, recordCheckEvery)
			err := rec.Check(cctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				// Nothing to put back on a server that is gone.
				a.teardown.forget(td)
				return fmt.Errorf("%w after %s; nothing was written to %s (the server's log file was %s)",
					err, time.Since(started).Round(time.Second), *out, rec.File())
			}
		}
	}
	if err := a.teardown.finish(td); err != nil {
		return err
	}
	took := time.Since(started).Round(time.Millisecond)
	fmt.Fprintf(a.stdout, "settings put back (%s)\n", strings.Join(rec.Changed(), ", "))

	var w io.Writer = tmp
	var gz *gzip.Writer
	if strings.HasSuffix(*out, ".gz") {
		gz = gzip.NewWriter(tmp)
		w = gz
	}
	n, err := rec.Copy(w)
	if err == nil && gz != nil {
		err = gz.Close()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), *out)
	}
	if err != nil {
		return fmt.Errorf("record: write %s: %w (the recording stays in %s)", *out, err, rec.File())
	}
	// The recording is in place: a signal from here on changes nothing.
	a.teardown.finished()
	if err := rec.Remove(); err != nil {
		fmt.Fprintf(a.stderr, "noisysim: %v\n", err)
	}
	sum, err := summarize(*out, f)
	if err != nil {
		return fmt.Errorf("record: read back %s: %w", *out, err)
	}
	how := "for " + took.String()
	if early {
		how = fmt.Sprintf("for %s, stopped early", took)
	}
	fmt.Fprintf(a.stdout, "wrote %s (%s, %d bytes of log, %s): %d records, %d statements\n", *out, f, n, how, sum.Records, sum.Statements)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(sum.Tenants)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, sum.Tenants[k]))
	}
	if len(parts) > 0 {
		fmt.Fprintf(a.stdout, "statements per tenant (application_name t:<tenant>): %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(a.stdout, "replay it with a scenario's  replay: {log: %s}\n", filepath.Base(*out))
	return nil
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// recordFormat returns the log format --format names, or --out's name.
func recordFormat(out, format string) (pglog.Format, error) {
	name := strings.TrimSuffix(out, ".gz")
	var byName pglog.Format
	switch {
	case strings.HasSuffix(name, ".csv"):
		byName = pglog.CSV
	case strings.HasSuffix(name, ".json"):
		byName = pglog.JSON
	}
	switch {
	case format == "" && byName == "":
		return "", usagef("record: --out %s: cannot tell the format from the name (.csv, .json, then .gz): give --format csvlog or jsonlog", out)
	case format == "":
		return byName, nil
	case format != string(pglog.CSV) && format != string(pglog.JSON):
		return "", usagef("record: --format %q: want csvlog or jsonlog", format)
	case byName != "" && byName != pglog.Format(format):
		return "", usagef("record: --format %s, but --out %s names %s", format, out, byName)
	}
	return pglog.Format(format), nil
}

// summarize reads back a written recording.
func summarize(path string, f pglog.Format) (record.Summary, error) {
	in, err := os.Open(path)
	if err != nil {
		return record.Summary{}, err
	}
	defer in.Close()
	var r io.Reader = in
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(in)
		if err != nil {
			return record.Summary{}, err
		}
		r = gz
	}
	return record.Summarize(r, f)
}
