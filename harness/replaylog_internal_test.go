package harness

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

// TestLogReorder: statements come out in order of start (log time less
// duration) within replay.reorder, the first start at 0; a statement that
// started before one already sent, found later than the window, is
// skipped and counted.
func TestLogReorder(t *testing.T) {
	rec := func(end string, ms float64, app, stmt string) string {
		return fmt.Sprintf(`{"timestamp":"2026-12-01 18:00:%s UTC","error_severity":"LOG","application_name":%q,"session_id":"s-%s","message":"duration: %.3f ms  statement: %s"}`,
			end, app, app, ms, stmt)
	}
	log := strings.Join([]string{
		rec("10.000", 1, "t:a", "SELECT 1"),     // start 9.999
		rec("10.500", 2000, "t:b", "SELECT 2"),  // start 8.5: logged later, started first
		rec("30.000", 1, "t:a", "SELECT 3"),     // start 29.999
		rec("45.000", 40000, "t:b", "SELECT 4"), // start 5.0: beyond the 10 s window
	}, "\n") + "\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pg.json"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scenario.Scenario{Replay: &scenario.Replay{Log: filepath.Join(dir, "pg.json"), Speed: 1,
		Reorder: scenario.Duration(10 * time.Second), Tenant: scenario.ReplayTenant{ApplicationName: scenario.DefaultTenantApplicationName},
		DefaultClass: "q"}}
	r := &runner{sc: sc, pop: pop, log: slog.New(slog.DiscardHandler), keys: []string{"a", "b"},
		classes: map[string]*scenario.Class{"q": {Name: "q"}},
		steps:   []step{{Phase: scenario.Phase{Name: "run"}, start: 0, end: time.Minute}}}
	if err := r.planReplay(); err != nil {
		t.Fatal(err)
	}
	rs, err := r.newReplaySource()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var got []string
	for op, ok := rs.Next(); ok; op, ok = rs.Next() {
		got = append(got, fmt.Sprintf("%s@%s", op.Payload.(*recorded).SQL, op.At))
	}
	want := "SELECT 2@0s SELECT 1@1.499s SELECT 3@21.499s"
	if strings.Join(got, " ") != want {
		t.Errorf("replayed %v, want %s", got, want)
	}
	if s := r.replay.skips[skipLate]; s == nil || s.n != 1 || s.lines[0] != 4 || r.replay.total != 3 || r.replay.records != 4 {
		t.Errorf("skips %v, total %d, records %d; want line 4 late, 3 replayed of 4", r.replay.skips, r.replay.total, r.replay.records)
	}
}
