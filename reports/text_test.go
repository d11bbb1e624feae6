package reports

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func renderText(t *testing.T, r *Report, opts TextOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, r, opts); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestTextGolden(t *testing.T) {
	tests := []struct {
		name string
		r    *Report
		opts TextOptions
	}{
		{"text", sampleReport(6), TextOptions{}},
		{"text-50-tenants", sampleReport(50), TextOptions{}},
		{"text-50-tenants-top2-list3", sampleReport(50), TextOptions{TopQuiet: 2, MaxListed: 3}},
		{"text-failing-all", failingReport(4), TextOptions{AllAssertions: true, TopQuiet: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, tt.name+".txt", renderText(t, tt.r, tt.opts))
		})
	}
}

// textTable is a table parsed back from WriteText's output.
type textTable struct {
	header []string
	rows   [][]string
}

var cellSep = regexp.MustCompile(`\s{2,}`)

// parseTextTables returns, per section title ("== title =="), the table
// whose header starts with "tenant": the rows that split into as many cells
// as the header.
func parseTextTables(t *testing.T, out string) map[string]textTable {
	t.Helper()
	tables := map[string]textTable{}
	var title string
	var cur *textTable
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "== ") && strings.HasSuffix(line, " ==") {
			title, cur = strings.TrimSuffix(strings.TrimPrefix(line, "== "), " =="), nil
			continue
		}
		cells := cellSep.Split(strings.TrimSpace(line), -1)
		switch {
		case cur == nil && strings.HasPrefix(line, "tenant  "):
			cur = &textTable{header: cells}
		case cur != nil && len(cells) == len(cur.header) && line != "":
			cur.rows = append(cur.rows, cells)
			tables[title] = *cur
		default:
			if cur != nil {
				tables[title] = *cur
			}
			cur = nil
		}
	}
	return tables
}

func parseNum(t *testing.T, s string) float64 {
	t.Helper()
	s = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "*"), "%"), "x")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cell %q is not a number: %v", s, err)
	}
	return v
}

func near(t *testing.T, what, cell string, want, tolerance float64) {
	t.Helper()
	if got := parseNum(t, cell); math.Abs(got-want) > tolerance+1e-9 {
		t.Errorf("%s: text says %s, JSON says %v", what, cell, want)
	}
}

// TestTextNumbersMatchJSON parses the terminal tables and checks every
// number against report.json parsed back, within the text's rounding.
func TestTextNumbersMatchJSON(t *testing.T) {
	for _, top := range []int{0, 2} {
		t.Run(fmt.Sprintf("top%d", top), func(t *testing.T) {
			in := sampleReport(50)
			var j Report
			if err := json.Unmarshal(renderJSON(t, in), &j); err != nil {
				t.Fatal(err)
			}
			opts := TextOptions{TopQuiet: top}
			tables := parseTextTables(t, string(renderText(t, in, opts)))
			dominant := j.Dominant
			tenantOf := func(label string) string { return strings.TrimSuffix(label, " (dominant)") }
			type key struct{ tenant, class string }

			solo := map[key]TenantRow{}
			for _, c := range j.Configurations {
				for _, s := range c.Solo {
					solo[key{s.Tenant, s.Class}] = s
				}
			}
			for _, c := range j.Configurations {
				var tab textTable
				for title, tt := range tables {
					if strings.HasPrefix(title, c.Name+": ") {
						tab = tt
					}
				}
				if len(tab.rows) == 0 {
					t.Fatalf("no table for configuration %s", c.Name)
				}
				rows := map[key]TenantRow{}
				totals := map[string]int64{}
				for _, r := range c.Tenants {
					rows[key{r.Tenant, r.Class}] = r
					totals[r.Tenant] += r.Count
				}
				// The named quiet tenants are the busiest ones.
				var quiet []string
				for name := range totals {
					if name != dominant {
						quiet = append(quiet, name)
					}
				}
				slices.SortFunc(quiet, func(a, b string) int { return cmp.Or(cmp.Compare(totals[b], totals[a]), natural(a, b)) })
				wantNamed := map[string]bool{dominant: true}
				for _, name := range quiet[:opts.topQuiet()] {
					wantNamed[name] = true
				}
				named := map[string]bool{}
				aggregates := 0
				for _, cells := range tab.rows {
					tenant, class := tenantOf(cells[0]), cells[1]
					var want TenantRow
					if tenant == QuietAll {
						aggregates++
						for _, r := range c.Tenants {
							if r.Tenant == dominant || r.Class != class {
								continue
							}
							want.Count += r.Count
							want.Rejected += r.Rejected
							want.Errors += r.Errors
							want.P50, want.P99, want.Max = max(want.P50, r.P50), max(want.P99, r.P99), max(want.Max, r.Max)
							want.DBTimeShare += r.DBTimeShare
						}
					} else {
						named[tenant] = true
						var ok bool
						if want, ok = rows[key{tenant, class}]; !ok {
							t.Fatalf("%s: text shows %s/%s, JSON has no such row", c.Name, tenant, class)
						}
					}
					what := c.Name + " " + tenant + "/" + class
					for i, w := range []int64{want.Count, want.Rejected, want.Errors} {
						if got := cells[2+i]; got != strconv.FormatInt(w, 10) {
							t.Errorf("%s %s: text says %s, JSON says %d", what, tab.header[2+i], got, w)
						}
					}
					near(t, what+" p50", cells[5], want.P50, 0.005)
					near(t, what+" p99", cells[6], want.P99, 0.005)
					near(t, what+" max", cells[7], want.Max, 0.005)
					near(t, what+" share", cells[8], want.DBTimeShare*100, 0.05)
				}
				if !maps.Equal(named, wantNamed) {
					t.Errorf("%s: named tenants %v, want the dominant and the %d busiest quiet: %v", c.Name, named, opts.topQuiet(), wantNamed)
				}
				if aggregates != 2 {
					t.Errorf("%s: %d %s rows, want one per quiet class (2)", c.Name, aggregates, QuietAll)
				}
			}

			side := tables["Side by side: p99 ms"]
			if len(side.rows) == 0 {
				t.Fatal("no side-by-side table")
			}
			wantHeader := []string{"tenant", "class", "solo p99", "naive p99", "vs solo", "isolated p99", "vs solo", "limit"}
			if !slices.Equal(side.header, wantHeader) {
				t.Fatalf("side-by-side header %q, want %q", side.header, wantHeader)
			}
			for _, cells := range side.rows {
				tenant, class := tenantOf(cells[0]), cells[1]
				if tenant == QuietAll {
					continue // the worst-of rule is checked per configuration above
				}
				k := key{tenant, class}
				s, hasSolo := solo[k]
				if hasSolo {
					near(t, "solo "+tenant+"/"+class, cells[2], s.P99, 0.005)
				} else if cells[2] != "-" {
					t.Errorf("solo %s/%s: text says %s, JSON has none", tenant, class, cells[2])
				}
				for i, c := range j.Configurations {
					var got TenantRow
					for _, r := range c.Tenants {
						if r.Tenant == tenant && r.Class == class {
							got = r
						}
					}
					near(t, c.Name+" p99 "+tenant+"/"+class, cells[3+2*i], got.P99, 0.005)
					if hasSolo {
						near(t, c.Name+" ratio "+tenant+"/"+class, cells[4+2*i], got.P99/s.P99, 0.005)
					}
				}
				limit := "-"
				for _, a := range j.Assertions {
					if a.Name == "quiet_p99" && a.Tenant == tenant && a.Class == class {
						limit = fmtMS(a.Limit)
					}
				}
				if cells[7] != limit {
					t.Errorf("limit %s/%s: text says %s, JSON says %s", tenant, class, cells[7], limit)
				}
			}
		})
	}
}

