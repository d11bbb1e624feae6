package simval

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/noisysim/noisysim/harness/sweep"
)

// SweepTrial is one simulated trial of a sweep: its point's values, its
// seed and the simulation's figures by configuration (FiguresOf).
type SweepTrial struct {
	Values  map[string]float64
	Seed    int64
	Figures map[string]Figures
}

// Comparison is one figure at one point of one configuration: the real
// trials' spread, the simulated trials' (the same seeds), and Sim.Median /
// Real.Median (nil when no real trial counts, or Real.Median is 0 and
// Sim.Median is not).
type Comparison struct {
	Real  Spread   `json:"real"`
	Sim   Spread   `json:"simulated"`
	Ratio *float64 `json:"ratio,omitempty"`
}

// Judged is a Comparison with its verdict: Ratio within the tolerance.
// A comparison with no real trial (Real.N 0: every one DISTURBED, or for
// the quiet p99 its figure unjudged by quiet_p99) is unjudged: not Within,
// and in neither count of its Tally.
type Judged struct {
	Comparison
	Within bool `json:"within"`
}

// Unjudged reports whether j has no real trial to judge by.
func (j Judged) Unjudged() bool { return j.Real.N == 0 }

// Tally counts one kind of figure (quiet p99, or throughput) over a sweep's
// rows: Judged the rows with a real figure to compare (a trial not
// DISTURBED; for the quiet p99, whose quiet figure quiet_p99 judged),
// Within those of them within the tolerance, Unjudged the rows with none
// (counted in neither).
type Tally struct {
	Judged   int `json:"judged"`
	Within   int `json:"within"`
	Unjudged int `json:"unjudged"`
}

// Outside returns the judged figures not within the tolerance.
func (t Tally) Outside() int { return t.Judged - t.Within }

func (t *Tally) add(j Judged) {
	switch {
	case j.Unjudged():
		t.Unjudged++
	case j.Within:
		t.Judged++
		t.Within++
	default:
		t.Judged++
	}
}

// SweepRow is one point of one configuration.
type SweepRow struct {
	Configuration string             `json:"configuration"`
	Values        map[string]float64 `json:"values"`
	// Trials are the real trials at the point, Excluded those of them
	// DISTURBED (in no median).
	Trials   int `json:"trials"`
	Excluded int `json:"excluded"`
	// QuietUnjudged counts the real trials not DISTURBED whose quiet
	// figure quiet_p99 did not judge (sweep.ConfigTrial.QuietUnjudged):
	// left out of the quiet p99 and quiet/solo medians with their
	// simulations; their throughput is compared.
	QuietUnjudged int `json:"quiet_unjudged,omitempty"`
	// QuietClasses are the real trials' quiet_class, each once: the
	// simulated quiet p99 of a trial is the p99 of its real trial's class.
	QuietClasses []string `json:"quiet_classes"`
	QuietP99     Judged   `json:"quiet_p99_ms"`
	Throughput   Judged   `json:"throughput_per_s"`
	// QuietOverSolo is informational: no verdict, not in the count.
	QuietOverSolo Comparison `json:"quiet_over_solo"`
	// Calibration, at the point the calibration runs ran at (each of the
	// sweep's keys at their value), is their own real quiet p99 as a
	// sweep keeps it (each run's quiet_class; a run DISTURBED or whose
	// quiet figure is unjudged left out), and CalibrationRatio its median
	// over QuietP99.Real.Median: what a model that reproduced its
	// calibration exactly would show at this point (AddCalibration).
	Calibration      *Spread  `json:"calibration_quiet_p99_ms,omitempty"`
	CalibrationRatio *float64 `json:"calibration_over_real,omitempty"`
}

// CalibrationTrial is one calibration run seen as a sweep's trial: the
// values of the sweep's keys it ran at (its scenario file's) and what a
// sweep keeps of its report (sweep.TrialOf).
type CalibrationTrial struct {
	Values map[string]float64
	Trial  sweep.Trial
}

