package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestRunReportsLinksAndOrder: run-K directories, and links to run
// directories of other series gathered in one place, in K's order (10
// after 9); a run-K without a report.json, a run-K that is a file and
// other names are not runs.
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
	for link, target := range map[string]string{"run-10": "../series/run-1", "run-2": "../series/run-3", "run-11": "../series/missing"} {
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
