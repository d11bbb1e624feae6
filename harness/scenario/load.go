package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/footprint"
)

// Load reads the scenario file at path and returns it with defaults applied
// and validated, as Parse does. An unreadable file is reported as an *Error
// whose Err is the read error. Every error Load returns for bad input is an
// *Error matching ErrInvalid.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		var pe *os.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, &Error{File: path, Problems: []Problem{{File: path, Msg: "read file: " + msg}}, Err: err}
	}
	return Parse(data, path)
}

// Parse decodes a scenario from data, strictly: unknown and duplicate keys are
// errors. It then fills in the defaults for keys left out or set to null and
// validates the result. file names the source in messages and is stored in
// Scenario.File.
//
// On bad input Parse returns a nil Scenario and an *Error (matching
// ErrInvalid) listing every problem found, each with its line, column and
// field path, sorted by line. Malformed YAML stops at the first syntax error.
func Parse(data []byte, file string) (*Scenario, error) {
	fail := func(ps ...Problem) error {
		for i := range ps {
			if ps[i].File == "" {
				ps[i].File = file
			}
		}
		return &Error{File: file, Problems: sortProblems(ps)}
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail(Problem{Msg: "file is empty: a scenario needs at least name, classes and configurations"})
		}
		return nil, fail(syntaxProblem(err))
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, fail(Problem{Line: extra.Line, Col: extra.Column, Msg: "a second YAML document: a scenario file holds one"})
	case !errors.Is(err, io.EOF):
		return nil, fail(syntaxProblem(err))
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, fail(Problem{Msg: "file is empty: a scenario needs at least name, classes and configurations"})
	}
	if root.Kind != yaml.MappingNode {
		return nil, fail(Problem{Line: root.Line, Col: root.Column, Msg: "must be a mapping of keys such as name, tenants, classes, configurations; got " + describe(root)})
	}

	s := &Scenario{File: file, ix: newIndex(root)}
	if s.ix.truncated {
		return nil, fail(Problem{Msg: fmt.Sprintf("more than %d keys and list items, or nesting deeper than %d, counting what aliases repeat: too large for a scenario", maxEntries, maxDepth)})
	}
	sdec := yaml.NewDecoder(bytes.NewReader(data))
	sdec.KnownFields(true)
	var problems []Problem
	bad := map[string]bool{} // fields whose value did not decode
	if err := sdec.Decode(s); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, fail(syntaxProblem(err))
		}
		for _, msg := range te.Errors {
			p, badField, ok := s.ix.decodeProblem(msg)
			problems = append(problems, p)
			if ok {
				bad[badField] = true
			}
		}
	}
	for _, p := range s.ix.fractions() {
		if !underAny(p.Field, bad) {
			problems = append(problems, p)
			bad[p.Field] = true
		}
	}
	s.applyDefaults()
	for _, p := range s.problems() {
		if !underAny(p.Field, bad) {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, fail(problems...)
	}
	return s, nil
}