// TrialRef names one trial of a sweep: its point's values and its seed,
// and for a figure of one configuration, the configuration.
type TrialRef struct {
	Values        map[string]float64 `json:"values"`
	Seed          int64              `json:"seed"`
	Configuration string             `json:"configuration,omitempty"`
}

// SweepResult is the comparison of a real sweep with the same sweep
// simulated (noisysim simulate SCENARIO --against SWEEPDIR).
type SweepResult struct {
	Scenario string `json:"scenario"`
	// Against is the real sweep's sweep.json, File the scenario file it
	// ran, Vary its --vary specs and Keys their keys, Only its --only.
	Against string   `json:"against"`
	File    string   `json:"file"`
	Vary    []string `json:"vary"`
	Keys    []string `json:"keys"`
	Only    string   `json:"only,omitempty"`
	// Calibration is the report the simulations drew their service times
	// from, CalibrationSeed its seed, CalibrationDisturbed its DISTURBED
	// windows, if any, and CalibrationNotes what of it carries into the
	// simulated figures (harness.CalibrationNotes: DISTURBED windows, a
	// run cut short or failed, other data).
	Calibration     string `json:"calibration"`
	CalibrationSeed int64  `json:"calibration_seed"`
	// CalibrationSeeds lists every calibration run's seed when the model
	// was calibrated on several ("42, 43, 44"; Calibration then names each
	// file, comma-separated, and CalibrationSeed is the first's); "" for one.
	CalibrationSeeds     string   `json:"calibration_seeds,omitempty"`
	CalibrationDisturbed string   `json:"calibration_disturbed,omitempty"`
	CalibrationNotes     []string `json:"calibration_notes,omitempty"`
	// Notes say what else the comparison could not check, e.g. a
	// sweep.json that records no scenario shape.
	Notes     []string `json:"notes,omitempty"`
	Tolerance float64  `json:"tolerance"`
	// Trials counts the real trials compared; Excluded are those of them
	// DISTURBED, left out of every median with their simulations.
	Trials   int        `json:"trials"`
	Excluded []TrialRef `json:"excluded,omitempty"`
	// QuietUnjudged are the configurations' real trials, not DISTURBED,
	// whose quiet figure quiet_p99 did not judge (it judged no class; the
	// worst class of all stood in): out of the quiet p99 medians and
	// count with their simulations, the throughput still compared.
	QuietUnjudged []TrialRef `json:"quiet_unjudged,omitempty"`
	// Rows are per configuration (in the sweep's order), then per point.
	Rows []SweepRow `json:"rows"`
	// QuietP99 and Throughput count each figure's rows apart: the quiet
	// p99 is what the model is checked on; the throughput of an open loop
	// is the schedule's whenever a configuration keeps up, so it matches
	// by construction and would only swell a joint count.
	QuietP99   Tally `json:"quiet_p99"`
	Throughput Tally `json:"throughput"`
	// CalibrationAt names the points the calibration runs ran at
	// ("classes.report.rate=16"), each once, and CalibrationUnplaced why a
	// run's point is not known (AddCalibration).
	CalibrationAt       []string `json:"calibration_at,omitempty"`
	CalibrationUnplaced []string `json:"calibration_unplaced,omitempty"`
}

// AddCalibration sets, on each row at a point a calibration run of cal ran
// at, Calibration and CalibrationRatio (SweepRow), and CalibrationAt.
// The real trials at the calibration's point and the calibration runs
// are two groups of seeds at the same settings: how far apart their
// medians lie is how closely any model fitted to the calibration can
// come there.
func (r *SweepResult) AddCalibration(cal []CalibrationTrial) {
	for _, c := range cal {
		if at := r.pointText(c.Values); !slices.Contains(r.CalibrationAt, at) {
			r.CalibrationAt = append(r.CalibrationAt, at)
		}
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		var vs []float64
		for _, c := range cal {
			if c.Trial.Disturbed || !r.samePoint(c.Values, row.Values) {
				continue
			}
			ix := slices.IndexFunc(c.Trial.Configurations, func(ct sweep.ConfigTrial) bool { return ct.Name == row.Configuration })
			if ix < 0 {
				continue
			}
			if ct := c.Trial.Configurations[ix]; !ct.QuietUnjudged && ct.QuietP99 > 0 {
				vs = append(vs, ct.QuietP99)
			}
		}
		if len(vs) == 0 {
			continue
		}
		sp := sweep.SpreadOf(vs)
		row.Calibration = &sp
		if row.QuietP99.Real.N > 0 {
			row.CalibrationRatio = ratio(row.QuietP99.Real.Median, sp.Median)
		}
	}
}

