package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// Files of an agent's output directory (noisysim run --segment --out DIR),
// beside the partial reports.
const (
	// SegmentFile describes the agent's run and holds each series' exact
	// counts (SegmentMeta).
	SegmentFile = "segment.json"
	// HistogramLogFile holds every histogram as a standard HdrHistogram
	// interval log (V2 compressed, base64), one line per histogram, tagged
	// "<configuration>/<phase>/<kind>/<tenant>/<class>", kind lat (response
	// times over the phase) or svc (service times), or
	// "<configuration>/<phase>/iv/<tenant>/<class>/<tick>" (response times
	// of one interval, whose start and length are the line's); values in
	// ns. StartTime and BaseTime are the agent's first timeline start in
	// seconds since the epoch, to the millisecond, and each line's start
	// is absolute (from BaseTime): merge places the agents' intervals by
	// them. Phase and class names hold no slash, comma or space (scenario
	// names are identifiers).
	HistogramLogFile = "histograms.hlog"
)

// SegmentVersion is the shape of segment.json.
const SegmentVersion = 1

// SegmentMeta is segment.json: what an agent ran, and the exact counts
// that histograms do not carry.
type SegmentMeta struct {
	Version int `json:"segment_version"`
	// Scenario is the scenario's name, ScenarioHash the SHA-256 of its
	// file's bytes, Seed its seed, ScheduleHash the whole schedule's.
	Scenario     string `json:"scenario"`
	ScenarioHash string `json:"scenario_hash"`
	Seed         int64  `json:"seed"`
	ScheduleHash string `json:"schedule_hash"`
	// StartAt is the run's --start-at (RFC 3339, UTC), "" when none was
	// given: with the scenario's hash and seed, what tells the agents of
	// one run from those of another.
	StartAt string `json:"start_at,omitempty"`
	// Index and Count are the segment, Index/Count.
	Index int `json:"index"`
	Count int `json:"count"`
	// Lowest, Highest (ns) and SigFigs are the histograms' bounds;
	// Interval (ns) the width of the intervals.
	Lowest   int64 `json:"lowest_ns"`
	Highest  int64 `json:"highest_ns"`
	SigFigs  int   `json:"sig_figs"`
	Interval int64 `json:"interval_ns"`
	// Windows are each configuration's phases, in run order.
	Windows []SegmentWindow `json:"windows"`
}

// Segment returns the segment the agent ran.
func (m *SegmentMeta) Segment() workload.Segment {
	return workload.Segment{Index: m.Index, Count: m.Count}
}

// SegmentWindow is one phase of one configuration in segment.json.
type SegmentWindow struct {
	Configuration string          `json:"configuration"`
	Phase         string          `json:"phase"`
	StartNs       int64           `json:"start_ns"`
	EndNs         int64           `json:"end_ns"`
	Sent          int64           `json:"sent"`
	Series        []SegmentSeries `json:"series"`
}

// SegmentSeries is one tenant × class of a window: the counts of
// metrics.Series.
type SegmentSeries struct {
	Tenant        int               `json:"tenant"`
	Class         string            `json:"class"`
	Count         int64             `json:"count"`
	Errors        int64             `json:"errors"`
	ErrorsByClass map[string]int64  `json:"errors_by_class,omitempty"`
	Dropped       int64             `json:"dropped"`
	Incomplete    int64             `json:"incomplete"`
	Clamped       int64             `json:"clamped"`
	LatencySumNs  int64             `json:"latency_sum_ns"`
	LatencyMaxNs  int64             `json:"latency_max_ns"`
	ServiceMaxNs  int64             `json:"service_max_ns"`
	Intervals     []SegmentInterval `json:"intervals,omitempty"`
}

// SegmentInterval is one interval's counts.
type SegmentInterval struct {
	Tick       int64 `json:"tick"`
	Count      int64 `json:"count"`
	Errors     int64 `json:"errors"`
	Dropped    int64 `json:"dropped"`
	Incomplete int64 `json:"incomplete"`
	MaxNs      int64 `json:"max_ns"`
}

// histTag is the tag of one histogram in the log.
func histTag(config, phase, kind string, tenant int, class string) string {
	return strings.Join([]string{config, phase, kind, strconv.Itoa(tenant), class}, "/")
}

