package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ownWorkload writes a scenario with data.setup and a script into a temp
// dir and returns the scenario's path.
func ownWorkload(t *testing.T, extra, script string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("setup.sql", "CREATE TABLE t (tenant text, id bigint);\n")
	write("q/lookup.sql", script)
	write("s.yaml", `name: own
tenants: {count: 5, keys: {type: text, template: "acme-{n}"}}
data: {setup: [setup.sql], rows: {items: 100}}
classes:
  - {name: interactive, script: q/lookup.sql, rate: 10}
  - {name: heavy, sql: "SELECT count(*) FROM t WHERE tenant = $1 AND id <= $2", args: [":tenant", "random(1, :rows_items)"], rate: 1}
configurations: [{name: isolated, mode: isolated}]
`+extra)
	return filepath.Join(dir, "s.yaml")
}

func TestOwnWorkload(t *testing.T) {
	path := ownWorkload(t, "", "\\set id random(1, :rows_items)\nSELECT * FROM t WHERE tenant = :tenant AND id = :id;\n")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Tenants.KeyList(); got[0] != "acme-1" || got[4] != "acme-5" {
		t.Errorf("keys %v", got)
	}
	if got := strings.Join(s.Builtins(), ","); got != "tenant,tenant_n,scale,rows_items" {
		t.Errorf("builtins %s", got)
	}
	for i := range s.Classes {
		if s.Classes[i].Program() == nil {
			t.Errorf("class %s: no parsed program", s.Classes[i].Name)
		}
	}
	if got := s.Classes[0].Program().Statements(); len(got) != 1 || got[0] != "SELECT * FROM t WHERE tenant = $1 AND id = $2" {
		t.Errorf("statements %q", got)
	}
}

