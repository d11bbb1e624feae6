package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/harness/sweep"
	"github.com/noisysim/noisysim/internal/runlock"
)

func TestSweepBadInput(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(runlock.EnvPath, filepath.Join(dir, "lock"))
	runs := t.TempDir()
	if err := os.Chmod(runs, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", runs)
	done := filepath.Join(dir, "done")
	if err := os.MkdirAll(done, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(done, "sweep.json"), []byte(`{"sweep_version": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := "../../scenarios/noisy-neighbor.yaml"
	nn, err := os.ReadFile(sc)
	if err != nil {
		t.Fatal(err)
	}
	// The line the file writes dominant_share on, as the error names it.
	shareAt := fmt.Sprintf("noisy-neighbor.yaml:%d:3: tenants.dominant_share", slices.IndexFunc(strings.Split(string(nn), "\n"), func(l string) bool {
		return strings.HasPrefix(l, "  dominant_share:")
	})+1)
	badHeadroom := filepath.Join(dir, "headroom.yaml")
	if err := os.WriteFile(badHeadroom, append(nn, "  headroom: {key: classes.report.ratee, min: 2}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"sweep", sc}, "at least one --vary"},
		{[]string{"sweep", sc, "--vary", "classes.report.ratez=1..2"}, `noisy-neighbor.yaml:`},
		{[]string{"sweep", sc, "--vary", "classes.report.ratez=1..2"}, `no key "ratez"`},
		{[]string{"sweep", sc, "--vary", "classes.report.query=1..2"}, "not a numeric key"},
		{[]string{"sweep", sc, "--vary", "classes.report.rate=6..48:0"}, "STEPS"},
		{[]string{"sweep", sc, "--vary", "tenants.dominant_share=0.5..1.2:3"}, "tenants.dominant_share: must be in (0, 1), got 1.2"},
		{[]string{"sweep", sc, "--vary", "tenants.dominant_share=0.5..1.2:3"}, shareAt},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--vary", "tenants.count=1..2"}, "the same key"},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--search", "knee", "--vary", "classes.report.rate=1..2"}, "one key"},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--search", "cliff"}, "--search"},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--trials", "0"}, "--trials"},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--resume"}, "give --out"},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--only", "nope"}, `--only "nope"`},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--out", done}, "does not overwrite"},
		{[]string{"sweep", sc, "--vary", "tenants.count=10..20", "--out", done, "--resume"}, "another scenario"},
		{[]string{"validate", badHeadroom}, `assertions.headroom.key: bad sweep input: --vary classes.report.ratee: ` + badHeadroom + `:`},
		{[]string{"sweep", badHeadroom, "--search", "knee", "--vary", "tenants.count=10..20"},
			fmt.Sprintf("--search knee of tenants.count: %s:%d:19: the scenario's assertions.headroom.key is classes.report.ratee", badHeadroom, strings.Count(string(nn), "\n")+1)},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			before := serversUnder(runs)
			var out, errOut bytes.Buffer
			if got := realMain(tc.args, &out, &errOut); got != exitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", got, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, errOut.String())
			}
			if after := serversUnder(runs); len(after) > len(before) {
				t.Errorf("postgres processes %v left running", after)
			}
		})
	}
}

// A tiny real sweep: 2 points, 1 trial, short phases, against PostgreSQL
// started by noisysim. SIGINT during the second point keeps the first in
// sweep.json (exit 1); --resume runs only the second.
func TestSweepReal(t *testing.T) {
	needPostgres(t)
	sc := writeShort(t)
	out := filepath.Join(t.TempDir(), "sw")
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	args := []string{"sweep", sc, "--vary", "classes.lookup.rate=20..40:2", "--out", out}
	c := startCLI(t, env, args...)
	c.waitLine(t, "classes.lookup.rate=20  trial 1/1  seed 1  shared held")
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != exitError {
		o, e := c.output()
		t.Fatalf("SIGINT: exit %d, want 1\n%s\n%s", code, o, e)
	}
	d := readSweep(t, out)
	if d.Complete || len(d.Points) != 1 || len(d.Points[0].Trials) != 1 {
		t.Fatalf("after SIGINT sweep.json: %+v", d)
	}

	r := startCLI(t, env, append(args, "--resume")...)
	if code := r.wait(t); code != 0 {
		o, e := r.output()
		t.Fatalf("--resume: exit %d\n%s\n%s", code, o, e)
	}
	o, _ := r.output()
	for _, want := range []string{"classes.lookup.rate=20  trial 1/1  seed 1  shared held (quiet/solo p99", "(kept from the interrupted sweep)",
		"classes.lookup.rate=40  trial 1/1  seed 1  shared held", "quiet/solo p99", "sweep written to"} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	d = readSweep(t, out)
	if !d.Complete || len(d.Points) != 2 || d.Points[1].Values["classes.lookup.rate"] != 40 || d.Points[0].Trials[0].Seed != 1 {
		t.Fatalf("sweep.json: %+v", d)
	}
	// A quiet figure quiet_p99 did not judge (this short sweep's few quiet
	// samples) is marked in the output exactly when sweep.json says so.
	unjudged := false
	for _, p := range d.Points {
		for _, tr := range p.Trials {
			unjudged = unjudged || tr.Configurations[0].QuietUnjudged
		}
	}
	t.Logf("quiet_unjudged in sweep.json: %v", unjudged)
	if strings.Contains(o, "unjudged: quiet_p99 judged no class") != unjudged || strings.Contains(o, sweep.UnjudgedNote) != unjudged {
		t.Errorf("sweep.json quiet_unjudged %v, output marks unjudged %v:\n%s", unjudged, !unjudged, o)
	}
	// The throughput reached follows the rate asked for.
	lo, hi := d.Points[0].Summary[0].Throughput.Median, d.Points[1].Summary[0].Throughput.Median
	if !(lo > 10 && lo < 30 && hi > 30 && hi < 50) {
		t.Errorf("throughput %v at rate 20, %v at 40", lo, hi)
	}
	if md, err := os.ReadFile(filepath.Join(out, "sweep.md")); err != nil || !strings.Contains(string(md), "| classes.lookup.rate=40 | shared | 1/1 |") {
		t.Errorf("sweep.md: %v\n%s", err, md)
	}
	if page, err := os.ReadFile(filepath.Join(out, sweep.HTMLFile)); err != nil || !strings.Contains(string(page), `id="sweep-plot"`) {
		t.Errorf("sweep.html: %v", err)
	}
}

func readSweep(t *testing.T, dir string) *sweep.Doc {
	t.Helper()
	d, err := sweep.ReadFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestHeadroomGate(t *testing.T) {
	sc, err := scenario.Parse([]byte(`name: x
classes: [{name: report, isolation_class: heavy, query: report, rate: 10}]
configurations:
  - {name: naive, mode: shared, expect: fail}
  - {name: isolated, mode: isolated}
assertions:
  headroom: {key: classes.report.rate, min: 2}
`), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	knees := func(iso sweep.Knee) *sweep.Doc {
		return &sweep.Doc{Search: "knee", Knees: []sweep.Knee{
			{Configuration: "naive", Expect: "fail", Key: "classes.report.rate"}, // never holds: a control
			iso}}
	}
	var out bytes.Buffer
	if err := headroomGate(&out, sc, knees(sweep.Knee{Configuration: "isolated", Expect: "pass", Found: true, Headroom: 2.5})); err != nil {
		t.Errorf("2.5x against min 2: %v", err)
	}
	for _, k := range []sweep.Knee{
		{Configuration: "isolated", Expect: "pass", Found: true, Headroom: 1.5},
		{Configuration: "isolated", Expect: "pass", Found: true, AboveRange: true, Headroom: 1.8}, // range too short
		{Configuration: "isolated", Expect: "pass"},
	} {
		err := headroomGate(&out, sc, knees(k))
		if exitCode(err) != exitAssertion || !strings.Contains(err.Error(), "isolated") {
			t.Errorf("%+v: %v, want exit 99 naming isolated", k, err)
		}
	}
	if err := headroomGate(&out, sc, &sweep.Doc{Search: "grid"}); err != nil {
		t.Errorf("grid: %v", err)
	}

	// headroom.configurations names who must have it: a configuration
	// expected to pass that it leaves out is not checked, one it names
	// is, and one it names that was not searched (--only) is said to be
	// unchecked.
	withList := func(list string) (*scenario.Scenario, error) {
		return scenario.Parse([]byte(`name: x
classes: [{name: report, isolation_class: heavy, query: report, rate: 10}]
configurations:
  - {name: naive, mode: shared}
  - {name: isolated, mode: isolated}
assertions:
  headroom: {key: classes.report.rate, min: 2, configurations: `+list+`}
`), "x.yaml")
	}
	named, err := withList("[isolated]")
	if err != nil {
		t.Fatal(err)
	}
	both := &sweep.Doc{Search: "knee", Knees: []sweep.Knee{
		{Configuration: "naive", Expect: "pass", Found: true, Headroom: 0.5},
		{Configuration: "isolated", Expect: "pass", Found: true, Headroom: 2.5}}}
	out.Reset()
	if err := headroomGate(&out, named, both); err != nil || strings.Contains(out.String(), "naive") {
		t.Errorf("naive left out of headroom.configurations was checked: %v\n%s", err, out.String())
	}
	both.Knees[1].Headroom = 1.5
	if err := headroomGate(&out, named, both); exitCode(err) != exitAssertion || !strings.Contains(err.Error(), "isolated") {
		t.Errorf("isolated at 1.5x against min 2: %v, want exit 99", err)
	}
	out.Reset()
	if err := headroomGate(&out, named, &sweep.Doc{Search: "knee", Knees: both.Knees[:1]}); err != nil || !strings.Contains(out.String(), "headroom unchecked: isolated was not searched") {
		t.Errorf("isolated not searched: %v\n%s", err, out.String())
	}
	// A range whose top is below min × the value is said to be too short,
	// not read as a knee.
	out.Reset()
	top := &sweep.Doc{Search: "knee", Knees: []sweep.Knee{{Configuration: "isolated", Expect: "pass", Found: true, AboveRange: true, Headroom: 1.5}}}
	if err := headroomGate(&out, named, top); exitCode(err) != exitAssertion || !strings.Contains(out.String(), "to at least 1.5×, the top of the range (want >= 2×: search a range up to that)") {
		t.Errorf("range too short: %v\n%s", err, out.String())
	}
	// No configuration held to it: said, not silently passed.
	out.Reset()
	if err := headroomGate(&out, sc, &sweep.Doc{Search: "knee", Knees: []sweep.Knee{{Configuration: "naive", Expect: "fail"}}}); err != nil {
		t.Errorf("only the control searched: %v", err)
	}
	allFail, err := scenario.Parse([]byte(`name: x
classes: [{name: report, isolation_class: heavy, query: report, rate: 10}]
configurations: [{name: naive, mode: shared, expect: fail}]
assertions:
  headroom: {key: classes.report.rate, min: 2}
`), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := headroomGate(&out, allFail, &sweep.Doc{Search: "knee", Knees: []sweep.Knee{{Configuration: "naive", Expect: "fail"}}}); err != nil || !strings.Contains(out.String(), "headroom unchecked: no configuration is expected to pass") {
		t.Errorf("every configuration expected to fail: %v\n%s", err, out.String())
	}
	for _, c := range []struct{ list, want string }{
		{"[isolatd]", `assertions.headroom.configurations[0]: unknown configuration "isolatd"; the scenario has naive, isolated`},
		{"[isolated, isolated]", `assertions.headroom.configurations[1]: configuration "isolated" named twice`},
		{"[]", `assertions.headroom.configurations: names no configuration`},
		{"[null]", `assertions.headroom.configurations: names no configuration`},
	} {
		_, err := withList(c.list)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "x.yaml:7:") {
			t.Errorf("configurations %s: %v, want %q at x.yaml:7", c.list, err, c.want)
		}
	}
	bad := `name: x
classes: [{name: report, isolation_class: heavy, query: report, rate: 10}]
configurations: [{name: s, mode: shared}]
assertions:
  headroom: {min: 0}
`
	_, err = scenario.Parse([]byte(bad), "bad.yaml")
	if err == nil || !strings.Contains(err.Error(), "assertions.headroom.key") || !strings.Contains(err.Error(), "bad.yaml:5:") || !strings.Contains(err.Error(), "assertions.headroom.min") {
		t.Errorf("bad headroom: %v", err)
	}
}
