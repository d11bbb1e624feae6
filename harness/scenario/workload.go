package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/workload/pgscript"
)

// KeyType is the SQL type of the tenant keys.
type KeyType string

// Key types.
const (
	KeyBigint KeyType = "bigint"
	KeyText   KeyType = "text"
	KeyUUID   KeyType = "uuid"
)

// TenantKeys maps noisysim's tenant n (1..tenants.count, 1 the dominant)
// to the key the workload uses. At most one of Template and List.
type TenantKeys struct {
	// Type is bigint (default), text or uuid: the type of the key column
	// of noisysim_tenants, and how :tenant binds.
	Type KeyType `yaml:"type"`
	// Template makes tenant n's key by replacing "{n}" with n, e.g.
	// "acme-{n}"; "{n:06}" pads n with zeros to 6 digits. Default "{n}"
	// for bigint and text; for uuid, "00000000-0000-4000-8000-{n:012}".
	Template string `yaml:"template"`
	// List gives every tenant's key, tenant 1's first; tenants.count
	// entries, unique.
	List []string `yaml:"list"`
	// Query reads the keys from the database (data.existing only): its
	// first column is the key, its first tenants.count rows in its order
	// the tenants, the first the dominant one; each further column, named
	// in Counts in order, is a row count of the tenant (:rows_<name>).
	// Run on the primary as the DSN's user, in a read-only transaction.
	Query string `yaml:"query"`
	// Counts names the query's columns after the key; integers.
	Counts []string `yaml:"counts"`
}

// DefaultUUIDTemplate is TenantKeys.Template's default for type uuid.
const DefaultUUIDTemplate = "00000000-0000-4000-8000-{n:012}"

var keyPlaceholder = regexp.MustCompile(`\{n(?::0(\d+))?\}`)

// Key returns tenant n's key (n from 1); with Query, n itself (the keys
// are known once the query ran).
func (k TenantKeys) Key(n int) string {
	if k.Query != "" {
		return strconv.Itoa(n)
	}
	if len(k.List) > 0 {
		if n >= 1 && n <= len(k.List) {
			return k.List[n-1]
		}
		return ""
	}
	t := k.Template
	if t == "" {
		t = "{n}"
		if k.Type == KeyUUID {
			t = DefaultUUIDTemplate
		}
	}
	return keyPlaceholder.ReplaceAllStringFunc(t, func(m string) string {
		sub := keyPlaceholder.FindStringSubmatch(m)
		if sub[1] == "" {
			return strconv.Itoa(n)
		}
		w, _ := strconv.Atoi(sub[1])
		return fmt.Sprintf("%0*d", w, n)
	})
}

// Default reports whether k is the default: bigint keys 1..N.
func (k TenantKeys) Default() bool {
	return (k.Type == "" || k.Type == KeyBigint) && (k.Template == "" || k.Template == "{n}") && len(k.List) == 0 && k.Query == ""
}

// SQLType returns the key column's SQL type.
func (k TenantKeys) SQLType() string {
	if k.Type == "" {
		return string(KeyBigint)
	}
	return string(k.Type)
}

// KeyList returns the key of every tenant of t, tenant 1's first.
func (t Tenants) KeyList() []string {
	out := make([]string, t.Count)
	for i := range out {
		out[i] = t.Keys.Key(i + 1)
	}
	return out
}

// SetupTenantsTable is the table noisysim creates in the run's schema
// before data.setup runs: one row per tenant with columns n (1..N, 1 the
// dominant), key (tenants.keys.type), share (of traffic and rows),
// dominant, and rows_<name> bigint per data.rows entry.
const SetupTenantsTable = "noisysim_tenants"

// Builtins returns the script variables noisysim binds, in the order
// pgscript.Options.Builtins takes them: tenant, tenant_n, scale, then
// rows_<name> for each data.rows name in sorted order (with the built-in
// data set, rows_orders: the tenant's orders rows).
func (s *Scenario) Builtins() []string {
	out := []string{"tenant", "tenant_n", "scale"}
	if s.Data.Builtin() {
		return append(out, "rows_orders")
	}
	for _, n := range s.RowNames() {
		out = append(out, "rows_"+n)
	}
	return out
}

