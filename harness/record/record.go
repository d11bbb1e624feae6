package record

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/pglog"
	"github.com/noisysim/noisysim/harness/scenario"
)

// ApplicationName is the application_name of a recording's own session;
// its statements are not logged.
const ApplicationName = "noisysim-record"

// ErrNotStarted is what recording on a server noisysim did not start
// returns (through a *NotStartedError): nothing was changed.
var ErrNotStarted = errors.New("not a server noisysim started")

// ErrCollectorOff is what Start returns on a server whose
// logging_collector is off: nothing was changed.
var ErrCollectorOff = errors.New("logging_collector is off")

// ErrBusy is what Start returns when another recording is under way on
// the same server (a lock on its data directory, held until Stop or the
// recording process's end): nothing was changed. Two recordings at once
// would each set log_filename, and the one that ends last would put back
// the settings of the other.
var ErrBusy = errors.New("another noisysim record is recording this server")

// ErrLeftover is what Start returns when postgresql.auto.conf still holds
// a log_filename of a recording's own: a recording that was killed (kill
// -9) before Stop put its settings back. Nothing is changed: taking those
// values as the ones to put back would keep the server logging every
// statement after this recording too.
var ErrLeftover = errors.New("the settings of a recording that did not end are still set")

// NotStartedError says why a server is not one record changes.
type NotStartedError struct{ Reason string }

func (e *NotStartedError) Error() string { return "not a server noisysim started: " + e.Reason }
func (e *NotStartedError) Unwrap() error { return ErrNotStarted }

// Setting is one server setting a recording needs.
type Setting struct {
	Name string
	// Want is the value the recording needs; Now the server's value ("":
	// the connection may not read it).
	Want, Now string
	// Restart: the setting takes effect only at server start.
	Restart bool
}

// Differs reports whether the server's value is not (or may not be) the
// one needed.
func (s Setting) Differs() bool { return s.Now != s.Want }

// Reload timeouts: how long Start and Stop wait for the logging collector
// to move to or off the recording's file after pg_reload_conf.
const switchTimeout = 15 * time.Second

// changeTimeout bounds Start's changes (the settings, the reload and the
// wait for the collector), which a canceled context does not interrupt.
const changeTimeout = switchTimeout + 15*time.Second

// checkTimeout bounds Check's ping, which a canceled context does not
// interrupt either.
const checkTimeout = 5 * time.Second

// neededNames are the settings Needed reads, in the order it lists them.
var neededNames = []string{"logging_collector", "log_destination", "log_min_duration_statement", "log_parameter_max_length"}

// Needed returns the settings recording in format needs, with the
// server's values now: logging_collector on, format added to
// log_destination, every statement logged with its duration
// (log_min_duration_statement 0) and its bind parameters in full
// (log_parameter_max_length -1).
func Needed(ctx context.Context, conn *pgx.Conn, format pglog.Format) ([]Setting, error) {
	now, err := current(ctx, conn, neededNames...)
	if err != nil {
		return nil, err
	}
	dest := now["log_destination"]
	want := dest
	if dest == "" {
		want = "stderr"
	}
	if !slices.Contains(strings.Split(strings.ReplaceAll(want, " ", ""), ","), string(format)) {
		want += "," + string(format)
	}
	return []Setting{
		{Name: "logging_collector", Want: "on", Now: now["logging_collector"], Restart: true},
		{Name: "log_destination", Want: want, Now: dest},
		{Name: "log_min_duration_statement", Want: "0", Now: now["log_min_duration_statement"]},
		{Name: "log_parameter_max_length", Want: "-1", Now: now["log_parameter_max_length"]},
	}, nil
}

// current reads settings from pg_settings; a setting the connection may
// not read is left out.
func current(ctx context.Context, conn *pgx.Conn, names ...string) (map[string]string, error) {
	return nameValues(ctx, conn, "settings", "SELECT name, setting FROM pg_settings WHERE name = ANY($1)", names)
}

