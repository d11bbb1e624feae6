package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxProblems is how many of a report's problems ReadFile's error lists
// before "and N more".
const maxProblems = 3

// ReadFile reads the report.json at path, as ReadJSON, with errors a
// reader can act on: malformed JSON at path:line:col, "not a noisysim
// report.json" for JSON of another shape, and a report failing Validate
// summed up on one line (its first problems and how many more), wrapping
// ErrInvalid. The file system's error is returned as it is.
func ReadFile(path string) (*Report, error) {
	// A FIFO or a device would block the read (a signal cannot end a
	// blocked open): only a regular file is read.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s), not a noisysim report.json", path, FileKind(fi))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: an empty file, not a noisysim report.json", path)
	}
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(data, &shape); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, fmt.Errorf("%s: malformed JSON: %v", at(path, data, syn.Offset-1), err)
		case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input"):
			return nil, fmt.Errorf("%s: malformed JSON: the file ends before the JSON does", at(path, data, int64(len(data))))
		case errors.As(err, &typ):
			return nil, fmt.Errorf("%s: not a noisysim report.json: the JSON is %s, not an object", path, typ.Value)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, ok := shape["schema_version"]; !ok {
		return nil, fmt.Errorf("%s: not a noisysim report.json: no schema_version (a report.json noisysim run --out wrote has one)", path)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return nil, fmt.Errorf("%s: not a noisysim report.json: %s: want %s, got a JSON %s", at(path, data, typ.Offset-1), typ.Field, typ.Type, typ.Value)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%s: schema_version %d: this noisysim reads version %d", path, r.SchemaVersion, SchemaVersion)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, summarize(err))
	}
	return &r, nil
}

// at returns "path:line:col" of the byte at index i of data (len(data):
// just past the end).
func at(path string, data []byte, i int64) string {
	i = min(max(i, 0), int64(len(data)))
	before := data[:i]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

// problemsError sums up a report's problems on one line.
type problemsError struct{ errs []error }

func (e *problemsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid report, %d problems: ", len(e.errs))
	for i, err := range e.errs[:min(len(e.errs), maxProblems)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimPrefix(err.Error(), "invalid report: "))
	}
	if n := len(e.errs) - maxProblems; n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	return b.String()
}

func (e *problemsError) Unwrap() []error { return e.errs }

// summarize returns err (Validate's) as one line when it joins several.
func summarize(err error) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) < 2 {
		return err
	}
	return &problemsError{errs: j.Unwrap()}
}

// FileKind names what a file that is not regular is: "a directory", "a
// FIFO", "a device", "a socket" or "a special file".
func FileKind(fi os.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}
