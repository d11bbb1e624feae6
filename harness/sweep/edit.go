package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/noisysim/noisysim/harness/scenario"
)

// ErrBadInput marks a bad --vary, --search or sweep option: a key that is not
// in the scenario file or not numeric, a malformed range, STEPS of 0. The CLI
// maps it to exit code 2. A value the scenario's own validation rejects is a
// *scenario.Error (scenario.ErrInvalid) instead.
var ErrBadInput = errors.New("bad sweep input")

func badf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadInput}, args...)...)
}

// Source is a scenario file held as text and as its YAML node tree, so that
// any numeric key can be set by its path and the result validated by
// scenario.Parse, with problems still reported at the file's line:col.
type Source struct {
	File string
	data []byte
	root *yaml.Node
}

// Key is a numeric key found in a Source.
type Key struct {
	// Path is the key as given, e.g. "classes.report.rate".
	Path string
	// Value is the scenario's own value; Int says the file writes an integer.
	Value float64
	Int   bool
	// Line and Col locate the value in the file (1-based); for a
	// calibrated rate, the load_factor key the value is written over.
	Line, Col int
	// LoadFactor, when not 0, says the key is the rate of a class whose
	// rate the run calibrates (the file writes load_factor, no rate):
	// each value is written as "rate: V" in place of "load_factor: …",
	// and Value is 0 until a calibration gives today's rate (see
	// Options.Calibrate).
	LoadFactor float64
	node       *yaml.Node
	// keyNode is load_factor's key node, for a calibrated rate.
	keyNode *yaml.Node
}

// Calibrated says the key is a calibrated class's rate (Key.LoadFactor).
func (k Key) Calibrated() bool { return k.LoadFactor != 0 }

// Load reads a scenario file for editing. It does not validate it: call
// Scenario for that.
func Load(file string) (*Source, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", scenario.ErrInvalid, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		// Parse reports the problem with its position.
		if _, perr := scenario.Parse(data, file); perr != nil {
			return nil, perr
		}
		return nil, fmt.Errorf("%w: %s: %v", scenario.ErrInvalid, file, err)
	}
	return &Source{File: file, data: data, root: doc.Content[0]}, nil
}

// Lookup finds the numeric key at path: mapping keys by name, list items by
// their name (the "name" key of each item) or by 0-based index, e.g.
// "classes.report.rate", "configurations.isolated.heavy.limiter.max_queue",
// "classes.0.rate". A key the file does not write, or whose value is not a
// plain number, is an error matching ErrBadInput.
func (s *Source) Lookup(path string) (Key, error) {
	if path == "" {
		return Key{}, badf("--vary: empty key")
	}
	n := s.root
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		at := strings.Join(segs[:i], ".")
		if at == "" {
			at = "the top level"
		}
		for n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			var keys []string
			for j := 0; j+1 < len(n.Content); j += 2 {
				keys = append(keys, n.Content[j].Value)
				if n.Content[j].Value == seg {
					next = n.Content[j+1]
				}
			}
			if next == nil && seg == "rate" && i == len(segs)-1 && len(segs) == 3 && segs[0] == "classes" {
				return s.calibratedRate(path, n)
			}
			if next == nil {
				return Key{}, badf("--vary %s: %s:%d:%d: %s has no key %q (it has %s); a key left to its default must be written in the file to be swept",
					path, s.File, n.Line, n.Column, at, seg, strings.Join(keys, ", "))
			}
		case yaml.SequenceNode:
			var names []string
			for _, item := range n.Content {
				if name := itemName(item); name != "" {
					names = append(names, name)
					if name == seg {
						next = item
					}
				}
			}
			if next == nil {
				if ix, err := strconv.Atoi(seg); err == nil && ix >= 0 && ix < len(n.Content) {
					next = n.Content[ix]
				}
			}
			if next == nil {
				return Key{}, badf("--vary %s: %s:%d:%d: %s is a list with no item named %q (names: %s; or an index 0..%d)",
					path, s.File, n.Line, n.Column, at, seg, strings.Join(names, ", "), len(n.Content)-1)
			}
		default:
			return Key{}, badf("--vary %s: %s:%d:%d: %s is a value, not a mapping or list: it has no %q", path, s.File, n.Line, n.Column, at, seg)
		}
		n = next
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode || n.Style != 0 || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return Key{}, badf("--vary %s: %s:%d:%d: not a numeric key (its value is %s)", path, s.File, n.Line, n.Column, describe(n))
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return Key{}, badf("--vary %s: %s:%d:%d: not a finite number: %q", path, s.File, n.Line, n.Column, n.Value)
	}
	if _, err := s.offset(n); err != nil {
		return Key{}, badf("--vary %s: %w", path, err)
	}
	integer := n.ShortTag() == "!!int"
	// A float field written as a whole number ("rate: 4") sweeps fractions.
	if sc, err := s.Scenario(nil); err == nil {
		if k, ok := goKind(sc, path); ok {
			integer = k >= reflect.Int && k <= reflect.Uint64
		}
	}
	return Key{Path: path, Value: v, Int: integer, Line: n.Line, Col: n.Column, node: n}, nil
}

