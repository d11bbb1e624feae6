package harness

import (
	"errors"
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

// TestLogBadRecords: a log's records that cannot be replayed are counted
// by cause with their line numbers (truncated, parameters that do not
// parse, interleaved or otherwise unreadable, untagged without a tenant
// "untagged", an isolation stack's own tag or reset) while the rest
// replays; a log of untagged statements alone
// has nothing to replay, bad input naming the file and its last line.
func TestLogBadRecords(t *testing.T) {
	rec := func(end, app, msg, detail string) string {
		return fmt.Sprintf(`{"timestamp":"2026-12-01 18:00:%s UTC","error_severity":"LOG","application_name":%q,"session_id":"s","message":%q,"detail":%q}`,
			end, app, msg, detail)
	}
	ok := "duration: 1.000 ms  statement: SELECT 1"
	good := strings.Join([]string{
		rec("01.000", "t:a", ok, ""),
		rec("02.000", "t:a", "duration: 1.000 ms  execute s1: SELECT $1", "parameters: $1 = 'open"),
		rec("03.000", "t:b", ok, "") + rec("03.000", "t:b", ok, ""), // two records on one line
		rec("04.000", "", ok, ""),
		rec("05.000", "t:b", ok, ""),
		rec("05.500", "noisysim-interactive", "duration: 0.100 ms  statement: SELECT pg_advisory_unlock_all()", ""),
		`{"timestamp":"2026-12-01 18:00:06.000 UTC","message":"duration: 1.0`,
	}, "\n")
	untagged := strings.Join([]string{rec("01.000", "", ok, ""), rec("02.000", "psql", ok, "")}, "\n") + "\n"
	dir := t.TempDir()
	for name, log := range map[string]string{"good.json": good, "untagged.json": untagged} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pop, err := workload.NewPopulation(workload.PopulationConfig{Tenants: 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	runner := func(log string) *runner {
		sc := &scenario.Scenario{Replay: &scenario.Replay{Log: filepath.Join(dir, log), Speed: 1,
			Reorder: scenario.Duration(10 * time.Second), Tenant: scenario.ReplayTenant{ApplicationName: scenario.DefaultTenantApplicationName},
			DefaultClass: "q"}}
		return &runner{sc: sc, pop: pop, log: slog.New(slog.DiscardHandler), keys: []string{"a", "b"},
			classes: map[string]*scenario.Class{"q": {Name: "q"}},
			steps:   []step{{Phase: scenario.Phase{Name: "run"}, start: 0, end: time.Minute}}}
	}
	r := runner("good.json")
	if err := r.planReplay(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for cause, s := range r.replay.skips {
		got[cause] = fmt.Sprint(s.n, s.lines)
	}
	want := map[string]string{skipParams: "1 [2]", skipUnreadable: "1 [3]", skipUntaggedOut: "1 [4]", skipHousekeeping: "1 [6]", skipTruncated: "1 [7]"}
	if fmt.Sprint(got) != fmt.Sprint(want) || r.replay.total != 2 || r.replay.records != 7 {
		t.Errorf("skipped %v, %d replayed of %d records; want %v, 2 replayed of 7", got, r.replay.total, r.replay.records, want)
	}

	err = runner("untagged.json").planReplay()
	if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), "untagged.json:2: nothing to replay in 2 lines") ||
		!strings.Contains(err.Error(), skipUntaggedOut+": 2 (line 1, 2)") {
		t.Errorf("untagged log: %v; want ErrInvalid naming untagged.json:2 and the cause", err)
	}
}
