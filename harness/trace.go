package harness

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/harness/metrics"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// TraceVersion is the version of the trace format a run writes and a
// replay reads (harness/TRACE.md).
const TraceVersion = 2

// traceVersionOps is the first version, ops without result lines; a
// replay reads it too.
const traceVersionOps = 1

// traceHeader is a trace's first line.
type traceHeader struct {
	Trace        int    `json:"noisysim_trace"`
	Scenario     string `json:"scenario"`
	Seed         int64  `json:"seed"`
	ScheduleHash string `json:"schedule_hash"`
	Started      string `json:"started"`
}

// traceOp is one line of a trace: one operation the open loop was handed,
// as harness/TRACE.md documents it.
type traceOp struct {
	Config string `json:"config"`
	Seq    int64  `json:"seq"`
	// AtNS is the intended start in ns from the timeline's start.
	AtNS           int64  `json:"at_ns"`
	Tenant         string `json:"tenant"`
	N              int    `json:"n,omitempty"`
	Class          string `json:"class"`
	IsolationClass string `json:"isolation_class,omitempty"`
	Script         string `json:"script,omitempty"`
	Query          string `json:"query,omitempty"`
	SQL            string `json:"sql,omitempty"`
	// Args are the statement's parameters as text; null is SQL NULL.
	Args []*string `json:"args,omitempty"`
}

// traceResult is a result line: how one op of the traced run ended
// (harness/TRACE.md). A replay reads them as the recorded figures.
type traceResult struct {
	Config string `json:"config"`
	Seq    int64  `json:"seq"`
	AtNS   int64  `json:"at_ns"`
	Tenant string `json:"tenant"`
	Class  string `json:"class"`
	// LatencyNS is end − intended start; ServiceNS end − actual start (0:
	// never started).
	LatencyNS int64 `json:"latency_ns"`
	ServiceNS int64 `json:"service_ns"`
	// Outcome is "ok", "dropped", "incomplete" or the error class.
	Outcome string `json:"outcome"`
}

// decodedLine is what a reader decodes a line into: an op, or a result
// when LatencyNS is present.
type decodedLine struct {
	traceOp
	LatencyNS *int64 `json:"latency_ns"`
	Outcome   string `json:"outcome"`
}

// recorded is a replayed op's statement: the executor sends it as it was
// recorded, through the op's class and tenant.
type recorded struct {
	SQL  string
	Args []any // string or nil
	// turn places a logged statement in its session: the session's
	// statements run one at a time, in order. nil: no order to keep.
	turn *sessionTurn
	// Duration is the recorded duration (a log); 0 when unknown.
	Duration time.Duration
}

// traceWriter writes a run's trace. Ops are written from the open loop's
// dispatching goroutine, one configuration after the other; results from
// the goroutines that ran them.
type traceWriter struct {
	r   *runner
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func newTraceWriter(r *runner, w io.Writer) *traceWriter {
	tw := &traceWriter{r: r, w: bufio.NewWriterSize(w, 1<<16)}
	tw.line(traceHeader{Trace: TraceVersion, Scenario: r.sc.Name, Seed: r.sc.Seed, ScheduleHash: r.hash,
		Started: r.started.UTC().Format(time.RFC3339Nano)})
	return tw
}

func (tw *traceWriter) line(v any) {
	b, err := json.Marshal(v)
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.err != nil {
		return
	}
	if err == nil {
		b = append(b, '\n')
		_, err = tw.w.Write(b)
	}
	tw.err = err
}

// flush writes what is buffered and returns the first error met.
func (tw *traceWriter) flush() error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.err == nil {
		tw.err = tw.w.Flush()
	}
	if tw.err != nil {
		return fmt.Errorf("write trace: %w", tw.err)
	}
	return nil
}

// wrap returns src writing each op it hands out as a line of config's.
func (tw *traceWriter) wrap(config string, src workload.Source) workload.Source {
	return &tracedSource{Source: src, tw: tw, config: config}
}