// Where returns "file:line:col" of the value at path, a path of mapping
// keys alone (e.g. "assertions.headroom.key"), or the file's name when the
// file does not write it.
func (s *Source) Where(path string) string {
	n := s.root
	for _, seg := range strings.Split(path, ".") {
		for n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		var next *yaml.Node
		if n.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == seg {
					next = n.Content[j+1]
				}
			}
		}
		if next == nil {
			return s.File
		}
		n = next
	}
	return fmt.Sprintf("%s:%d:%d", s.File, n.Line, n.Column)
}

// calibratedRate returns the rate key of class mapping n, which writes no
// rate: it must write load_factor (the run calibrates its rate), which each
// value replaces, and no calibrate (only with load_factor).
func (s *Source) calibratedRate(path string, n *yaml.Node) (Key, error) {
	var key, val, cal *yaml.Node
	for j := 0; j+1 < len(n.Content); j += 2 {
		switch n.Content[j].Value {
		case "load_factor":
			key, val = n.Content[j], n.Content[j+1]
		case "calibrate":
			cal = n.Content[j]
		}
	}
	if key == nil {
		return Key{}, badf("--vary %s: %s:%d:%d: the class writes neither rate nor load_factor; write its rate in the file to sweep it", path, s.File, n.Line, n.Column)
	}
	if cal != nil {
		return Key{}, badf("--vary %s: %s:%d:%d: the class's rate is calibrated (load_factor) for a set time (calibrate): remove calibrate to sweep a fixed rate in place of the calibration", path, s.File, cal.Line, cal.Column)
	}
	if val.Kind != yaml.ScalarNode || val.Style != 0 || (val.ShortTag() != "!!int" && val.ShortTag() != "!!float") {
		return Key{}, badf("--vary %s: %s:%d:%d: load_factor is not a number (its value is %s)", path, s.File, val.Line, val.Column, describe(val))
	}
	lf, err := strconv.ParseFloat(strings.ReplaceAll(val.Value, "_", ""), 64)
	if err != nil || !(lf > 0) || math.IsInf(lf, 0) {
		return Key{}, badf("--vary %s: %s:%d:%d: load_factor %q: want a number above 0", path, s.File, val.Line, val.Column, val.Value)
	}
	if _, _, err := s.span(key, val); err != nil {
		return Key{}, badf("--vary %s: %w", path, err)
	}
	return Key{Path: path, LoadFactor: lf, Line: key.Line, Col: key.Column, node: val, keyNode: key}, nil
}

// span returns the byte offsets in the file of "key: value" from key's
// text to the end of value's, both plain on one line.
func (s *Source) span(key, val *yaml.Node) (int, int, error) {
	ko, err := s.offset(key)
	if err != nil {
		return 0, 0, err
	}
	vo, err := s.offset(val)
	if err != nil {
		return 0, 0, err
	}
	if key.Line != val.Line || vo < ko {
		return 0, 0, fmt.Errorf("%s:%d:%d: %s and its value are not on one line", s.File, key.Line, key.Column, key.Value)
	}
	return ko, vo + len(val.Value), nil
}

func itemName(item *yaml.Node) string {
	if item.Kind != yaml.MappingNode {
		return ""
	}
	for j := 0; j+1 < len(item.Content); j += 2 {
		if item.Content[j].Value == "name" && item.Content[j+1].Kind == yaml.ScalarNode {
			return item.Content[j+1].Value
		}
	}
	return ""
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Style != 0 {
		return fmt.Sprintf("the quoted string %q", n.Value)
	}
	return fmt.Sprintf("%q (%s)", n.Value, strings.TrimPrefix(n.ShortTag(), "!!"))
}

