package reports

import (
	"bytes"
	"errors"
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
	return writeDir(dir, r, writeAtomic)
}

// WriteNewDir writes as WriteDir, but never over a report: when dir holds
// one of WriteDir's files already, or another process writes one there
// meanwhile, it returns an error matching os.ErrExist (wrapped as "write
// report: ...") and leaves what is there as it was. Each file is linked
// into place, which fails on an existing name, JSONFile first: of two
// writers racing for one dir, one writes all its files, the other none.
func WriteNewDir(dir string, r *Report) error {
	return writeDir(dir, r, writeNew)
}

// writeDir renders r's files and writes each into dir with put.
func writeDir(dir string, r *Report, put func(path string, data []byte) error) error {
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
	var written []string
	for i := range files {
		path := filepath.Join(dir, files[i].name)
		if err := put(path, files[i].buf.Bytes()); err != nil {
			if errors.Is(err, os.ErrExist) {
				// Only WriteNewDir's put fails so: take back what this
				// call placed, the other writer's files stay.
				for _, w := range written {
					os.Remove(w)
				}
			}
			return fmt.Errorf("write report: %w", err)
		}
		written = append(written, path)
	}
	return nil
}

// writeNew writes data to a temporary file beside path and links it to
// path, failing with an error matching os.ErrExist when path exists.
func writeNew(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Link(tmp, path)
}

// WriteFileAtomic writes data to path (mode 0644, synced) through a
// temporary file beside it, renamed onto it: a reader sees the old file or
// the new one, never part of one. On error the temporary file is removed.
func WriteFileAtomic(path string, data []byte) error { return writeAtomic(path, data) }

// writeAtomic is WriteFileAtomic.
func writeAtomic(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes data, synced and with mode 0644, to a new temporary
// file beside path and returns its name. On error nothing is left.
func writeTemp(path string, data []byte) (name string, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if err = f.Chmod(0o644); err != nil {
		return "", err
	}
	if err = f.Sync(); err != nil {
		return "", err
	}
	if err = f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}