func TestOwnWorkloadProblems(t *testing.T) {
	good := "SELECT 1;\n"
	for _, tc := range []struct {
		name, extra, script string
		want                []string // substrings, each with its place
	}{
		{"unsupported meta-command", "", "SELECT 1;\n\\shell ls\n",
			[]string{`q/lookup.sql:2:1: classes[0].script: meta-command \shell is not supported by noisysim`}},
		{"script syntax", "", "\\set x (1 + \n",
			[]string{`q/lookup.sql:1:12: classes[0].script: \set x: unexpected end of expression`}},
		{"unknown variable", "", "SELECT :rows_orders;\n",
			[]string{`q/lookup.sql:1:8: classes[0].script: unknown variable :rows_orders`}},
		{"key template", "tenants: {count: 5, keys: {template: \"acme\"}}\n", good,
			[]string{`s.yaml:7:28: tenants.keys.template: must contain {n}`}},
		{"key list length", "tenants: {count: 5, keys: {list: [a, b]}}\n", good,
			[]string{`tenants.keys.list: has 2 keys; tenants.count is 5`}},
		{"bigint keys", "tenants: {count: 5, keys: {template: \"t{n}\"}}\n", good,
			[]string{`tenants.keys.template: tenant 1's key "t1" is not a bigint`}},
		{"uuid keys", "tenants: {count: 5, keys: {type: uuid, list: [a, b, c, d, e]}}\n", good,
			[]string{`tenants.keys.list[0]: tenant 1's key "a" is not a uuid`}},
		{"duplicate keys", "tenants: {count: 3, keys: {type: text, list: [a, b, a]}}\n", good,
			[]string{`tenants.keys.list[2]: tenants 1 and 3 have the same key "a"`}},
		{"orders with setup", "data: {setup: [setup.sql], orders: 5000}\n", good,
			[]string{`data.orders: only for the built-in orders data set`}},
		{"missing setup file", "data: {setup: [nope.sql]}\n", good,
			[]string{`data.setup[0]: setup file`, `nope.sql: no such file or directory`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := tc.extra
			path := ownWorkload(t, "", tc.script)
			if extra != "" {
				// Replace the top-level key the case overrides.
				src, _ := os.ReadFile(path)
				key := strings.SplitN(extra, ":", 2)[0]
				var lines []string
				for _, l := range strings.Split(string(src), "\n") {
					if !strings.HasPrefix(l, key+":") {
						lines = append(lines, l)
					}
				}
				os.WriteFile(path, []byte(strings.Join(lines, "\n")+extra), 0o644)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
	t.Run("builtin data set", func(t *testing.T) {
		_, err := Parse([]byte(`name: x
tenants: {keys: {type: text, template: "a{n}"}}
classes: [{name: interactive, query: lookup, rate: 1}]
configurations: [{name: c, mode: shared}]
`), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), "x.yaml:2:11: tenants.keys: needs data.setup or data.existing") {
			t.Errorf("error %v", err)
		}
		_, err = Parse([]byte(`name: x
data: {setup: [s.sql]}
classes: [{name: interactive, query: lookup, rate: 1}]
configurations: [{name: c, mode: shared}]
`), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), "classes[0].query: query lookup reads the built-in orders data set") {
			t.Errorf("error %v", err)
		}
	})
}

// TestOwnWorkloadOnShards: a data.setup on topology shards needs
// data.directory (the tables the nodes split and a move copies).
func TestOwnWorkloadOnShards(t *testing.T) {
	src, err := os.ReadFile("../../scenarios/tenant-promotion.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "\ndata:\n", "\ndata:\n  setup: [x.sql]\n", 1)
	_, err = Parse([]byte(text), "p.yaml")
	if err == nil || !strings.Contains(err.Error(), "data.setup: needs data.directory on topology shards") {
		t.Errorf("error %v", err)
	}
}

func TestTenantKeys(t *testing.T) {
	for _, tc := range []struct {
		keys TenantKeys
		n    int
		want string
	}{
		{TenantKeys{}, 7, "7"},
		{TenantKeys{Type: KeyText, Template: "org-{n:04}"}, 7, "org-0007"},
		{TenantKeys{Type: KeyText, Template: "{n}-{n}"}, 12, "12-12"},
		{TenantKeys{Type: KeyUUID}, 26, "00000000-0000-4000-8000-000000000026"},
		{TenantKeys{Type: KeyText, List: []string{"a", "b"}}, 2, "b"},
	} {
		if got := tc.keys.Key(tc.n); got != tc.want {
			t.Errorf("%+v.Key(%d) = %q, want %q", tc.keys, tc.n, got, tc.want)
		}
	}
}

func TestExistingProblems(t *testing.T) {
	base := `name: x
classes: [{name: interactive, sql: "SELECT 1", rate: 1}]
configurations: [{name: c, mode: shared}]
`
	for _, tc := range []struct{ name, extra, want string }{
		{"query without existing", "tenants: {keys: {type: text, query: \"SELECT k FROM t\"}}\n", "tenants.keys.query: only with data.existing"},
		{"counts without query", "tenants: {keys: {type: text, template: \"a{n}\", counts: [x]}}\ndata: {existing: {schemas: [app]}}\n", "tenants.keys.counts: only with tenants.keys.query"},
		{"template and query", "tenants: {keys: {template: \"{n}\", query: \"SELECT 1\"}}\ndata: {existing: {schemas: [app]}}\n", "tenants.keys: give one of template, list and query"},
		{"run schema", "data: {existing: {schemas: [noisysim]}}\n", "data.existing.schemas[0]: is the run's own schema"},
		{"bad schema", "data: {existing: {schemas: [\"a b\"]}}\n", "data.existing.schemas[0]: must be a schema name"},
		{"with setup", "data: {setup: [s.sql], existing: {schemas: [app]}}\n", "data.existing: not with data.setup"},
		{"with rows", "data: {rows: {x: 100}, existing: {schemas: [app]}}\n", "data.rows: not with data.existing"},
		{"bad count name", "tenants: {keys: {type: text, query: \"SELECT 1\", counts: [Bad]}}\ndata: {existing: {schemas: [app]}}\n", "tenants.keys.counts[0]: row count names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(base+tc.extra), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	s, err := Parse([]byte(base+"tenants: {keys: {type: text, query: \"SELECT k, n AS invoices FROM t\", counts: [invoices]}}\ndata: {existing: {schemas: [app]}}\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Builtins(), ","); got != "tenant,tenant_n,scale,rows_invoices" {
		t.Errorf("builtins %s", got)
	}
}

func TestOwnWorkloadNotOnShards(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"existing", "data: {existing: {schemas: [app]}}", "x.yaml:3:8: data.existing: only for the noisy-neighbour scenario; a topology shards scenario loads its data set on every node"},
		{"directory without setup", "data: {directory: {tables: [t], column: k}}", "x.yaml:3:8: data.directory: only with data.setup on topology shards"},
		{"directory fields", "data: {setup: [s.sql], directory: {tables: [noisysim_tenants, \"a b\"]}}", "data.directory.tables[0]: noisysim_tenants is noisysim's"},
		{"directory column", "data: {setup: [s.sql], directory: {tables: [t]}}", "data.directory.column: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`name: x
backend: {topology: shards}
`+tc.data+`
classes: [{name: interactive, sql: "SELECT 1", rate: 1}]
configurations: [{name: c, mode: shared}]
`), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %q", err, tc.want)
			}
		})
	}
}
