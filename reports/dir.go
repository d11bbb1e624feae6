package reports

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File names WriteDir writes.
const (
	JSONFile     = "report.json"
	MarkdownFile = "report.md"
	JUnitFile    = "junit.xml"
)

// WriteDir writes JSONFile, MarkdownFile, JUnitFile and HTMLFile into dir, creating
// dir (mode 0755) if needed. Everything is rendered before anything is
// written, and each file is written to a temporary file in dir and renamed
// into place, so a reader never sees a partial file and an invalid report
// leaves dir untouched. Files get mode 0644. Errors are wrapped as
// "write report: ...": ErrInvalid if r does not pass Validate, else the
// file system's error.
func WriteDir(dir string, r *Report) error {
	files := []struct {
		name   string
		render func(io.Writer, *Report) error
		buf    bytes.Buffer
	}{
		{name: JSONFile, render: WriteJSON},
		{name: MarkdownFile, render: WriteMarkdown},
		{name: JUnitFile, render: WriteJUnit},
		{name: HTMLFile, render: WriteHTML},
	}
	for i := range files {
		if err := files[i].render(&files[i].buf, r); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	for i := range files {
		if err := writeAtomic(filepath.Join(dir, files[i].name), files[i].buf.Bytes()); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	return nil
}

// writeAtomic writes data to a temporary file beside path and renames it to
// path. On error the temporary file is removed.
func writeAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