// RowNames returns the names of the tenants' row counts, sorted:
// data.rows' names, or with data.existing tenants.keys.counts.
func (s *Scenario) RowNames() []string {
	var names []string
	if s.Data.IsExisting() {
		names = slices.Clone(s.Tenants.Keys.Counts)
	} else {
		for n := range s.Data.Rows {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Path resolves a path of the scenario file (a script, a setup file)
// against the file's directory; absolute paths stay as they are.
func (s *Scenario) Path(p string) string {
	if filepath.IsAbs(p) || s.File == "" {
		return p
	}
	return filepath.Join(filepath.Dir(s.File), p)
}

var (
	rowName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	uuidRe  = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// keys checks tenants.keys.
func (c *checker) keys(t *Tenants, d *Data) {
	k := &t.Keys
	if k.Type != "" && !oneOf(c, "tenants.keys.type", "key type", k.Type, KeyBigint, KeyText, KeyUUID) {
		return
	}
	given := 0
	for _, set := range []bool{k.Template != "", len(k.List) > 0, k.Query != ""} {
		if set {
			given++
		}
	}
	if given > 1 {
		c.add("tenants.keys", "give one of template, list and query")
		return
	}
	if k.Query != "" && !d.IsExisting() {
		c.add("tenants.keys.query", "only with data.existing: the keys of tables already in the database")
		return
	}
	if len(k.Counts) > 0 && k.Query == "" {
		c.add("tenants.keys.counts", "only with tenants.keys.query: the names of its columns after the key")
		return
	}
	seenCount := map[string]bool{}
	for i, n := range k.Counts {
		f := fmt.Sprintf("tenants.keys.counts[%d]", i)
		if !rowName.MatchString(n) || len(n) > 58 {
			c.add(f, "row count names are lower-case letters, digits and '_', starting with a letter, at most 58 bytes; got %q", n)
		}
		if seenCount[n] {
			c.add(f, "duplicate count name %q", n)
		}
		seenCount[n] = true
	}
	if k.Query != "" {
		return // the keys are read at run time
	}
	if k.Template != "" && !keyPlaceholder.MatchString(k.Template) {
		c.add("tenants.keys.template", "must contain {n} (or {n:06}, zero-padded), which noisysim replaces with the tenant's number; got %q", k.Template)
		return
	}
	if len(k.List) > 0 && t.Count >= 2 && len(k.List) != t.Count {
		c.add("tenants.keys.list", "has %d keys; tenants.count is %d: give one key per tenant, the dominant tenant's first", len(k.List), t.Count)
		return
	}
	if !k.Default() && d.Builtin() {
		c.add("tenants.keys", "needs data.setup or data.existing: the built-in orders data set numbers its tenants 1..tenants.count")
		return
	}
	if t.Count < 2 || t.Count > 1_000_000 {
		return
	}
	field := "tenants.keys.template"
	if len(k.List) > 0 {
		field = "tenants.keys.list"
	}
	seen := map[string]int{}
	for n := 1; n <= t.Count; n++ {
		key := k.Key(n)
		f := field
		if len(k.List) > 0 {
			f = fmt.Sprintf("tenants.keys.list[%d]", n-1)
		}
		if prev, dup := seen[key]; dup {
			c.add(f, "tenants %d and %d have the same key %q: keys must be unique", prev, n, key)
			return
		}
		seen[key] = n
		if err := CheckKey(k.Type, key); err != nil {
			c.add(f, "tenant %d's %v", n, err)
			return
		}
	}
}

// CheckKey returns an error when key is not a value of type t ("" is
// bigint): a whole number for bigint, 8-4-4-4-12 hex digits for uuid, not
// empty for text.
func CheckKey(t KeyType, key string) error {
	switch t {
	case "", KeyBigint:
		if _, err := strconv.ParseInt(key, 10, 64); err != nil {
			return fmt.Errorf("key %q is not a bigint; use keys.type text", key)
		}
	case KeyUUID:
		if !uuidRe.MatchString(key) {
			return fmt.Errorf("key %q is not a uuid (8-4-4-4-12 hex digits)", key)
		}
	case KeyText:
		if key == "" {
			return fmt.Errorf("key is empty")
		}
	}
	return nil
}

// setup checks data.setup and data.rows; the built-in data set's keys
// apply only without setup.
func (c *checker) setup(s *Scenario) {
	d := &s.Data
	c.directory(s)
	if other := s.otherRunner(); other != "" && d.IsExisting() {
		c.add("data.existing", "only for the noisy-neighbour scenario; a %s scenario loads its data set on every node: give data.setup and data.directory", other)
		return
	}
	if d.Builtin() {
		if len(d.Rows) > 0 {
			c.add("data.rows", "only with data.setup: the built-in data set sizes itself with data.orders")
		}
		return
	}
	if d.IsExisting() {
		if s.Citus() {
			c.add("data.existing", "not on topology citus: give data.setup and data.citus.tables, which noisysim distributes (an existing Citus cluster's own distributed tables are not supported)")
		}
		c.existing(s)
		return
	}
	for _, f := range []string{"orders", "days", "customers"} {
		if c.present("data." + f) {
			c.add("data."+f, "only for the built-in orders data set, not with data.setup: size your rows with data.rows")
		}
	}
	for i, f := range d.Setup {
		field := fmt.Sprintf("data.setup[%d]", i)
		if f == "" {
			c.add(field, "empty path")
			continue
		}
		if _, err := os.Stat(s.Path(f)); err != nil {
			c.add(field, "setup file %s: %v", s.Path(f), errors.Unwrap(err))
		}
	}
	for _, n := range s.RowNames() {
		f := "data.rows." + n
		if !rowName.MatchString(n) || len(n) > 58 {
			c.add(f, "row count names are lower-case letters, digits and '_', starting with a letter, at most 58 bytes")
		}
		switch v := d.Rows[n]; {
		case s.Tenants.Count >= 2 && v < int64(s.Tenants.Count):
			c.add(f, "must be >= tenants.count (%d) so that every tenant has rows, got %d", s.Tenants.Count, v)
		case v > MaxOrders:
			c.add(f, "must be <= %d, got %d", MaxOrders, v)
		}
	}
}

// directory checks data.directory: the tables and tenant column of a
// data.setup on topology shards.
func (c *checker) directory(s *Scenario) {
	dd := &s.Data.Directory
	given := c.present("data.directory")
	switch {
	case given && (s.Backend.Topology != TopologyShards || len(s.Data.Setup) == 0):
		c.add("data.directory", "only with data.setup on topology shards: the tables the nodes split and move_tenant copies")
		return
	case !given && s.Backend.Topology == TopologyShards && len(s.Data.Setup) > 0:
		c.add("data.setup", "needs data.directory on topology shards: {tables: [...], column: ...}, the tables holding tenant rows and their tenant column")
		return
	case !given:
		return
	}
	if len(dd.Tables) == 0 {
		c.add("data.directory.tables", "required: the tables holding tenant rows, in the order a move copies them")
	}
	seen := map[string]bool{}
	for i, t := range dd.Tables {
		f := fmt.Sprintf("data.directory.tables[%d]", i)
		switch {
		case !identifier.MatchString(t):
			c.add(f, "must be a table name: letters, digits, '_' and '$', not starting with a digit, at most 63 bytes; got %q", t)
		case t == SetupTenantsTable:
			c.add(f, "%s is noisysim's, on every node; name your own tables", t)
		case seen[t]:
			c.add(f, "duplicate table %q", t)
		}
		seen[t] = true
	}
	if !identifier.MatchString(dd.Column) {
		c.add("data.directory.column", "required: the tenant column of every table (holding tenants.keys), a column name; got %q", dd.Column)
	}
}

// otherRunner names a scenario that loads its own data set on several
// nodes ("topology shards": the built-in data set, or data.setup split by
// data.directory); "" for the others. Topology citus runs a workload of the user's own
// (data.setup with data.citus.tables) but not data.existing, an HTTP
// target or a service: see sqlOnly.
func (s *Scenario) otherRunner() string {
	if s.Backend.Topology == TopologyShards {
		return "topology shards"
	}
	return ""
}

// sqlOnly names a scenario whose classes run SQL only, no HTTP target or
// service ("topology shards", "topology citus"); "" for the others.
func (s *Scenario) sqlOnly() string {
	if s.Citus() {
		return "topology citus"
	}
	return s.otherRunner()
}

// existing checks data.existing.
func (c *checker) existing(s *Scenario) {
	d := &s.Data
	if len(d.Setup) > 0 {
		c.add("data.existing", "not with data.setup: give one of them")
	}
	if len(d.Rows) > 0 {
		c.add("data.rows", "not with data.existing: row counts of existing tables come from tenants.keys.query (counts)")
	}
	for _, f := range []string{"orders", "days", "customers"} {
		if c.present("data." + f) {
			c.add("data."+f, "only for the built-in orders data set, not with data.existing")
		}
	}
	seen := map[string]bool{}
	for i, sch := range d.Existing.Schemas {
		f := fmt.Sprintf("data.existing.schemas[%d]", i)
		switch {
		case !identifier.MatchString(sch):
			c.add(f, "must be a schema name: letters, digits, '_' and '$', not starting with a digit, at most 63 bytes; got %q", sch)
		case sch == d.SchemaName():
			c.add(f, "is the run's own schema (data.schema), which noisysim creates and drops")
		case seen[sch]:
			c.add(f, "duplicate schema %q", sch)
		}
		seen[sch] = true
	}
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// program checks what class i runs (query, script or sql) and parses a
// script or statement.
func (c *checker) program(i int, cl *Class) {
	p := fmt.Sprintf("classes[%d]", i)
	given := 0
	for _, f := range []string{"query", "script", "sql", "http"} {
		if c.present(p + "." + f) {
			given++
		}
	}
	if given > 1 {
		c.add(p, "give one of query, script, sql and http")
		return
	}
	if cl.HTTP != nil {
		c.http(p, cl)
		return
	}
	if len(cl.Args) > 0 && cl.SQL == "" {
		c.add(p+".args", "only with sql")
	}
	opts := pgscript.Options{Builtins: c.s.Builtins()}
	switch {
	case cl.Script != "":
		path := c.s.Path(cl.Script)
		prog, err := pgscript.ParseFile(path, opts)
		if err != nil {
			c.scriptProblem(p+".script", err)
			return
		}
		cl.program = prog
	case cl.SQL != "":
		line, _ := c.s.ix.pos(p + ".sql")
		var argLines []int
		for j := range cl.Args {
			l, _ := c.s.ix.pos(fmt.Sprintf("%s.args[%d]", p, j))
			argLines = append(argLines, l)
		}
		prog, err := pgscript.ParseStatement(cl.SQL, cl.Args, c.s.File, line, argLines, opts)
		if err != nil {
			c.scriptProblem(p+".sql", err)
			return
		}
		if n := placeholders(cl.SQL); n != len(cl.Args) {
			c.add(p+".args", "the statement has $1..$%d; give one expression per placeholder, got %d", n, len(cl.Args))
			return
		}
		cl.program = prog
	default:
		if !oneOf(c, p+".query", "query", cl.Query, QueryLookup, QueryPage, QueryReport, QueryExport, QuerySleep) {
			c.ps[len(c.ps)-1].Msg += "; or give script (a pgbench script) or sql"
			return
		}
		if !c.s.Data.Builtin() {
			c.add(p+".query", "query %s reads the built-in orders data set, which data.setup or data.existing replaces: give script or sql", cl.Query)
			return
		}
		// A query kind is a script shipped with noisysim.
		batch := cl.Batch
		if cl.Query != QueryExport {
			batch = 0
		}
		prog, err := dataset.Script(dataset.Kind(cl.Query), opts.Builtins, dataset.ScriptParams{
			Customers: c.s.Data.Customers, Batch: batch, Sleep: cl.Sleep.Duration()})
		if err != nil {
			panic(fmt.Sprintf("shipped script %s: %v", cl.Query, err)) // a shipped script parses
		}
		cl.program = prog
	}
}

// scriptProblem records a script's *pgscript.Error at its own file:line:col.
func (c *checker) scriptProblem(field string, err error) {
	var se *pgscript.Error
	if errors.As(err, &se) && se.File != c.s.File {
		c.ps = append(c.ps, Problem{File: se.File, Line: se.Line, Col: se.Col, Field: field, Msg: se.Msg})
		return
	}
	if errors.As(err, &se) {
		line, col := se.Line, se.Col
		if line == 0 {
			line, col = c.s.ix.pos(field)
		}
		c.ps = append(c.ps, Problem{File: c.s.File, Line: line, Col: col, Field: field, Msg: se.Msg})
		return
	}
	c.add(field, "%v", err)
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// placeholders returns the highest $n of sql.
func placeholders(sql string) int {
	n := 0
	for _, m := range placeholder.FindAllStringSubmatch(sql, -1) {
		if v, err := strconv.Atoi(m[1]); err == nil {
			n = max(n, v)
		}
	}
	return n
}
