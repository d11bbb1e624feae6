package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/isolation/directory"
	"github.com/noisysim/noisysim/reports"
)

func TestExitCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"other", errors.New("boom"), 1},
		{"usage", usagef("bad flag"), 2},
		{"help", fmt.Errorf("x: %w", flag.ErrHelp), 0},
		{"topology", fmt.Errorf("start: %w", &backend.TopologyError{Topology: "ring"}), 2},
		{"binaries", &local.BinariesNotFoundError{}, 2},
		{"port", &local.PortInUseError{Port: 5432}, 2},
		{"setting", &local.SettingError{Name: "x"}, 2},
		{"no server user", &local.ServerUserError{User: "postgres"}, 2},
		{"node start", &local.NodeStartError{Node: "primary", Err: errors.New("crashed")}, 1},
		{"invalid tenant", fmt.Errorf("move: %w", &directory.TenantError{Tenant: "abc"}), 2},
		{"target not empty", fmt.Errorf("move: %w", &directory.TargetNotEmptyError{Tenant: "1"}), 2},
		{"assertion", fmt.Errorf("run: %w", errAssertionFailed), 99},
		{"assertion beats bad input", errors.Join(errAssertionFailed, backend.ErrBadInput), 99},
		// A signal stopped it: exit 1, whatever the cancellation caused.
		{"stopped", &stoppedError{signal: syscall.SIGTERM, err: fmt.Errorf("connect: %w", backend.ErrBadInput)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestDispatchUsage(t *testing.T) {
	cases := []struct {
		args []string
		want int
		msg  string
	}{
		{nil, 2, "no command"},
		{[]string{"frob"}, 2, `unknown command "frob"`},
		{[]string{"-bogus"}, 2, "bogus"},
		{[]string{"help"}, 0, ""},
		{[]string{"cluster"}, 2, "missing subcommand"},
		{[]string{"cluster", "sideways"}, 2, "unknown subcommand"},
		{[]string{"cluster", "up", "--bogus"}, 2, "bogus"},
		{[]string{"cluster", "up", "-h"}, 0, ""},
		{[]string{"cluster", "up", "--setting", "novalue"}, 2, "name=value"},
		{[]string{"cluster", "up", "--port", "70000"}, 2, "out of range"},
		{[]string{"cluster", "up", "extra"}, 2, "unexpected argument"},
		{[]string{"cluster", "up", "--topology", "ring"}, 2, "unknown topology"},
		{[]string{"cluster", "up", "--setting", "port=1"}, 2, "cannot be overridden"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := realMain(tc.args, &out, &errOut); got != tc.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tc.want, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, errOut.String())
			}
		})
	}
}

func TestTeardownRunsNewestFirstAndForgets(t *testing.T) {
	var td teardown
	var order []string
	rec := func(s string) func() error { return func() error { order = append(order, s); return nil } }
	td.add(rec("a"), rec("a!"))
	b := td.add(rec("b"), rec("b!"))
	td.add(rec("c"), rec("c!"))
	td.forget(b)
	td.run(false)
	td.run(true)
	if got := strings.Join(order, ","); got != "c,a,c!,a!" {
		t.Fatalf("order = %s, want c,a,c!,a!", got)
	}
}

