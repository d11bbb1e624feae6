package reports

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
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
		{"text-fallback", withoutMerged(sampleReport(9)), TextOptions{}},
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
// number against report.json parsed back, within the text's rounding: with
// merged quiet rows the QuietAll rows must equal them, without they must be
// the worst-of fallback.
func TestTextNumbersMatchJSON(t *testing.T) {
	for _, tc := range []struct {
		name   string
		top    int
		merged bool
	}{
		{"merged/top0", 0, true},
		{"merged/top2", 2, true},
		{"fallback/top0", 0, false},
		{"fallback/top2", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sampleReport(50)
			if !tc.merged {
				in = withoutMerged(in)
			}
			var j Report
			if err := json.Unmarshal(renderJSON(t, in), &j); err != nil {
				t.Fatal(err)
			}
			opts := TextOptions{TopQuiet: tc.top}
			out := string(renderText(t, in, opts))
			tables := parseTextTables(t, out)
			dominant := j.Dominant
			tenantOf := func(label string) string { return strings.TrimSuffix(label, " (dominant)") }
			type key struct{ tenant, class string }

			solo := map[key]TenantRow{}
			soloMerged := map[string]TenantRow{}
			for _, c := range j.Configurations {
				for _, s := range c.Solo {
					solo[key{s.Tenant, s.Class}] = s
				}
				for _, s := range c.SoloQuietAll {
					soloMerged[s.Class] = s
				}
			}
			if tc.merged != (len(soloMerged) == 2) {
				t.Fatalf("report.json has %d merged solo rows, want %d", len(soloMerged), map[bool]int{true: 2}[tc.merged])
			}
			// wantQuiet is the QuietAll row text must show for c and class.
			wantQuiet := func(c Configuration, class string) TenantRow {
				if tc.merged {
					for _, q := range c.QuietAll {
						if q.Class == class {
							return q
						}
					}
					t.Fatalf("%s: report.json has no %s row for %s", c.Name, QuietAll, class)
				}
				want := TenantRow{Tenant: QuietAll, Class: class}
				shares := map[string]float64{}
				for _, r := range c.Tenants {
					if r.Tenant == dominant || r.Class != class {
						continue
					}
					want.Count += r.Count
					want.Rejected += r.Rejected
					want.Errors += r.Errors
					want.P50, want.P99, want.Max = max(want.P50, r.P50), max(want.P99, r.P99), max(want.Max, r.Max)
					shares[r.Tenant] = r.DBTimeShare
				}
				for _, s := range shares {
					want.DBTimeShare += s
				}
				return want
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
						want = wantQuiet(c, class)
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
			aggregates := 0
			for _, cells := range side.rows {
				tenant, class := tenantOf(cells[0]), cells[1]
				limit := "-"
				for _, a := range j.Assertions {
					if a.Name == "quiet_p99" && a.Tenant == tenant && a.Class == class {
						limit = fmtMS(a.Limit)
					}
				}
				if cells[7] != limit {
					t.Errorf("limit %s/%s: text says %s, JSON says %s", tenant, class, cells[7], limit)
				}
				if tenant == QuietAll {
					aggregates++
					// Solo, p99 and ratio per configuration: merged over
					// merged, or the worst quiet tenant's.
					var wantSolo float64
					if tc.merged {
						wantSolo = soloMerged[class].P99
					} else {
						for k, s := range solo {
							if k.class == class {
								wantSolo = max(wantSolo, s.P99)
							}
						}
					}
					near(t, "solo "+QuietAll+"/"+class, cells[2], wantSolo, 0.005)
					for i, c := range j.Configurations {
						want := wantQuiet(c, class)
						near(t, c.Name+" p99 "+QuietAll+"/"+class, cells[3+2*i], want.P99, 0.005)
						wantRatio := want.P99 / wantSolo
						if !tc.merged {
							wantRatio = 0
							for _, r := range c.Tenants {
								if s, ok := solo[key{r.Tenant, r.Class}]; ok && r.Class == class {
									wantRatio = max(wantRatio, r.P99/s.P99)
								}
							}
						}
						near(t, c.Name+" ratio "+QuietAll+"/"+class, cells[4+2*i], wantRatio, 0.005)
					}
					continue
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
			}
			if aggregates != 2 {
				t.Errorf("side by side: %d %s rows, want one per quiet class (2)", aggregates, QuietAll)
			}
			note := QuietAll + ": " + quietWorstNote
			if tc.merged {
				note = QuietAll + ": " + quietMergedNote
			}
			if !strings.Contains(out, "\n"+note) {
				t.Errorf("footnote %q missing:\n%s", note, out)
			}
		})
	}
}

// TestTextQuietAllPrecedence checks which QuietAll rows the text shows:
// merged rows win over the per-tenant rows; a class missing a merged row in
// one configuration or in the solo baseline falls back to the worst-of rows
// everywhere, and the footnote says which class is which.
func TestTextQuietAllPrecedence(t *testing.T) {
	// quietCells returns the side-by-side and per-configuration QuietAll
	// cells of class.
	quietCells := func(t *testing.T, r *Report, class string) (side []string, perConfig map[string][]string, out string) {
		t.Helper()
		out = string(renderText(t, r, TextOptions{}))
		perConfig = map[string][]string{}
		for title, tab := range parseTextTables(t, out) {
			for _, cells := range tab.rows {
				if cells[0] != QuietAll || cells[1] != class {
					continue
				}
				if title == "Side by side: p99 ms" {
					side = cells
				} else {
					perConfig[strings.SplitN(title, ":", 2)[0]] = cells
				}
			}
		}
		if side == nil || len(perConfig) != len(r.Configurations) {
			t.Fatalf("%s/%s rows missing:\n%s", QuietAll, class, out)
		}
		return side, perConfig, out
	}
	merged := func(r *Report, cfg int, class string) TenantRow {
		for _, q := range r.Configurations[cfg].QuietAll {
			if q.Class == class {
				return q
			}
		}
		panic("no merged row")
	}

	t.Run("merged rows win", func(t *testing.T) {
		r := sampleReport(6)
		// Merged values no per-tenant row has, so a worst-of can't pass for them.
		for i := range r.Configurations {
			c := &r.Configurations[i]
			for j := range c.QuietAll {
				c.QuietAll[j].P50, c.QuietAll[j].P99, c.QuietAll[j].Max = 0.77, 1.11, 99.99
				c.QuietAll[j].Count, c.QuietAll[j].DBTimeShare = 12345, 0.042
			}
			for j := range c.SoloQuietAll {
				c.SoloQuietAll[j].P99 = 0.5
			}
		}
		for i := range r.Assertions {
			if a := &r.Assertions[i]; a.Tenant == QuietAll && a.Class == "heavy" {
				a.Limit = 123.45
			}
		}
		side, perConfig, out := quietCells(t, r, "heavy")
		// naive failed its checks (marked), isolated passed them.
		want := []string{QuietAll, "heavy", "0.50", "1.11*", "2.22x", "1.11", "2.22x", "123.45"}
		if !slices.Equal(side, want) {
			t.Errorf("side by side: got %q, want %q", side, want)
		}
		for cfg, cells := range perConfig {
			p99 := "1.11"
			if cfg == "naive" { // its failures are marked in its own table too
				p99 = "1.11*"
			}
			if want := []string{QuietAll, "heavy", "12345", "0", "0", "0.77", p99, "99.99", "4.2%"}; !slices.Equal(cells, want) {
				t.Errorf("%s: got %q, want %q", cfg, cells, want)
			}
		}
		if !strings.Contains(out, "\n"+QuietAll+": "+quietMergedNote+"\n") {
			t.Errorf("footnote does not say the rows are merged:\n%s", out)
		}
	})

	for name, mutate := range map[string]func(r *Report){
		"a configuration lacks the merged row": func(r *Report) { r.Configurations[1].QuietAll = r.Configurations[1].QuietAll[1:] },
		"the solo baseline lacks the merged row": func(r *Report) {
			for i := range r.Configurations {
				r.Configurations[i].SoloQuietAll = r.Configurations[i].SoloQuietAll[1:]
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := sampleReport(9) // two quiet heavy tenants (t4, t8); merged rows sort by class: [0] is heavy
			mutate(r)
			fallback := withoutMerged(sampleReport(9))
			fallback.Assertions = r.Assertions // same limits and marks
			side, perConfig, out := quietCells(t, r, "heavy")
			wantSide, wantPerConfig, _ := quietCells(t, fallback, "heavy")
			if !slices.Equal(side, wantSide) || !maps.EqualFunc(perConfig, wantPerConfig, slices.Equal) {
				t.Errorf("heavy is not the worst-of fallback:\n got %q %q\nwant %q %q", side, perConfig, wantSide, wantPerConfig)
			}
			if merged(r, 0, "heavy").P99 >= parseNum(t, side[3]) {
				t.Fatalf("fixture: merged p99 should be below the worst tenant's")
			}
			// interactive is still merged in every table.
			side, perConfig, _ = quietCells(t, r, "interactive")
			if want := fmtMS(merged(r, 1, "interactive").P99); side[5] != want || perConfig["isolated"][6] != want {
				t.Errorf("interactive: side %q, isolated %q, want merged p99 %s", side, perConfig["isolated"], want)
			}
			note := QuietAll + ": " + quietMergedNote + " for interactive; " + quietWorstNote + " for heavy"
			if !strings.Contains(out, "\n"+note+"; 3 more quiet tenants in report.json\n") {
				t.Errorf("footnote %q missing:\n%s", note, out)
			}
			// Where the full figures are is the caller's to say.
			var b strings.Builder
			if err := WriteText(&b, r, TextOptions{FullReport: "out/report.json"}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "; 3 more quiet tenants in out/report.json\n") || strings.Contains(b.String(), " in report.json") {
				t.Errorf("FullReport not used:\n%s", b.String())
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

// TestQuietFallbackSharesCountTenantsOnce checks the fallback QuietAll row
// sums each quiet tenant's DB-time share once per class, however many rows
// carry it, and takes the worst latencies.
func TestQuietFallbackSharesCountTenantsOnce(t *testing.T) {
	rows := []TenantRow{
		{Tenant: "d", Class: "c", Count: 50, P99: 90, DBTimeShare: 0.5},
		{Tenant: "a", Class: "c", Count: 3, P50: 1, P99: 4, Max: 5, DBTimeShare: 0.3},
		{Tenant: "a", Class: "c", Count: 2, P50: 2, P99: 3, Max: 7, DBTimeShare: 0.3}, // a second row of a's share
		{Tenant: "a", Class: "h", Count: 1, P99: 40, DBTimeShare: 0.3},
		{Tenant: "b", Class: "c", Count: 4, P50: 1, P99: 2, Max: 3, DBTimeShare: 0.2},
	}
	got := worstQuiet(rows, "d")
	for class, r := range got {
		r.DBTimeShare = math.Round(r.DBTimeShare*1e9) / 1e9 // 0.3 + 0.2 in floats
		got[class] = r
	}
	want := map[string]TenantRow{
		"c": {Tenant: QuietAll, Class: "c", Count: 9, P50: 2, P99: 4, Max: 7, DBTimeShare: 0.5},
		"h": {Tenant: QuietAll, Class: "h", Count: 1, P99: 40, DBTimeShare: 0.3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("worstQuiet:\n got %+v\nwant %+v", got, want)
	}

	out := string(renderText(t, &Report{Scenario: "s", Dominant: "d", Configurations: []Configuration{{Name: "x", Tenants: rows}}}, TextOptions{}))
	var share string
	for title, tab := range parseTextTables(t, out) {
		for _, cells := range tab.rows {
			if strings.HasPrefix(title, "x: ") && cells[0] == QuietAll && cells[1] == "c" {
				share = cells[8]
			}
		}
	}
	if share != "50.0%" {
		t.Errorf("%s/c DB time: text says %q, want 50.0%%:\n%s", QuietAll, share, out)
	}
	if !strings.Contains(out, "\n"+QuietAll+": "+quietWorstNote+"\n") {
		t.Errorf("fallback footnote missing:\n%s", out)
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

// TestTextOwnSolo checks that each configuration's "vs solo" is set against
// its own solo baseline when the configurations measured different ones,
// and that a footnote says so.
func TestTextOwnSolo(t *testing.T) {
	r := sampleReport(6)
	naive := &r.Configurations[0]
	naive.Solo = slices.Clone(naive.Solo)
	for i := range naive.Solo {
		naive.Solo[i].P99 *= 2
	}
	naive.SoloQuietAll = slices.Clone(naive.SoloQuietAll)
	for i := range naive.SoloQuietAll {
		naive.SoloQuietAll[i].P99 *= 2
	}
	out := string(renderText(t, r, TextOptions{}))
	side := parseTextTables(t, out)["Side by side: p99 ms"]
	checked := 0
	for _, cells := range side.rows {
		tenant, class := strings.TrimSuffix(cells[0], " (dominant)"), cells[1]
		if tenant == QuietAll || tenant == r.Dominant {
			continue
		}
		for i, c := range r.Configurations {
			var got, solo TenantRow
			for _, row := range c.Tenants {
				if row.Tenant == tenant && row.Class == class {
					got = row
				}
			}
			for _, row := range c.Solo {
				if row.Tenant == tenant && row.Class == class {
					solo = row
				}
			}
			if solo.P99 > 0 {
				near(t, c.Name+" ratio "+tenant+"/"+class, cells[4+2*i], got.P99/solo.P99, 0.005)
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no ratio checked")
	}
	if !strings.Contains(out, "each \"vs solo\" against its own configuration's solo baseline") {
		t.Errorf("no footnote on per-configuration baselines:\n%s", out)
	}
}

// A window disturbed by a stall of noisysim's process says so, apart from
// one disturbed by CPU used outside the run, in the verdict line and in
// Markdown.
func TestDisturbedSaysWhy(t *testing.T) {
	r := sampleReport(3)
	r.Machine = &Machine{MaxForeignCPU: 0.5, MaxStallMs: 250, Windows: []WindowLoad{
		{Window: "solo", Seconds: 6, ForeignCPU: 0.9, Disturbed: true},
		{Window: "run (naive)", Seconds: 10, ForeignCPU: 0.1, Stalls: 2, StalledMs: 800, StallMaxMs: 730, StallAtS: 4.2, Disturbed: true},
		{Window: "run (isolated)", Seconds: 10, Stalls: 1, StalledMs: 60, StallMaxMs: 60, StallAtS: 1},
	}}
	out := string(renderText(t, r, TextOptions{}))
	for _, want := range []string{
		"DISTURBED (solo: 0.90 CPU used outside the run (above 0.50); run (naive): noisysim stood still 730 ms at 4.2 s (250 ms or more))",
		"2 stalls (800 ms in all), longest 730 ms at 4.2 s",
		"1 stall, longest 60 ms at 1.0 s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "run (naive): noisysim stood still 730 ms") {
		t.Errorf("Markdown lacks the stall:\n%s", md.String())
	}
}

// TestTextListsEveryFailingKind checks that a failing configuration's
// listing, cut after TextOptions.MaxListed rows, names every failing
// assertion (each by its row over the quiet tenants merged when it has
// one) before more rows of one: twelve tenants' no_unexpected_errors must
// not hide write_pause and the merged quiet_p99.
func TestTextListsEveryFailingKind(t *testing.T) {
	r := failingReport(3)
	for i := range 12 {
		r.Assertions = append(r.Assertions, Assertion{
			Name: "no_unexpected_errors", Configuration: "isolated", Tenant: fmt.Sprintf("t%d", 10+i), Class: "interactive",
			Observed: 3, Limit: 0, Op: "<=",
		})
	}
	r.Assertions = append(r.Assertions, Assertion{Name: "write_pause", Configuration: "isolated", Tenant: "t1",
		Observed: 5440, Limit: 1000, Unit: "ms", Op: "<="}) // failingReport fails the merged quiet_p99 and t3's
	out := string(renderText(t, r, TextOptions{MaxListed: 3}))
	var listed []string
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "FAIL" && f[1] == "isolated" {
			listed = append(listed, f[2]+" "+strings.Join(f[3:5], " "))
		}
	}
	want := []string{"no_unexpected_errors t10/interactive", "quiet_p99 quiet (all)/interactive", "write_pause t1"}
	if len(listed) != len(want) {
		t.Fatalf("listed FAIL rows of isolated %q, want %q:\n%s", listed, want, out)
	}
	for i, w := range want {
		if !strings.HasPrefix(listed[i], w) {
			t.Errorf("FAIL row %d of isolated: %q, want %q first", i, listed[i], w)
		}
	}
	if !strings.Contains(out, "12 more FAIL not listed") {
		t.Errorf("no count of the rows not listed (12: 11 tenants' no_unexpected_errors and t3's quiet_p99):\n%s", out)
	}
}

// Every window of a configuration's timeline has a row of its own in the
// terminal, with its span and p99s: a phase between the baseline and the
// judged window (a move, a burst) is not only in report.json.
func TestTextWindows(t *testing.T) {
	r := sampleReport(4)
	c := &r.Configurations[0]
	c.Windows = []Window{
		{Name: "warmup", Start: 0, End: 1, Senders: "quiet"},
		{Name: "solo", Start: 1, End: 5, Senders: "quiet", Measured: true, Tenants: c.Solo, QuietAll: c.SoloQuietAll},
		{Name: "move", Start: 5, End: 18.8, Senders: "all", Measured: true, Tenants: c.Tenants, QuietAll: c.QuietAll,
			Stats: RunStats{Issued: 1234, Errors: 7, AchievedRate: 89.4}, TopDBTime: []Share{{Tenant: r.Dominant, Share: 0.784}}},
	}
	out := string(renderText(t, r, TextOptions{}))
	var dominant, quiet []string
	for _, row := range displayOrder(c.Tenants, r.Dominant) {
		if row.Tenant == r.Dominant {
			dominant = append(dominant, row.Class+" "+fmtMS(row.P99))
		}
	}
	for _, row := range c.QuietAll {
		quiet = append(quiet, row.Class+" "+fmtMS(row.P99))
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "warmup (warm-up) ") || strings.HasPrefix(l, "solo ") || strings.HasPrefix(l, "move ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d window rows, want 3 (warmup, solo, move):\n%s", len(lines), out)
	}
	move := cellSep.Split(strings.TrimSpace(lines[2]), -1)
	want := []string{"move", "5.0–18.8", "1234", "7", "89.4", strings.Join(dominant, ", "), strings.Join(quiet, ", "), r.Dominant + " 78.4%"}
	if !slices.Equal(move, want) {
		t.Errorf("move row %q, want %q", move, want)
	}
}

// The side by side names the baseline quiet_p99 compares with: a timeline
// whose baseline is "before" has no solo window to speak of.
func TestTextSideBySideNamesBaseline(t *testing.T) {
	r := sampleReport(4)
	for i := range r.Assertions {
		if r.Assertions[i].Name == "quiet_p99" {
			r.Assertions[i].Window, r.Assertions[i].Baseline = "after", "before"
		}
	}
	side := parseTextTables(t, string(renderText(t, r, TextOptions{})))["Side by side: p99 ms"]
	want := []string{"tenant", "class", "before p99"}
	for _, c := range r.Configurations {
		want = append(want, c.Name+" p99", "vs before")
	}
	want = append(want, "limit")
	if !slices.Equal(side.header, want) {
		t.Errorf("side by side header %q, want %q", side.header, want)
	}
}

// A run of --retry-disturbed says its attempts: "after K attempts" in the
// verdict line (and that the machine was disturbed in every attempt when
// each failed on a window it disturbed), a line per attempt in Markdown,
// and the list in report.json.
func TestAttemptsSaid(t *testing.T) {
	failed := Assertion{Name: "quiet_p99", Window: "run", Baseline: "solo", Configuration: "isolated", Tenant: QuietAll, Class: "lookup",
		Observed: 9.1, Limit: 3.2, Unit: "ms", Op: "<="}
	stolen := DisturbedWindow{Window: "run (isolated)", Why: "the hypervisor took 0.12 CPU, 9% of the CPU the machine ran (above 5%)", Judged: true}
	for _, tc := range []struct {
		name     string
		attempts []Attempt
		want     string
		every    bool
	}{
		{"disturbed in every attempt", []Attempt{
			{Attempt: 1, Seed: 42, Failed: []Assertion{failed}, Disturbed: []DisturbedWindow{stolen}, Retried: true, Reports: "out/attempt-1"},
			{Attempt: 2, Seed: 42, Failed: []Assertion{failed}, Disturbed: []DisturbedWindow{stolen}},
		}, "RESULT: FAIL after 2 attempts (the machine was disturbed in every attempt: the failure may be the machine's, not the system's)", true},
		{"the last attempt undisturbed", []Attempt{
			{Attempt: 1, Seed: 42, Failed: []Assertion{failed}, Disturbed: []DisturbedWindow{stolen}, Retried: true},
			{Attempt: 2, Seed: 42, Failed: []Assertion{failed}, Disturbed: []DisturbedWindow{{Window: "solo (naive)", Why: "0.90 CPU used outside the run (above 0.50)"}}},
		}, "RESULT: FAIL after 2 attempts\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := failingReport(3)
			r.Attempts = tc.attempts
			out := string(renderText(t, r, TextOptions{}))
			if !strings.Contains(out, tc.want) {
				t.Errorf("text lacks %q:\n%s", tc.want, out)
			}
			if r.DisturbedEveryAttempt() != tc.every {
				t.Errorf("DisturbedEveryAttempt = %v, want %v", !tc.every, tc.every)
			}
			line := tc.attempts[0].Line()
			for _, want := range []string{"attempt 1 (seed 42): FAIL on a disturbed machine: failed isolated quiet_p99 quiet (all)/lookup (observed 9.10 ms, want <= 3.20 ms)",
				"disturbed run (isolated): the hypervisor took 0.12 CPU"} {
				if !strings.Contains(line, want) {
					t.Errorf("attempt line %q lacks %q", line, want)
				}
			}
			if l := tc.attempts[1].Line(); !tc.every && !strings.Contains(l, "FAIL: failed") || !strings.Contains(l, "attempt 2") {
				t.Errorf("last attempt's line: %q", l)
			}
			var md, js bytes.Buffer
			if err := WriteMarkdown(&md, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(md.String(), "after 2 attempts") || !strings.Contains(md.String(), "- attempt 2 (seed 42): FAIL") {
				t.Errorf("Markdown lacks the attempts:\n%s", md.String())
			}
			if err := WriteJSON(&js, r); err != nil {
				t.Fatal(err)
			}
			back, err := ReadJSON(&js)
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Attempts) != 2 || !back.Attempts[0].Retried || back.Attempts[0].Disturbed[0] != stolen || back.Attempts[1].Failed[0].Observed != 9.1 {
				t.Errorf("report.json attempts read back: %+v", back.Attempts)
			}
		})
	}
	if r := failingReport(3); strings.Contains(string(renderText(t, r, TextOptions{})), "attempt") {
		t.Errorf("a run without --retry-disturbed speaks of attempts")
	}
}