// results returns rec writing each result as a line of config's.
func (tw *traceWriter) results(config string, rec workload.Recorder) workload.Recorder {
	return workload.RecorderFunc(func(res workload.Result) {
		rec.Record(res)
		out := traceResult{Config: config, Seq: res.Op.Seq, AtNS: int64(res.Op.At), Tenant: tw.r.key(res.Op.Tenant),
			Class: res.Op.Class, LatencyNS: int64(res.Latency()), ServiceNS: int64(res.Service()), Outcome: "ok"}
		switch {
		case res.Err == nil:
		case errors.Is(res.Err, workload.ErrDropped):
			out.Outcome = "dropped"
		case errors.Is(res.Err, workload.ErrIncomplete):
			out.Outcome = "incomplete"
		default:
			out.Outcome = errorClass(res.Err)
		}
		tw.line(out)
	})
}

type tracedSource struct {
	workload.Source
	tw     *traceWriter
	config string
}

var _ workload.Sized = (*tracedSource)(nil)

func (ts *tracedSource) Next() (workload.Op, bool) {
	op, ok := ts.Source.Next()
	if ok {
		ts.tw.line(ts.tw.r.traceOp(ts.config, op))
	}
	return op, ok
}

func (ts *tracedSource) Len() int64 {
	if s, ok := ts.Source.(workload.Sized); ok {
		return s.Len()
	}
	return 0
}

// traceOp describes op as the executor runs it: the statement and
// parameters it sends (drawn with the same seed and sequence number), or
// for a script of several statements its name alone (its values are drawn
// from the seed and seq when it runs).
func (r *runner) traceOp(config string, op workload.Op) traceOp {
	c := r.classes[op.Class]
	t := traceOp{Config: config, Seq: op.Seq, AtNS: int64(op.At), Tenant: r.key(op.Tenant), N: op.Tenant,
		Class: op.Class, IsolationClass: string(c.IsolationClass), Script: c.Script}
	if p, ok := op.Payload.(*recorded); ok {
		t.SQL, t.Args = p.SQL, textArgs(p.Args)
		return t
	}
	t.Query = string(c.Query)
	if prog := c.Program(); prog != nil {
		rng := rand.New(rand.NewPCG(uint64(r.sc.Seed), uint64(op.Seq)))
		if sql, args, ok, err := prog.Single(rng, r.bind[op.Tenant-1]); err == nil && ok {
			t.SQL, t.Args = sql, textArgs(asText(args))
		}
	}
	return t
}

// textArgs writes parameters as the server receives them: text, or nil
// for NULL.
func textArgs(args []any) []*string {
	out := make([]*string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
		case string:
			out[i] = &v
		case *string:
			out[i] = v
		case time.Time:
			s := v.Format(time.RFC3339Nano)
			out[i] = &s
		default:
			s := fmt.Sprint(v)
			out[i] = &s
		}
	}
	return out
}

// Skip causes of a replayed trace's lines.
const (
	skipNotJSON      = "not a JSON trace line"
	skipNoTenant     = "no tenant"
	skipTenant       = "tenant not in the scenario"
	skipClass        = "class not in the scenario"
	skipNegative     = "negative at_ns"
	skipOrder        = "before the line above it (out of order)"
	skipAfter        = "after the timeline's end"
	skipHeader       = "header not on the first line"
	maxTraceLine     = 16 << 20
	maxSkipLineNames = 5
)

// skipped is one cause's count and its first line numbers.
type skipped struct {
	n     int64
	lines []int64
}

// opReader reads the ops a replay sends, in order of At, counting the
// records it skips: a trace (traceReader) or a PostgreSQL log (logReader).
type opReader interface {
	next() (workload.Op, bool)
	counts() *readCounts
	Close() error
}

// readCounts is what a reader counted.
type readCounts struct {
	path string
	// line is the last line read.
	line  int64
	skips map[string]*skipped
	// other counts the ops of other configurations, not replayed (trace).
	other map[string]int64
	// config is the configuration replayed (trace).
	config string
	// rules counts the statements each classification rule (or the
	// default class) took (log); untagged those without a tenant.
	rules    map[string]int64
	untagged int64
	// records counts the records (lines) read, a trace's header excluded.
	records int64
	err     error
}

func newReadCounts(path string) readCounts {
	return readCounts{path: path, skips: map[string]*skipped{}, other: map[string]int64{}, rules: map[string]int64{}}
}