// WriteSegment writes an agent's histograms and segment.json into dir
// (which exists): meta describes the run (its Windows are filled here),
// windows are each configuration's phases, in run order.
func WriteSegment(dir string, meta SegmentMeta, configs []string, windows map[string][]WindowResult) error {
	meta.Version = SegmentVersion
	f, err := os.Create(filepath.Join(dir, HistogramLogFile))
	if err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	defer f.Close()
	// The log's StartTime and BaseTime are the first timeline's start, to
	// the millisecond; every line's start is absolute (from BaseTime), so
	// that merge places each agent's intervals where they ran.
	var base time.Time
	for _, config := range configs {
		for _, w := range windows[config] {
			if base.IsZero() || w.Origin.Before(base) {
				base = w.Origin
			}
		}
	}
	if base.IsZero() {
		base = time.Unix(0, 0)
	}
	bw := bufio.NewWriter(f)
	lw, err := newIntervalLogWriter(bw, base, fmt.Sprintf("noisysim %s segment %d/%d seed %d", meta.Scenario, meta.Index, meta.Count, meta.Seed))
	if err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	for _, config := range configs {
		for _, w := range windows[config] {
			origin := w.Origin
			if origin.IsZero() {
				origin = base
			}
			cfg := w.Recorder.Config()
			meta.Lowest, meta.Highest, meta.SigFigs, meta.Interval = int64(cfg.Lowest), int64(cfg.Highest), cfg.SigFigs, int64(cfg.Interval)
			sw := SegmentWindow{Configuration: config, Phase: w.Name, StartNs: int64(w.Start), EndNs: int64(w.End), Sent: w.Sent}
			span := max(w.End-w.Start, 0)
			for _, s := range w.Recorder.Export() {
				ss := SegmentSeries{Tenant: s.Tenant, Class: s.Class, Count: s.Count, Errors: s.Errors, ErrorsByClass: s.ErrorsByClass,
					Dropped: s.Dropped, Incomplete: s.Incomplete, Clamped: s.Clamped,
					LatencySumNs: int64(s.LatencySum), LatencyMaxNs: int64(s.LatencyMax), ServiceMaxNs: int64(s.ServiceMax)}
				if err := errors.Join(lw.write(histTag(config, w.Name, "lat", s.Tenant, s.Class), origin.Add(w.Start), span, s.Latency),
					lw.write(histTag(config, w.Name, "svc", s.Tenant, s.Class), origin.Add(w.Start), span, s.Service)); err != nil {
					return fmt.Errorf("write segment: %w", err)
				}
				for _, iv := range s.Intervals {
					ss.Intervals = append(ss.Intervals, SegmentInterval{Tick: iv.Tick, Count: iv.Count, Errors: iv.Errors,
						Dropped: iv.Dropped, Incomplete: iv.Incomplete, MaxNs: int64(iv.Max)})
					tag := histTag(config, w.Name, "iv", s.Tenant, s.Class) + "/" + strconv.FormatInt(iv.Tick, 10)
					if err := lw.write(tag, origin.Add(time.Duration(iv.Tick)*cfg.Interval), cfg.Interval, iv.Hist); err != nil {
						return fmt.Errorf("write segment: %w", err)
					}
				}
				sw.Series = append(sw.Series, ss)
			}
			meta.Windows = append(meta.Windows, sw)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, SegmentFile), append(b, '\n'), 0o644)
}

// SegmentOutput is one agent's output read back: its meta, and each
// configuration's phases with recorders rebuilt from the histogram log.
type SegmentOutput struct {
	Dir     string
	Meta    SegmentMeta
	Windows map[string][]WindowResult
	// Log is the agent's interval log as read (absolute times).
	Log *IntervalLog
}

