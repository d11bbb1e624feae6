package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestRunReportsLinksAndOrder: run-K directories, and links to run
// directories of other series gathered in one place, in K's order (10
// after 9); a run-K directory without a report.json, a run-K that is a
// file and other names are not runs. A run-K link that leads to no run's
// directory (broken, a loop, a file, a directory without a report.json)
// is an error naming it: someone linked it as a run.
func TestRunReportsLinksAndOrder(t *testing.T) {
	base := t.TempDir()
	series := filepath.Join(base, "series")
	gathered := filepath.Join(base, "gathered")
	for _, d := range []string{"run-1", "run-2", "run-3"} {
		if err := os.MkdirAll(filepath.Join(series, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(series, d, reports.JSONFile), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(gathered, "run-9"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gathered, "run-9", reports.JSONFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"run-10": "../series/run-1", "run-2": "../series/run-3"} {
		if err := os.Symlink(target, filepath.Join(gathered, link)); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(gathered, "run-3"), 0o755)               // no report.json
	os.WriteFile(filepath.Join(gathered, "run-4"), []byte("x"), 0o644) // a file
	os.MkdirAll(filepath.Join(gathered, "other"), 0o755)
	got, err := runReports(gathered)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(gathered, "run-2", reports.JSONFile),
		filepath.Join(gathered, "run-9", reports.JSONFile),
		filepath.Join(gathered, "run-10", reports.JSONFile),
	}
	if !slices.Equal(got, want) {
		t.Errorf("runReports:\n  %v\nwant\n  %v", got, want)
	}
}

func TestRunReportsBadLinks(t *testing.T) {
	base := t.TempDir()
	run := filepath.Join(base, "series", "run-1")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, reports.JSONFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]string{
		"../series/missing":           "a link that leads to no run directory: no such file or directory",
		"run-2":                       "a link that leads to no run directory: too many levels of symbolic links",
		"../series/run-1/report.json": "a link to ../series/run-1/report.json, not a run's directory (no report.json in it)",
		"../series":                   "a link to ../series, not a run's directory (no report.json in it)",
	} {
		dir := filepath.Join(base, "g"+strconv.Itoa(len(target)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../series/run-1", filepath.Join(dir, "run-1")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, "run-2")); err != nil {
			t.Fatal(err)
		}
		got, err := runReports(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "run-2")+": "+want) {
			t.Errorf("run-2 -> %s: %v, %v; want an error naming it: %q", target, got, err, want)
		}
	}
}