// nameValues runs sql, whose rows are (name, value), and returns them as
// a map; what names the rows in an error.
func nameValues(ctx context.Context, conn *pgx.Conn, what, sql string, args ...any) (map[string]string, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	out := map[string]string{}
	var name, value string
	_, err = pgx.ForEachRow(rows, []any{&name, &value}, func() error {
		out[name] = value
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return out, nil
}

// Started reports whether conn reaches a server noisysim's local backend
// started and that runs on this machine (local.StartedBy), connected as a
// superuser: the only servers a Recording changes. Otherwise a
// *NotStartedError says why.
func Started(ctx context.Context, conn *pgx.Conn) (local.StartedNode, error) {
	cfg := conn.Config()
	if !loopback(cfg.Host) {
		return local.StartedNode{}, &NotStartedError{Reason: fmt.Sprintf("host %s is not this machine's loopback or a unix socket", cfg.Host)}
	}
	var super bool
	if err := conn.QueryRow(ctx, "SELECT current_setting('is_superuser') = 'on'").Scan(&super); err != nil {
		return local.StartedNode{}, fmt.Errorf("read is_superuser: %w", err)
	}
	if !super {
		return local.StartedNode{}, &NotStartedError{Reason: fmt.Sprintf("user %s is not a superuser (noisysim's clusters' DSNs are)", cfg.User)}
	}
	s, err := current(ctx, conn, "data_directory", "port", "cluster_name")
	if err != nil {
		return local.StartedNode{}, err
	}
	var port int
	fmt.Sscan(s["port"], &port)
	n, err := local.StartedBy(s["data_directory"], port, s["cluster_name"])
	var ns *local.NotStartedError
	if errors.As(err, &ns) {
		return local.StartedNode{}, &NotStartedError{Reason: ns.Error()}
	}
	return n, err
}

func loopback(host string) bool {
	return strings.HasPrefix(host, "/") || host == "localhost" || host == "::1" || strings.HasPrefix(host, "127.")
}

// Recording is a recording in progress on a server noisysim started.
type Recording struct {
	conn    *pgx.Conn
	format  pglog.Format
	dataDir string
	// file is the log file's absolute path, name its log_filename.
	file, name string
	// changed are the settings Start changed, each with its previous
	// ALTER SYSTEM value (nil: none, RESET restores it).
	changed []change
	names   []string

	// lock is the data directory, flock'ed while the recording lasts.
	lock *os.File

	mu      sync.Mutex
	stopped bool
	stopErr error
}

type change struct {
	name string
	prev *string
}

// New prepares a recording in format on the server conn reaches, whose
// data directory is dataDir: nothing changes on the server until Start.
// conn must not be used by anything else until Stop.
func New(conn *pgx.Conn, format pglog.Format, dataDir string) *Recording {
	return &Recording{conn: conn, format: format, dataDir: dataDir}
}

// Start starts recording: see the package documentation. On a server whose
// logging_collector is off it returns an error wrapping ErrCollectorOff
// and changes nothing; on any error it leaves the server's settings as
// they were. ctx canceled before the first setting changes ends Start
// with nothing changed; canceled later, it no longer interrupts Start,
// which finishes (or fails and puts back what it set) within
// changeTimeout, so that the settings can be put back on the same
// connection. Stop may be called at any time, from another goroutine too (a
// second signal's handler): it waits for Start to return, then puts back
// what Start changed.
func (r *Recording) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("record: stopped before it started")
	}
	conn, format, dataDir := r.conn, r.format, r.dataDir
	if format != pglog.CSV && format != pglog.JSON {
		return fmt.Errorf("record: unknown format %q; want csvlog or jsonlog", format)
	}
	// The recording's own statements are not recorded.
	if _, err := conn.Exec(ctx, "SET log_min_duration_statement = -1"); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	needed, err := Needed(ctx, conn, format)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if needed[0].Now != "on" {
		return fmt.Errorf("record: %w: it takes effect only at server start (start the cluster with --setting logging_collector=on)", ErrCollectorOff)
	}
	lock, err := lockDir(dataDir)
	if err != nil {
		return err
	}
	token := make([]byte, 6)
	rand.Read(token)
	r.lock, r.name = lock, "noisysim-record-"+hex.EncodeToString(token)+".log"
	ok := false
	defer func() {
		if !ok {
			r.unlock()
		}
	}()
	var logDir string
	if err := conn.QueryRow(ctx, "SELECT setting FROM pg_settings WHERE name = 'log_directory'").Scan(&logDir); err != nil {
		return fmt.Errorf("record: read log_directory: %w", err)
	}
	if !filepath.IsAbs(logDir) {
		logDir = filepath.Join(dataDir, logDir)
	}
	r.file = filepath.Join(logDir, strings.TrimSuffix(r.name, ".log")+map[pglog.Format]string{pglog.CSV: ".csv", pglog.JSON: ".json"}[format])
	// log_filename (no escapes: a rotation by size or age reopens the same
	// file) changes last, so that its rotation opens the recording's file
	// once the other settings are in force.
	want := map[string]string{}
	if trunc, err := current(ctx, conn, "log_truncate_on_rotation"); err != nil {
		return fmt.Errorf("record: %w", err)
	} else if trunc["log_truncate_on_rotation"] != "off" {
		// A time-based rotation would empty the file.
		want["log_truncate_on_rotation"] = "off"
	}
	for _, s := range needed[1:] {
		if s.Differs() {
			want[s.Name] = s.Want
		}
	}
	prev, err := autoConf(ctx, conn)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if f := prev["log_filename"]; strings.HasPrefix(f, "noisysim-record-") {
		var reset []string
		for _, name := range []string{"log_destination", "log_min_duration_statement", "log_parameter_max_length", "log_truncate_on_rotation", "log_filename"} {
			if _, ok := prev[name]; ok {
				reset = append(reset, "ALTER SYSTEM RESET "+name+";")
			}
		}
		return fmt.Errorf("record: %w (postgresql.auto.conf: log_filename = %s); nothing was changed: put back those of these settings that were not set before (or give them their earlier values), then SELECT pg_reload_conf(): %s",
			ErrLeftover, f, strings.Join(reset, " "))
	}
	// From the first change on, ctx's cancellation (a first signal) no
	// longer interrupts Start: pgx ends a connection whose statement is
	// canceled, and the settings could then not be put back on it. The
	// steps are bounded by changeTimeout instead; the caller sees ctx done
	// once Start returns and stops the recording.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), changeTimeout)
	defer cancel()
	names := slices.Sorted(maps.Keys(want))
	set := func(name, value string) error {
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = %s", name, quote(value))); err != nil {
			return err
		}
		c := change{name: name}
		if v, ok := prev[name]; ok {
			c.prev = &v
		}
		r.changed = append(r.changed, c)
		r.names = append(r.names, name)
		return nil
	}
	for _, name := range append(names, "log_filename") {
		v := want[name]
		if name == "log_filename" {
			v = r.name
		}
		if err := set(name, v); err != nil {
			return errors.Join(fmt.Errorf("record: ALTER SYSTEM SET %s: %w", name, err), r.restore(context.WithoutCancel(ctx)))
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return errors.Join(fmt.Errorf("record: pg_reload_conf: %w", err), r.restore(context.WithoutCancel(ctx)))
	}
	if err := r.waitFile(ctx, true); err != nil {
		return errors.Join(err, r.restore(context.WithoutCancel(ctx)))
	}
	ok = true
	return nil
}