func (rc *readCounts) counts() *readCounts { return rc }

func (rc *readCounts) skip(cause string) {
	s := rc.skips[cause]
	if s == nil {
		s = &skipped{}
		rc.skips[cause] = s
	}
	s.n++
	if len(s.lines) < maxSkipLineNames {
		s.lines = append(s.lines, rc.line)
	}
}

// traceReader reads a trace's ops of one configuration, in file order,
// mapped onto the scenario's tenants and classes and the timeline (speed
// applied); lines it cannot replay are counted by cause, with their first
// line numbers. It holds one line at a time.
type traceReader struct {
	readCounts
	in     *replayFile
	sc     *bufio.Scanner
	speed  float64
	end    time.Duration // the timeline's end
	tenant map[string]int
	class  map[string]bool
	last   time.Duration
	// onResult, when set, receives the recorded results of the replayed
	// configuration's ops that map onto the scenario and its timeline.
	onResult func(res workload.Result)
}

// result hands a result line of the replayed configuration to onResult,
// as a Result of the op at its replayed start: latency as recorded, the
// outcome's error (ErrDropped, ErrIncomplete or the error class).
func (tr *traceReader) result(t traceOp, latency int64, outcome string) {
	if tr.onResult == nil || tr.config != "" && t.Config != tr.config {
		return
	}
	n, ok := tr.tenant[t.Tenant]
	if !ok || !tr.class[t.Class] || t.AtNS < 0 {
		return
	}
	at := time.Duration(math.Round(float64(t.AtNS) / tr.speed))
	if at >= tr.end {
		return
	}
	res := workload.Result{Op: workload.Op{Seq: t.Seq, Tenant: n, Class: t.Class, At: at}}
	res.End = res.Intended.Add(time.Duration(latency))
	switch outcome {
	case "ok":
	case "dropped":
		res.Err = workload.ErrDropped
	case "incomplete":
		res.Err = workload.ErrIncomplete
	default:
		res.Err = recordedError(outcome)
	}
	tr.onResult(res)
}

// recordedError is a recorded op's error class.
type recordedError string

func (e recordedError) Error() string { return string(e) }

// replayFile is a replayed file, decompressed when its name ends in .gz.
type replayFile struct {
	f  *os.File
	gz *gzip.Reader
	io.Reader
}

func openReplayFile(path, field string) (*replayFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", scenario.ErrInvalid, field, err)
	}
	rf := &replayFile{f: f, Reader: f}
	if strings.HasSuffix(path, ".gz") {
		if rf.gz, err = gzip.NewReader(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: %s %s: %w", scenario.ErrInvalid, field, path, err)
		}
		rf.Reader = rf.gz
	}
	return rf, nil
}

func (rf *replayFile) Close() error {
	if rf.gz != nil {
		rf.gz.Close()
	}
	return rf.f.Close()
}

// openReplay opens the scenario's replayed trace or log.
func (r *runner) openReplay() (opReader, error) {
	if r.sc.Replay.Log != "" {
		return r.openLog()
	}
	return r.openTrace()
}

func (r *runner) openTrace() (*traceReader, error) {
	rp := r.sc.Replay
	path := r.sc.Path(rp.Trace)
	in, err := openReplayFile(path, "replay.trace")
	if err != nil {
		return nil, err
	}
	tr := &traceReader{readCounts: newReadCounts(path), in: in, speed: rp.Speed, tenant: map[string]int{},
		class: map[string]bool{}}
	tr.config = rp.Configuration
	tr.sc = bufio.NewScanner(in)
	tr.sc.Buffer(make([]byte, 0, 64<<10), maxTraceLine)
	for n := 1; n <= r.pop.Len(); n++ {
		tr.tenant[r.key(n)] = n
	}
	for name := range r.classes {
		tr.class[name] = true
	}
	if len(r.steps) > 0 {
		tr.end = r.steps[len(r.steps)-1].end
	}
	return tr, nil
}

func (tr *traceReader) Close() error { return tr.in.Close() }

