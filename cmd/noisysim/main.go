// Command noisysim starts throwaway PostgreSQL clusters, drives multi-tenant
// load through an isolation stack and checks that quiet tenants stay fast.
//
// Usage:
//
//	noisysim [-v] <command> [arguments]
//
// Exit codes (the contract CI gates rely on; mapped in exitCode only):
//
//	0   success
//	1   any other error, an interruption, or a panic (after teardown)
//	2   bad input or usage: unknown command or flag, invalid scenario or
//	    topology, an explicit port in use, PostgreSQL (or Citus, for
//	    topology citus) not installed, a DSN that is not a Citus coordinator,
//	    record on a server noisysim did not start (nothing changed)
//	99  an assertion failed (the run completed; a quiet tenant was hurt)
//
// Signals: the first SIGINT or SIGTERM cancels the command, which tears
// down gracefully; a second one tears down immediately (SIGKILL to the
// servers, directories removed) and exits 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/bench"
	"github.com/noisysim/noisysim/harness/record"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/internal/runlock"
	"github.com/noisysim/noisysim/isolation/citus"
	"github.com/noisysim/noisysim/isolation/directory"
)

// command is one subcommand. run gets the arguments after the command name;
// it returns a *usageError (or an error wrapping a bad-input sentinel) for
// wrong arguments.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, app *app, args []string) error
}

// commands is the one place subcommands are registered. To add one, write
// its run function in its own file and add a line here.
var commands = []command{
	{"bench", "measure noisysim against pgbench on one server: maximum rate, fixed rate, memory", runBench},
	{"citus", "hot shard on Citus: plan [--apply], isolate --tenant X, hot-shard (local experiment)", runCitus},
	{"cluster", "start (up) or stop (down) a throwaway PostgreSQL cluster", runCluster},
	{"merge", "merge the outputs of agents run with run --segment i/N: reports and verdict over all", runMerge},
	{"record", "record a server's statements for a replay: record --dsn DSN --for 10m --out FILE", runRecord},
	{"report", "render a run's report.json again: report --html (report.html)", runReport},
	{"run", "run a scenario: naive vs isolated, assertions, reports", runRun},
	{"simulate", "run a scenario in virtual time through a model calibrated on a real run's report.json", runSimulate},
	{"sweep", "run a scenario across ranges of its numeric keys; --search knee finds how far each configuration holds", runSweep},
	{"tenant", "move a tenant between directory shards (tenant move --tenant X --to NODE)", runTenant},
	{"validate", "check scenario files and report every problem", runValidate},
}

// Exit codes; see the package documentation.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitAssertion = 99
)

// errAssertionFailed is returned (wrapped) by a command whose run completed
// but whose assertions failed.
var errAssertionFailed = errors.New("assertion failed")

// exitCodes maps errors to exit codes, first match wins (errors.Is). Add the
// sentinels of new commands here, nowhere else.
var exitCodes = []struct {
	err  error
	code int
}{
	{errAssertionFailed, exitAssertion},
	{errUsage, exitUsage},
	{flag.ErrHelp, exitOK},
	{backend.ErrBadInput, exitUsage},
	{backend.ErrNotInstalled, exitUsage},
	{local.ErrNotKept, exitUsage},
	{container.ErrNoCluster, exitUsage},
	{scenario.ErrInvalid, exitUsage},
	{directory.ErrInvalidConfig, exitUsage},
	{directory.ErrUnknownNode, exitUsage},
	{directory.ErrInvalidTenant, exitUsage},
	{directory.ErrTargetNotEmpty, exitUsage},
	{citus.ErrNotCitus, exitUsage},
	{citus.ErrNotDistributed, exitUsage},
	{runlock.ErrHeld, exitUsage},
	{bench.ErrInvalid, exitUsage},
	{bench.ErrNoPgBench, exitUsage},
	{sweep.ErrBadInput, exitUsage},
	{record.ErrNotStarted, exitUsage},
}

// exitCode returns the exit code for the error a command returned.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	for _, e := range exitCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return exitError
}

// errUsage marks wrong command-line usage.
var errUsage = errors.New("usage")