// offset returns the byte offset of scalar n's text in the file, checking
// that the text there is its value (a plain scalar on one line).
func (s *Source) offset(n *yaml.Node) (int, error) {
	off := 0
	for range n.Line - 1 {
		i := bytes.IndexByte(s.data[off:], '\n')
		if i < 0 {
			return 0, fmt.Errorf("%s:%d:%d: value not found in the file", s.File, n.Line, n.Column)
		}
		off += i + 1
	}
	line := s.data[off:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	col := 0
	for i := range string(line) { // columns count characters
		if col == n.Column-1 {
			off += i
			if !bytes.HasPrefix(line[i:], []byte(n.Value)) {
				break
			}
			return off, nil
		}
		col++
	}
	return 0, fmt.Errorf("%s:%d:%d: value %q is not written as a plain number on its line", s.File, n.Line, n.Column, n.Value)
}

// Format writes v as k's file would: an integer key rounded.
func (k Key) Format(v float64) string {
	if k.Int {
		return strconv.FormatInt(int64(math.Round(v)), 10)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Scenario returns the scenario with each key set to its value, decoded and
// validated by scenario.Parse: a value outside the key's bounds is the
// scenario's own problem (file:line:col, field), an *scenario.Error.
func (s *Source) Scenario(set []Setting) (*scenario.Scenario, error) {
	type edit struct {
		off  int
		old  int
		text string
	}
	var edits []edit
	for _, st := range set {
		if st.Key.Calibrated() {
			from, to, err := s.span(st.Key.keyNode, st.Key.node)
			if err != nil {
				return nil, badf("--vary %s: %w", st.Key.Path, err)
			}
			edits = append(edits, edit{from, to - from, "rate: " + st.Key.Format(st.Value)})
			continue
		}
		off, err := s.offset(st.Key.node)
		if err != nil {
			return nil, badf("--vary %s: %w", st.Key.Path, err)
		}
		edits = append(edits, edit{off, len(st.Key.node.Value), st.Key.Format(st.Value)})
	}
	slices.SortFunc(edits, func(a, b edit) int { return b.off - a.off })
	data := slices.Clone(s.data)
	for i, e := range edits {
		if i > 0 && e.off+e.old > edits[i-1].off {
			return nil, badf("--vary: two keys set the same place in the file")
		}
		data = slices.Concat(data[:e.off], []byte(e.text), data[e.off+e.old:])
	}
	return scenario.Parse(data, s.File)
}

// Setting is one key set to one value.
type Setting struct {
	Key   Key
	Value float64
}

// goKind returns the kind of the Go field the key path decodes into, by
// the yaml tags of scenario.Scenario (list items by their Name or index);
// ok false when the path cannot be followed (a map, a custom decoder).
func goKind(sc *scenario.Scenario, path string) (reflect.Kind, bool) {
	v := reflect.ValueOf(sc).Elem()
	for _, seg := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return 0, false
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Struct:
			f, ok := yamlField(v, seg)
			if !ok {
				return 0, false
			}
			v = f
		case reflect.Slice:
			next := reflect.Value{}
			for i := range v.Len() {
				e := reflect.Indirect(v.Index(i))
				if e.Kind() == reflect.Struct {
					if n := e.FieldByName("Name"); n.IsValid() && n.Kind() == reflect.String && n.String() == seg {
						next = e
						break
					}
				}
			}
			if !next.IsValid() {
				ix, err := strconv.Atoi(seg)
				if err != nil || ix < 0 || ix >= v.Len() {
					return 0, false
				}
				next = v.Index(ix)
			}
			v = next
		default:
			return 0, false
		}
	}
	return v.Kind(), true
}

// yamlField returns the field of struct v that the yaml key name decodes
// into, looking into inlined structs.
func yamlField(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if fv, ok := yamlField(reflect.Indirect(v.Field(i)), name); ok {
				return fv, true
			}
			continue
		}
		if tag == "" && f.IsExported() {
			tag = strings.ToLower(f.Name)
		}
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}
