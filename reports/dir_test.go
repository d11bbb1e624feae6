package reports

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "run1")
	// A stale file from an earlier run is replaced.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, JSONFile), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := sampleReport(5)
	if err := WriteDir(dir, r); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{JUnitFile, HTMLFile, JSONFile, MarkdownFile}; !slices.Equal(names, want) {
		t.Errorf("files %v, want exactly %v (no temporary files left)", names, want)
	}
	for name, render := range map[string]func(io.Writer, *Report) error{
		JSONFile: WriteJSON, MarkdownFile: WriteMarkdown, JUnitFile: WriteJUnit, HTMLFile: WriteHTML,
	} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := render(&want, r); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s differs from its renderer's output", name)
		}
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", name, info.Mode().Perm())
		}
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		t.Errorf("%s is not a directory (%v)", dir, err)
	}
}

func TestWriteDirErrors(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteDir(filepath.Join(file, "out"), sampleReport(3))
	if !errors.Is(err, syscall.ENOTDIR) || !strings.HasPrefix(err.Error(), "write report: ") {
		t.Errorf("dir under a file: got %v, want a wrapped file system error", err)
	}

	bad := sampleReport(3)
	bad.Assertions[0].Limit = math.NaN()
	dir := filepath.Join(base, "never")
	if err := WriteDir(dir, bad); !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "write report: ") {
		t.Errorf("invalid report: got %v, want a wrapped ErrInvalid", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("invalid report created %s (stat: %v)", dir, err)
	}
}