// underAny reports whether field is one of bad or inside one of them.
func underAny(field string, bad map[string]bool) bool {
	for b := range bad {
		if b == "" || field == b || strings.HasPrefix(field, b+".") || strings.HasPrefix(field, b+"[") {
			return true
		}
	}
	return false
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserErrors are the messages of yaml.v3's parser (as opposed to its
// scanner). For these it reports a 0-based line: the line where the enclosing
// flow or block starts, or else where the problem is.
var parserErrors = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxProblem turns a YAML syntax error into a Problem with its line.
func syntaxProblem(err error) Problem {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if parserErrors[m[2]] {
			line++
		}
		return Problem{Line: line, Msg: "malformed YAML: " + m[2]}
	}
	return Problem{Msg: "malformed YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// entry is one key or list item of the file.
type entry struct {
	path  string
	key   *yaml.Node // nil for list items
	value *yaml.Node
}

// index maps field paths ("classes[1].rate") to where they are in the file.
type index struct {
	byPath map[string]*entry // first occurrence of each path
	all    []*entry          // every key and list item, in file order
	// truncated is set when the walk stopped at maxDepth or maxEntries.
	truncated bool
}

func newIndex(root *yaml.Node) *index {
	ix := &index{byPath: map[string]*entry{}}
	ix.walk(root, "", 0)
	return ix
}

// maxDepth and maxEntries bound the walk through aliases, which could
// otherwise expand exponentially; the schema is 6 levels deep and a real file
// has a few hundred entries.
const (
	maxDepth   = 32
	maxEntries = 100_000
)

func (ix *index) walk(n *yaml.Node, path string, depth int) {
	if depth > maxDepth || len(ix.all) >= maxEntries {
		ix.truncated = true
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.ShortTag() == "!!merge" {
				ix.walkMerge(v, path, depth+1)
				continue
			}
			p := joinPath(path, k.Value)
			ix.add(&entry{path: p, key: k, value: v})
			ix.walk(v, p, depth+1)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			ix.add(&entry{path: p, value: item})
			ix.walk(item, p, depth+1)
		}
	}
}

// walkMerge indexes the mappings merged in by a "<<" key, so that their keys
// count as present.
func (ix *index) walkMerge(v *yaml.Node, path string, depth int) {
	if v.Kind == yaml.SequenceNode {
		for _, m := range v.Content {
			ix.walk(m, path, depth)
		}
		return
	}
	ix.walk(v, path, depth)
}

func (ix *index) add(e *entry) {
	ix.all = append(ix.all, e)
	if _, ok := ix.byPath[e.path]; !ok {
		ix.byPath[e.path] = e
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// has reports whether path is in the file with a non-null value.
func (ix *index) has(path string) bool {
	if ix == nil {
		return false
	}
	e, ok := ix.byPath[path]
	if !ok {
		return false
	}
	v := e.value
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	return !(v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null")
}

// pos returns the line and column of path's key (or list item); for a path
// not in the file, those of its nearest ancestor that is; 0, 0 if none is.
func (ix *index) pos(path string) (line, col int) {
	if ix == nil {
		return 0, 0
	}
	for p := path; p != ""; p = parentPath(p) {
		if e, ok := ix.byPath[p]; ok {
			n := e.value
			if e.key != nil {
				n = e.key
			}
			return n.Line, n.Column
		}
	}
	return 0, 0
}

// parentPath returns path without its last key or index.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

var (
	decodeLine   = regexp.MustCompile(`^line (\d+): (?:column (\d+): )?(.*)$`)
	notFound     = regexp.MustCompile(`^field (.*) not found in type \S+$`)
	alreadyDef   = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
	cannotDecode = regexp.MustCompile("^cannot unmarshal (\\S+)(?: `(.*)`)? into .+$")
)

// decodeProblem turns one of yaml.v3's type error messages into a Problem
// naming the field. It also returns the field whose value could not be
// decoded (and true), so that validation does not report it again; "" means
// the whole file.
func (ix *index) decodeProblem(msg string) (p Problem, bad string, ok bool) {
	m := decodeLine.FindStringSubmatch(msg)
	if m == nil {
		return Problem{Msg: msg}, "", false
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	rest := m[3]
	at := func(e *entry, msg string) Problem {
		n := e.value
		if e.key != nil {
			n = e.key
		}
		return Problem{Line: n.Line, Col: n.Column, Field: e.path, Msg: msg}
	}

	if col > 0 { // our own UnmarshalYAML errors carry the value's column
		if e := ix.deepest(func(e *entry) bool { return e.value.Line == line && e.value.Column == col }); e != nil {
			return at(e, rest), e.path, true
		}
	}
	if mm := notFound.FindStringSubmatch(rest); mm != nil {
		if e := ix.deepest(func(e *entry) bool { return e.key != nil && e.key.Line == line && e.key.Value == mm[1] }); e != nil {
			return at(e, unknownKeyMsg(e.path)), e.path, true
		}
	}
	if mm := alreadyDef.FindStringSubmatch(rest); mm != nil {
		// yaml.v3 skips the whole mapping holding a duplicate key.
		if e := ix.deepest(func(e *entry) bool { return e.key != nil && e.key.Line == line && e.key.Value == mm[1] }); e != nil {
			return at(e, fmt.Sprintf("duplicate key (first at line %s)", mm[2])), parentPath(e.path), true
		}
	}
	if mm := cannotDecode.FindStringSubmatch(rest); mm != nil {
		tag, shown := mm[1], strings.TrimSuffix(mm[2], "...")
		e := ix.deepest(func(e *entry) bool {
			v := e.value
			if v.Line != line {
				return false
			}
			switch tag {
			case "!!map":
				return v.Kind == yaml.MappingNode
			case "!!seq":
				return v.Kind == yaml.SequenceNode
			}
			return v.Kind == yaml.ScalarNode && strings.HasPrefix(v.Value, shown)
		})
		if e != nil {
			t := typeAt(e.path)
			if want := kindName(t); want != "" {
				msg := fmt.Sprintf("must be %s, got %s", want, describe(e.value))
				if t == reflect.TypeFor[Limiter]() && e.value.Kind == yaml.ScalarNode {
					msg += "; to run without a limiter write limiter: {enabled: false}"
				}
				return at(e, msg), e.path, true
			}
			return at(e, rest), e.path, true
		}
	}
	return Problem{Line: line, Col: col, Msg: rest}, "", false
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// fractions returns a problem for each integer key written as a number
// that is not a whole one: yaml.v3 decodes 10.7 into an int as 10 and
// -.inf as the lowest int64, silently. Whole numbers written as floats
// (1e2) are left to decode. Types that decode themselves are skipped.
func (ix *index) fractions() []Problem {
	var out []Problem
	for _, e := range ix.all {
		v := e.value
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!float" {
			continue
		}
		t := typeAt(e.path)
		if t == nil || reflect.PointerTo(t).Implements(unmarshalerType) {
			continue
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			continue
		}
		var f float64
		if err := v.Decode(&f); err == nil && !math.IsInf(f, 0) && f == math.Trunc(f) {
			continue
		}
		n := v
		if e.key != nil {
			n = e.key
		}
		out = append(out, Problem{Line: n.Line, Col: n.Column, Field: e.path, Msg: "must be an integer, got " + describe(v)})
	}
	return out
}

// deepest returns the entry with the longest path among those matching ok.
func (ix *index) deepest(ok func(*entry) bool) *entry {
	var best *entry
	for _, e := range ix.all {
		if ok(e) && (best == nil || len(e.path) > len(best.path)) {
			best = e
		}
	}
	return best
}

// describe says what a node holds, for "got ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(v)
	}
	return v
}

// kindName names what a value of type t is written as, for "must be ...".
func kindName(t reflect.Type) string {
	if t == nil {
		return ""
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return ""
}

var pathIndex = regexp.MustCompile(`^\[\d+\]`)

// typeAt returns the Go type of the field at path in a Scenario, or nil.
func typeAt(path string) reflect.Type {
	t := reflect.TypeFor[Scenario]()
	for path != "" {
		for t.Kind() == reflect.Pointer { // optional sections: service, classes[].http, http.retry
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map: // keys are leaves in this schema and may hold dots
			return t.Elem()
		case reflect.Slice:
			loc := pathIndex.FindStringIndex(path)
			if loc == nil {
				return nil
			}
			t, path = t.Elem(), strings.TrimPrefix(path[loc[1]:], ".")
		case reflect.Struct:
			name, rest, _ := strings.Cut(path, ".")
			if i := strings.IndexByte(name, '['); i >= 0 {
				name, rest = name[:i], path[i:]
			}
			f, ok := fieldByYAMLName(t, name)
			if !ok {
				return nil
			}
			t, path = f.Type, rest
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// yamlName returns the key a struct field is written as, or "" for a field
// that is not in the file.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

func fieldByYAMLName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// unknownKeyMsg says that the last key of path is unknown and suggests the
// closest known key, or lists them.
func unknownKeyMsg(path string) string {
	if msg, ok := removedKeys[path]; ok {
		return msg
	}
	key := path[max(strings.LastIndexAny(path, ".]")+1, 0):]
	parent := typeAt(parentPath(path))
	if parent == nil || parent.Kind() != reflect.Struct {
		return fmt.Sprintf("unknown key %q", key)
	}
	var known []string
	for i := range parent.NumField() {
		if n := yamlName(parent.Field(i)); n != "" {
			known = append(known, n)
		}
	}
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown key %q; did you mean %q?", key, best)
	}
	slices.Sort(known)
	return fmt.Sprintf("unknown key %q; known keys: %s", key, strings.Join(known, ", "))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fill sets each field of the struct dst that the file leaves out (has
// reports false for its path) to the same field of def, recursing into
// structs the file does give.
func fill(dst, def reflect.Value, path string, has func(string) bool) {
	t := dst.Type()
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		p := joinPath(path, name)
		switch {
		case !has(p):
			dst.Field(i).Set(def.Field(i))
		case t.Field(i).Type.Kind() == reflect.Struct:
			fill(dst.Field(i), def.Field(i), p, has)
		}
	}
}

// applyDefaults fills in the defaults for every key the file leaves out.
func (s *Scenario) applyDefaults() {
	has := s.ix.has
	def := Scenario{
		Seed:    DefaultSeed,
		Backend: Backend{Kind: DefaultBackendKind, Topology: DefaultTopology},
		Tenants: Tenants{Count: DefaultTenantCount, DominantShare: DefaultDominantShare,
			Distribution: DefaultDistribution, Exponent: DefaultExponent},
		Data: Data{Orders: DefaultOrders, Days: DefaultDays, Customers: DefaultCustomers, Schema: footprint.DefaultSchema},
		Load: LoadSpec{Model: DefaultLoadModel, Users: DefaultUsers, ThinkTime: DefaultThinkTime,
			RetryQueries: DefaultRetryQueries, MaxRetries: DefaultMaxRetries},
		Phases: Phases{Warmup: DefaultWarmup, Solo: DefaultSolo, Run: DefaultRun, Drain: DefaultDrain},
		Assertions: Assertions{
			QuietP99:        QuietP99{Factor: DefaultQuietP99Factor, Slack: DefaultQuietP99Slack, MinSamples: DefaultQuietP99MinSamples},
			QuietP99AB:      QuietP99AB{Block: DefaultABBlock, Settle: DefaultABSettle},
			NoisyRejections: DefaultNoisyRejections,
			AllowedErrors:   DefaultAllowedErrors(),
			CleanAfter:      DefaultCleanAfter,
		},
	}
	if s.Backend.Kind == BackendExternal && s.Backend.ReplicaDSN != "" {
		def.Backend.Topology = backend.TopologyReplica
	}
	fill(reflect.ValueOf(s).Elem(), reflect.ValueOf(def), "", has)
	s.applyTimelineDefaults()
	s.applyShardDefaults()
	s.applyWriterDefaults()
	s.applyReplayDefaults()
	s.applyServiceDefaults()
	s.applyCitusDefaults()
	if s.ix.has("assertions.skew") && !s.ix.has("assertions.skew.max") {
		s.Assertions.Skew.Max = DefaultMaxSkew
	}

	for i := range s.Classes {
		c := &s.Classes[i]
		d := Class{Arrival: DefaultArrival, Senders: DefaultSenders}
		if c.Query == QueryExport {
			d.Batch = DefaultBatch
		}
		if c.LoadFactor != 0 {
			d.Calibrate = DefaultCalibrate
		}
		if ic := IsolationClass(c.Name); ic == IsolationInteractive || ic == IsolationHeavy {
			d.IsolationClass = ic
		}
		fill(reflect.ValueOf(c).Elem(), reflect.ValueOf(d), fmt.Sprintf("classes[%d]", i), has)
	}
	for i := range s.Configurations {
		c := &s.Configurations[i]
		d := Configuration{Expect: DefaultExpect}
		switch c.Mode {
		case ModeShared:
			d.Shared = DefaultSharedPool()
		case ModeIsolated:
			d.Interactive, d.Heavy = DefaultInteractivePool(), DefaultHeavyPool()
		}
		fill(reflect.ValueOf(c).Elem(), reflect.ValueOf(d), fmt.Sprintf("configurations[%d]", i), has)
		if a := c.App; a != nil {
			p := fmt.Sprintf("configurations[%d].app.", i)
			if a.Instances == 0 && !has(p+"instances") {
				a.Instances = 1
			}
			if a.Limiter == "" && !has(p+"limiter") {
				a.Limiter = AppPerInstance
			}
		}
	}
}