// ReadSegment reads what WriteSegment wrote into dir.
//
// Errors: a missing or malformed file, a histogram the meta does not
// name or the other way round, naming dir.
func ReadSegment(dir string) (*SegmentOutput, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("read segment %s: "+format, append([]any{dir}, args...)...)
	}
	b, err := os.ReadFile(filepath.Join(dir, SegmentFile))
	if errors.Is(err, fs.ErrNotExist) {
		if rb, rerr := os.ReadFile(filepath.Join(dir, reports.JSONFile)); rerr == nil {
			var rep struct{ Segment, Incomplete string }
			if json.Unmarshal(rb, &rep) == nil && rep.Segment != "" {
				return nil, bad("it holds the %s of agent %s but no %s: that agent was stopped before its end (%s) and wrote no histograms; run every agent again, with a new --start-at", reports.JSONFile, rep.Segment, SegmentFile, rep.Incomplete)
			}
			return nil, bad("it holds %s but no %s: a whole run's reports, not an agent's output (noisysim run --segment i/N --out DIR writes one)", reports.JSONFile, SegmentFile)
		}
		return nil, bad("no %s: not an agent's output (noisysim run --segment i/N --out DIR writes one)", SegmentFile)
	}
	if err != nil {
		return nil, bad("%w", err)
	}
	out := &SegmentOutput{Dir: dir, Windows: map[string][]WindowResult{}}
	if err := json.Unmarshal(b, &out.Meta); err != nil {
		return nil, bad("%s", jsonProblem(filepath.Join(dir, SegmentFile), b, err))
	}
	m := &out.Meta
	if m.Version != SegmentVersion {
		return nil, bad("%s: segment_version %d, this noisysim reads %d", SegmentFile, m.Version, SegmentVersion)
	}
	cfg := metrics.Config{Lowest: time.Duration(m.Lowest), Highest: time.Duration(m.Highest), SigFigs: m.SigFigs, Interval: time.Duration(m.Interval), Classify: errorClass}
	type key struct {
		config, phase, kind string
		tenant              int
		class               string
		tick                int64
	}
	hists := map[key]LoggedHistogram{}
	var order []key // the log's lines, in file order
	f, err := os.Open(filepath.Join(dir, HistogramLogFile))
	if err != nil {
		return nil, bad("%w", err)
	}
	defer f.Close()
	log, err := ReadIntervalLog(f)
	if err != nil {
		return nil, bad("%s: %w", HistogramLogFile, err)
	}
	out.Log = log
	for _, h := range log.Histograms {
		parts := strings.Split(h.Tag, "/")
		if len(parts) < 5 || len(parts) != 5+btoi(parts[2] == "iv") {
			return nil, bad("%s: tag %q is not configuration/phase/kind/tenant/class[/tick]", HistogramLogFile, h.Tag)
		}
		tenant, err := strconv.Atoi(parts[3])
		if err != nil {
			return nil, bad("%s: tag %q: tenant %q", HistogramLogFile, h.Tag, parts[3])
		}
		k := key{parts[0], parts[1], parts[2], tenant, parts[4], 0}
		if k.kind == "iv" {
			if k.tick, err = strconv.ParseInt(parts[5], 10, 64); err != nil {
				return nil, bad("%s: tag %q: tick %q", HistogramLogFile, h.Tag, parts[5])
			}
		}
		hists[k] = h
		order = append(order, k)
	}
	// origin returns the wall-clock start of configuration config's
	// timeline as the log places it: a phase histogram's start less the
	// phase's start, or an interval's less its tick; BaseTime when the
	// configuration recorded nothing.
	origin := func(config string) time.Time {
		for _, k := range order {
			h := hists[k]
			if k.config != config {
				continue
			}
			for _, sw := range m.Windows {
				if sw.Configuration == config && sw.Phase == k.phase && k.kind != "iv" {
					return h.Start.Add(-time.Duration(sw.StartNs).Truncate(time.Millisecond))
				}
			}
			if k.kind == "iv" {
				return h.Start.Add(-time.Duration(k.tick) * time.Duration(m.Interval))
			}
		}
		return log.BaseTime
	}
	origins := map[string]time.Time{}
	for _, sw := range m.Windows {
		if _, ok := origins[sw.Configuration]; !ok {
			origins[sw.Configuration] = origin(sw.Configuration)
		}
	}
	take := func(k key) (*hdr.PackedHistogram, error) {
		lh, ok := hists[k]
		if !ok {
			return nil, bad("%s has no %s histogram of configuration %s phase %s tenant %d class %s, which %s names: the log is cut short or from another run (it holds %d histograms)",
				HistogramLogFile, k.kind, k.config, k.phase, k.tenant, k.class, SegmentFile, len(log.Histograms))
		}
		delete(hists, k)
		p := hdr.NewPacked(m.Lowest, m.Highest, m.SigFigs)
		if dropped := p.MergeFrom(lh.Hist); dropped > 0 {
			return nil, bad("%s: %d values of %s outside the bounds in %s", HistogramLogFile, dropped, histTag(k.config, k.phase, k.kind, k.tenant, k.class), SegmentFile)
		}
		return p, nil
	}
	for _, sw := range m.Windows {
		rec, err := metrics.New(cfg)
		if err != nil {
			return nil, bad("%s: %w", SegmentFile, err)
		}
		for _, ss := range sw.Series {
			s := metrics.Series{Key: metrics.Key{Tenant: ss.Tenant, Class: ss.Class}, Count: ss.Count, Errors: ss.Errors,
				ErrorsByClass: ss.ErrorsByClass, Dropped: ss.Dropped, Incomplete: ss.Incomplete, Clamped: ss.Clamped,
				LatencySum: time.Duration(ss.LatencySumNs), LatencyMax: time.Duration(ss.LatencyMaxNs), ServiceMax: time.Duration(ss.ServiceMaxNs)}
			k := key{sw.Configuration, sw.Phase, "lat", ss.Tenant, ss.Class, 0}
			if s.Latency, err = take(k); err != nil {
				return nil, err
			}
			// A line that decodes but is not this series' (another
			// tenant's, another run's) is caught by its count.
			if n := s.Latency.TotalCount(); n != ss.Count {
				return nil, bad("%s: histogram %s holds %d values where %s counts %d: the log is corrupted or from another run",
					HistogramLogFile, histTag(k.config, k.phase, k.kind, k.tenant, k.class), n, SegmentFile, ss.Count)
			}
			k.kind = "svc"
			if s.Service, err = take(k); err != nil {
				return nil, err
			}
			for _, iv := range ss.Intervals {
				k := key{sw.Configuration, sw.Phase, "iv", ss.Tenant, ss.Class, iv.Tick}
				h, err := take(k)
				if err != nil {
					return nil, err
				}
				if n := h.TotalCount(); n != iv.Count {
					return nil, bad("%s: histogram %s/%d holds %d values where %s counts %d: the log is corrupted or from another run",
						HistogramLogFile, histTag(k.config, k.phase, k.kind, k.tenant, k.class), k.tick, n, SegmentFile, iv.Count)
				}
				s.Intervals = append(s.Intervals, metrics.SeriesInterval{Tick: iv.Tick, Count: iv.Count, Errors: iv.Errors,
					Dropped: iv.Dropped, Incomplete: iv.Incomplete, Max: time.Duration(iv.MaxNs), Hist: h})
			}
			if err := rec.Add(s); err != nil {
				return nil, bad("%w", err)
			}
		}
		out.Windows[sw.Configuration] = append(out.Windows[sw.Configuration],
			WindowResult{Name: sw.Phase, Origin: origins[sw.Configuration], Start: time.Duration(sw.StartNs), End: time.Duration(sw.EndNs), Sent: sw.Sent, Recorder: rec})
	}
	for k := range hists {
		return nil, bad("%s holds a histogram %s that %s does not name", HistogramLogFile, histTag(k.config, k.phase, k.kind, k.tenant, k.class), SegmentFile)
	}
	return out, nil
}

// jsonProblem says where in data, the bytes of the file at path, the
// decoding error err arose: "path:line:col: ..." for malformed JSON or a
// field of the wrong type, "path: the file ends before the JSON does" for
// a cut file.
func jsonProblem(path string, data []byte, err error) string {
	at := func(i int64) string {
		i = min(max(i, 0), int64(len(data)))
		before := data[:i]
		line := bytes.Count(before, []byte("\n")) + 1
		col := len(before) - (bytes.LastIndexByte(before, '\n') + 1) + 1
		return fmt.Sprintf("%s:%d:%d", path, line, col)
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) && syn.Offset >= int64(len(data)):
		return fmt.Sprintf("%s: malformed JSON: the file ends before the JSON does (cut short?)", at(int64(len(data))))
	case errors.As(err, &syn):
		return fmt.Sprintf("%s: malformed JSON: %v", at(syn.Offset-1), err)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s: %s: want %s, got a JSON %s", at(typ.Offset-1), typ.Field, typ.Type, typ.Value)
	}
	return fmt.Sprintf("%s: %v", path, err)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
