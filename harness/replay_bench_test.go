package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/harness/pglog"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

// BenchmarkReplayFidelity replays a trace of 2,000, 5,000, 10,000 and
// 20,000 statements/s for 5 s each through the open loop, configured as a
// run configures it, with an executor that returns at once, and reports the
// p99 and max of the gap between each statement's intended start and the
// executor's call (start-gap-p99-µs, start-gap-max-µs): how closely a
// replay keeps the recorded times on this machine, reading the trace as it
// goes. The generated schedule at the same rates, for comparison, is what
// the open loop and the machine alone give. Run:
//
//	go test -run '^$' -bench ReplayFidelity -benchtime 1x ./harness/
//
// The figures are the machine's as much as noisysim's: on a busy machine
// (other processes runnable on every core) the gap is the kernel's
// scheduling delay. Measure on a quiet one.
func BenchmarkReplayFidelity(b *testing.B) {
	for _, rate := range []int{2000, 5000, 10000, 20000} {
		b.Run(fmt.Sprintf("trace-%d", rate), func(b *testing.B) { benchTrace(b, rate) })
		for _, wait := range []time.Duration{preciseWait, 0} {
			name := fmt.Sprintf("generated-%d", rate)
			if wait == 0 {
				name += "-timers" // Go timers alone, for comparison
			}
			b.Run(name, func(b *testing.B) {
				pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 10}, 1)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					s, err := workload.NewStream(pop, []workload.ClassSpec{{Name: "lookup", Rate: float64(rate), Arrival: workload.Constant}}, fidelityLength, 1, nil)
					if err != nil {
						b.Fatal(err)
					}
					fidelity(b, s, int(s.Len()), wait)
				}
			})
		}
	}
}

// fidelityLength is each fidelity benchmark's replay.
const fidelityLength = 5 * time.Second

// benchTrace writes a trace of rate statements/s and replays it.
func benchTrace(b *testing.B, rate int) {
	r, n := traceRunner(b, rate)
	for b.Loop() {
		rs, err := r.newReplaySource()
		if err != nil {
			b.Fatal(err)
		}
		fidelity(b, rs, n, preciseWait)
		rs.Close()
	}
}

// BenchmarkReplayRead reads a trace's lines as a replay does, without the
// open loop: the replay's own cost per statement (ns/op, B/op, allocs/op
// per line), which a replay spends between two statements.
func BenchmarkReplayRead(b *testing.B) {
	r, _ := traceRunner(b, 20000)
	rs, err := r.newReplaySource()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := rs.Next(); !ok {
			rs.Close()
			if rs, err = r.newReplaySource(); err != nil {
				b.Fatal(err)
			}
			rs.Next()
		}
	}
	rs.Close()
}

// traceRunner writes a trace of rate statements/s for fidelityLength and
// returns a runner that has planned its replay, and the trace's length.
func traceRunner(b *testing.B, rate int) (*runner, int) {
	dir := b.TempDir()
	path := filepath.Join(dir, "trace.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	n := int(float64(rate) * fidelityLength.Seconds())
	for i := 0; i < n; i++ {
		at := time.Duration(i) * time.Second / time.Duration(rate)
		arg := fmt.Sprint(i)
		line, _ := json.Marshal(traceOp{Config: "naive", Seq: int64(i), AtNS: int64(at), Tenant: fmt.Sprint(1 + i%10),
			Class: "lookup", SQL: "SELECT $1", Args: []*string{&arg}})
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 10}, 1)
	if err != nil {
		b.Fatal(err)
	}
	sc := &scenario.Scenario{Replay: &scenario.Replay{Trace: path, Speed: 1}}
	r := &runner{sc: sc, pop: pop, log: slog.New(slog.DiscardHandler), classes: map[string]*scenario.Class{"lookup": {Name: "lookup"}},
		steps: []step{{Phase: scenario.Phase{Name: "run"}, start: 0, end: fidelityLength}}}
	for i := 1; i <= 10; i++ {
		r.keys = append(r.keys, fmt.Sprint(i))
	}
	if err := r.planReplay(); err != nil {
		b.Fatal(err)
	}
	return r, n
}

