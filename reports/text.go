package reports

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Defaults for TextOptions.
const (
	// DefaultTopQuiet is how many quiet tenants the terminal tables name.
	DefaultTopQuiet = 5
	// DefaultMaxListed is how many non-passing assertions of one outcome the
	// terminal lists per configuration.
	DefaultMaxListed = 10
	// DefaultFullReport is where the text says the figures it leaves out
	// are (TextOptions.FullReport).
	DefaultFullReport = "report.json"
)

// TextOptions tune WriteText. The zero value gives the defaults.
type TextOptions struct {
	// TopQuiet is how many quiet tenants each table shows by name, busiest
	// (highest count) first; all quiet tenants are summarised in QuietAll
	// rows. 0 means DefaultTopQuiet; negative means none.
	TopQuiet int
	// MaxListed is how many failed, expected-failed or skipped assertions
	// are listed per configuration and outcome; the rest are counted.
	// 0 means DefaultMaxListed; negative means all.
	MaxListed int
	// AllAssertions lists every passed assertion instead of one count per
	// configuration and assertion name.
	AllAssertions bool
	// LimitAssertion names the assertion whose limit fills the limit column
	// of the side-by-side table. Empty means the first assertion, in report
	// order, in ms with op "<=" on that tenant and class.
	LimitAssertion string
	// FullReport completes "N more quiet tenants in …": where the figures
	// the text leaves out can be read, e.g. "out/report.json", or how to
	// get them when no report is written. Empty means DefaultFullReport.
	FullReport string
}

func (o TextOptions) fullReport() string {
	if o.FullReport == "" {
		return DefaultFullReport
	}
	return o.FullReport
}

func (o TextOptions) topQuiet() int {
	switch {
	case o.TopQuiet == 0:
		return DefaultTopQuiet
	case o.TopQuiet < 0:
		return 0
	}
	return o.TopQuiet
}

func (o TextOptions) maxListed() int {
	switch {
	case o.MaxListed == 0:
		return DefaultMaxListed
	case o.MaxListed < 0:
		return int(^uint(0) >> 1)
	}
	return o.MaxListed
}

// WriteText writes r to w for a terminal, in sections headed "== ...":
//
//   - the run: scenario, seed, schedule hash, backend, start, notes;
//   - side by side: per tenant and class, the solo p99 and each
//     configuration's p99 with its ratio to solo, then the limit; a "*"
//     marks a value whose tenant and class failed an assertion in that
//     configuration;
//   - per configuration: counters and a table tenant | class | count |
//     rejected | errors | p50 | p99 | max ms | DB-time share;
//   - assertions, failures first, with a summary count;
//   - the verdict per configuration and for the run.
//
// Tables show the dominant tenant, the opts.TopQuiet busiest quiet tenants
// and one QuietAll row per class, so they stay readable for 50 tenants. The
// QuietAll rows are the report's merged rows (Configuration.QuietAll and
// SoloQuietAll) when it has them for the class in every configuration and
// the solo baseline: exact latencies over all quiet requests, "vs solo" the
// merged p99 over the merged solo p99, and the limit of the first assertion
// on QuietAll and that class. Otherwise each is a fallback: counts summed,
// each tenant's DB-time share counted once, and latencies and ratios the
// worst quiet row's, an upper bound of the merged values. A footnote says
// which. Latencies are in ms with two decimals.
// It returns an error wrapping ErrInvalid if r does not pass Validate, or
// the writer's error; nothing is written on a validation error.
func WriteText(w io.Writer, r *Report, opts TextOptions) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("write text: %w", err)
	}
	var buf bytes.Buffer
	t := &textWriter{r: normalized(r), opts: opts, buf: &buf}
	t.dominant = dominantTenant(t.r)
	t.merged = mergedClasses(t.r, t.dominant)
	t.render()
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write text: %w", err)
	}
	return nil
}