// next returns the next replayable op; false at the end of the file or at
// a read error (tr.err).
func (tr *traceReader) next() (workload.Op, bool) {
	for tr.err == nil && tr.sc.Scan() {
		tr.line++
		b := tr.sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if tr.line == 1 {
			var h traceHeader
			if json.Unmarshal(b, &h) == nil && h.Trace != 0 {
				if h.Trace != TraceVersion && h.Trace != traceVersionOps {
					tr.err = fmt.Errorf("%s:1: trace version %d, this noisysim reads versions %d and %d", tr.path, h.Trace, traceVersionOps, TraceVersion)
					return workload.Op{}, false
				}
				continue
			}
		}
		var d decodedLine
		err := json.Unmarshal(b, &d)
		t := d.traceOp
		if err == nil && d.LatencyNS != nil {
			tr.result(t, *d.LatencyNS, d.Outcome)
			continue
		}
		tr.records++
		if err != nil || t.Class == "" && t.Tenant == "" {
			var h traceHeader
			if json.Unmarshal(b, &h) == nil && h.Trace != 0 {
				tr.skip(skipHeader)
			} else {
				tr.skip(skipNotJSON)
			}
			continue
		}
		if tr.config == "" {
			tr.config = t.Config
		}
		if t.Config != tr.config {
			tr.other[t.Config]++
			continue
		}
		n, ok := tr.tenant[t.Tenant]
		switch {
		case t.Tenant == "":
			tr.skip(skipNoTenant)
			continue
		case !ok:
			tr.skip(skipTenant)
			continue
		case !tr.class[t.Class]:
			tr.skip(skipClass)
			continue
		case t.AtNS < 0:
			tr.skip(skipNegative)
			continue
		}
		at := time.Duration(math.Round(float64(t.AtNS) / tr.speed))
		if at < tr.last {
			tr.skip(skipOrder)
			continue
		}
		if at >= tr.end {
			tr.skip(skipAfter)
			continue
		}
		tr.last = at
		op := workload.Op{Seq: t.Seq, Tenant: n, Class: t.Class, At: at}
		if t.SQL != "" {
			p := &recorded{SQL: t.SQL, Args: make([]any, len(t.Args))}
			for i, a := range t.Args {
				if a != nil {
					p.Args[i] = *a
				}
			}
			op.Payload = p
		}
		return op, true
	}
	if tr.err == nil {
		if err := tr.sc.Err(); err != nil {
			tr.err = fmt.Errorf("%s:%d: %w", tr.path, tr.line+1, err)
		}
	}
	return workload.Op{}, false
}

// replayPlan is what a first read of the trace found: the ops each phase
// replays, and the lines skipped.
type replayPlan struct {
	// recorded are the recorded durations per tenant × class (a log).
	recorded map[recordedKey]*hdr.Histogram
	rules    map[string]int64
	untagged int64
	records  int64
	path     string
	config   string
	lines    int64
	phases   []int64
	total    int64
	hash     string
	skips    map[string]*skipped
	other    map[string]int64
	// results are the recorded results of a trace's replayed ops, one
	// recorder per step (nil: none in the step); resultLines their count.
	results     []*metrics.Recorder
	resultLines int64
}