// After a signal, the last line says what stopped the command and where,
// not a bare "context canceled".
func TestStoppedErrorSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		err  *stoppedError
		want string
	}{
		{&stoppedError{signal: syscall.SIGINT, err: fmt.Errorf("run scenario: timeline of naive: %w", context.Canceled)}, "stopped by SIGINT (run scenario: timeline of naive)"},
		{&stoppedError{signal: syscall.SIGTERM, err: context.Canceled}, "stopped by SIGTERM"},
		{&stoppedError{signal: syscall.SIGINT, err: errors.New("read pg_stat_activity: conn closed")}, "stopped by SIGINT (read pg_stat_activity: conn closed)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

// TestRunTraceRefusesExistingFile: run --trace never overwrites a file,
// and is refused with --repeat or in a missing directory, and an --out
// that is (or is under) a file is refused: all before any run starts.
func TestRunTraceRefusesExistingFile(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(existing, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", "--trace", existing, "../../scenarios/ci-gate.yaml"}, "the file exists; noisysim does not overwrite it"},
		{[]string{"run", "--trace", existing + ".new", "--repeat", "2", "../../scenarios/ci-gate.yaml"}, "not with --repeat"},
		// Checked before the scenario's flags (--only), not when the reports are written after the run.
		{[]string{"run", "--out", existing, "--only", "nope", "../../scenarios/ci-gate.yaml"}, "trace.jsonl is a file, not a directory"},
		{[]string{"run", "--out", filepath.Join(existing, "out"), "--only", "nope", "../../scenarios/ci-gate.yaml"}, "trace.jsonl is a file, not a directory"},
		{[]string{"run", "--trace", filepath.Join(existing+".dir", "t.jsonl"), "--only", "nope", "../../scenarios/ci-gate.yaml"}, "no directory " + existing + ".dir"},
		// Before --out and its run-N directories are looked at: 10^12 of them took the machine's memory.
		{[]string{"run", "--repeat", "2000", "--out", existing, "../../scenarios/ci-gate.yaml"}, "--repeat 2000: want 1..1000"},
		{[]string{"run", "--repeat", "-1", "--out", filepath.Join(existing+".dir", "runs"), "../../scenarios/ci-gate.yaml"}, "--repeat -1: want 1..1000"},
	} {
		var out, errOut bytes.Buffer
		if got := realMain(tc.args, &out, &errOut); got != 2 || !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying %q", tc.args, got, errOut.String(), tc.msg)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me\n" {
		t.Errorf("the existing file now holds %q", b)
	}
	if _, err := os.Stat(existing + ".new"); err == nil {
		t.Errorf("%s.new was created", existing)
	}
}

// TestMergeScenarioFlagMissing: merge --scenario naming no file exits 2
// naming --scenario, before reading the agents' outputs, and does not
// tell the user to give the --scenario they gave.
func TestMergeScenarioFlagMissing(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	got := realMain([]string{"merge", "--scenario", filepath.Join(dir, "nope.yaml"), "--out", filepath.Join(dir, "m"), filepath.Join(dir, "a1")}, &out, &errOut)
	msg := errOut.String()
	if got != exitUsage || !strings.Contains(msg, "merge: --scenario: ") || !strings.Contains(msg, "nope.yaml") || strings.Contains(msg, "give --scenario") {
		t.Errorf("merge --scenario missing: exit %d, want 2 naming --scenario and the file:\n%s", got, msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "m")); err == nil {
		t.Errorf("merge --scenario missing created --out")
	}
}

// An --out another run wrote its report into while this one ran (the same
// --out given to a run that waited for the machine, or ran beside it) is
// not written over: this run's reports go to a new directory beside it,
// and the exit is 2 naming both.
func TestWriteReportsOutTaken(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(out, reports.JSONFile)
	if err := os.WriteFile(theirs, []byte("the other run's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &reports.Report{Scenario: "s", Seed: 1, ScheduleHash: "abc", Backend: "local single",
		Configurations: []reports.Configuration{{Name: "naive", Passed: true}}}
	err := writeReports(out, r)
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--out "+out+": another run wrote its report there") {
		t.Fatalf("got %v (exit %d), want exit 2 naming --out", err, exitCode(err))
	}
	if b, _ := os.ReadFile(theirs); string(b) != "the other run's\n" {
		t.Errorf("the other run's report.json now holds %.40q", b)
	}
	alts, _ := filepath.Glob(filepath.Join(base, "out.*"))
	if len(alts) != 1 || !strings.Contains(err.Error(), "this run's reports are in "+alts[0]) {
		t.Fatalf("directories beside --out: %v; error %v", alts, err)
	}
	for _, name := range []string{reports.JSONFile, reports.MarkdownFile, reports.JUnitFile, reports.HTMLFile} {
		if _, err := os.Stat(filepath.Join(alts[0], name)); err != nil {
			t.Errorf("this run's %s: %v", name, err)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("--out holds %d entries, want only the other run's report.json", len(entries))
	}
}

// --max-foreign-cpu 0 is refused (exit 2): the guard takes 0 as its
// default, so it judged windows at 0.5 CPU while the header said 0.50 and
// the user had asked for none; NaN and infinities are refused too.
func TestMaxForeignCPUZero(t *testing.T) {
	sc := "../../scenarios/ci-gate.yaml"
	for _, args := range [][]string{
		{"run", "--max-foreign-cpu", "0", sc},
		{"run", "--max-foreign-cpu=-0", sc},
		{"run", "--max-foreign-cpu", "NaN", sc},
		{"sweep", sc, "--vary", "classes.lookup.rate=10..20", "--max-foreign-cpu", "0"},
		{"citus", "hot-shard", "--max-foreign-cpu", "0"},
	} {
		var out, errOut bytes.Buffer
		if got := realMain(args, &out, &errOut); got != exitUsage || !strings.Contains(errOut.String(), "--max-foreign-cpu") || !strings.Contains(errOut.String(), "want a number of CPUs > 0") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 saying what --max-foreign-cpu takes", args, got, errOut.String())
		}
	}
}