// lockDir takes an exclusive flock on the data directory dir, or returns
// an error wrapping ErrBusy if another process holds it.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("record: lock the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("record: %w (a lock on %s); nothing was changed: wait for it to end", ErrBusy, dir)
		}
		return nil, fmt.Errorf("record: lock the data directory %s: %w", dir, err)
	}
	return f, nil
}

// unlock releases the data directory's lock.
func (r *Recording) unlock() {
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
}

// autoConf returns the settings ALTER SYSTEM has set (postgresql.auto.conf).
func autoConf(ctx context.Context, conn *pgx.Conn) (map[string]string, error) {
	return nameValues(ctx, conn, "postgresql.auto.conf",
		"SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%/postgresql.auto.conf' ORDER BY seqno")
}

func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// waitFile waits until the logging collector writes (on) or has left
// (!on) the recording's file.
func (r *Recording) waitFile(ctx context.Context, on bool) error {
	ctx, cancel := context.WithTimeout(ctx, switchTimeout)
	defer cancel()
	for {
		var cur *string
		if err := r.conn.QueryRow(ctx, "SELECT pg_current_logfile($1)", string(r.format)).Scan(&cur); err != nil {
			return fmt.Errorf("record: pg_current_logfile: %w", err)
		}
		if (cur != nil && filepath.Base(*cur) == filepath.Base(r.file)) == on {
			return nil
		}
		select {
		case <-ctx.Done():
			what := "start writing"
			if !on {
				what = "leave"
			}
			return fmt.Errorf("record: the logging collector did not %s %s within %s", what, r.file, switchTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Check pings the server on the recording's connection (not after Stop):
// an error says it no longer answers (stopped, or the connection ended).
// ctx's cancellation does not interrupt the ping (a canceled statement
// would end the connection Stop puts the settings back on); checkTimeout
// bounds it.
func (r *Recording) Check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
	defer cancel()
	if err := r.conn.Ping(ctx); err != nil {
		return fmt.Errorf("record: the server stopped answering: %w", err)
	}
	return nil
}

// File is the server's log file the recording writes, an absolute path.
func (r *Recording) File() string { return r.file }

// Changed returns the names of the settings Start changed.
func (r *Recording) Changed() []string { return slices.Clone(r.names) }

// Stop ends the recording: it puts the changed settings back and waits
// until the logging collector has left the recording's file. Later calls
// return the first call's error.
func (r *Recording) Stop(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return r.stopErr
	}
	r.stopped = true
	r.stopErr = r.restore(ctx)
	if r.stopErr == nil {
		r.stopErr = r.waitFile(ctx, false)
	}
	r.unlock()
	return r.stopErr
}

// restore puts back the settings changed so far, newest first, and
// reloads the configuration.
func (r *Recording) restore(ctx context.Context) error {
	var errs []error
	for i := len(r.changed) - 1; i >= 0; i-- {
		c := r.changed[i]
		stmt := "ALTER SYSTEM RESET " + c.name
		if c.prev != nil {
			stmt = fmt.Sprintf("ALTER SYSTEM SET %s = %s", c.name, quote(*c.prev))
		}
		if _, err := r.conn.Exec(ctx, stmt); err != nil {
			errs = append(errs, fmt.Errorf("record: restore %s: %w", c.name, err))
		}
	}
	r.changed = nil
	if _, err := r.conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		errs = append(errs, fmt.Errorf("record: pg_reload_conf: %w", err))
	}
	return errors.Join(errs...)
}

// Copy writes the recording's file to w (after Stop: all of it).
func (r *Recording) Copy(w io.Writer) (int64, error) {
	f, err := os.Open(r.file)
	if err != nil {
		return 0, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return n, fmt.Errorf("record: copy %s: %w", r.file, err)
	}
	return n, nil
}

// Remove deletes the recording's file from the server's log directory.
func (r *Recording) Remove() error {
	if err := os.Remove(r.file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("record: %w", err)
	}
	return nil
}

// Summary is what a recorded log holds, read with pglog.
type Summary struct {
	// Records counts the log's records; Statements those that are
	// statements a replay sends (simple protocol, or an execute).
	Records, Statements int64
	// Tenants counts the statements per tenant key found in
	// application_name as a replay finds it by default (t:<key>);
	// scenario.Untagged those without one.
	Tenants map[string]int64
	// Unreadable counts records pglog could not read.
	Unreadable int64
}

// Summarize reads a recorded log a record at a time.
func Summarize(in io.Reader, format pglog.Format) (Summary, error) {
	rd, err := pglog.NewReader(in, format)
	if err != nil {
		return Summary{}, err
	}
	tenant := regexp.MustCompile(scenario.DefaultTenantApplicationName)
	s := Summary{Tenants: map[string]int64{}}
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return s, nil
		}
		if le := (*pglog.LineError)(nil); errors.As(err, &le) {
			s.Records++
			s.Unreadable++
			continue
		}
		if err != nil {
			return s, err
		}
		s.Records++
		if e.Kind != pglog.KindStatement && e.Kind != pglog.KindExecute {
			continue
		}
		s.Statements++
		key := scenario.Untagged
		if m := tenant.FindStringSubmatch(e.Application); m != nil {
			key = m[1]
		}
		s.Tenants[key]++
	}
}

