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
	names := dirNames(t, dir)
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

// WriteNewDir never writes over a report: a file of another run there, or
// one written meanwhile by a writer racing for the same dir, is kept, and
// of two writers exactly one writes all its files.
func TestWriteNewDir(t *testing.T) {
	for _, theirs := range []string{JSONFile, MarkdownFile} {
		t.Run(theirs, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, theirs), []byte("theirs"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteNewDir(dir, sampleReport(3))
			if !errors.Is(err, fs.ErrExist) || !strings.HasPrefix(err.Error(), "write report: ") {
				t.Fatalf("got %v, want a wrapped fs.ErrExist", err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, theirs)); string(b) != "theirs" {
				t.Errorf("%s now holds %.40q", theirs, b)
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{theirs}) {
				t.Errorf("dir holds %v, want only the earlier %s", names, theirs)
			}
		})
	}

	dir := filepath.Join(t.TempDir(), "out")
	reps := []*Report{sampleReport(3), sampleReport(5)}
	errs := make([]error, len(reps))
	done := make(chan int)
	for i := range reps {
		go func() {
			errs[i] = WriteNewDir(dir, reps[i])
			done <- i
		}()
	}
	<-done
	<-done
	won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
	if won < 0 || errs[1-won] == nil || !errors.Is(errs[1-won], fs.ErrExist) {
		t.Fatalf("racing writers: %v, want one nil and one fs.ErrExist", errs)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{JUnitFile, HTMLFile, JSONFile, MarkdownFile}) {
		t.Errorf("dir holds %v, want the winner's four files", names)
	}
	var want bytes.Buffer
	if err := WriteMarkdown(&want, reps[won]); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, MarkdownFile)); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s is not the winner's", MarkdownFile)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