// fidelity runs src through the open loop as a run configures it (wait:
// its PreciseWait), with an executor that returns at once, and reports the p99 and max gap between
// intended and actual starts.
func fidelity(b *testing.B, src workload.Source, n int, wait time.Duration) {
	var mu sync.Mutex
	gaps := hdr.New(1, int64(10*time.Second/time.Microsecond), 3)
	rec := workload.RecorderFunc(func(res workload.Result) {
		mu.Lock()
		defer mu.Unlock()
		if !res.Start.IsZero() {
			gaps.RecordValue(max(res.Start.Sub(res.Intended).Microseconds(), 1))
		}
	})
	exec := func(context.Context, workload.Op) error { return nil }
	st, err := workload.RunOpenLoopSource(context.Background(), src, exec, rec, workload.OpenLoopConfig{Drain: time.Second, PreciseWait: wait})
	if err != nil || st.Issued != int64(n) {
		b.Fatalf("replay: %v, %d of %d issued", err, st.Issued, n)
	}
	b.ReportMetric(float64(gaps.ValueAtQuantile(50)), "start-gap-p50-µs")
	b.ReportMetric(float64(gaps.ValueAtQuantile(99)), "start-gap-p99-µs")
	b.ReportMetric(float64(gaps.Max()), "start-gap-max-µs")
}

// BenchmarkReplayLogMemory streams a generated csvlog of 200,000 short
// sessions (an app opening a connection per request: 1,000 a second for
// 200 s of log time, 3 statements each 1 ms apart, 300 pids cycled so a
// session id recurs within its second; about 600,000 statement records,
// ~150 MB with its disconnection records) through a replay's reader and
// its session turns, with no database: each statement waits for its turn
// and is done at once. It reports the heap in use after 10% and after
// 100% of the log's statements (heap-MB-10pct, heap-MB-100pct), their
// ratio (heap-ratio-100/10: about 1 when the replay's memory is flat in
// the sessions seen) and the most sessions its reader kept at once
// (sessions-kept-max): "disconnections" with log_disconnections records,
// "idle" without (sessions forgotten once idle for logSessionIdle of log
// time). Run it with -benchtime=1x; ns/op is the whole replay:
//
//	go test -run '^$' -bench ReplayLogMemory -benchtime 1x ./harness/
func BenchmarkReplayLogMemory(b *testing.B) {
	for _, disc := range []bool{true, false} {
		name := "idle"
		if disc {
			name = "disconnections"
		}
		b.Run(name, func(b *testing.B) {
			sl := sessionsLog{Format: pglog.CSV, Sessions: 200000, PerSecond: 1000, Statements: 3, Spacing: time.Millisecond,
				Tenants: 10, Pids: 300, Disconnections: disc}
			path, statements := sl.writeFile(b, b.TempDir())
			if st, err := os.Stat(path); err == nil {
				b.Logf("%s: %d statements, %.0f MB", name, statements, float64(st.Size())/(1<<20))
			}
			r := logRunner(b, path, sl.Format, sl.Tenants, time.Second)
			heapInUse := func() float64 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return float64(ms.HeapInuse)
			}
			for b.Loop() {
				rs, err := r.newReplaySource()
				if err != nil {
					b.Fatal(err)
				}
				lr := rs.tr.(*logReader)
				ctx := context.Background()
				var at10, at100 float64
				sent, kept := 0, 0
				for op, ok := rs.Next(); ok; op, ok = rs.Next() {
					turn := op.Payload.(*recorded).turn
					if err := turn.wait(ctx); err != nil {
						b.Fatal(err)
					}
					turn.finish()
					if sent++; sent == statements/10 {
						at10 = heapInUse()
					}
					kept = max(kept, len(lr.sessions))
				}
				at100 = heapInUse()
				if err := rs.Close(); err != nil || sent != statements {
					b.Fatalf("replay: %v, %d of %d statements", err, sent, statements)
				}
				b.ReportMetric(at10/(1<<20), "heap-MB-10pct")
				b.ReportMetric(at100/(1<<20), "heap-MB-100pct")
				b.ReportMetric(at100/at10, "heap-ratio-100/10")
				b.ReportMetric(float64(kept), "sessions-kept-max")
			}
		})
	}
}
