package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/noisysim/noisysim/reports"
)

// JSONFile is the file a sweep's Doc is written to in its directory.
const JSONFile = "sweep.json"

// Doc is what sweep.json holds (reports/REPORT.md, "Sweeps"). It is
// rewritten after every trial, so an interrupted sweep keeps what finished.
type Doc struct {
	Version  int       `json:"sweep_version"`
	Scenario string    `json:"scenario"`
	File     string    `json:"file"`
	Vary     []VaryDoc `json:"vary"`
	Trials   int       `json:"trials"`
	// Search is "grid" (every point) or "knee" (bisection per configuration).
	Search string  `json:"search"`
	Points []Point `json:"points"`
	Knees  []Knee  `json:"knees,omitempty"`
	// Complete is false while the sweep runs and when it was interrupted.
	Complete bool `json:"complete"`
	// Simulated, when set, names the calibration report of a sweep run in
	// virtual time (noisysim sweep --simulate): every figure is simulated.
	Simulated string `json:"simulated,omitempty"`
	// Shape is the scenario's shape the trials ran (ShapeOf); nil in a
	// sweep.json written before noisysim recorded it.
	Shape *Shape `json:"shape,omitempty"`
}

func (d *Doc) specs() []string {
	var s []string
	for _, v := range d.Vary {
		s = append(s, v.Spec)
	}
	return s
}

// VaryDoc is one varied key.
type VaryDoc struct {
	// Spec is the --vary as given, Key its path, Value the scenario's own
	// value (the baseline of headroom), Integer whether the key is whole.
	Spec    string  `json:"spec"`
	Key     string  `json:"key"`
	Value   float64 `json:"value"`
	Integer bool    `json:"integer"`
	// LoadFactor, when not 0, says Key is the rate of a class the file
	// calibrates (load_factor, no rate): each point writes "rate: V" in
	// place of "load_factor: …". Value is then the rate the calibration
	// gives (0 until a knee search calibrated), Calibration what it
	// measured.
	LoadFactor  float64              `json:"load_factor,omitempty"`
	Calibration *reports.Calibration `json:"calibration,omitempty"`
}

// Point is one set of values, run Trials times.
type Point struct {
	// Values maps each varied key to its value at this point.
	Values map[string]float64 `json:"values"`
	// Only names the one configuration run (a knee probe); empty: all.
	Only    string          `json:"only,omitempty"`
	Trials  []Trial         `json:"trials"`
	Summary []ConfigSummary `json:"summary"`
	// Notes are the trials' reports' notes, each once, in the order
	// first seen: a simulated sweep's what the model could not vouch for
	// (a tenant beyond the calibrated rows, the cap applied, …).
	Notes []string `json:"notes,omitempty"`
}

// Trial is one run at a point.
type Trial struct {
	Seed int64 `json:"seed"`
	// Passed is the run's verdict (each configuration as expected).
	Passed bool `json:"passed"`
	// Disturbed: a measured window saw other work on the machine (guard).
	Disturbed bool `json:"disturbed,omitempty"`
	// Resumed: taken from the interrupted sweep --resume continued (not
	// written: a resumed sweep's file holds it as it was).
	Resumed        bool          `json:"-"`
	Configurations []ConfigTrial `json:"configurations"`
}

// ConfigTrial is one configuration in one trial.
type ConfigTrial struct {
	Name string `json:"name"`
	// Held: all the configuration's assertions passed (whatever it was
	// expected to do); Failed names those that did not.
	Held   bool     `json:"held"`
	Failed []string `json:"failed,omitempty"`
	// Throughput and TargetRate are requests per second, issued and intended.
	Throughput float64 `json:"throughput_per_s"`
	TargetRate float64 `json:"target_rate_per_s"`
	// QuietP99 and SoloP99 (ms) are the merged quiet tenants' p99 of
	// QuietClass, the class with the largest QuietP99/SoloP99
	// (QuietOverSolo) among those quiet_p99 judged for the quiet tenants
	// together (every class when it judged none), with and without the
	// noise; SoloP99 is 0 when the scenario has no solo phase.
	QuietClass    string  `json:"quiet_class,omitempty"`
	QuietP99      float64 `json:"quiet_p99_ms"`
	SoloP99       float64 `json:"solo_p99_ms"`
	QuietOverSolo float64 `json:"quiet_over_solo"`
	// QuietUnjudged: quiet_p99 did not judge QuietClass (it judged no
	// class, every one too few samples): the figure is the worst class of
	// all, shown for what it is, and no verdict rests on it. Held still
	// comes from the assertions alone.
	QuietUnjudged bool            `json:"quiet_unjudged,omitempty"`
	Rejected      int64           `json:"rejected"`
	Errors        int64           `json:"errors"`
	TopDBTime     []reports.Share `json:"top_db_time,omitempty"`
}

