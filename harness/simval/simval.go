package simval

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/reports"
)

// DefaultTolerance is the largest relative distance of the simulated median
// from the real one that counts as agreeing: issue 18's 25%.
const DefaultTolerance = 0.25

// The files WriteDir writes.
const (
	JSONFile     = "validate.json"
	MarkdownFile = "validate.md"
)

// Kinds of figure.
const (
	KindQuietP99   = "quiet_p99"  // the quiet tenants' merged p99 of a class, ms
	KindThroughput = "throughput" // stats.achieved_rate_per_s, calls per second
	KindRejected   = "rejected"   // stats.rejected, calls
	// KindQuietOverSolo is a quiet class's quiet p99 over its solo p99 in
	// the same run (the ratio quiet_p99 judges), ×: shown, not judged. A
	// machine that runs every call slower in one run than in another
	// moves both and not their ratio, so it separates the model's shape
	// from the machine's speed on the day.
	KindQuietOverSolo = "quiet_over_solo"
)

// Figures are what the comparison reads of one configuration of a report.
type Figures struct {
	// QuietP99 is the quiet (all) p99 per quiet class, in ms.
	QuietP99 map[string]float64
	// SoloP99 is the quiet (all) p99 per quiet class of the solo window,
	// in ms: only classes with one above 0.
	SoloP99 map[string]float64
	// Classes are QuietP99's classes in the report's order.
	Classes []string
	// Throughput is the achieved rate, per second; Rejected the calls the
	// limiters rejected.
	Throughput float64
	Rejected   int64
}

// FiguresOf returns rep's figures by configuration name.
func FiguresOf(rep *reports.Report) map[string]Figures {
	out := map[string]Figures{}
	for _, c := range rep.Configurations {
		f := Figures{QuietP99: map[string]float64{}, SoloP99: map[string]float64{}, Throughput: c.Stats.AchievedRate, Rejected: c.Stats.Rejected}
		for _, row := range c.SoloQuietAll {
			if row.P99 > 0 {
				f.SoloP99[row.Class] = row.P99
			}
		}
		for _, row := range c.QuietAll {
			if row.Count == 0 {
				continue
			}
			if _, ok := f.QuietP99[row.Class]; !ok {
				f.Classes = append(f.Classes, row.Class)
			}
			f.QuietP99[row.Class] = row.P99
		}
		out[c.Name] = f
	}
	return out
}

// value returns figure kind of class (a quiet class for KindQuietP99 and
// KindQuietOverSolo) in f: none when f lacks it (a quiet/solo without a
// solo p99 above 0).
func (f Figures) value(kind, class string) (float64, bool) {
	switch kind {
	case KindQuietP99:
		v, ok := f.QuietP99[class]
		return v, ok
	case KindQuietOverSolo:
		q, ok := f.QuietP99[class]
		s := f.SoloP99[class]
		if !ok || s <= 0 {
			return 0, false
		}
		return q / s, true
	case KindThroughput:
		return f.Throughput, true
	case KindRejected:
		return float64(f.Rejected), true
	}
	return 0, false
}

// Run is one real run and its simulation at the same seed.
type Run struct {
	// Name names the run, e.g. "run-2".
	Name string
	Seed int64
	Real *reports.Report
	Sim  *reports.Report
}

// Spread is a figure over runs: how many, their median, least and most.
// It is a sweep's: the same figure a sweep gives per point over trials.
type Spread = sweep.Spread

// Seed is one run's figure, real and simulated.
type Seed struct {
	Run  string  `json:"run"`
	Seed int64   `json:"seed"`
	Real float64 `json:"real"`
	Sim  float64 `json:"simulated"`
	// Ratio is Sim / Real; nil when Real is 0 and Sim is not.
	Ratio *float64 `json:"ratio,omitempty"`
	// Excluded is true for a DISTURBED real run: in neither median.
	Excluded bool `json:"excluded,omitempty"`
}

