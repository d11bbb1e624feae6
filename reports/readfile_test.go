package reports

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFileErrors: a file that is not a report.json is named with the
// place the JSON breaks, or as not a noisysim report; a report with many
// problems is one line.
func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	golden, err := os.ReadFile(filepath.Join("testdata", "report.json.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var noConfigs map[string]any
	if err := json.Unmarshal(golden, &noConfigs); err != nil {
		t.Fatal(err)
	}
	noConfigs["configurations"] = []any{}
	emptied, err := json.Marshal(noConfigs)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		data, want string
	}{
		"bad character": {"{\n  \"schema_version\": o}", "bad character.json:2:21: malformed JSON: invalid character 'o'"},
		"truncated":     {"{\n  \"schema_version\": 2,", "truncated.json:2:22: malformed JSON: unexpected end of JSON input"},
		"empty":         {"", "empty.json: an empty file, not a noisysim report.json"},
		"array":         {"[1]", "array.json: not a noisysim report.json: the JSON is array"},
		"other object":  {`{"a": 1}`, "other object.json: not a noisysim report.json: no schema_version"},
		"wrong type":    {`{"schema_version": 2, "seed": "x"}`, "wrong type.json:1:33: not a noisysim report.json: seed: want int64, got a JSON string"},
		"emptied":       {string(emptied), "emptied.json: invalid report, "},
	} {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v; want %q", name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err on several lines:\n%v", name, err)
		}
		if name == "emptied" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), " more")) {
			t.Errorf("emptied: err %v; want ErrInvalid, the first problems and how many more", err)
		}
	}
	if r, err := ReadFile(filepath.Join("testdata", "report.json.golden")); err != nil || r.Scenario == "" {
		t.Errorf("the golden report: %v", err)
	}
}

// A FIFO in place of report.json is refused at once, not read (the read
// would block until a writer came).
func TestReadFileFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(path); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("err = %v, want not a regular file", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile of a FIFO blocked")
	}
}