// samePoint reports whether a and b give each of r's keys the same value
// (to a relative 1e-9: a value read from a scenario file against one a
// sweep computed).
func (r *SweepResult) samePoint(a, b map[string]float64) bool {
	for _, k := range r.Keys {
		x, okA := a[k]
		y, okB := b[k]
		if !okA || !okB || math.Abs(x-y) > 1e-9*max(math.Abs(x), math.Abs(y), 1) {
			return false
		}
	}
	return true
}

// calibrationLines returns, when AddCalibration was called, the
// calibration runs' own real quiet p99 at their point against the sweep's
// real median there, a line on the rows not within the tolerance whose
// real groups lie as far apart themselves, or why no row could be set
// beside them.
func (r *SweepResult) calibrationLines(markdown bool) []string {
	var rows []SweepRow
	for _, row := range r.Rows {
		if row.Calibration != nil {
			rows = append(rows, row)
		}
	}
	var lines []string
	for _, u := range r.CalibrationUnplaced {
		lines = append(lines, "calibration runs not set beside the sweep: "+u)
	}
	if len(rows) == 0 {
		var at, off []string
		for _, p := range r.CalibrationAt {
			if slices.ContainsFunc(r.Rows, func(row SweepRow) bool { return r.pointText(row.Values) == p }) {
				at = append(at, p)
			} else {
				off = append(off, p)
			}
		}
		if len(off) > 0 {
			lines = append(lines, fmt.Sprintf("the calibration runs ran at %s, not a point of this sweep: no real figure of theirs to set beside the sweep's", strings.Join(off, "; ")))
		}
		if len(at) > 0 {
			lines = append(lines, fmt.Sprintf("the calibration runs at %s have no quiet figure to set beside the sweep's (each DISTURBED, or its quiet figure unjudged by quiet_p99)", strings.Join(at, "; ")))
		}
		return lines
	}
	var b strings.Builder
	at := "their point"
	if slices.ContainsFunc(rows, func(row SweepRow) bool { return !r.samePoint(row.Values, rows[0].Values) }) {
		at = "each one's point"
	}
	title := "the calibration runs' own real quiet p99 at " + at + " against the sweep's real median there (what a model that reproduces its calibration exactly would show):"
	w := fmt.Sprintf("within %.0f%%", 100*r.Tolerance)
	if markdown {
		fmt.Fprintf(&b, "The %s\n\n| Configuration | Point | Calibration runs' real median | Min–max (n) | Calibration/real | %s |\n|---|---|---|---|---|---|\n", strings.TrimPrefix(title, "the "), strings.ToUpper(w[:1])+w[1:])
		for _, row := range rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.Configuration, r.pointText(row.Values), median(*row.Calibration, "ms"), rangeOf(*row.Calibration, "ms"),
				ratioText(row.CalibrationRatio), yesNoRatio(r.Tolerance, row.CalibrationRatio))
		}
	} else {
		b.WriteString(title + "\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "configuration\tpoint\tcalibration runs' real median\tmin–max (n)\tcalibration/real\t%s\n", w)
		for _, row := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Configuration, r.pointText(row.Values), median(*row.Calibration, "ms"), rangeOf(*row.Calibration, "ms"),
				ratioText(row.CalibrationRatio), yesNoRatio(r.Tolerance, row.CalibrationRatio))
		}
		tw.Flush()
	}
	lines = append(lines, strings.TrimRight(b.String(), "\n"))
	var apart []string
	for _, row := range rows {
		q := row.QuietP99
		if !q.Unjudged() && !q.Within && row.CalibrationRatio != nil && !within(r.Tolerance, row.CalibrationRatio) {
			apart = append(apart, fmt.Sprintf("%s %s (simulated %s, calibration runs %s the real median)", row.Configuration, r.pointText(row.Values), ratioText(q.Ratio), ratioText(row.CalibrationRatio)))
		}
	}
	if len(apart) > 0 {
		lines = append(lines, fmt.Sprintf("not within %.0f%% between the real runs themselves either: %s; a model fitted to the calibration runs cannot come closer than they are (more runs on each side narrow both medians)",
			100*r.Tolerance, strings.Join(apart, ", ")))
	}
	return lines
}