// Figure is one figure of one configuration over the runs.
type Figure struct {
	Configuration string `json:"configuration"`
	Kind          string `json:"kind"`
	// Class is the quiet class of a KindQuietP99 or KindQuietOverSolo
	// figure.
	Class string `json:"class,omitempty"`
	Unit  string `json:"unit"`
	// ShownOnly is true for a figure shown, not judged (KindQuietOverSolo):
	// Within is false, and it is in neither Outside nor the verdict.
	ShownOnly bool `json:"shown_only,omitempty"`
	// Real and Sim are over the runs not excluded, the same seeds.
	Real Spread `json:"real"`
	Sim  Spread `json:"simulated"`
	// Ratio is Sim.Median / Real.Median; nil when there is no real run to
	// compare or Real.Median is 0 and Sim.Median is not.
	Ratio *float64 `json:"ratio,omitempty"`
	// Within is true when Ratio lies within the tolerance.
	Within bool `json:"within"`
	// Seeds are every run's figure, in run order.
	Seeds []Seed `json:"seeds"`
	// Calibration is the same figure of the calibration runs themselves
	// (real, those not DISTURBED or incomplete), CalibrationRatio its
	// median over Real's: how far the real runs the model was fitted to
	// lie from the real runs it is checked on, the distance a model that
	// reproduces its calibration exactly would show (AddCalibration; nil
	// without).
	Calibration      *Spread  `json:"calibration,omitempty"`
	CalibrationRatio *float64 `json:"calibration_over_real,omitempty"`
}

// Name returns e.g. "quiet p99 lookup", "quiet/solo lookup", "throughput"
// or "rejected".
func (f Figure) Name() string {
	switch f.Kind {
	case KindQuietP99:
		return "quiet p99 " + f.Class
	case KindQuietOverSolo:
		return "quiet/solo " + f.Class
	}
	return f.Kind
}

// Exclusion is a real run left out of one configuration's medians: DISTURBED
// or incomplete (cut short).
type Exclusion struct {
	Run           string `json:"run"`
	Seed          int64  `json:"seed"`
	Configuration string `json:"configuration"`
	// Why lists the DISTURBED windows and why each was, and why the run
	// is incomplete, if it is.
	Why string `json:"why"`
}

// Result is the comparison of a scenario's simulations with its real runs.
type Result struct {
	Scenario string `json:"scenario"`
	// Against is the directory of the real runs; Calibration the report the
	// simulations drew their service times from, CalibrationSeed its seed
	// and CalibrationDisturbed its DISTURBED windows, if any.
	// CalibrationNotes say what of the calibration carries into the
	// simulated figures (harness.CalibrationNotes).
	Against         string `json:"against"`
	Calibration     string `json:"calibration"`
	CalibrationSeed int64  `json:"calibration_seed"`
	// CalibrationSeeds lists every calibration run's seed when the model
	// was calibrated on several ("42, 43, 44"; Calibration then names each
	// file, comma-separated, and CalibrationSeed is the first's); "" for one.
	CalibrationSeeds     string   `json:"calibration_seeds,omitempty"`
	CalibrationDisturbed string   `json:"calibration_disturbed,omitempty"`
	CalibrationNotes     []string `json:"calibration_notes,omitempty"`
	// Window is the quiet_p99 window the figures are of.
	Window    string  `json:"window"`
	Tolerance float64 `json:"tolerance"`
	// Runs are the real runs compared, by name, in order.
	Runs     []string    `json:"runs"`
	Excluded []Exclusion `json:"excluded,omitempty"`
	Figures  []Figure    `json:"figures"`
	// Outside counts the judged figures not within the tolerance, Unjudged
	// those of them with no real run to compare (every one excluded).
	Outside  int `json:"outside"`
	Unjudged int `json:"unjudged"`
}

