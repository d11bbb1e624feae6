package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/workload"
)

// TestIntervalLogsAbsoluteTime is field case L12: agent A's log starts at
// 1700000000.000 with three 1 s intervals of 1,000 values, agent B's at
// 1700000002.500 with one, its last line unterminated. Merged, B's
// interval is at 2.5 s (not folded into A's first second), all 4,000
// values are there, and times are written to the millisecond.
func TestIntervalLogsAbsoluteTime(t *testing.T) {
	hist := func(v int64) *hdr.Histogram {
		h := hdr.New(1, int64(time.Minute), 3)
		if err := h.RecordValues(v, 1000); err != nil {
			t.Fatal(err)
		}
		return h
	}
	logText := func(start time.Time, n int) string {
		l := &IntervalLog{StartTime: start}
		for i := range n {
			l.Histograms = append(l.Histograms, LoggedHistogram{Tag: "q", Start: start.Add(time.Duration(i) * time.Second), Length: time.Second, Hist: hist(int64(i+1) * 1e6)})
		}
		var b bytes.Buffer
		if err := WriteIntervalLog(&b, l, "agent"); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	a0, b0 := time.UnixMilli(1700000000000), time.UnixMilli(1700000002500)
	aText, bText := logText(a0, 3), strings.TrimSuffix(logText(b0, 1), "\n")
	for _, want := range []string{"#[StartTime: 1700000002.500 (seconds since epoch), 2023-11-14T22:13:22.500Z]", "#[BaseTime: 1700000002.500 (seconds since epoch)]", "Tag=q,0.000,1.000,1.000,"} {
		if !strings.Contains(bText, want) {
			t.Errorf("B's log does not hold %q:\n%s", want, bText)
		}
	}
	read := func(s string) *IntervalLog {
		l, err := ReadIntervalLog(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := read(aText), read(bText)
	if len(b.Histograms) != 1 || !b.BaseTime.Equal(b0) || !b.Histograms[0].Start.Equal(b0) || b.Histograms[0].Length != time.Second {
		t.Fatalf("B read back as base %v, %d histograms %+v", b.BaseTime, len(b.Histograms), b.Histograms)
	}
	m := MergeIntervalLogs(a, b)
	if got := m.Total(); got != 4000 {
		t.Errorf("merged total %d, want 4000", got)
	}
	var starts []float64
	for _, h := range m.Histograms {
		starts = append(starts, float64(h.Start.Sub(a0))/float64(time.Second))
		if h.Hist.TotalCount() != 1000 {
			t.Errorf("interval at %v holds %d values, want 1000 (one agent's)", h.Start.Sub(a0), h.Hist.TotalCount())
		}
	}
	if want := []float64{0, 1, 2, 2.5}; !equalFloats(starts, want) {
		t.Errorf("merged intervals start at %v s, want %v", starts, want)
	}
	var out bytes.Buffer
	if err := WriteIntervalLog(&out, m, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#[BaseTime: 1700000000.000 ", "Tag=q,1.000,1.000,", "Tag=q,2.500,1.000,"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("merged log does not hold %q:\n%s", want, out.String())
		}
	}
	// The same interval in two logs is one histogram of both.
	if m := MergeIntervalLogs(a, read(aText)); len(m.Histograms) != 3 || m.Total() != 6000 {
		t.Errorf("A merged with itself: %d histograms, %d values; want 3, 6000", len(m.Histograms), m.Total())
	}
	if _, err := ReadIntervalLog(strings.NewReader(aText[:len(aText)-20])); err == nil || !strings.Contains(err.Error(), "line 8") {
		t.Errorf("a log cut short: %v, want an error naming line 8", err)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-9 || d < -1e-9 {
			return false
		}
	}
	return true
}

// TestSegmentLogOrigin: an agent's histograms.hlog has its timeline's
// start, to the millisecond, as BaseTime, and ReadSegment gives it back
// as each window's Origin.
func TestSegmentLogOrigin(t *testing.T) {
	rec, err := metrics.New(metrics.Config{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	origin := time.UnixMilli(1700000002500)
	t0 := time.Now()
	rec.Record(workload.Result{Op: workload.Op{Tenant: 1, Class: "q", At: 1500 * time.Millisecond},
		Intended: t0, Start: t0, End: t0.Add(3 * time.Millisecond)})
	dir := t.TempDir()
	ws := map[string][]WindowResult{"c": {{Name: "p", Origin: origin, Start: time.Second, End: 3 * time.Second, Sent: 1, Recorder: rec}}}
	if err := WriteSegment(dir, SegmentMeta{Scenario: "s", Index: 1, Count: 2}, []string{"c"}, ws); err != nil {
		t.Fatal(err)
	}
	out, err := ReadSegment(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := out.Windows["c"][0]
	if !w.Origin.Equal(origin) || w.Start != time.Second || w.Recorder.Export()[0].Count != 1 {
		t.Errorf("read back origin %v start %v, want %v, 1s", w.Origin, w.Start, origin)
	}
	// A segment.json cut short, or with a field of the wrong type, is
	// named with its file:line:col.
	meta := filepath.Join(dir, SegmentFile)
	mb, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ body, want string }{
		{string(mb[:len(mb)/2]), "malformed JSON: the file ends before the JSON does"},
		{"{\n  \"seed\": \"x\"\n}\n", meta + ":2:13: seed: want int64, got a JSON string"},
		{"{\n  \"seed\": 1,,\n}\n", meta + ":2:13: malformed JSON"},
	} {
		if err := os.WriteFile(meta, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSegment(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadSegment of segment.json %q = %v, want %q", tc.body, err, tc.want)
		}
	}
	// A histogram whose count is not segment.json's (a line of another
	// series or run that still decodes) is refused, naming its tag.
	for _, tc := range []struct {
		edit func(*SegmentMeta)
		want string
	}{
		{func(m *SegmentMeta) { m.Windows[0].Series[0].Count = 2 }, "histogram c/p/lat/1/q holds 1 values where segment.json counts 2"},
		{func(m *SegmentMeta) { m.Windows[0].Series[0].Intervals[0].Count = 3 }, "histogram c/p/iv/1/q/1 holds 1 values where segment.json counts 3"},
	} {
		var m SegmentMeta
		if err := json.Unmarshal(mb, &m); err != nil {
			t.Fatal(err)
		}
		tc.edit(&m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(meta, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSegment(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadSegment = %v, want %q", err, tc.want)
		}
	}
	if err := os.WriteFile(meta, mb, 0o644); err != nil {
		t.Fatal(err)
	}
	// Cut after its header and first histogram line, the log is named as
	// cut short.
	path := filepath.Join(dir, HistogramLogFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(path, []byte(strings.Join(lines[:6], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSegment(dir); err == nil || !strings.Contains(err.Error(), "the log is cut short") {
		t.Errorf("ReadSegment of a cut log = %v, want it named as cut short", err)
	}
}

// TestMsDurationRounds: a mean in ms read back from a report is the whole
// number of ns it was written from (66.899363 ms × 1e6 is
// 66899362.99999999 in float64).
func TestMsDurationRounds(t *testing.T) {
	for _, c := range []struct {
		ms   float64
		want time.Duration
	}{{66.899363, 66899363}, {0.000001, 1}, {1, time.Millisecond}} {
		if got := msDuration(c.ms); got != c.want {
			t.Errorf("msDuration(%v) = %d ns, want %d", c.ms, got, c.want)
		}
	}
}
