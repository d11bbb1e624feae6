package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestRunFileFromAnotherDirectory: a report names its scenario file as
// the run was given it, relative to where it ran, and keeps the file it
// read as file_abs. From any directory the file the run read is taken
// while it is there, even where the relative name finds another file; a
// file_abs that is gone, a directory, or not absolute (a report edited by
// hand) leaves the run's own name.
func TestRunFileFromAnotherDirectory(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "scenarios", "ci-gate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	abs := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(abs, src, 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, "scenarios"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "scenarios", "s.yaml"), bytes.Replace(src, []byte("name: ci-gate"), []byte("name: other"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(other)
	rep := &reports.Report{File: "scenarios/s.yaml", FileAbs: abs}
	if got := RunFile(rep); got != abs {
		t.Errorf("another scenarios/s.yaml here: RunFile = %q, want the file the run read %q", got, abs)
	}
	if f, err := loadRunFile(rep); err != nil || f.Name != "ci-gate" {
		t.Errorf("loadRunFile: %v; want scenario ci-gate, not the other here", err)
	}
	for _, fileAbs := range []string{"", filepath.Join(dir, "gone.yaml"), dir, "s.yaml", "garbage\x00"} {
		rep := &reports.Report{File: "scenarios/s.yaml", FileAbs: fileAbs}
		if got := RunFile(rep); got != "scenarios/s.yaml" {
			t.Errorf("file_abs %q: RunFile = %q, want the run's own %q", fileAbs, got, "scenarios/s.yaml")
		}
	}
	if got := absFile("a/b.yaml"); got != filepath.Join(other, "a", "b.yaml") {
		t.Errorf("absFile = %q", got)
	}
}