// Compare compares each run's real and simulated figures per configuration
// of the simulations (in their order) and returns the result; the caller
// fills Scenario, Against, Calibration and Window.
func Compare(runs []Run, tolerance float64) *Result {
	res := &Result{Tolerance: tolerance}
	if len(runs) == 0 {
		return res
	}
	var configs []string
	for _, c := range runs[0].Sim.Configurations {
		configs = append(configs, c.Name)
	}
	type pair struct{ real, sim Figures }
	figs := make([]map[string]pair, len(runs))
	excluded := make([]map[string]bool, len(runs))
	for i, r := range runs {
		res.Runs = append(res.Runs, r.Name)
		real, sim := FiguresOf(r.Real), FiguresOf(r.Sim)
		figs[i] = map[string]pair{}
		excluded[i] = map[string]bool{}
		for _, c := range configs {
			figs[i][c] = pair{real[c], sim[c]}
			why := disturbed(r.Real.Machine, c, configs)
			if r.Real.Incomplete != "" {
				// A run cut short measured part of its windows: its
				// figures are not the scenario's.
				why = strings.TrimPrefix(why+"; ", "; ") + "incomplete: " + r.Real.Incomplete
			}
			if why != "" {
				excluded[i][c] = true
				res.Excluded = append(res.Excluded, Exclusion{Run: r.Name, Seed: r.Seed, Configuration: c, Why: why})
			}
		}
	}
	for _, c := range configs {
		var classes []string
		for i := range runs {
			for _, cl := range figs[i][c].real.Classes {
				if !slices.Contains(classes, cl) {
					classes = append(classes, cl)
				}
			}
		}
		add := func(kind, class, unit string) {
			f := Figure{Configuration: c, Kind: kind, Class: class, Unit: unit, ShownOnly: kind == KindQuietOverSolo}
			var rs, ss []float64
			for i, r := range runs {
				rv, rok := figs[i][c].real.value(kind, class)
				sv, sok := figs[i][c].sim.value(kind, class)
				if !rok || !sok {
					continue
				}
				s := Seed{Run: r.Name, Seed: r.Seed, Real: rv, Sim: sv, Ratio: ratio(rv, sv), Excluded: excluded[i][c]}
				f.Seeds = append(f.Seeds, s)
				if !s.Excluded {
					rs, ss = append(rs, rv), append(ss, sv)
				}
			}
			if f.ShownOnly && len(f.Seeds) == 0 {
				return // no solo p99 to divide by
			}
			f.Real, f.Sim = sweep.SpreadOf(rs), sweep.SpreadOf(ss)
			if len(rs) > 0 {
				f.Ratio = ratio(f.Real.Median, f.Sim.Median)
			}
			f.Within = !f.ShownOnly && f.Ratio != nil && *f.Ratio >= 1-tolerance && *f.Ratio <= 1+tolerance
			if !f.Within && !f.ShownOnly {
				res.Outside++
				if len(rs) == 0 {
					res.Unjudged++
				}
			}
			res.Figures = append(res.Figures, f)
		}
		for _, cl := range classes {
			add(KindQuietP99, cl, "ms")
		}
		for _, cl := range classes {
			add(KindQuietOverSolo, cl, "x")
		}
		add(KindThroughput, "", "/s")
		add(KindRejected, "", "calls")
	}
	return res
}

// AddCalibration sets each figure's Calibration and CalibrationRatio from
// cal, the real runs the simulations were calibrated on; a run DISTURBED
// in a configuration's windows, or incomplete, is left out of that
// configuration's, as in Compare.
func (r *Result) AddCalibration(cal []*reports.Report) {
	var configs []string
	for _, f := range r.Figures {
		if !slices.Contains(configs, f.Configuration) {
			configs = append(configs, f.Configuration)
		}
	}
	for i := range r.Figures {
		f := &r.Figures[i]
		var vs []float64
		for _, rep := range cal {
			if rep.Incomplete != "" || disturbed(rep.Machine, f.Configuration, configs) != "" {
				continue
			}
			fig, ok := FiguresOf(rep)[f.Configuration]
			if !ok {
				continue
			}
			if v, ok := fig.value(f.Kind, f.Class); ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		sp := sweep.SpreadOf(vs)
		f.Calibration = &sp
		if f.Real.N > 0 {
			f.CalibrationRatio = ratio(f.Real.Median, sp.Median)
		}
	}
}

// within reports whether x lies within r's tolerance of 1.
func (r *Result) within(x *float64) bool { return within(r.Tolerance, x) }

// within reports whether x lies within tolerance of 1.
func within(tolerance float64, x *float64) bool {
	return x != nil && *x >= 1-tolerance && *x <= 1+tolerance
}

// calibrationLines returns, when AddCalibration was called, the table of
// the calibration runs' own real figures against the compared runs' real
// medians, and a line on the figures not within the tolerance whose real
// runs lie as far apart themselves.
func (r *Result) calibrationLines(markdown bool) []string {
	var rows []Figure
	for _, f := range r.Figures {
		if f.Calibration != nil {
			rows = append(rows, f)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	var b strings.Builder
	title := "the calibration runs' own real figures against the compared runs' real median (what a model that reproduces its calibration exactly would show):"
	if markdown {
		fmt.Fprintf(&b, "The %s\n\n", strings.TrimPrefix(title, "the "))
		fmt.Fprintf(&b, "| Configuration | Figure | Calibration runs' real median | Min–max (n) | Calibration/real | Within %.0f%% |\n|---|---|---|---|---|---|\n", 100*r.Tolerance)
		for _, f := range rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", f.Configuration, f.Name(), median(*f.Calibration, f.Unit), rangeOf(*f.Calibration, f.Unit),
				ratioText(f.CalibrationRatio), calibrationYesNo(r, f))
		}
	} else {
		b.WriteString(title + "\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "configuration\tfigure\tcalibration runs' real median\tmin–max (n)\tcalibration/real\twithin %.0f%%\n", 100*r.Tolerance)
		for _, f := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Configuration, f.Name(), median(*f.Calibration, f.Unit), rangeOf(*f.Calibration, f.Unit),
				ratioText(f.CalibrationRatio), calibrationYesNo(r, f))
		}
		tw.Flush()
	}
	lines := []string{strings.TrimRight(b.String(), "\n")}
	var apart []string
	for _, f := range rows {
		if f.Ratio != nil && !f.Within && !f.ShownOnly && f.CalibrationRatio != nil && !r.within(f.CalibrationRatio) {
			apart = append(apart, fmt.Sprintf("%s %s (simulated %s, calibration runs %s the real median)", f.Configuration, f.Name(), ratioText(f.Ratio), ratioText(f.CalibrationRatio)))
		}
	}
	if len(apart) > 0 {
		lines = append(lines, fmt.Sprintf("not within %.0f%% between the real runs themselves either: %s; a model fitted to the calibration runs cannot come closer than they are (more runs on each side narrow both medians)",
			100*r.Tolerance, strings.Join(apart, ", ")))
	}
	return lines
}