// usageError is wrong command-line usage; it unwraps to errUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return errUsage }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// app is what every command gets from main.
type app struct {
	stdout, stderr io.Writer
	log            *slog.Logger
	teardown       *teardown
}

func main() {
	// go-redis logs dial failures itself; noisysim reports them once, as
	// errors (an unusable app.redis_url exits 2).
	redis.SetLogger(quietRedis{})
	// Keeps SIGINT and SIGTERM from their default action (killed, exit
	// 130) in the moment between realMain's own handler stopping and the
	// exit: a late signal then changes nothing.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM)
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// realMain runs noisysim with args and returns the exit code. It owns signal
// handling and the last-resort teardown on panic.
func realMain(args []string, stdout, stderr io.Writer) (code int) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	td := &teardown{}
	// exitMu decides who ends the process: realMain returning its code, or
	// the immediate stop on a second signal (exit 1). Whoever locks it first
	// wins; the other blocks.
	var exitMu sync.Mutex
	defer exitMu.Lock()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer func() {
		signal.Stop(sigs)
		close(sigs) // ends the goroutine below
	}()
	// done ends the signal goroutine once the command and its teardown
	// are over; handled is closed when it has: a first signal it took is
	// then said and cancelled, so the verdict below sees it.
	done, handled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(handled)
		first := func(s os.Signal) {
			fmt.Fprintf(stderr, "noisysim: %v: %s\n", s, stopMessage(td.stopNote()))
			cancel(&stoppedError{signal: s})
		}
		select {
		case s, ok := <-sigs:
			if !ok {
				return
			}
			first(s)
		case <-done:
			select { // a signal already delivered is still said
			case s, ok := <-sigs:
				if ok {
					first(s)
				}
			default:
			}
			return
		}
		select {
		case s, ok := <-sigs:
			if !ok {
				return
			}
			exitMu.Lock()
			fmt.Fprintf(stderr, "noisysim: %v: stopping immediately\n", s)
			td.run(true)
			os.Exit(exitError)
		case <-done:
		}
	}()

	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "noisysim: panic: %v\n%s", r, debug.Stack())
			td.run(false)
			code = exitError
		}
	}()

	err := dispatch(ctx, args, stdout, stderr, td)
	td.run(false)
	close(done)
	<-handled
	if stopped, ok := context.Cause(ctx).(*stoppedError); ok {
		switch {
		case td.isFinished():
			// The signal changed nothing: the outputs are whole.
			fmt.Fprintf(stderr, "noisysim: %s came when the command had finished: its outputs are complete and its result stands\n", stopped.name())
		case err != nil:
			stopped.err = err
			err = stopped
		}
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "noisysim: %v\n", err)
	}
	return exitCode(err)
}

// stoppedError is what a command that failed after the first signal
// returns: the signal stopped it, whatever error the cancellation caused.
// It does not unwrap: a stopped command exits 1.
type stoppedError struct {
	signal os.Signal
	err    error // the command's error
}

// name is the signal's name: SIGINT, SIGTERM.
func (e *stoppedError) name() string {
	switch e.signal {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return e.signal.String()
}

func (e *stoppedError) Error() string {
	msg := "stopped by " + e.name()
	if e.err == nil {
		return msg
	}
	if at := strings.TrimSuffix(e.err.Error(), ": "+context.Canceled.Error()); at != context.Canceled.Error() {
		msg += " (" + at + ")"
	}
	return msg
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer, td *teardown) error {
	fs := flag.NewFlagSet("noisysim", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "log debug details (start-up steps, timings) to stderr")
	fs.Usage = func() { mainUsage(fs.Output(), fs) }
	if err := parseFlagsTo(stdout, stderr, fs, args); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	a := &app{
		stdout: stdout, stderr: stderr, teardown: td,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}
	if fs.NArg() == 0 {
		mainUsage(stderr, fs)
		return usagef("no command given")
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		if len(rest) == 0 || isHelp(rest[0]) {
			mainUsage(stdout, fs)
			return nil
		}
		name, rest = rest[0], append(rest[1:], "--help") // help CMD [SUB] is CMD [SUB] --help
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, a, rest)
		}
	}
	return usagef("unknown command %q (run 'noisysim help')", name)
}

func mainUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: noisysim [-v] <command> [arguments]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'noisysim <command> -h' (or 'noisysim help <command>') for a command's flags.\n\nFlags:\n")
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprintf(w, "\nExit codes: 0 ok, 1 error, 2 bad input or usage, 99 assertion failed.\n")
}

// isHelp reports whether arg, in a subcommand's place, asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// parseFlags parses args with fs, whose Usage writes to fs.Output() (nil:
// the flags' defaults). Help (-h, -help, --help) prints the usage on
// a.stdout and returns flag.ErrHelp (exit 0); a bad flag prints the error
// and the usage on a.stderr and returns a usage error (exit 2).
func parseFlags(a *app, fs *flag.FlagSet, args []string) error {
	return parseFlagsTo(a.stdout, a.stderr, fs, args)
}

func parseFlagsTo(stdout, stderr io.Writer, fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	if usage == nil {
		usage = func() {
			fmt.Fprintf(fs.Output(), "Usage: noisysim %s [flags]\n\nFlags:\n", fs.Name())
			fs.PrintDefaults()
		}
	}
	fs.Usage = func() {}     // the flag package calls it on help and on errors alike
	fs.SetOutput(io.Discard) // its own line for a bad value says only "parse error"
	explainedValues := explainValues(fs)
	err := fs.Parse(args)
	bad := explainedValues()
	fs.Usage = usage
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		usage()
		fs.SetOutput(stderr)
		return flag.ErrHelp
	case err != nil:
		msg := err.Error()
		if bad != nil {
			msg = bad.Error()
			if fs.Name() != "noisysim" {
				msg = fs.Name() + ": " + msg
			}
		}
		fmt.Fprintln(stderr, msg)
		usage()
		return &usageError{msg}
	}
	return nil
}

// stopMessage returns what noisysim says on the first signal: note, what
// the command does when stopped, or by default what a run does.
func stopMessage(note string) string {
	if note == "" {
		return "stopping: what noisysim started is removed and, once something was measured, the reports of it are written, marked incomplete (send it again to stop immediately: what it started is still removed, but no reports are written)"
	}
	return "stopping: " + note + " (send it again to stop immediately)"
}

// teardown is what must be undone however noisysim ends: normal return,
// error, signal or panic. Commands register each resource they create.
type teardown struct {
	mu    sync.Mutex
	items []*teardownItem
	note  string // what the command does when stopped (onStop)
	done  bool   // the command's outputs are complete (finished)
}

// finished says the command's outputs are complete: a signal from now on
// changes nothing, and the command's result (its exit code) stands.
func (t *teardown) finished() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

func (t *teardown) isFinished() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// onStop sets what the first signal's message says the command does when
// stopped, in place of a run's "the reports of it are written", for a
// command that writes nothing when interrupted.
func (t *teardown) onStop(note string) {
	t.mu.Lock()
	t.note = note
	t.mu.Unlock()
}

func (t *teardown) stopNote() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.note
}

type teardownItem struct {
	graceful, immediate func() error
}

// add registers a resource: graceful undoes it normally, immediate as fast
// as possible (a second signal); either may run while the other runs, and
// both must be idempotent. A command calls finish on its normal path, or
// forget to leave the resource on purpose.
func (t *teardown) add(graceful, immediate func() error) *teardownItem {
	it := &teardownItem{graceful, immediate}
	t.mu.Lock()
	t.items = append(t.items, it)
	t.mu.Unlock()
	return it
}

// finish undoes it gracefully now and unregisters it.
func (t *teardown) finish(it *teardownItem) error {
	err := it.graceful()
	t.forget(it)
	return err
}

// forget unregisters it without undoing it (a cluster kept on purpose).
func (t *teardown) forget(it *teardownItem) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.items {
		if x == it {
			t.items = append(t.items[:i], t.items[i+1:]...)
			return
		}
	}
}

// run undoes every registered resource, newest first.
func (t *teardown) run(immediate bool) {
	t.mu.Lock()
	items := append([]*teardownItem(nil), t.items...)
	t.mu.Unlock()
	for i := len(items) - 1; i >= 0; i-- {
		f := items[i].graceful
		if immediate {
			f = items[i].immediate
		}
		f()
	}
}