// ConfigSummary is one configuration over a point's trials.
type ConfigSummary struct {
	Name string `json:"name"`
	// Held of Trials trials held all the configuration's assertions.
	Held          int    `json:"held"`
	Trials        int    `json:"trials"`
	Throughput    Spread `json:"throughput_per_s"`
	QuietP99      Spread `json:"quiet_p99_ms"`
	QuietOverSolo Spread `json:"quiet_over_solo"`
	// QuietUnjudged counts the trials whose quiet figure quiet_p99 did not
	// judge (ConfigTrial.QuietUnjudged); 0 when it judged every one.
	QuietUnjudged int             `json:"quiet_unjudged,omitempty"`
	Rejected      Spread          `json:"rejected"`
	Errors        Spread          `json:"errors"`
	TopDBTime     []reports.Share `json:"top_db_time,omitempty"`
}

// Spread is a figure over trials: median, min, max of N values.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Knee is one configuration's result of a knee search.
type Knee struct {
	Configuration string `json:"configuration"`
	Expect        string `json:"expect,omitempty"`
	Key           string `json:"key"`
	// Baseline is the scenario's own value of Key; Lo..Hi the range searched.
	// BaselineCalibrated: Key is a calibrated class's rate and Baseline the
	// rate its calibration gave (VaryDoc.Calibration).
	Baseline           float64 `json:"baseline"`
	BaselineCalibrated bool    `json:"baseline_calibrated,omitempty"`
	Lo                 float64 `json:"lo"`
	Hi                 float64 `json:"hi"`
	// Found: the assertions held at Lo. Knee is the largest value probed at
	// which they held in all trials (KneePasses of Trials); FailAt the
	// smallest above it at which they did not (FailPasses held).
	Found      bool    `json:"found"`
	Knee       float64 `json:"knee"`
	KneePasses int     `json:"knee_passes"`
	FailAt     float64 `json:"fail_at,omitempty"`
	FailPasses int     `json:"fail_passes"`
	// Failed names the assertions that failed at FailAt, in any trial.
	Failed []string `json:"failed,omitempty"`
	Trials int      `json:"trials"`
	// AboveRange: the assertions held at Hi too; the knee lies beyond.
	AboveRange bool `json:"above_range"`
	// Headroom is Knee / Baseline (0 when not found or Baseline is 0).
	Headroom float64 `json:"headroom"`
	Probes   []Probe `json:"probes"`
}

// Probe is one value a knee search tried and how many trials held.
type Probe struct {
	Value float64 `json:"value"`
	Held  int     `json:"held"`
}

// WriteFile writes d as dir/sweep.json, atomically and with the other
// reports' mode (reports.WriteFileAtomic). A sweep with no point yet
// writes "points": [], not null.
func (d *Doc) WriteFile(dir string) error {
	out := *d
	if out.Points == nil {
		out.Points = []Point{}
	}
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sweep: %w", err)
	}
	if err := reports.WriteFileAtomic(filepath.Join(dir, JSONFile), append(data, '\n')); err != nil {
		return fmt.Errorf("write sweep: %w", err)
	}
	return nil
}

// ReadFile reads dir/sweep.json.
func ReadFile(dir string) (*Doc, error) {
	// A FIFO or a device would block the read (a signal cannot end a
	// blocked open): only a regular file is read.
	if fi, err := os.Stat(filepath.Join(dir, JSONFile)); err == nil && !fi.Mode().IsRegular() {
		return nil, badf("%s: not a regular file (%s), not a sweep", filepath.Join(dir, JSONFile), reports.FileKind(fi))
	}
	data, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, JSONFile)
	var d Doc
	if err := json.Unmarshal(data, &d); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, badf("%s: not a sweep: malformed JSON: %v", at(path, data, syn.Offset-1), err)
		case errors.As(err, &typ) && typ.Field != "":
			return nil, badf("%s: not a sweep: %s: want %s, got a JSON %s", at(path, data, typ.Offset-1), typ.Field, typ.Type, typ.Value)
		}
		return nil, badf("%s: not a sweep: %v", path, err)
	}
	return &d, nil
}

// at returns path:line:col of byte i of data.
func at(path string, data []byte, i int64) string {
	i = min(max(i, 0), int64(len(data)))
	before := data[:i]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}