// calibrationYesNo says whether f's calibration runs lie within the
// tolerance of the compared runs: "(shown)" for a figure not judged.
func calibrationYesNo(r *Result, f Figure) string {
	if f.ShownOnly {
		return "(shown)"
	}
	return yesNoRatio(r.Tolerance, f.CalibrationRatio)
}

func yesNoRatio(tolerance float64, x *float64) string {
	switch {
	case x == nil:
		return "-"
	case within(tolerance, x):
		return "yes"
	}
	return "NO"
}

// disturbed returns why m marks a window of configuration config (named
// "phase (config)") or of no configuration in configs DISTURBED; "" when
// none is.
func disturbed(m *reports.Machine, config string, configs []string) string {
	var why []string
	for _, w := range m.Disturbed() {
		of := ""
		for _, c := range configs {
			if strings.HasSuffix(w.Window, " ("+c+")") {
				of = c
			}
		}
		if of == "" || of == config {
			why = append(why, w.Window+": "+m.Why(w))
		}
	}
	return strings.Join(why, "; ")
}

// ratio returns sim / real: 1 for 0 against 0, nil for anything else
// against 0.
func ratio(real, sim float64) *float64 {
	var r float64
	switch {
	case real != 0:
		r = sim / real
	case sim == 0:
		r = 1
	default:
		return nil
	}
	return &r
}

