package sweep

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteText writes the sweep as terminal tables: per point and
// configuration, the trials that held, the throughput, the quiet p99 over
// the solo p99 (median and min–max over trials), rejections, errors and the
// top tenants' DB-time shares; then each knee.
func WriteText(w io.Writer, d *Doc) error {
	if d.Simulated != "" {
		fmt.Fprintf(w, "SIMULATED: every figure from noisysim simulate, calibrated on %s\n", d.Simulated)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, r := range rows(d) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if anyUnjudged(d) {
		fmt.Fprintln(w, UnjudgedNote)
	}
	for _, v := range d.Vary {
		if b := BaselineSentence(v, d.Simulated); b != "" {
			fmt.Fprintln(w, b)
		}
	}
	for _, k := range d.Knees {
		fmt.Fprintln(w, KneeSentence(k))
	}
	if !d.Complete {
		fmt.Fprintln(w, "INCOMPLETE: the sweep was interrupted; --resume continues it")
	}
	return nil
}

// WriteMarkdown writes the sweep as Markdown (sweep.md).
func WriteMarkdown(w io.Writer, d *Doc) error {
	fmt.Fprintf(w, "# Sweep of %s\n\n", d.Scenario)
	fmt.Fprintf(w, "File `%s`, %s, %d trial(s) per point, varying %s.", d.File, d.Search, d.Trials, strings.Join(d.specs(), ", "))
	if !d.Complete {
		fmt.Fprintf(w, " **Incomplete** (interrupted; `--resume` continues it).")
	}
	if d.Simulated != "" {
		fmt.Fprintf(w, " **Simulated** (virtual time, calibrated on `%s`).", d.Simulated)
	}
	fmt.Fprintf(w, "\n\n")
	for _, v := range d.Vary {
		if b := BaselineSentence(v, d.Simulated); b != "" {
			fmt.Fprintf(w, "%s\n\n", b)
		}
	}
	if len(d.Knees) > 0 {
		fmt.Fprintf(w, "## Knees\n\n")
		for _, k := range d.Knees {
			fmt.Fprintf(w, "- %s\n", KneeSentence(k))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "## Points\n\n")
	fmt.Fprintf(w, "| %s |\n", strings.Join(columns, " | "))
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows(d) {
		_, err := fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		if err != nil {
			return err
		}
	}
	if anyUnjudged(d) {
		fmt.Fprintf(w, "\n%s\n", UnjudgedNote)
	}
	return nil
}

// UnjudgedNote explains the mark rows put on a quiet figure quiet_p99 did
// not judge (ConfigSummary.QuietUnjudged).
const UnjudgedNote = "unjudged: quiet_p99 judged no quiet class in those trials (every class too few samples); " +
	"the quiet figures are the worst class of all, and no verdict rests on them"

// anyUnjudged reports whether a row of d carries the unjudged mark.
func anyUnjudged(d *Doc) bool {
	for _, p := range d.Points {
		for _, s := range p.Summary {
			if (p.Only == "" || s.Name == p.Only) && s.QuietUnjudged > 0 {
				return true
			}
		}
	}
	return false
}

// unjudgedMark is the suffix of a summary's quiet figures: " unjudged"
// when quiet_p99 judged no trial's, " unjudged 1/3" when it did not judge
// one of three.
func unjudgedMark(s ConfigSummary) string {
	switch {
	case s.QuietUnjudged == 0:
		return ""
	case s.QuietUnjudged == s.Trials:
		return " unjudged"
	}
	return fmt.Sprintf(" unjudged %d/%d", s.QuietUnjudged, s.Trials)
}

// BaselineSentence says, for a calibrated class's rate (VaryDoc.LoadFactor),
// where today's value comes from: "classes.report.rate: the file writes
// load_factor 3, no rate; today's rate 12.3/s is its calibration, run once
// before the search (report alone: 250 ms mean over 9 queries; 3 × pool 40
// of naive); each point writes rate: V in place of load_factor". In a
// simulated sweep (simulated names its calibration report, Doc.Simulated)
// nothing runs: today's rate is "taken from the calibration report FILE
// before the search". Empty for any other key.
func BaselineSentence(v VaryDoc, simulated string) string {
	if v.LoadFactor == 0 {
		return ""
	}
	lf := strconv.FormatFloat(v.LoadFactor, 'g', -1, 64)
	s := fmt.Sprintf("%s: the file writes load_factor %s, no rate; each point writes rate: V in place of load_factor", v.Key, lf)
	c := v.Calibration
	if c == nil {
		return s + " (not calibrated: no today's rate)"
	}
	how, samples := "run once before the search", fmt.Sprintf(" over %d queries", c.Samples)
	if simulated != "" {
		how = "taken from the calibration report " + simulated + " before the search"
	}
	if c.Samples == 0 {
		samples = " (simulated: the calibration report's service time)"
	}
	return fmt.Sprintf("%s; today's rate %s/s is the calibration's, %s (%s alone: %s ms mean%s; %s × pool %d of %s / mean)",
		s, strconv.FormatFloat(c.Rate, 'g', 4, 64), how, c.Class, strconv.FormatFloat(c.ServiceMean, 'g', 4, 64), samples, lf, c.Pool, c.PoolName)
}

// KneeSentence says how far a configuration holds, relative to the
// scenario's own value: "isolated holds classes.report.rate to 36 (3×
// today's 12; 3/3 trials held there, 1/3 at 48)".
func KneeSentence(k Knee) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
	failed := ""
	if len(k.Failed) > 0 {
		failed = ": " + strings.Join(k.Failed, ", ") + " failed"
	}
	today := "today's"
	if k.BaselineCalibrated {
		today = "today's calibrated"
	}
	switch {
	case !k.Found:
		return fmt.Sprintf("%s fails %s already at %s, the bottom of the range (%d/%d trials held%s; %s value %s)",
			k.Configuration, k.Key, f(k.Lo), k.FailPasses, k.Trials, failed, today, f(k.Baseline))
	case k.AboveRange:
		return fmt.Sprintf("%s holds %s to at least %s, the top of the range (%s× %s %s; %d/%d trials held)",
			k.Configuration, k.Key, f(k.Knee), f(k.Headroom), today, f(k.Baseline), k.KneePasses, k.Trials)
	}
	return fmt.Sprintf("%s holds %s to %s (%s× %s %s; %d/%d trials held there, %d/%d at %s%s)",
		k.Configuration, k.Key, f(k.Knee), f(k.Headroom), today, f(k.Baseline), k.KneePasses, k.Trials, k.FailPasses, k.Trials, f(k.FailAt), failed)
}

// columns are the heads of rows' columns.
var columns = []string{"point", "configuration", "held", "throughput/s", "quiet p99 ms", "quiet/solo p99 (min–max)", "rejected", "errors", "top DB time"}

func rows(d *Doc) [][]string {
	var out [][]string
	for _, p := range d.Points {
		var vals []string
		for _, v := range d.Vary {
			if x, ok := p.Values[v.Key]; ok {
				vals = append(vals, v.Key+"="+strconv.FormatFloat(x, 'g', -1, 64))
			}
		}
		pt := strings.Join(vals, " ")
		for _, s := range p.Summary {
			if p.Only != "" && s.Name != p.Only {
				continue
			}
			var shares []string
			for _, sh := range s.TopDBTime {
				shares = append(shares, fmt.Sprintf("%s %.0f%%", sh.Tenant, 100*sh.Share))
			}
			ratio := "-"
			if s.QuietOverSolo.N > 0 {
				ratio = fmt.Sprintf("%.2f× (%.2f–%.2f)", s.QuietOverSolo.Median, s.QuietOverSolo.Min, s.QuietOverSolo.Max) + unjudgedMark(s)
			}
			out = append(out, []string{pt, s.Name, fmt.Sprintf("%d/%d", s.Held, s.Trials),
				fmt.Sprintf("%.0f", s.Throughput.Median), fmt.Sprintf("%.1f", s.QuietP99.Median) + unjudgedMark(s), ratio,
				fmt.Sprintf("%.0f", s.Rejected.Median), fmt.Sprintf("%.0f", s.Errors.Median), strings.Join(shares, ", ")})
		}
	}
	return out
}
