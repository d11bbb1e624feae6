package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

// BenchmarkReplayFidelity replays a trace of 2,000 statements/s for 5 s
// through the open loop with an executor that returns at once, and reports
// the p99 and max of the gap between each statement's intended start and
// the executor's call (start-gap-p99-µs, start-gap-max-µs): how closely a
// replay keeps the recorded times on this machine, reading the trace as it
// goes. Run: go test -run '^$' -bench ReplayFidelity -benchtime 1x ./harness/
func BenchmarkReplayFidelity(b *testing.B) {
	const rate, length = 2000, 5 * time.Second
	dir := b.TempDir()
	path := filepath.Join(dir, "trace.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	n := int(rate * length.Seconds())
	for i := 0; i < n; i++ {
		at := time.Duration(i) * time.Second / rate
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
		steps: []step{{Phase: scenario.Phase{Name: "run"}, start: 0, end: length}}}
	for i := 1; i <= 10; i++ {
		r.keys = append(r.keys, fmt.Sprint(i))
	}
	if err := r.planReplay(); err != nil {
		b.Fatal(err)
	}
	b.Run("trace", func(b *testing.B) {
		for b.Loop() {
			rs, err := r.newReplaySource()
			if err != nil {
				b.Fatal(err)
			}
			fidelity(b, rs, n)
			rs.Close()
		}
	})
	// The same rate drawn by the generated schedule, for comparison: what
	// the open loop and the machine alone give.
	b.Run("generated", func(b *testing.B) {
		for b.Loop() {
			s, err := workload.NewStream(pop, []workload.ClassSpec{{Name: "lookup", Rate: rate, Arrival: workload.Constant}}, length, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			fidelity(b, s, int(s.Len()))
		}
	})
}

// fidelity runs src through the open loop with an executor that returns at
// once and reports the p99 and max gap between intended and actual starts.
func fidelity(b *testing.B, src workload.Source, n int) {
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
	st, err := workload.RunOpenLoopSource(context.Background(), src, exec, rec, workload.OpenLoopConfig{Drain: time.Second})
	if err != nil || st.Issued != int64(n) {
		b.Fatalf("replay: %v, %d of %d issued", err, st.Issued, n)
	}
	b.ReportMetric(float64(gaps.ValueAtQuantile(99)), "start-gap-p99-µs")
	b.ReportMetric(float64(gaps.Max()), "start-gap-max-µs")
}