// value formats v in unit: "1.29 ms", "1958.5/s", "16470".
func value(v float64, unit string) string {
	switch unit {
	case "ms":
		if v >= 100 {
			return fmt.Sprintf("%.0f ms", v)
		}
		return fmt.Sprintf("%.2f ms", v)
	case "/s":
		return fmt.Sprintf("%.1f/s", v)
	case "x":
		return fmt.Sprintf("%.2fx", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func rangeOf(s Spread, unit string) string {
	if s.N == 0 {
		return "-"
	}
	lo := value(s.Min, unit)
	for _, u := range []string{" ms", "/s", "x"} {
		lo = strings.TrimSuffix(lo, u)
	}
	return fmt.Sprintf("%s–%s (%d)", lo, value(s.Max, unit), s.N)
}

func ratioText(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *r)
}

func yesNo(f Figure) string {
	switch {
	case f.ShownOnly:
		return "(shown)"
	case f.Real.N == 0:
		return "no (no undisturbed run)"
	case f.Within:
		return "yes"
	}
	return "NO"
}

// calibrationSeeds says the calibration's seed, or its runs' seeds when
// there are several.
func calibrationSeeds(seed int64, seeds string) string {
	if seeds != "" {
		return "seeds " + seeds + ": service times averaged, the scheduler wait fitted to their median quiet p99"
	}
	return fmt.Sprintf("seed %d", seed)
}

// header returns the lines above the table.
func (r *Result) header() []string {
	lines := []string{
		fmt.Sprintf("SIMULATED vs REAL: %s, %s of %s simulated at their seeds, calibrated on %s (%s)",
			r.Scenario, reports.Plural(len(r.Runs), "run"), r.Against, r.Calibration, calibrationSeeds(r.CalibrationSeed, r.CalibrationSeeds)),
		fmt.Sprintf("figures of the %q window (quiet_p99's); medians over the real runs not DISTURBED and the simulations of the same seeds; within %.0f%%: simulated/real median in [%.2f, %.2f]",
			r.Window, 100*r.Tolerance, 1-r.Tolerance, 1+r.Tolerance),
	}
	return append(lines, noteLines(r.CalibrationNotes)...)
}

// noteLines returns a line per note: "note: …". A validation's header says
// so what of its calibration (or of its input) carries into its verdict.
func noteLines(notes []string) []string {
	var out []string
	for _, n := range notes {
		out = append(out, "note: "+n)
	}
	return out
}

// exclusions returns a line per configuration with runs excluded, then one
// per excluded run.
func (r *Result) exclusions() []string {
	if len(r.Excluded) == 0 {
		return []string{fmt.Sprintf("excluded: none of the %d real runs was DISTURBED or incomplete", len(r.Runs))}
	}
	n := map[string]int{}
	var order []string
	for _, e := range r.Excluded {
		if n[e.Configuration] == 0 {
			order = append(order, e.Configuration)
		}
		n[e.Configuration]++
	}
	var parts []string
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%s %d of %d", c, n[c], len(r.Runs)))
	}
	lines := []string{"excluded as DISTURBED or incomplete (real run and its simulation out of the medians): " + strings.Join(parts, ", ")}
	for _, e := range r.Excluded {
		lines = append(lines, fmt.Sprintf("  %s (seed %d) %s: %s", e.Run, e.Seed, e.Configuration, e.Why))
	}
	return lines
}

// Judged returns how many of r's figures are judged (not ShownOnly).
func (r *Result) Judged() int {
	n := 0
	for _, f := range r.Figures {
		if !f.ShownOnly {
			n++
		}
	}
	return n
}

// verdict returns the closing line.
func (r *Result) verdict() string {
	judged := r.Judged()
	shown := len(r.Figures) - judged
	also := ""
	if shown > 0 {
		also = fmt.Sprintf("; %s shown, not judged", reports.Plural(shown, "quiet/solo figure"))
	}
	if r.Outside == 0 {
		return fmt.Sprintf("every judged figure within %.0f%% (%d figures%s)", 100*r.Tolerance, judged, also)
	}
	s := fmt.Sprintf("%d of %d judged figures NOT within %.0f%%%s", r.Outside, judged, 100*r.Tolerance, also)
	if r.Unjudged > 0 {
		s += fmt.Sprintf(" (%d with no undisturbed real run to compare)", r.Unjudged)
	}
	return s
}

// WriteText writes r for a terminal: the header, the table of medians and
// spreads, the per-seed ratios and the exclusions.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	for _, l := range r.header() {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "configuration\tfigure\treal median\treal min–max (n)\tsimulated median\tsimulated min–max (n)\tsim/real\twithin %.0f%%\n", 100*r.Tolerance)
	for _, f := range r.Figures {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Configuration, f.Name(), median(f.Real, f.Unit), rangeOf(f.Real, f.Unit),
			median(f.Sim, f.Unit), rangeOf(f.Sim, f.Unit), ratioText(f.Ratio), yesNo(f))
	}
	tw.Flush()
	b.WriteString("\nsimulated/real per seed (in brackets: DISTURBED, in no median):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "configuration\tfigure")
	for _, s := range seedsOf(r) {
		fmt.Fprintf(tw, "\t%d", s)
	}
	fmt.Fprintln(tw)
	for _, f := range r.Figures {
		fmt.Fprintf(tw, "%s\t%s", f.Configuration, f.Name())
		for _, s := range seedsOf(r) {
			fmt.Fprintf(tw, "\t%s", seedCell(f, s))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	b.WriteString("\n")
	if cl := r.calibrationLines(false); len(cl) > 0 {
		for _, l := range cl {
			b.WriteString(l + "\n")
		}
		b.WriteString("\n")
	}
	for _, l := range r.exclusions() {
		b.WriteString(l + "\n")
	}
	b.WriteString(r.verdict() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func median(s Spread, unit string) string {
	if s.N == 0 {
		return "-"
	}
	return value(s.Median, unit)
}

// seedsOf returns the seeds of r's figures in run order.
func seedsOf(r *Result) []int64 {
	var out []int64
	for _, f := range r.Figures {
		for _, s := range f.Seeds {
			if !slices.Contains(out, s.Seed) {
				out = append(out, s.Seed)
			}
		}
	}
	return out
}

func seedCell(f Figure, seed int64) string {
	for _, s := range f.Seeds {
		if s.Seed == seed {
			if s.Excluded {
				return "(" + ratioText(s.Ratio) + ")"
			}
			return ratioText(s.Ratio)
		}
	}
	return ""
}

// WriteMarkdown writes r as Markdown: the same as WriteText.
func WriteMarkdown(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# noisysim simulate vs real runs: %s\n\n", r.Scenario)
	for _, l := range r.header() {
		b.WriteString(l + "\n\n")
	}
	fmt.Fprintf(&b, "| Configuration | Figure | Real median | Real min–max (n) | Simulated median | Simulated min–max (n) | Sim/real | Within %.0f%% |\n", 100*r.Tolerance)
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.Figures {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Configuration, f.Name(), median(f.Real, f.Unit), rangeOf(f.Real, f.Unit),
			median(f.Sim, f.Unit), rangeOf(f.Sim, f.Unit), ratioText(f.Ratio), yesNo(f))
	}
	b.WriteString("\nSimulated/real per seed (in brackets: DISTURBED, in no median):\n\n| Configuration | Figure |")
	seeds := seedsOf(r)
	for _, s := range seeds {
		fmt.Fprintf(&b, " %d |", s)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(seeds)) + "\n")
	for _, f := range r.Figures {
		fmt.Fprintf(&b, "| %s | %s |", f.Configuration, f.Name())
		for _, s := range seeds {
			fmt.Fprintf(&b, " %s |", seedCell(f, s))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, l := range r.calibrationLines(true) {
		b.WriteString(l + "\n\n")
	}
	return writeMarkdownEnd(w, &b, r.exclusions(), r.verdict())
}

// writeMarkdownEnd ends a Markdown validation in b with its exclusions
// and its verdict's lines (in both, an indented line becomes a list item),
// and writes b to w.
func writeMarkdownEnd(w io.Writer, b *strings.Builder, exclusions []string, verdict ...string) error {
	list := func(lines []string) {
		for _, l := range lines {
			if strings.HasPrefix(l, "  ") {
				l = "- " + strings.TrimSpace(l)
			}
			b.WriteString(l + "\n")
		}
	}
	list(exclusions)
	for i, l := range verdict {
		if i == 0 || !strings.HasPrefix(l, "  ") {
			b.WriteString("\n")
		}
		list([]string{l})
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r *Result) error { return writeJSON(w, r) }

func writeJSON(w io.Writer, r any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteDir writes r as JSONFile and MarkdownFile into dir, creating it. It
// never overwrites: a file there already is an error (os.ErrExist,
// wrapped), checked for both before either is written.
func WriteDir(dir string, r *Result) error {
	return writeDir(dir, func(w io.Writer) error { return WriteJSON(w, r) }, func(w io.Writer) error { return WriteMarkdown(w, r) })
}

// writeDir writes JSONFile with writeJSON and MarkdownFile with writeMD
// into dir, as WriteDir.
func writeDir(dir string, writeJSON, writeMD func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write validation: %w", err)
	}
	if err := Existing(dir); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{JSONFile, writeJSON}, {MarkdownFile, writeMD}} {
		path := filepath.Join(dir, f.name)
		out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("write validation: %w", err)
		}
		err = cmp.Or(f.write(out), out.Close())
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// Existing returns an error naming the first of WriteDir's files dir holds
// already (os.ErrExist, wrapped); nil when it holds neither.
func Existing(dir string) error {
	for _, name := range []string{JSONFile, MarkdownFile} {
		path := filepath.Join(dir, name)
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%s: %w", path, os.ErrExist)
		}
	}
	return nil
}