// Guidance writes how to record the statements of a server noisysim did
// not start, in format, given the settings Needed found: the settings to
// set, where the log goes, how to put the settings back and replay it.
func Guidance(w io.Writer, needed []Setting, format pglog.Format) {
	fmt.Fprintf(w, "To record this server's statements for a replay, as a superuser:\n")
	fmt.Fprintf(w, "  1. turn on the settings (only those not already so):\n")
	restart := false
	for _, s := range needed {
		now := s.Now
		if now == "" {
			now = "unknown to this connection"
		}
		mark := ""
		if !s.Differs() {
			mark = "  -- already so"
		}
		if s.Restart && s.Differs() {
			mark = "  -- takes effect only at the next server restart"
			restart = true
		}
		fmt.Fprintf(w, "       ALTER SYSTEM SET %s = %s;   -- now: %s%s\n", s.Name, quote(s.Want), now, mark)
	}
	fmt.Fprintf(w, "       SELECT pg_reload_conf();\n")
	if restart {
		fmt.Fprintf(w, "     (restart the server once for logging_collector)\n")
	}
	fmt.Fprintf(w, "  2. let the traffic run; every statement goes, with its duration, user, application_name and\n")
	fmt.Fprintf(w, "     session, to the file   SELECT pg_current_logfile('%s');   (relative to data_directory)\n", format)
	fmt.Fprintf(w, "  3. put the settings back (ALTER SYSTEM RESET name, or the value it had; SELECT pg_reload_conf();)\n")
	fmt.Fprintf(w, "     and copy that file (the records of the window you want); replay it: replay: {log: FILE}\n")
}
