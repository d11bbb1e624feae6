package simval

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/reports"
)

// rep returns a report of one configuration "c" with a quiet (all) lookup
// p99, a throughput and rejections; disturbed names a DISTURBED window.
func rep(p99, rate float64, rejected int64, disturbed string) *reports.Report {
	r := &reports.Report{Configurations: []reports.Configuration{{Name: "c",
		QuietAll: []reports.TenantRow{{Tenant: reports.QuietAll, Class: "lookup", Count: 100, P99: p99}},
		Stats:    reports.RunStats{AchievedRate: rate, Rejected: rejected}}}}
	if disturbed != "" {
		r.Machine = &reports.Machine{MaxForeignCPU: 0.5, Windows: []reports.WindowLoad{{Window: disturbed, ForeignCPU: 0.9, Disturbed: true}}}
	}
	return r
}

// TestCompare: medians over the runs not DISTURBED (real and simulated of
// the same seeds), the ratio of medians, the tolerance, 0 against 0.
func TestCompare(t *testing.T) {
	runs := []Run{
		{Name: "run-2", Seed: 2, Real: rep(1, 100, 0, ""), Sim: rep(1.5, 100, 0, "")},
		{Name: "run-3", Seed: 3, Real: rep(3, 100, 0, "solo (other)"), Sim: rep(2.5, 90, 0, "")},
		{Name: "run-4", Seed: 4, Real: rep(2, 100, 0, ""), Sim: rep(2.9, 80, 0, "")},
		// Out of the medians: its window of c, and one of no configuration.
		{Name: "run-5", Seed: 5, Real: rep(500, 1, 9, "run (c)"), Sim: rep(1, 1000, 0, "")},
		{Name: "run-6", Seed: 6, Real: rep(500, 1, 9, "calibrate (report)"), Sim: rep(1, 1000, 0, "")},
	}
	res := Compare(runs, DefaultTolerance)
	if len(res.Figures) != 3 {
		t.Fatalf("%d figures, want 3: %+v", len(res.Figures), res.Figures)
	}
	p99, rate, rej := res.Figures[0], res.Figures[1], res.Figures[2]
	// "solo (other)" is a window of no configuration of the simulations:
	// it counts against c too.
	if len(res.Excluded) != 3 || res.Excluded[0].Run != "run-3" || res.Excluded[1].Run != "run-5" || res.Excluded[2].Run != "run-6" ||
		!strings.Contains(res.Excluded[1].Why, "run (c): 0.90 CPU used outside the run") {
		t.Errorf("excluded %+v", res.Excluded)
	}
	if p99.Name() != "quiet p99 lookup" || p99.Real != (Spread{N: 2, Median: 1.5, Min: 1, Max: 2}) || p99.Sim != (Spread{N: 2, Median: 2.2, Min: 1.5, Max: 2.9}) {
		t.Errorf("p99 real %+v sim %+v", p99.Real, p99.Sim)
	}
	if p99.Ratio == nil || *p99.Ratio < 1.4666 || *p99.Ratio > 1.4667 || p99.Within {
		t.Errorf("p99 ratio %v within %v, want 2.2/1.5 = 1.47, not within", p99.Ratio, p99.Within)
	}
	if rate.Real.Median != 100 || rate.Sim.Median != 90 || rate.Ratio == nil || *rate.Ratio != 0.9 || !rate.Within {
		t.Errorf("throughput %+v", rate)
	}
	if rej.Ratio == nil || *rej.Ratio != 1 || !rej.Within {
		t.Errorf("rejected 0 against 0: %+v, want ratio 1, within", rej)
	}
	if len(p99.Seeds) != 5 || !p99.Seeds[3].Excluded || p99.Seeds[0].Excluded || *p99.Seeds[0].Ratio != 1.5 {
		t.Errorf("seeds %+v", p99.Seeds)
	}
	if res.Outside != 1 || res.Unjudged != 0 {
		t.Errorf("outside %d unjudged %d, want 1, 0", res.Outside, res.Unjudged)
	}
	var text bytes.Buffer
	if err := WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1.50 ms", "1.00–2.00 ms (2)", "1.47x", "(0.00x)", "excluded as DISTURBED or incomplete (real run and its simulation out of the medians): c 3 of 5",
		"1 of 3 judged figures NOT within 25%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	// Anything against 0 has no ratio; every run excluded leaves nothing
	// to judge.
	res = Compare([]Run{{Name: "run-2", Seed: 2, Real: rep(1, 100, 0, ""), Sim: rep(1, 100, 5, "")},
		{Name: "run-3", Seed: 3, Real: rep(1, 100, 0, ""), Sim: rep(1, 100, 5, "")}}, DefaultTolerance)
	if f := res.Figures[2]; f.Ratio != nil || f.Within || res.Outside != 1 {
		t.Errorf("5 rejections against 0: %+v (outside %d)", f, res.Outside)
	}
	res = Compare([]Run{{Name: "run-2", Seed: 2, Real: rep(1, 100, 0, "run (c)"), Sim: rep(1, 100, 0, "")}}, DefaultTolerance)
	if res.Outside != 3 || res.Unjudged != 3 || res.Figures[0].Ratio != nil {
		t.Errorf("all excluded: outside %d unjudged %d ratio %v", res.Outside, res.Unjudged, res.Figures[0].Ratio)
	}
}