type textWriter struct {
	r        *Report
	opts     TextOptions
	dominant string
	// merged holds the quiet classes whose QuietAll rows are the report's
	// merged rows; the others are worst-of fallbacks.
	merged map[string]bool
	buf    *bytes.Buffer
}

type rowKey struct{ tenant, class string }

func keyOf(t TenantRow) rowKey { return rowKey{t.Tenant, t.Class} }

func (t *textWriter) p(format string, args ...any) { fmt.Fprintf(t.buf, format, args...) }

// table returns a tabwriter over the buffer; cells are separated by at least
// two spaces, so a cell may hold single spaces ("quiet (all)").
func (t *textWriter) table() *tabwriter.Writer {
	return tabwriter.NewWriter(t.buf, 0, 0, 2, ' ', 0)
}

func row(tw *tabwriter.Writer, cells ...string) {
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

func (t *textWriter) render() {
	t.header()
	if len(t.r.Configurations) > 0 {
		t.sideBySide()
		for _, c := range t.r.Configurations {
			t.configuration(c)
		}
	}
	writeReplayText(t, t.r)
	t.assertions()
	t.marginal()
	t.verdict()
}

// marginal lists the marginal verdicts apart.
func (t *textWriter) marginal() {
	if len(t.r.Marginal) == 0 {
		return
	}
	t.p("\n== Marginal verdicts: %d (the limit inside the p99's 95%% CI: either verdict is plausible) ==\n", len(t.r.Marginal))
	for _, a := range t.r.Marginal {
		t.p("%s\n", marginalLine(a))
	}
}

func (t *textWriter) header() {
	r := t.r
	if r.Simulated != nil {
		t.p("== noisysim %s (SIMULATED) ==\n", r.Scenario)
	} else {
		t.p("== noisysim %s ==\n", r.Scenario)
	}
	if l := simulatedLine(r); l != "" {
		t.p("%s\n", l)
	}
	if r.File != "" {
		t.p("file      %s\n", r.File)
	}
	t.p("seed      %d\n", r.Seed)
	t.p("schedule  %s\n", r.ScheduleHash)
	t.p("backend   %s\n", r.Backend)
	t.p("started   %s, duration %s\n", r.StartedAt.Format(time.RFC3339), fmtSeconds(r.Duration))
	if r.Incomplete != "" {
		t.p("INCOMPLETE: %s; what was measured until then, no verdict\n", r.Incomplete)
	}
	for _, n := range r.Notes {
		t.p("note: %s\n", n)
	}
	for _, c := range r.Calibrations {
		t.p("calibrated %s\n", calibrationLine(c))
	}
	for _, l := range simulatedClassLines(r) {
		t.p("simulated %s\n", l)
	}
	if q := r.QuietPlan; q != nil {
		t.p("quiet_p99 %s\n", planLine(q))
	}
	if m := r.Machine; m != nil {
		if m.NodeCPU != nil {
			t.p("node cpu  %s\n", m.NodeCPU.line())
		}
		if m.GeneratorCores != "" {
			t.p("generator noisysim on cores %s\n", m.GeneratorCores)
		}
		switch {
		case m.GeneratorPriority != "":
			t.p("generator noisysim in %s\n", m.GeneratorPriority)
		case m.GeneratorPrioritySkipped != "":
			t.p("generator noisysim at the default CPU weight: %s\n", m.GeneratorPrioritySkipped)
		}
		if m.Concurrent != "" {
			t.p("CONCURRENT: %s\n", m.Concurrent)
		}
		if len(m.Windows) > 0 {
			t.p("machine   CPU outside the run per window (disturbed above %.2f CPU%s%s):\n", m.MaxForeignCPU, stealBound(m), stallBound(m))
			for _, w := range m.Windows {
				t.p("  %s\n", w.line())
			}
		}
	}
}

func (t *textWriter) label(tenant string) string {
	if tenant == t.dominant {
		return tenant + " (dominant)"
	}
	return tenant
}

// quietLeaders returns up to n quiet tenants with the highest total count
// over rows, busiest first.
func (t *textWriter) quietLeaders(rows []TenantRow, n int) (shown []string, quiet int) {
	totals := tenantTotals(rows)
	delete(totals, t.dominant)
	names := slices.SortedFunc(maps.Keys(totals), func(a, b string) int {
		return cmp.Or(cmp.Compare(totals[b], totals[a]), natural(a, b))
	})
	return names[:min(n, len(names))], len(names)
}

// limitFor returns the limit shown beside tenant and class, if any: that
// of the base configuration (see baseConfig) when it has one.
func (t *textWriter) limitFor(k rowKey) (float64, bool) {
	base := t.r.Configurations[t.baseConfig()].Name
	for _, pass := range []bool{true, false} {
		if v, ok := t.limitIn(k, func(a Assertion) bool { return !pass || a.Configuration == base }); ok {
			return v, true
		}
	}
	return 0, false
}

// baseConfig is the index of the configuration whose solo p99 and limits
// the side-by-side table shows: the first expected to pass, or the first.
func (t *textWriter) baseConfig() int {
	for i, c := range t.r.Configurations {
		if !c.expectsFailure() {
			return i
		}
	}
	return 0
}

func (t *textWriter) limitIn(k rowKey, ok func(Assertion) bool) (float64, bool) {
	for _, a := range t.r.Assertions {
		if a.Tenant != k.tenant || a.Class != k.class || !ok(a) {
			continue
		}
		if t.opts.LimitAssertion != "" && a.Name == t.opts.LimitAssertion ||
			t.opts.LimitAssertion == "" && a.Unit == "ms" && a.Op == "<=" {
			return a.Limit, true
		}
	}
	return 0, false
}

func (t *textWriter) sideBySide() {
	r := t.r
	var all []TenantRow
	// Each configuration's p99 is set against its own solo rows; the solo
	// column shows the base configuration's (any configuration's for a key
	// the base lacks).
	base := t.baseConfig()
	solo := map[rowKey]TenantRow{}
	soloMerged := map[string]TenantRow{}
	soloOf := make([]map[rowKey]TenantRow, len(r.Configurations))
	soloMergedOf := make([]map[string]TenantRow, len(r.Configurations))
	byConfig := make([]map[rowKey]TenantRow, len(r.Configurations))
	mergedByConfig := make([]map[string]TenantRow, len(r.Configurations))
	differ := false
	for i, c := range r.Configurations {
		all = append(all, c.Tenants...)
		byConfig[i] = map[rowKey]TenantRow{}
		for _, row := range c.Tenants {
			byConfig[i][keyOf(row)] = row
		}
		mergedByConfig[i] = byClass(c.QuietAll)
		soloOf[i] = map[rowKey]TenantRow{}
		for _, row := range c.Solo {
			soloOf[i][keyOf(row)] = row
		}
		soloMergedOf[i] = byClass(c.SoloQuietAll)
		differ = differ || !slices.EqualFunc(c.Solo, r.Configurations[0].Solo, sameP99) ||
			!slices.EqualFunc(c.SoloQuietAll, r.Configurations[0].SoloQuietAll, sameP99)
	}
	for _, i := range append([]int{base}, seq(len(r.Configurations))...) {
		for k, row := range soloOf[i] {
			if _, ok := solo[k]; !ok {
				solo[k] = row
			}
		}
		for class, row := range soloMergedOf[i] {
			if _, ok := soloMerged[class]; !ok {
				soloMerged[class] = row
			}
		}
	}
	marks := make([]map[rowKey]string, len(r.Configurations))
	for i, c := range r.Configurations {
		marks[i] = rowMarks(r, c.Name, t.dominant)
	}

	// Rows: every key seen in the noisy phase or the solo baseline.
	keys := map[rowKey]bool{}
	for _, row := range all {
		keys[keyOf(row)] = true
	}
	for k := range solo {
		keys[k] = true
	}
	shown, quiet := t.quietLeaders(all, t.opts.topQuiet())
	rank := map[string]int{t.dominant: -1}
	for i, name := range shown {
		rank[name] = i
	}
	var rows []rowKey
	groupClasses := map[string]bool{}
	for k := range keys {
		if _, ok := rank[k.tenant]; ok {
			rows = append(rows, k)
		}
		if k.tenant != t.dominant {
			groupClasses[k.class] = true
		}
	}
	for i := range r.Configurations {
		for class := range mergedByConfig[i] {
			groupClasses[class] = true
		}
	}
	for class := range soloMerged {
		groupClasses[class] = true
	}
	slices.SortFunc(rows, func(a, b rowKey) int {
		return cmp.Or(cmp.Compare(rank[a.tenant], rank[b.tenant]), natural(a.class, b.class))
	})

	t.p("\n== Side by side: p99 ms ==\n")
	tw := t.table()
	bl := t.baselineName()
	head := []string{"tenant", "class", bl + " p99"}
	for _, c := range r.Configurations {
		head = append(head, c.Name+" p99", "vs "+bl)
	}
	row(tw, append(head, "limit")...)
	used := map[string]bool{}
	cell := func(v float64, mark string) string {
		marksUsed(used, mark)
		return fmtMS(v) + mark
	}
	for _, k := range rows {
		s, hasSolo := solo[k]
		cells := []string{t.label(k.tenant), k.class, dash(hasSolo, func() string { return fmtMS(s.P99) })}
		for i := range r.Configurations {
			got, ok := byConfig[i][k]
			own, hasOwn := soloOf[i][k]
			cells = append(cells,
				dash(ok, func() string { return cell(got.P99, marks[i][k]) }),
				dash(ok && hasOwn && own.P99 > 0, func() string { return fmtRatio(got.P99 / own.P99) }))
		}
		limit, ok := t.limitFor(k)
		row(tw, append(cells, dash(ok, func() string { return fmtMS(limit) }))...)
	}
	classes := sortedKeys(groupClasses)
	for _, class := range classes {
		// A QuietAll row carries the marks of the group's assertions and
		// of its tenants' (rowMarks).
		bad := func(i int) string { return marks[i][rowKey{QuietAll, class}] }
		var cells []string
		if t.merged[class] {
			s, hasSolo := soloMerged[class]
			cells = []string{QuietAll, class, dash(hasSolo, func() string { return fmtMS(s.P99) })}
			for i := range r.Configurations {
				got, ok := mergedByConfig[i][class]
				own, hasOwn := soloMergedOf[i][class]
				cells = append(cells,
					dash(ok, func() string { return cell(got.P99, bad(i)) }),
					dash(ok && hasOwn && own.P99 > 0, func() string { return fmtRatio(got.P99 / own.P99) }))
			}
		} else {
			cells = t.worstSideBySide(class, solo, soloOf, byConfig, bad, cell)
		}
		limit, ok := t.limitFor(rowKey{QuietAll, class})
		row(tw, append(cells, dash(ok, func() string { return fmtMS(limit) }))...)
	}
	tw.Flush()
	for _, l := range markLegend(used) {
		t.p("%s\n", l)
	}
	if differ {
		t.p("%s p99 and limit: configuration %s; each \"vs %s\" against its own configuration's %s baseline\n", bl, r.Configurations[base].Name, bl, bl)
	}
	if len(classes) > 0 {
		t.p("%s: %s", QuietAll, quietNote(classes, t.merged))
		if hidden := quiet - len(shown); hidden > 0 {
			t.p("; %d more quiet tenants in %s", hidden, t.opts.fullReport())
		}
		t.p("\n")
	}
}

// baselineName names the window the side by side's first column and its
// ratios read: quiet_p99's baseline as its assertions say (a timeline's
// "before"), "solo" when they do not.
func (t *textWriter) baselineName() string {
	for _, a := range t.r.Assertions {
		if a.Name == "quiet_p99" && a.Baseline != "" {
			return a.Baseline
		}
	}
	return "solo"
}

// worstSideBySide returns the fallback cells of the side-by-side QuietAll
// row of class, up to the limit: per column the worst quiet tenant's p99 and
// the worst quiet tenant's ratio to its own solo p99.
func (t *textWriter) worstSideBySide(class string, solo map[rowKey]TenantRow, soloOf, byConfig []map[rowKey]TenantRow,
	bad func(int) string, cell func(float64, string) string) []string {
	var worstSolo float64
	hasSolo := false
	for k, s := range solo {
		if k.class == class && k.tenant != t.dominant {
			worstSolo, hasSolo = max(worstSolo, s.P99), true
		}
	}
	cells := []string{QuietAll, class, dash(hasSolo, func() string { return fmtMS(worstSolo) })}
	for i := range byConfig {
		var worst, worstRatio float64
		seen, anyRatio := false, false
		for k, got := range byConfig[i] {
			if k.class != class || k.tenant == t.dominant {
				continue
			}
			worst, seen = max(worst, got.P99), true
			if s, ok := soloOf[i][k]; ok && s.P99 > 0 {
				worstRatio, anyRatio = max(worstRatio, got.P99/s.P99), true
			}
		}
		cells = append(cells,
			dash(seen, func() string { return cell(worst, bad(i)) }),
			dash(anyRatio, func() string { return fmtRatio(worstRatio) }))
	}
	return cells
}

func (t *textWriter) configuration(c Configuration) {
	if c.Incomplete {
		t.p("\n== %s: expect %s, cut short: not evaluated ==\n", c.Name, expectation(c))
	} else {
		t.p("\n== %s: expect %s, assertions %s, %s ==\n", c.Name, expectation(c), passFail(c.Passed), asExpectedWords(c))
	}
	t.p("%s\n", statsLine(c.Stats))
	if c.QuietChecks != nil {
		t.p("%s\n", checkedLine(c.QuietChecks))
	}
	if c.Duration > 0 {
		t.p("timeline %s\n", fmtSeconds(c.Duration))
	}
	t.windows(c)
	for _, a := range c.Actions {
		t.p("action %s\n", actionLine(a))
	}
	if hasFaultAction(c) {
		t.p("  %s\n", faultLegend)
	}
	for _, l := range serviceLines(c) {
		t.p("%s\n", l)
	}
	if l := recoveryLine(c); l != "" {
		t.p("%s\n", l)
	}
	if c.Writer != nil {
		t.p("writer %s\n", writerLine(c.Writer))
	}
	shown, quiet := t.quietLeaders(c.Tenants, t.opts.topQuiet())
	visible := map[string]bool{t.dominant: true}
	for _, name := range shown {
		visible[name] = true
	}
	marks := rowMarks(t.r, c.Name, t.dominant)
	used := map[string]bool{}
	p99 := func(tr TenantRow) string {
		m := marks[keyOf(tr)]
		marksUsed(used, m)
		return fmtMS(tr.P99) + m
	}
	tw := t.table()
	row(tw, "tenant", "class", "count", "rejected", "errors", "p50 ms", "p99 ms", "max ms", "DB time")
	for _, tr := range displayOrder(c.Tenants, t.dominant) {
		if visible[tr.Tenant] {
			row(tw, t.label(tr.Tenant), tr.Class, strconv.FormatInt(tr.Count, 10), strconv.FormatInt(tr.Rejected, 10),
				strconv.FormatInt(tr.Errors, 10), fmtMS(tr.P50), p99(tr), fmtMS(tr.Max), fmtShare(tr.DBTimeShare))
		}
	}
	for _, agg := range quietRows(c.Tenants, c.QuietAll, t.dominant, t.merged) {
		row(tw, QuietAll, agg.Class, strconv.FormatInt(agg.Count, 10), strconv.FormatInt(agg.Rejected, 10),
			strconv.FormatInt(agg.Errors, 10), fmtMS(agg.P50), p99(agg), fmtMS(agg.Max), fmtShare(agg.DBTimeShare))
	}
	tw.Flush()
	for _, l := range markLegend(used) {
		t.p("%s\n", l)
	}
	if hidden := quiet - len(shown); hidden > 0 {
		t.p("%d more quiet tenants in %s\n", hidden, t.opts.fullReport())
	}
	if len(c.TopDBTime) > 0 {
		n := min(len(c.TopDBTime), t.opts.topQuiet()+1)
		parts := make([]string, n)
		for i, s := range c.TopDBTime[:n] {
			parts[i] = s.Tenant + " " + fmtShare(s.Share)
		}
		t.p("top DB time: %s\n", strings.Join(parts, ", "))
	}
	t.faults(c)
}

// windows prints one row per window of the configuration's timeline
// (windowRows), so that the phases between the baseline and the judged
// window (a move, a burst, an incident) show beside them. The table after
// it is the judged window's.
func (t *textWriter) windows(c Configuration) {
	rows := windowRows(c, t.dominant, t.merged)
	if len(rows) == 0 {
		return
	}
	tw := t.table()
	row(tw, windowHeader...)
	for _, cells := range rows {
		row(tw, cells...)
	}
	tw.Flush()
}

// windowHeader names the cells of windowRows.
var windowHeader = []string{"window", "span s", "requests", "errors", "rate/s", "dominant p99 ms", QuietAll + " p99 ms", "top DB time"}

// windowRows returns a row per window of c: its name (a warm-up marked),
// span from the timeline's start, requests, errors and achieved rate, the
// dominant tenant's p99 per class, the quiet tenants' per class (merged for
// the classes in merged, else the worst quiet tenant's), and the top
// tenant by DB time.
func windowRows(c Configuration, dominant string, merged map[string]bool) [][]string {
	var out [][]string
	for _, w := range c.Windows {
		name := w.Name
		if !w.Measured {
			name += " (warm-up)"
		}
		var dom, quiet []string
		for _, tr := range displayOrder(w.Tenants, dominant) {
			if tr.Tenant == dominant {
				dom = append(dom, tr.Class+" "+fmtMS(tr.P99))
			}
		}
		for _, q := range quietRows(w.Tenants, w.QuietAll, dominant, merged) {
			quiet = append(quiet, q.Class+" "+fmtMS(q.P99))
		}
		top := "-"
		if len(w.TopDBTime) > 0 {
			top = w.TopDBTime[0].Tenant + " " + fmtShare(w.TopDBTime[0].Share)
		}
		out = append(out, []string{name, fmt.Sprintf("%.1f–%.1f", w.Start, w.End), strconv.FormatInt(w.Stats.Issued, 10),
			strconv.FormatInt(w.Stats.Errors, 10), strconv.FormatFloat(w.Stats.AchievedRate, 'f', 1, 64),
			dash(len(dom) > 0, func() string { return strings.Join(dom, ", ") }),
			dash(len(quiet) > 0, func() string { return strings.Join(quiet, ", ") }), top})
	}
	return out
}

func (t *textWriter) assertions() {
	r := t.r
	t.p("\n== Assertions: %s ==\n", countAssertions(r, r.Assertions))
	if len(r.Assertions) == 0 {
		return
	}
	tw := t.table()
	limit := t.opts.maxListed()
	// Non-passing assertions come in groups of one outcome and one
	// configuration; each group lists up to limit lines, then a count.
	var group string
	listed, hidden := 0, 0
	endGroup := func() {
		if hidden > 0 {
			outcome, cfg, _ := strings.Cut(group, " ")
			row(tw, "...", cfg, "", "", fmt.Sprintf("%d more %s not listed", hidden, outcome))
		}
		listed, hidden = 0, 0
	}
	passed := map[string]int{} // "configuration name" → passed
	total := map[string]int{}
	var passedOrder []Assertion
	for _, a := range leadsFirst(r, failuresFirst(r)) {
		outcome := verdict(a, expectsFailure(r, a))
		key := a.Configuration + " " + a.Name
		total[key]++
		if a.Passed && !a.Skipped {
			if passed[key] == 0 {
				passedOrder = append(passedOrder, a)
			}
			passed[key]++
			if !t.opts.AllAssertions {
				continue
			}
		} else {
			if g := outcome + " " + a.Configuration; g != group {
				endGroup()
				group = g
			}
			if listed >= limit {
				hidden++
				continue
			}
			listed++
		}
		row(tw, outcome, a.Configuration, a.Name, dash(subject(a) != "", func() string { return subject(a) }),
			joinNonEmpty("  ", check(a), a.Detail))
	}
	endGroup()
	if !t.opts.AllAssertions {
		for _, a := range passedOrder {
			key := a.Configuration + " " + a.Name
			row(tw, "PASS", a.Configuration, a.Name, "", fmt.Sprintf("%d of %d passed", passed[key], total[key]))
		}
	}
	tw.Flush()
}

func (t *textWriter) verdict() {
	t.p("\n== Verdict ==\n")
	tw := t.table()
	for _, c := range t.r.Configurations {
		if c.Incomplete {
			row(tw, c.Name, "expect "+expectation(c), "incomplete: not evaluated")
			continue
		}
		row(tw, c.Name, "expect "+expectation(c), "assertions "+passFail(c.Passed), asExpectedWords(c))
	}
	tw.Flush()
	if t.r.Incomplete != "" {
		t.p("RESULT: INCOMPLETE (%s)\n", t.r.Incomplete)
		return
	}
	result := passFail(t.r.Passed) + AttemptsWords(t.r)
	if why := t.r.Machine.DisturbedWhy(); why != "" {
		t.p("RESULT: %s, DISTURBED (%s); the figures may not be the system's own\n", result, why)
	} else {
		t.p("RESULT: %s\n", result)
	}
	if n := len(t.r.Marginal); n > 0 {
		t.p("MARGINAL: %s could go either way (listed above); noisysim run --strict fails on them\n", plural(n, "verdict"))
	}
}

// AttemptsWords returns " after K attempts" for a report of noisysim run
// --retry-disturbed, with "(the machine was disturbed in every attempt …)"
// when each failed on a window the machine disturbed; "" without it.
func AttemptsWords(r *Report) string {
	if len(r.Attempts) == 0 {
		return ""
	}
	s := " after " + plural(len(r.Attempts), "attempt")
	if r.DisturbedEveryAttempt() {
		s += " (the machine was disturbed in every attempt: the failure may be the machine's, not the system's)"
	}
	return s
}

// dash returns f() if ok, else "-".
func dash(ok bool, f func() string) string {
	if !ok {
		return "-"
	}
	return f()
}

// fmtRatio formats a ratio with two decimals and an "x".
func fmtRatio(v float64) string { return strconv.FormatFloat(zero(v), 'f', 2, 64) + "x" }

// sameP99 reports whether two rows are the same tenant and class with the
// same p99.
func sameP99(a, b TenantRow) bool {
	return a.Tenant == b.Tenant && a.Class == b.Class && a.P99 == b.P99
}

// seq returns 0..n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// stealBound returns ", steal above 5% of the CPU the machine ran" when the guard
// judged steal.
func stealBound(m *Machine) string {
	if m.MaxStealShare <= 0 {
		return ""
	}
	return fmt.Sprintf(", steal above %.0f%% of the CPU the machine ran", 100*m.MaxStealShare)
}

// stallBound returns ", or a stall of 250 ms" when the stall meter ran.
func stallBound(m *Machine) string {
	if m.MaxStallMs <= 0 {
		return ""
	}
	return fmt.Sprintf(", or a stall of %.0f ms", m.MaxStallMs)
}

// Plural returns e.g. "1 verdict", "2 verdicts".
func Plural(n int, noun string) string { return plural(n, noun) }

// plural returns e.g. "1 verdict", "2 verdicts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
