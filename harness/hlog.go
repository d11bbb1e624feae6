package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// An interval log is the HdrHistogram log format (version 1.3, as
// HistogramLogWriter.java writes it): "#[StartTime: s.mmm ...]" and
// "#[BaseTime: s.mmm ...]" header lines in seconds since the epoch, then
// one line per histogram, "Tag=t,start,length,max,payload", start in
// seconds from BaseTime, length in seconds, max in ms, payload a V2
// compressed histogram in base64.
//
// hdrhistogram-go's own writer prints StartTime and BaseTime in whole
// seconds (OutputStartTime, OutputBaseTime truncate) and interval times
// with %f, and its reader truncates a start to whole milliseconds
// (int64(s*1000), 2.5 s + a base may come back 1 ms early) without
// telling the base it read: noisysim writes and reads the lines itself,
// with millisecond precision, and uses the library for the payloads.

// hlogVersion is the log format version written.
const hlogVersion = "1.3"

// LoggedHistogram is one line of an interval log: its tag, its interval's
// absolute start and length, and its histogram (values in ns).
type LoggedHistogram struct {
	Tag    string
	Start  time.Time
	Length time.Duration
	Hist   *hdr.Histogram
}

// IntervalLog is an interval log read back: its StartTime and BaseTime
// and every histogram line, in file order.
type IntervalLog struct {
	StartTime, BaseTime time.Time
	Histograms          []LoggedHistogram
}

// Total returns the number of values over every histogram of l.
func (l *IntervalLog) Total() int64 {
	var n int64
	for _, h := range l.Histograms {
		n += h.Hist.TotalCount()
	}
	return n
}

// encodedHistogram is what WriteIntervalLog needs of a histogram (hdr's
// Histogram and PackedHistogram both are).
type encodedHistogram interface {
	Max() int64
	EncodeV2() ([]byte, error)
}

// intervalLogWriter writes an interval log whose StartTime and BaseTime
// are base (millisecond precision).
type intervalLogWriter struct {
	w    io.Writer
	base time.Time
}

