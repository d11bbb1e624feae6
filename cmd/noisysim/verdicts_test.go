package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/internal/runlock"
)

// validate says how many quiet tenant × class pairs quiet_p99 will judge,
// names those it will not, and how check_top sizes the phases; a check_top
// no phase of at most an hour can meet is bad input.
func TestValidateSaysSamples(t *testing.T) {
	dir := t.TempDir()
	gate, err := os.ReadFile("../../scenarios/ci-gate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, assertion string) string {
		body := regexp.MustCompile(`(?m)^  quiet_p99: .*$`).ReplaceAllString(string(gate), "  quiet_p99: "+assertion)
		if !strings.Contains(body, assertion) {
			t.Fatal("ci-gate.yaml has no assertions.quiet_p99 line to replace")
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("plain.yaml", "{min_samples: 100}")
	top := write("top.yaml", "{min_samples: 100, check_top: 3}")
	never := write("never.yaml", "{min_samples: 10000000, check_top: all}")

	var out, errOut bytes.Buffer
	if code := realMain([]string{"validate", plain, top}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	text := out.String()
	plainOut, topOut, _ := strings.Cut(text, top+": ok")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`quiet_p99 will check \d+ of 98 quiet tenant × class pairs: those with >= 100 samples in both run and solo`),
		regexp.MustCompile(`too few samples, skipped: 2/lookup \(run \d+, solo \d+\), `),
		regexp.MustCompile(`and \d+ more \(assertions.quiet_p99.check_top`),
	} {
		if !want.MatchString(plainOut) {
			t.Errorf("validate of ci-gate lacks %s:\n%s", want, plainOut)
		}
	}
	for _, want := range []string{"check_top 3: run lengthened from 20s to ", "check_top 3: solo lengthened from 6s to "} {
		if !strings.Contains(topOut, want) {
			t.Errorf("validate with check_top 3 lacks %q:\n%s", want, topOut)
		}
	}
	for _, short := range []string{" 2/", " 3/", " 4/"} {
		if strings.Contains(topOut, "skipped:"+short) || strings.Contains(topOut, ","+short) {
			t.Errorf("check_top 3 leaves a pair of the 3 busiest quiet tenants short:\n%s", topOut)
		}
	}

	out.Reset()
	errOut.Reset()
	if code := realMain([]string{"validate", never}, &out, &errOut); code != exitUsage {
		t.Errorf("unreachable check_top: exit %d, want 2", code)
	}
	if !regexp.MustCompile(`never\.yaml:\d+:\d+: assertions\.quiet_p99\.check_top: all:`).MatchString(errOut.String()) {
		t.Errorf("stderr does not name the file and check_top:\n%s", errOut.String())
	}
}

// A run whose quiet_p99 verdicts rest on too few samples for an upper
// bound of their p99 (fewer than 368) passes with marginal verdicts: listed
// apart, exit 0, and exit 1 under --strict. The limits are wide, so the
// verdict does not depend on the machine's load.
func TestRunStrictMarginal(t *testing.T) {
	needPostgres(t)
	p := filepath.Join(t.TempDir(), "marginal.yaml")
	if err := os.WriteFile(p, []byte(`name: marginal
tenants: {count: 3}
data: {orders: 600}
classes:
  - {name: lookup, isolation_class: interactive, query: lookup, rate: 40}
phases: {warmup: 300ms, solo: 2s, run: 2s, drain: 500ms}
configurations:
  - {name: isolated, mode: isolated}
assertions: {quiet_p99: {factor: 100, slack: 2s, min_samples: 5}, noisy_rejections: false}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{runlock.EnvPath + "=" + filepath.Join(t.TempDir(), "lock")}
	dir := filepath.Join(t.TempDir(), "out")
	plain := startCLI(t, env, "run", "--no-progress", "--out", dir, p)
	if code := plain.wait(t); code != 0 {
		o, e := plain.output()
		t.Fatalf("without --strict: exit %d, want 0\n%s\n%s", code, o, e)
	}
	o, e := plain.output()
	for _, want := range []string{"== Marginal verdicts: ", "MARGINAL: ", "quiet_p99 checked "} {
		if !strings.Contains(o, want) {
			t.Errorf("terminal report lacks %q:\n%s", want, o)
		}
	}
	if !strings.Contains(e, "quiet_p99 will check ") {
		t.Errorf("the run does not say at its start how many pairs it will check:\n%s", e)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(md), "## Marginal verdicts") {
		t.Errorf("report.md lacks the marginal verdicts (%v)", err)
	}
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil || !strings.Contains(string(js), `"marginal": [`) || !strings.Contains(string(js), `"observed_ci"`) {
		t.Errorf("report.json lacks marginal and observed_ci (%v)", err)
	}

	strict := startCLI(t, env, "run", "--no-progress", "--strict", p)
	if code := strict.wait(t); code != 1 {
		o, e := strict.output()
		t.Fatalf("--strict: exit %d, want 1\n%s\n%s", code, o, e)
	}
	if _, e := strict.output(); !strings.Contains(e, " marginal verdict") || !strings.Contains(e, "passed with ") {
		t.Errorf("--strict does not say why it failed:\n%s", e)
	}
}