// TestCompareQuietOverSolo: each run's quiet p99 over its own solo p99,
// real and simulated, shown beside the judged figures and never judged: a
// simulation whose p99 is off by the machine's speed on the day (every
// call of the real run 2x slower, solo too) has the real ratio.
func TestCompareQuietOverSolo(t *testing.T) {
	withSolo := func(r *reports.Report, solo float64) *reports.Report {
		r.Configurations[0].SoloQuietAll = []reports.TenantRow{{Tenant: reports.QuietAll, Class: "lookup", Count: 100, P99: solo}}
		return r
	}
	runs := []Run{
		{Name: "run-2", Seed: 2, Real: withSolo(rep(4, 100, 0, ""), 2), Sim: withSolo(rep(2, 100, 0, ""), 1)},
		{Name: "run-3", Seed: 3, Real: withSolo(rep(6, 100, 0, ""), 2), Sim: withSolo(rep(1.5, 100, 0, ""), 1)},
		// No solo p99: no ratio, left out of the quiet/solo medians alone.
		{Name: "run-4", Seed: 4, Real: rep(5, 100, 0, ""), Sim: rep(2, 100, 0, "")},
	}
	res := Compare(runs, DefaultTolerance)
	if len(res.Figures) != 4 {
		t.Fatalf("%d figures, want 4 (quiet p99, quiet/solo, throughput, rejected): %+v", len(res.Figures), res.Figures)
	}
	qs := res.Figures[1]
	if qs.Kind != KindQuietOverSolo || qs.Name() != "quiet/solo lookup" || !qs.ShownOnly || qs.Within {
		t.Errorf("figure 1: %+v, want quiet/solo lookup, shown only", qs)
	}
	if qs.Real != (Spread{N: 2, Median: 2.5, Min: 2, Max: 3}) || qs.Sim != (Spread{N: 2, Median: 1.75, Min: 1.5, Max: 2}) || qs.Ratio == nil || *qs.Ratio != 0.7 {
		t.Errorf("quiet/solo real %+v sim %+v ratio %v, want medians 2.5 and 1.75, 0.70x", qs.Real, qs.Sim, qs.Ratio)
	}
	// The quiet p99 (2/5 and more) is outside; the quiet/solo (0.70x) is
	// not counted though it is outside too.
	if res.Outside != 1 {
		t.Errorf("outside %d, want 1 (the quiet p99 alone)", res.Outside)
	}
	var text bytes.Buffer
	if err := WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quiet/solo lookup", "2.50x", "2.00–3.00x (2)", "(shown)", "1 of 3 judged figures NOT within 25%; 1 quiet/solo figure shown, not judged"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	res.AddCalibration([]*reports.Report{withSolo(rep(3, 100, 0, ""), 1)})
	if c := res.Figures[1].Calibration; c == nil || c.Median != 3 {
		t.Errorf("calibration quiet/solo %+v, want 3", c)
	}
	// Nor is it judged in the calibration runs' table: a calibration
	// quiet/solo 2.4x the real median's is shown, not marked NO.
	res.AddCalibration([]*reports.Report{withSolo(rep(6, 100, 0, ""), 1)})
	for _, markdown := range []bool{false, true} {
		lines := res.calibrationLines(markdown)
		if len(lines) == 0 {
			t.Fatalf("no calibration table")
		}
		for _, l := range strings.Split(lines[0], "\n") {
			if strings.Contains(l, "quiet/solo lookup") && (!strings.Contains(l, "2.40x") || !strings.Contains(l, "(shown)") || strings.Contains(l, "NO")) {
				t.Errorf("calibration table (markdown %v): %q, want 2.40x (shown)", markdown, l)
			}
		}
	}
}