// newIntervalLogWriter writes the header: the format version, comment (if
// any), StartTime and BaseTime (base, to the millisecond) and the legend.
func newIntervalLogWriter(w io.Writer, base time.Time, comment string) (*intervalLogWriter, error) {
	base = base.Truncate(time.Millisecond)
	secs := float64(base.UnixMilli()) / 1000
	var b strings.Builder
	fmt.Fprintf(&b, "#[Histogram log format version %s]\n", hlogVersion)
	if comment != "" {
		fmt.Fprintf(&b, "#%s\n", comment)
	}
	fmt.Fprintf(&b, "#[StartTime: %.3f (seconds since epoch), %s]\n", secs, base.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	fmt.Fprintf(&b, "#[BaseTime: %.3f (seconds since epoch)]\n", secs)
	b.WriteString(`"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"` + "\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return nil, err
	}
	return &intervalLogWriter{w: w, base: base}, nil
}

// write writes one histogram line: tag (no comma, space or line break),
// the interval's absolute start and its length.
func (lw *intervalLogWriter) write(tag string, start time.Time, length time.Duration, h encodedHistogram) error {
	if strings.ContainsAny(tag, ", \r\n") {
		return fmt.Errorf("interval log: tag %q holds a comma, space or line break", tag)
	}
	payload, err := h.EncodeV2()
	if err != nil {
		return fmt.Errorf("interval log: tag %s: %w", tag, err)
	}
	rel := start.Truncate(time.Millisecond).Sub(lw.base)
	_, err = fmt.Fprintf(lw.w, "Tag=%s,%.3f,%.3f,%.3f,%s\n", tag, rel.Seconds(), length.Truncate(time.Millisecond).Seconds(),
		float64(h.Max())/1e6, payload)
	return err
}

var (
	hlogStartTime = regexp.MustCompile(`^#\[StartTime: ([0-9.]+)`)
	hlogBaseTime  = regexp.MustCompile(`^#\[BaseTime: ([0-9.]+)`)
)

// ReadIntervalLog reads every line of an interval log, the last one also
// when no newline ends it. A start is BaseTime plus the line's start; a
// log without BaseTime has absolute starts, or starts from StartTime when
// they are more than a year before it (as HistogramLogReader.java
// decides).
//
// Errors: a line that is not a header, comment, legend or histogram line,
// or whose histogram does not decode (a log cut short), naming the line.
func ReadIntervalLog(r io.Reader) (*IntervalLog, error) {
	l := &IntervalLog{}
	var startSec, baseSec float64
	var haveStart, haveBase bool
	type line struct {
		n          int
		tag        string
		start, len float64
		payload    string
	}
	var lines []line
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		s, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		eof := err != nil
		s = strings.TrimRight(s, "\r\n")
		switch {
		case s == "" || strings.HasPrefix(s, `"StartTimestamp"`):
		case strings.HasPrefix(s, "#"):
			if m := hlogStartTime.FindStringSubmatch(s); m != nil {
				if startSec, err = strconv.ParseFloat(m[1], 64); err != nil {
					return nil, fmt.Errorf("line %d: StartTime %q: %w", n, m[1], err)
				}
				haveStart = true
			} else if m := hlogBaseTime.FindStringSubmatch(s); m != nil {
				if baseSec, err = strconv.ParseFloat(m[1], 64); err != nil {
					return nil, fmt.Errorf("line %d: BaseTime %q: %w", n, m[1], err)
				}
				haveBase = true
			}
		default:
			ln := line{n: n}
			if rest, ok := strings.CutPrefix(s, "Tag="); ok {
				ln.tag, rest, _ = strings.Cut(rest, ",")
				s = rest
			}
			f := strings.SplitN(s, ",", 4)
			if len(f) != 4 {
				return nil, fmt.Errorf("line %d: want [Tag=tag,]start,length,max,histogram, got %d fields (the log is cut short?)", n, len(f))
			}
			var err1, err2 error
			ln.start, err1 = strconv.ParseFloat(f[0], 64)
			ln.len, err2 = strconv.ParseFloat(f[1], 64)
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("line %d: start or length: %w", n, err)
			}
			ln.payload = f[3]
			if !haveStart {
				startSec, haveStart = ln.start, true
			}
			lines = append(lines, ln)
		}
		if eof {
			break
		}
	}
	if !haveBase && len(lines) > 0 && lines[0].start < startSec-365*24*3600 {
		baseSec = startSec
	}
	ms := func(sec float64) int64 { return int64(math.Round(sec * 1000)) }
	l.StartTime, l.BaseTime = time.UnixMilli(ms(startSec)), time.UnixMilli(ms(baseSec))
	for _, ln := range lines {
		h, err := hdr.Decode([]byte(ln.payload))
		if err != nil {
			return nil, fmt.Errorf("line %d: histogram %s does not decode (the log is cut short?): %w", ln.n, ln.tag, err)
		}
		h.SetTag(ln.tag)
		start := time.UnixMilli(ms(baseSec) + ms(ln.start))
		l.Histograms = append(l.Histograms, LoggedHistogram{Tag: ln.tag, Start: start, Length: time.Duration(ms(ln.len)) * time.Millisecond, Hist: h})
	}
	return l, nil
}

// MergeIntervalLogs merges interval logs by absolute time: histograms of
// one tag whose intervals start at the same instant and have the same
// length are merged bucket by bucket, others kept apart (an interval of
// one log that starts half-way into another's is never folded into it).
// The result starts at the earliest StartTime and holds the histograms
// by start, then tag. No log is changed.
func MergeIntervalLogs(logs ...*IntervalLog) *IntervalLog {
	out := &IntervalLog{}
	type key struct {
		tag    string
		start  int64
		length time.Duration
	}
	at := map[key]int{}
	for i, l := range logs {
		if i == 0 || l.StartTime.Before(out.StartTime) {
			out.StartTime = l.StartTime
		}
		for _, h := range l.Histograms {
			k := key{h.Tag, h.Start.UnixMilli(), h.Length}
			if j, ok := at[k]; ok {
				out.Histograms[j].Hist.Merge(h.Hist)
				continue
			}
			at[k] = len(out.Histograms)
			c := h.Hist.Clone()
			c.SetTag(h.Tag)
			out.Histograms = append(out.Histograms, LoggedHistogram{Tag: h.Tag, Start: h.Start, Length: h.Length, Hist: c})
		}
	}
	out.BaseTime = out.StartTime
	slices.SortStableFunc(out.Histograms, func(a, b LoggedHistogram) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Tag, b.Tag)
	})
	return out
}

// WriteIntervalLog writes l with its StartTime as StartTime and BaseTime
// (millisecond precision) and comment, if any, as a comment line.
func WriteIntervalLog(w io.Writer, l *IntervalLog, comment string) error {
	lw, err := newIntervalLogWriter(w, l.StartTime, comment)
	if err != nil {
		return fmt.Errorf("write interval log: %w", err)
	}
	for _, h := range l.Histograms {
		if err := lw.write(h.Tag, h.Start, h.Length, h.Hist); err != nil {
			return fmt.Errorf("write interval log: %w", err)
		}
	}
	return nil
}