// planReplay reads the whole trace once (one line at a time): it checks
// it, counts the ops of each phase and hashes them. A trace with nothing
// to replay is bad input naming the file and its lines.
func (r *runner) planReplay() error {
	rd, err := r.openReplay()
	if err != nil {
		return err
	}
	defer rd.Close()
	tr := rd.counts()
	p := &replayPlan{path: tr.path, phases: make([]int64, len(r.steps)), recorded: map[recordedKey]*hdr.Histogram{}}
	if trd, ok := rd.(*traceReader); ok {
		p.results = make([]*metrics.Recorder, len(r.steps))
		trd.onResult = func(res workload.Result) {
			i := stepOf(r.steps, res.Op.At)
			if p.results[i] == nil {
				// The precision the traced run's windows recorded at.
				cfg := r.windowMetrics()
				cfg.Classify = recordedClass
				p.results[i], _ = metrics.New(cfg) // cannot fail: a window's own configuration
			}
			p.results[i].Record(res)
			p.resultLines++
		}
	}
	h := sha256.New()
	io.WriteString(h, "noisysim replay v1\x00")
	i := 0
	for op, ok := rd.next(); ok; op, ok = rd.next() {
		for i+1 < len(r.steps) && op.At >= r.steps[i].end {
			i++
		}
		p.phases[i]++
		p.total++
		fmt.Fprintf(h, "%d\x00%d\x00%s\x00%d\x00", op.Seq, op.Tenant, op.Class, op.At)
		if rec, ok := op.Payload.(*recorded); ok {
			if rec.turn != nil {
				rec.turn.finish() // this pass runs nothing: the session goes on
			}
			fmt.Fprintf(h, "%s\x00%q\x00", rec.SQL, rec.Args)
			if rec.Duration > 0 {
				p.record(op, rec.Duration)
			}
		}
	}
	p.lines, p.config, p.skips, p.other, p.rules, p.untagged, p.records = tr.line, tr.config, tr.skips, tr.other, tr.rules, tr.untagged, tr.records
	field := "replay.trace"
	if r.sc.Replay.Log != "" {
		field = "replay.log"
	}
	if tr.err != nil {
		return fmt.Errorf("%w: %s: %w", scenario.ErrInvalid, field, tr.err)
	}
	if p.total == 0 {
		return fmt.Errorf("%w: %s: %s:%d: nothing to replay in %d lines%s", scenario.ErrInvalid, field, p.path, max(p.lines, 1), p.lines, p.skipText())
	}
	p.hash = hex.EncodeToString(h.Sum(nil))
	r.replay = p
	r.hash = p.hash[:16]
	r.planned = p.phases
	what := "operations of configuration " + p.config
	if r.sc.Replay.Log != "" {
		what = "statements of the " + r.sc.Replay.LogFormat()
	}
	r.note("replay: %s: %d %s at speed %s%s", p.path, p.total, what,
		strconv.FormatFloat(r.sc.Replay.Speed, 'g', -1, 64), p.skipText())
	// A speed (or timeline) that leaves a measured window without an
	// operation replays nothing in it for its whole length: say so.
	var empty []string
	for i, st := range r.steps {
		if st.Measure && p.phases[i] == 0 {
			empty = append(empty, st.Name)
		}
	}
	if len(empty) > 0 {
		unit := "operations"
		if r.sc.Replay.Log != "" {
			unit = "statements"
		}
		r.note("replay: no %s fall in window %s (after replay.speed %s, the first start is the timeline's 0): nothing is replayed there",
			unit, strings.Join(empty, ", "), strconv.FormatFloat(r.sc.Replay.Speed, 'g', -1, 64))
	}
	return nil
}

// stepOf returns the index of the step at lies in (the last for later).
func stepOf(steps []step, at time.Duration) int {
	i := 0
	for i+1 < len(steps) && at >= steps[i].end {
		i++
	}
	return i
}

// recordedClass is the error class of a recorded result.
func recordedClass(err error) string {
	if e, ok := err.(recordedError); ok {
		return string(e)
	}
	return errorClass(err)
}

