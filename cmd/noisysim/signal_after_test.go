package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/reports"
)

// TestRunSignalAfterTheReports: a SIGINT that lands once a real run's
// reports are written in full (before what it started is removed) stops
// nothing: the exit code is the verdict's (0 or 99), not the 1 of a
// stopped run, the reports are not marked incomplete, the message says
// so, and the cluster is removed as on any return.
func TestRunSignalAfterTheReports(t *testing.T) {
	needPostgres(t)
	runStep = signalAt(t, "written")
	defer func() { runStep = func(context.Context, string) {} }()
	out := filepath.Join(t.TempDir(), "out")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"run", "--no-progress", "--only", "naive", "--out", out, "testdata/html-short.yaml"}, &stdout, &stderr)
	if code != exitOK && code != exitAssertion {
		t.Fatalf("exit %d, want the verdict's 0 or 99\n%s", code, stderr.String())
	}
	rep, err := reports.ReadFile(filepath.Join(out, reports.JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Incomplete != "" {
		t.Errorf("report marked incomplete: %q", rep.Incomplete)
	}
	if want := "SIGINT came when the command had finished: its outputs are complete and its result stands"; !strings.Contains(stderr.String(), want) ||
		strings.Contains(stderr.String(), "stopped by") {
		t.Errorf("stderr lacks %q or says it stopped:\n%s", want, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping: the run has finished: its reports are written in full") {
		t.Errorf("the signal's message does not say the run has finished:\n%s", stderr.String())
	}
}

// TestSweepSignalAfterTheWork: a SIGINT that lands once a sweep is written
// in full stops nothing: the exit code is the sweep's own (0 here), not the
// 1 of a stopped command, and sweep.json is complete.
func TestSweepSignalAfterTheWork(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	writeCalibration(t, cal, true)
	sweepStep = signalAt(t, "written")
	defer func() { sweepStep = func(context.Context, string) {} }()
	out := filepath.Join(dir, "sweep")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"sweep", "../../scenarios/ci-gate.yaml", "--simulate", "--calibrate", cal,
		"--vary", "classes.lookup.rate=100", "--out", out}, &stdout, &stderr)
	if code != exitOK {
		t.Errorf("exit %d, want 0 (a grid sweep that finished)\n%s", code, stderr.String())
	}
	if d, err := sweep.ReadFile(out); err != nil || !d.Complete {
		t.Errorf("sweep.json: %v (complete: %v)", err, err == nil && d.Complete)
	}
	if want := "SIGINT came when the command had finished: its outputs are complete and its result stands"; !strings.Contains(stderr.String(), want) ||
		strings.Contains(stderr.String(), "stopped by") {
		t.Errorf("stderr lacks %q or says it stopped:\n%s", want, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping: the sweep has finished: it is written in full") {
		t.Errorf("the signal's message does not say the sweep has finished:\n%s", stderr.String())
	}
}

// signalAt returns a step hook (simulateStep, runStep) that sends this
// process SIGINT at step and waits until realMain's handler has it.
func signalAt(t *testing.T, step string) func(context.Context, string) {
	return func(ctx context.Context, at string) {
		if at != step {
			return
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("SIGINT at %s not seen in 10 s", step)
		}
	}
}