func TestTextLimitAssertion(t *testing.T) {
	r := sampleReport(3)
	r.Assertions = append(r.Assertions, Assertion{
		Name: "quiet_service_p99", Configuration: "isolated", Tenant: "t2", Class: "interactive",
		Observed: 2, Limit: 4.25, Unit: "ms", Op: "<=", Passed: true,
	})
	for _, tt := range []struct {
		name, want string
	}{
		{"", "8.38"}, // first "<=" ms assertion in report order: naive's quiet_p99
		{"quiet_service_p99", "4.25"},
		{"no_such_assertion", "-"},
	} {
		out := string(renderText(t, r, TextOptions{LimitAssertion: tt.name}))
		side := parseTextTables(t, out)["Side by side: p99 ms"]
		found := false
		for _, cells := range side.rows {
			if cells[0] == "t2" && cells[1] == "interactive" {
				found = true
				if got := cells[len(cells)-1]; got != tt.want {
					t.Errorf("LimitAssertion %q: limit %s, want %s", tt.name, got, tt.want)
				}
			}
		}
		if !found {
			t.Fatalf("no t2/interactive row:\n%s", out)
		}
	}
}

// TestMinimalReports renders reports with nothing but a name, or a
// configuration without rows, through every renderer.
func TestMinimalReports(t *testing.T) {
	for name, r := range map[string]*Report{
		"empty":       {Scenario: "empty"},
		"no rows":     {Scenario: "bare", Configurations: []Configuration{{Name: "naive"}}},
		"one config":  {Scenario: "one", Configurations: []Configuration{{Name: "isolated", Passed: true, Tenants: []TenantRow{{Tenant: "a", Class: "c", Count: 3, P99: 1}}}}, Passed: true},
		"no dominant": {Scenario: "nodom", Configurations: []Configuration{{Name: "x", Tenants: []TenantRow{{Tenant: "b", Class: "c", Count: 1}, {Tenant: "a", Class: "c", Count: 5}}}}},
	} {
		for rname, render := range renderers() {
			var b bytes.Buffer
			if err := render(&b, r); err != nil {
				t.Errorf("%s %s: %v", name, rname, err)
			}
			if b.Len() == 0 {
				t.Errorf("%s %s: empty output", name, rname)
			}
		}
	}
	out := string(renderText(t, &Report{Scenario: "nodom", Configurations: []Configuration{{Name: "x", Tenants: []TenantRow{
		{Tenant: "b", Class: "c", Count: 1}, {Tenant: "a", Class: "c", Count: 5},
	}}}}, TextOptions{}))
	if !strings.Contains(out, "a (dominant)") {
		t.Errorf("without Dominant the busiest tenant should be marked dominant:\n%s", out)
	}
}