// CompareSweep compares each trial of the real sweep with its simulation
// (sims: the same point values and seed), per point and configuration
// (only's, when not empty): the median over the trials not DISTURBED of
// quiet_p99_ms (the simulation's p99 of the real trial's quiet_class) and
// quiet_over_solo, both without the trials whose quiet figure is
// unjudged (quiet_unjudged), and of throughput_per_s. A real trial without a simulation,
// or a simulation without the configuration, is an error naming it by
// sweep.json field; the caller fills Scenario, Against and Calibration.
func CompareSweep(real *sweep.Doc, sims []SweepTrial, only string, tolerance float64) (*SweepResult, error) {
	res := &SweepResult{File: real.File, Only: only, Tolerance: tolerance}
	for _, v := range real.Vary {
		res.Vary, res.Keys = append(res.Vary, v.Spec), append(res.Keys, v.Key)
	}
	var configs []string
	for _, p := range real.Points {
		for _, t := range p.Trials {
			for _, c := range t.Configurations {
				if (only == "" || c.Name == only) && !slices.Contains(configs, c.Name) {
					configs = append(configs, c.Name)
				}
			}
		}
	}
	// sim[i][j] is the simulation of real.Points[i].Trials[j].
	sim := make([][]map[string]Figures, len(real.Points))
	for i, p := range real.Points {
		for j, t := range p.Trials {
			k := slices.IndexFunc(sims, func(s SweepTrial) bool { return s.Seed == t.Seed && maps.Equal(s.Values, p.Values) })
			if k < 0 {
				return nil, fmt.Errorf("points[%d].trials[%d] (%s): the scenario's sweep has no such trial (not the file the sweep ran?)",
					i, j, trialText(real, p.Values, t.Seed))
			}
			sim[i] = append(sim[i], sims[k].Figures)
			res.Trials++
			if t.Disturbed {
				res.Excluded = append(res.Excluded, TrialRef{Values: p.Values, Seed: t.Seed})
			}
		}
	}
	for _, c := range configs {
		for i, p := range real.Points {
			row := SweepRow{Configuration: c, Values: p.Values}
			var rq, sq, rt, st, rqs, sqs []float64
			for j, t := range p.Trials {
				ix := slices.IndexFunc(t.Configurations, func(ct sweep.ConfigTrial) bool { return ct.Name == c })
				if ix < 0 {
					continue
				}
				ct := t.Configurations[ix]
				sf, ok := sim[i][j][c]
				if !ok {
					return nil, fmt.Errorf("points[%d].trials[%d] (%s): the simulation has no configuration %q",
						i, j, trialText(real, p.Values, t.Seed), c)
				}
				if _, ok := sf.QuietP99[ct.QuietClass]; !ok {
					return nil, fmt.Errorf("points[%d].trials[%d].configurations[%d].quiet_class %q (%s): the simulation has no quiet p99 of that class",
						i, j, ix, ct.QuietClass, trialText(real, p.Values, t.Seed))
				}
				row.Trials++
				if ct.QuietClass != "" && !slices.Contains(row.QuietClasses, ct.QuietClass) {
					row.QuietClasses = append(row.QuietClasses, ct.QuietClass)
				}
				if t.Disturbed {
					row.Excluded++
					continue
				}
				rt, st = append(rt, ct.Throughput), append(st, sf.Throughput)
				if ct.QuietUnjudged {
					// No verdict rests on the real figure: nothing
					// to check the model's against.
					row.QuietUnjudged++
					res.QuietUnjudged = append(res.QuietUnjudged, TrialRef{Values: p.Values, Seed: t.Seed, Configuration: c})
					continue
				}
				rq, sq = append(rq, ct.QuietP99), append(sq, sf.QuietP99[ct.QuietClass])
				if ct.QuietOverSolo > 0 {
					rqs = append(rqs, ct.QuietOverSolo)
				}
				if solo := sf.SoloP99[ct.QuietClass]; solo > 0 {
					sqs = append(sqs, sf.QuietP99[ct.QuietClass]/solo)
				}
			}
			if row.Trials == 0 {
				continue
			}
			row.QuietP99 = judge(rq, sq, tolerance)
			row.Throughput = judge(rt, st, tolerance)
			res.QuietP99.add(row.QuietP99)
			res.Throughput.add(row.Throughput)
			row.QuietOverSolo = compare(rqs, sqs)
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

// compare returns the spreads of real and sim and the ratio of their
// medians.
func compare(real, sim []float64) Comparison {
	c := Comparison{Real: sweep.SpreadOf(real), Sim: sweep.SpreadOf(sim)}
	if len(real) > 0 && len(sim) > 0 {
		c.Ratio = ratio(c.Real.Median, c.Sim.Median)
	}
	return c
}

// judge compares real and sim (the same trials).
func judge(real, sim []float64, tolerance float64) Judged {
	j := Judged{Comparison: compare(real, sim)}
	j.Within = within(tolerance, j.Ratio)
	return j
}

// valuesText returns a point's values in the sweep's key order:
// "classes.lookup.rate=200 tenants.count=50".
func valuesText(d *sweep.Doc, values map[string]float64) string {
	var parts []string
	for _, v := range d.Vary {
		if x, ok := values[v.Key]; ok {
			parts = append(parts, v.Key+"="+num(x))
		}
	}
	return strings.Join(parts, " ")
}

// trialText names a trial in messages: "rate=20, seed 3", or "seed 3" for
// a point without values.
func trialText(d *sweep.Doc, values map[string]float64, seed int64) string {
	if v := valuesText(d, values); v != "" {
		return fmt.Sprintf("%s, seed %d", v, seed)
	}
	return fmt.Sprintf("seed %d", seed)
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func (r *SweepResult) pointText(values map[string]float64) string {
	var parts []string
	for _, k := range r.Keys {
		parts = append(parts, k+"="+num(values[k]))
	}
	return strings.Join(parts, " ")
}

func (r *SweepResult) header() []string {
	only := ""
	if r.Only != "" {
		only = ", --only " + r.Only
	}
	lines := []string{
		fmt.Sprintf("SIMULATED vs REAL SWEEP: %s, the sweep in %s (%s, --vary %s%s) re-run in virtual time at its points and seeds, %d real trials, calibrated on %s (%s)",
			r.Scenario, r.Against, r.File, strings.Join(r.Vary, " --vary "), only, r.Trials, r.Calibration, calibrationSeeds(r.CalibrationSeed, r.CalibrationSeeds)),
		fmt.Sprintf("medians over the real trials not DISTURBED and the simulations of the same seeds; quiet p99 is of each real trial's quiet_class (the simulated p99 of the same class); within %.0f%%: simulated/real median in [%.2f, %.2f]; quiet/solo is informational",
			100*r.Tolerance, 1-r.Tolerance, 1+r.Tolerance),
	}
	lines = append(lines, noteLines(r.CalibrationNotes)...)
	return append(lines, noteLines(r.Notes)...)
}

// configurations returns the rows' configurations in order.
func (r *SweepResult) configurations() []string {
	var out []string
	for _, row := range r.Rows {
		if !slices.Contains(out, row.Configuration) {
			out = append(out, row.Configuration)
		}
	}
	return out
}

func (r *SweepResult) columns() []string {
	w := fmt.Sprintf("within %.0f%%", 100*r.Tolerance)
	cols := slices.Clone(r.Keys)
	return append(cols, "trials", "quiet class", "quiet p99 real", "real min–max (n)", "simulated", "sim/real", w,
		"throughput real", "real min–max (n)", "simulated", "sim/real", w, "quiet/solo real", "simulated")
}

func (r *SweepResult) cells(row SweepRow) []string {
	var out []string
	for _, k := range r.Keys {
		out = append(out, num(row.Values[k]))
	}
	trials := strconv.Itoa(row.Trials)
	if row.Excluded > 0 {
		trials = fmt.Sprintf("%d of %d", row.Trials-row.Excluded, row.Trials)
	}
	class := strings.Join(row.QuietClasses, ", ")
	if class == "" {
		class = "-"
	}
	qs := func(s Spread) string {
		if s.N == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", s.Median)
	}
	return append(out, trials, class,
		median(row.QuietP99.Real, "ms"), rangeOf(row.QuietP99.Real, "ms"), median(row.QuietP99.Sim, "ms"), ratioText(row.QuietP99.Ratio), quietJudgedText(row),
		median(row.Throughput.Real, "/s"), rangeOf(row.Throughput.Real, "/s"), median(row.Throughput.Sim, "/s"), ratioText(row.Throughput.Ratio), judgedText(row.Throughput),
		qs(row.QuietOverSolo.Real), qs(row.QuietOverSolo.Sim))
}

// quietJudgedText is judgedText of row's quiet p99, saying how many real
// quiet figures quiet_p99 did not judge were left out.
func quietJudgedText(row SweepRow) string {
	switch {
	case row.QuietUnjudged == 0:
		return judgedText(row.QuietP99)
	case row.QuietP99.Unjudged() && row.QuietUnjudged == row.Trials-row.Excluded:
		return "unjudged (quiet_p99 judged no class)"
	}
	return fmt.Sprintf("%s (%d unjudged left out)", judgedText(row.QuietP99), row.QuietUnjudged)
}

func judgedText(j Judged) string {
	switch {
	case j.Unjudged():
		return "unjudged (no undisturbed trial)"
	case j.Within:
		return "yes"
	}
	return "NO"
}

func (r *SweepResult) exclusions() []string {
	if len(r.Excluded) == 0 {
		return append([]string{fmt.Sprintf("excluded: none of the %d real trials was DISTURBED", r.Trials)}, r.quietUnjudged()...)
	}
	lines := []string{fmt.Sprintf("excluded as DISTURBED (real trial and its simulation out of the medians): %d of %d real trials", len(r.Excluded), r.Trials)}
	for _, e := range r.Excluded {
		lines = append(lines, fmt.Sprintf("  %s seed %d", r.pointText(e.Values), e.Seed))
	}
	return append(lines, r.quietUnjudged()...)
}

// quietUnjudged lists the real quiet figures left out as unjudged; none
// when there are none.
func (r *SweepResult) quietUnjudged() []string {
	if len(r.QuietUnjudged) == 0 {
		return nil
	}
	lines := []string{fmt.Sprintf("quiet figure unjudged (quiet_p99 judged no class, the worst class of all stood in; out of the quiet p99 medians and count with its simulation, throughput still compared): %d real trials and configurations",
		len(r.QuietUnjudged))}
	for _, u := range r.QuietUnjudged {
		lines = append(lines, fmt.Sprintf("  %s %s seed %d", u.Configuration, r.pointText(u.Values), u.Seed))
	}
	return lines
}

// verdict returns the closing lines: the quiet p99's count ("quiet p99:
// N of M within 25%"), the throughput's apart, and the rows no real trial
// judges, listed.
func (r *SweepResult) verdict() []string {
	left := ""
	if n := len(r.QuietUnjudged); n > 0 {
		left = fmt.Sprintf("; %d real quiet figures unjudged by quiet_p99 left out", n)
	}
	lines := []string{
		fmt.Sprintf("quiet p99: %d of %d within %.0f%% (per point and configuration%s)", r.QuietP99.Within, r.QuietP99.Judged, 100*r.Tolerance, left),
		fmt.Sprintf("throughput: %d of %d within %.0f%% (an open loop issues the schedule's arrivals: it matches by construction while a configuration keeps up)",
			r.Throughput.Within, r.Throughput.Judged, 100*r.Tolerance),
	}
	var disturbed, quiet []string
	for _, row := range r.Rows {
		switch {
		case row.Throughput.Unjudged():
			disturbed = append(disturbed, fmt.Sprintf("  %s %s", row.Configuration, r.pointText(row.Values)))
		case row.QuietP99.Unjudged():
			quiet = append(quiet, fmt.Sprintf("  %s %s", row.Configuration, r.pointText(row.Values)))
		}
	}
	if len(disturbed) > 0 {
		lines = append(lines, fmt.Sprintf("unjudged (every real trial DISTURBED; in neither count): %d of %d points and configurations", len(disturbed), len(r.Rows)))
		lines = append(lines, disturbed...)
	}
	if len(quiet) > 0 {
		lines = append(lines, fmt.Sprintf("quiet p99 unjudged (every real quiet figure not DISTURBED unjudged by quiet_p99; not in the quiet p99 count): %d of %d points and configurations", len(quiet), len(r.Rows)))
		lines = append(lines, quiet...)
	}
	return lines
}

// Outside returns how many judged figures, quiet p99 and throughput
// together, are not within the tolerance.
func (r *SweepResult) Outside() int { return r.QuietP99.Outside() + r.Throughput.Outside() }

// WriteSweepText writes r for a terminal: the header, a table per
// configuration with a row per point, the exclusions and the count of
// figures within the tolerance.
func WriteSweepText(w io.Writer, r *SweepResult) error {
	var b strings.Builder
	for _, l := range r.header() {
		b.WriteString(l + "\n")
	}
	for _, c := range r.configurations() {
		fmt.Fprintf(&b, "\nconfiguration %s:\n", c)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(r.columns(), "\t"))
		for _, row := range r.Rows {
			if row.Configuration == c {
				fmt.Fprintln(tw, strings.Join(r.cells(row), "\t"))
			}
		}
		tw.Flush()
	}
	b.WriteString("\n")
	for _, l := range r.calibrationLines(false) {
		b.WriteString(l + "\n")
	}
	for _, l := range r.exclusions() {
		b.WriteString(l + "\n")
	}
	for _, l := range r.verdict() {
		b.WriteString(l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSweepMarkdown writes r as Markdown: the same as WriteSweepText.
func WriteSweepMarkdown(w io.Writer, r *SweepResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# noisysim simulate vs a real sweep: %s\n\n", r.Scenario)
	for _, l := range r.header() {
		b.WriteString(l + "\n\n")
	}
	cols := r.columns()
	for _, c := range r.configurations() {
		fmt.Fprintf(&b, "## Configuration %s\n\n| %s |\n|%s\n", c, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, row := range r.Rows {
			if row.Configuration == c {
				fmt.Fprintf(&b, "| %s |\n", strings.Join(r.cells(row), " | "))
			}
		}
		b.WriteString("\n")
	}
	for _, l := range r.calibrationLines(true) {
		b.WriteString(l + "\n\n")
	}
	return writeMarkdownEnd(w, &b, r.exclusions(), r.verdict()...)
}

// WriteSweepJSON writes r as indented JSON.
func WriteSweepJSON(w io.Writer, r *SweepResult) error { return writeJSON(w, r) }

// WriteSweepDir writes r as JSONFile and MarkdownFile into dir, never over
// existing ones, as WriteDir.
func WriteSweepDir(dir string, r *SweepResult) error {
	return writeDir(dir, func(w io.Writer) error { return WriteSweepJSON(w, r) }, func(w io.Writer) error { return WriteSweepMarkdown(w, r) })
}
