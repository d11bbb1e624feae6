package scenario

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in scenario files as a Go duration
// string: "1.5s", "500ms", "2m30s". "0" and "0s" are zero. A bare number
// other than 0 is an error (it has no unit).
type Duration time.Duration

// Duration returns d as a time.Duration.
func (d Duration) Duration() time.Duration { return time.Duration(d) }

// String returns d in time.Duration's format, e.g. "1.5s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText returns d.String(), so that JSON and YAML show "1.5s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalYAML parses a duration string with time.ParseDuration. A value that
// does not parse is reported as a *yaml.TypeError carrying its line and column,
// so decoding goes on and every problem is reported.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeError(n, "must be a duration such as \"1.5s\" or \"500ms\"")
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		hint := ""
		if _, nerr := strconv.ParseFloat(n.Value, 64); nerr == nil {
			hint = fmt.Sprintf(" (a unit is required, e.g. \"%ss\" or \"%sms\")", n.Value, n.Value)
		}
		return typeError(n, fmt.Sprintf("must be a duration such as \"1.5s\" or \"500ms\", got %q%s", n.Value, hint))
	}
	*d = Duration(v)
	return nil
}

// typeError returns a *yaml.TypeError for node n in the "line L: column C: msg"
// form that Parse maps back to a field path.
func typeError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: column %d: %s", n.Line, n.Column, msg)}}
}

// Size is a PostgreSQL memory setting such as work_mem, written as PostgreSQL
// writes it: an integer with an optional unit B, kB, MB, GB or TB ("64MB",
// "512kB"). A bare integer is in kilobytes, as work_mem's unit is. Empty means
// the server's default.
type Size string

var sizeForm = regexp.MustCompile(`^([0-9]+)\s*(B|kB|MB|GB|TB)?$`)

// Bytes returns the size in bytes; 0 for an empty Size. It returns an error
// matching ErrInvalid when s is not of the form above.
func (s Size) Bytes() (int64, error) {
	if s == "" {
		return 0, nil
	}
	m := sizeForm.FindStringSubmatch(string(s))
	if m == nil {
		return 0, fmt.Errorf("parse size %q: %w: want an integer with an optional unit B, kB, MB, GB or TB, e.g. \"64MB\"", string(s), ErrInvalid)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse size %q: %w: %v", string(s), ErrInvalid, err)
	}
	unit := map[string]int64{"B": 1, "": 1 << 10, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}[m[2]]
	if n > (1<<62)/unit {
		return 0, fmt.Errorf("parse size %q: %w: too large", string(s), ErrInvalid)
	}
	return n * unit, nil
}