// skipText lists the skipped lines by cause ("" when none).
func (p *replayPlan) skipText() string {
	var parts []string
	for _, cause := range slices.Sorted(maps.Keys(p.skips)) {
		s := p.skips[cause]
		var ls []string
		for _, l := range s.lines {
			ls = append(ls, strconv.FormatInt(l, 10))
		}
		more := ""
		if s.n > int64(len(s.lines)) {
			more = ", …"
		}
		parts = append(parts, fmt.Sprintf("%s: %d (line %s%s)", cause, s.n, strings.Join(ls, ", "), more))
	}
	for _, c := range slices.Sorted(maps.Keys(p.other)) {
		parts = append(parts, fmt.Sprintf("configuration %s not replayed: %d", c, p.other[c]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; skipped " + strings.Join(parts, "; ")
}

// recordedKey is a tenant × class of recorded durations.
type recordedKey struct {
	tenant int
	class  string
}

// record adds a recorded duration (µs, clamped to an hour).
func (p *replayPlan) record(op workload.Op, d time.Duration) {
	k := recordedKey{op.Tenant, op.Class}
	h := p.recorded[k]
	if h == nil {
		h = hdr.New(1, int64(time.Hour/time.Microsecond), 3)
		p.recorded[k] = h
	}
	_ = h.RecordValue(min(max(d.Microseconds(), 1), int64(time.Hour/time.Microsecond)))
}

// replaySource hands the open loop the trace's ops, read as they are
// consumed, and counts the ops sent per phase.
type replaySource struct {
	tr    opReader
	steps []step
	total int64
	cur   int
	sent  []int64
}

var (
	_ workload.Source = (*replaySource)(nil)
	_ workload.Sized  = (*replaySource)(nil)
)

func (r *runner) newReplaySource() (*replaySource, error) {
	tr, err := r.openReplay()
	if err != nil {
		return nil, err
	}
	tr.counts().config = r.replay.config
	return &replaySource{tr: tr, steps: r.steps, total: r.replay.total, sent: make([]int64, len(r.steps))}, nil
}

func (rs *replaySource) Next() (workload.Op, bool) {
	op, ok := rs.tr.next()
	if !ok {
		return op, false
	}
	for rs.cur+1 < len(rs.steps) && op.At >= rs.steps[rs.cur].end {
		rs.cur++
	}
	rs.sent[rs.cur]++
	return op, true
}

func (rs *replaySource) Duration() time.Duration { return rs.steps[len(rs.steps)-1].end }
func (rs *replaySource) Len() int64              { return rs.total }

// Close closes the trace; the error of a read that ended the replay
// early, if any.
func (rs *replaySource) Close() error {
	err := rs.tr.counts().err
	rs.tr.Close()
	return err
}

// replayReport is the report's replay section; nil without a replay.
func (r *runner) replayReport() *reports.Replay {
	p := r.replay
	if p == nil {
		return nil
	}
	rp := r.sc.Replay
	out := &reports.Replay{Source: "trace", File: p.path, Speed: rp.Speed, Records: p.records, Replayed: p.total, Untagged: p.untagged}
	if rp.Log != "" {
		out.Source = rp.LogFormat()
	} else {
		out.Configuration = p.config
	}
	for _, cause := range slices.Sorted(maps.Keys(p.skips)) {
		s := p.skips[cause]
		out.Skipped = append(out.Skipped, reports.ReplaySkip{Cause: cause, Count: s.n, Lines: s.lines})
	}
	for _, c := range slices.Sorted(maps.Keys(p.other)) {
		out.Skipped = append(out.Skipped, reports.ReplaySkip{Cause: "of configuration " + c + " (not replayed)", Count: p.other[c]})
	}
	if rp.Log != "" {
		for i, rule := range rp.Rules {
			out.Rules = append(out.Rules, reports.ReplayRule{Rule: rule.Name(i), Class: rule.Class, Count: p.rules[rule.Name(i)]})
		}
		def := "default_class " + rp.DefaultClass
		out.Rules = append(out.Rules, reports.ReplayRule{Rule: def, Class: rp.DefaultClass, Count: p.rules[def]})
	}
	out.Results = p.resultLines
	for i, rec := range p.results {
		if rec == nil || !r.steps[i].Measure {
			continue
		}
		rows := append(r.quietAllRows(rec, nil), r.rows(rec.Summary(), nil)...)
		for _, row := range rows {
			if row.Count == 0 {
				continue
			}
			out.Recorded = append(out.Recorded, reports.RecordedRow{Window: r.steps[i].Name, Tenant: row.Tenant, Class: row.Class,
				Count: row.Count, P50: row.P50, P99: row.P99, Max: row.Max})
		}
	}
	keys := slices.SortedFunc(maps.Keys(p.recorded), func(a, b recordedKey) int {
		if a.tenant != b.tenant {
			return a.tenant - b.tenant
		}
		return strings.Compare(a.class, b.class)
	})
	for _, k := range keys {
		h := p.recorded[k]
		ms := func(us int64) float64 { return float64(us) / 1000 }
		out.Recorded = append(out.Recorded, reports.RecordedRow{Tenant: r.key(k.tenant), Class: k.class, Count: h.TotalCount(),
			P50: ms(h.ValueAtQuantile(50)), P99: ms(h.ValueAtQuantile(99)), Max: ms(h.Max())})
	}
	return out
}
