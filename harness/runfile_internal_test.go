package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// TestRunFileFromAnotherDirectory: a report names its scenario file as
// the run was given it, relative to where it ran; a later command run
// from elsewhere finds it by file_abs, and one where both are gone gets
// the run's own name back (for its error).
func TestRunFileFromAnotherDirectory(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(abs, []byte("name: s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := &reports.Report{File: "scenarios/s.yaml", FileAbs: abs}
	if got := RunFile(rep); got != abs {
		t.Errorf("relative file not here: RunFile = %q, want file_abs %q", got, abs)
	}
	t.Chdir(dir)
	rep.File = "s.yaml"
	if got := RunFile(rep); got != "s.yaml" {
		t.Errorf("relative file here: RunFile = %q, want the run's own %q", got, "s.yaml")
	}
	rep.File, rep.FileAbs = "gone.yaml", filepath.Join(dir, "gone.yaml")
	if got := RunFile(rep); got != "gone.yaml" {
		t.Errorf("neither here: RunFile = %q, want %q", got, "gone.yaml")
	}
	if got := absFile("a/b.yaml"); got != filepath.Join(dir, "a", "b.yaml") {
		t.Errorf("absFile = %q", got)
	}
}