// TestWriteDirNeverOverwrites: a validation there already is refused
// before anything is written.
func TestWriteDirNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	res := Compare([]Run{{Name: "run-2", Seed: 2, Real: rep(1, 100, 0, ""), Sim: rep(1, 100, 0, "")}}, DefaultTolerance)
	if err := WriteDir(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{JSONFile, MarkdownFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, JSONFile)); err != nil {
		t.Fatal(err)
	}
	err := WriteDir(dir, res)
	if !errors.Is(err, os.ErrExist) || !strings.Contains(err.Error(), MarkdownFile) {
		t.Errorf("WriteDir over %s: %v, want os.ErrExist naming it", MarkdownFile, err)
	}
	if _, err := os.Stat(filepath.Join(dir, JSONFile)); !os.IsNotExist(err) {
		t.Errorf("%s written beside an existing %s", JSONFile, MarkdownFile)
	}
}

// TestCompareIncomplete: a real run cut short (interrupted) measured part
// of its windows: it is left out of the medians as a DISTURBED one is, and
// the exclusion says why.
func TestCompareIncomplete(t *testing.T) {
	cut := rep(900, 10, 0, "")
	cut.Incomplete = "interrupted during run of c"
	runs := []Run{
		{Name: "run-2", Seed: 2, Real: rep(1, 100, 0, ""), Sim: rep(1, 100, 0, "")},
		{Name: "run-3", Seed: 3, Real: cut, Sim: rep(1, 100, 0, "")},
	}
	res := Compare(runs, DefaultTolerance)
	if len(res.Excluded) != 1 || res.Excluded[0].Run != "run-3" || !strings.Contains(res.Excluded[0].Why, "incomplete: interrupted during run of c") {
		t.Errorf("excluded %+v, want run-3 as incomplete", res.Excluded)
	}
	if p99 := res.Figures[0]; p99.Real.N != 1 || p99.Real.Median != 1 || !p99.Within {
		t.Errorf("quiet p99 %+v: want the complete run's alone, within", p99)
	}
}

// TestAddCalibration: the calibration runs' own real figures beside the
// compared runs' (a DISTURBED or incomplete calibration run left out), and
// a figure not within the tolerance whose real runs lie as far apart
// themselves is said to be so.
func TestAddCalibration(t *testing.T) {
	runs := []Run{
		{Name: "run-4", Seed: 4, Real: rep(2, 100, 0, ""), Sim: rep(3.1, 100, 0, "")},
		{Name: "run-5", Seed: 5, Real: rep(2, 100, 0, ""), Sim: rep(2.9, 100, 0, "")},
	}
	res := Compare(runs, DefaultTolerance)
	cut := rep(50, 1, 0, "")
	cut.Incomplete = "interrupted"
	res.AddCalibration([]*reports.Report{rep(3, 110, 0, ""), rep(2.8, 100, 0, ""), rep(40, 1, 0, "run (c)"), cut})
	p99, rate := res.Figures[0], res.Figures[1]
	if p99.Calibration == nil || *p99.Calibration != (Spread{N: 2, Median: 2.9, Min: 2.8, Max: 3}) || p99.CalibrationRatio == nil || *p99.CalibrationRatio != 1.45 {
		t.Errorf("p99 calibration %+v ratio %v, want the 2 undisturbed complete runs: median 2.9, 1.45x the real 2", p99.Calibration, p99.CalibrationRatio)
	}
	if rate.Calibration == nil || rate.Calibration.Median != 105 || *rate.CalibrationRatio != 1.05 {
		t.Errorf("throughput calibration %+v ratio %v, want 105, 1.05x", rate.Calibration, rate.CalibrationRatio)
	}
	var text, md bytes.Buffer
	if err := WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the calibration runs' own real figures against the compared runs' real median",
		"2.90 ms", "2.80–3.00 ms (2)", "1.45x",
		"not within 25% between the real runs themselves either: c quiet p99 lookup (simulated 1.50x, calibration runs 1.45x the real median)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(md.String(), "| c | quiet p99 lookup | 2.90 ms | 2.80–3.00 ms (2) | 1.45x | NO |") {
		t.Errorf("markdown lacks the calibration row:\n%s", md.String())
	}
	// Without AddCalibration, nothing of it.
	res = Compare(runs, DefaultTolerance)
	text.Reset()
	if err := WriteText(&text, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "calibration runs") {
		t.Errorf("text without calibration runs speaks of them:\n%s", text.String())
	}
}
