package testcommand

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const root = "../.."

// readmeTestCommand returns the command of the README's "Run the tests:"
// block.
func readmeTestCommand(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "Run the tests:\n\n```sh\n")
	if !ok {
		t.Fatal(`README.md has no "Run the tests:" block`)
	}
	cmd, _, _ := strings.Cut(after, "\n")
	return cmd
}

// The README's test command is a Go tool of the module (it works on a
// fresh clone), keeps -race -count=1, runs packages in parallel (no -p 1:
// the measuring packages take turns through internal/suitelock) with a
// timeout that covers a package's wait for its turn, is the one .ci/run
// runs, and shows each skipped test with its one-line reason in its
// summary.
func TestReadmeTestCommandShowsSkips(t *testing.T) {
	cmd := readmeTestCommand(t)
	for _, want := range []string{"go tool gotestsum ", " -race -count=1 ", " -timeout 60m ", " ./..."} {
		if !strings.Contains(cmd+" ", want) {
			t.Errorf("README test command %q lacks %q", cmd, want)
		}
	}
	if strings.Contains(cmd+" ", " -p 1 ") {
		t.Errorf("README test command %q runs one package at a time (-p 1): the suite must pass with packages in parallel", cmd)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "\ntool gotest.tools/gotestsum\n") {
		t.Error("go.mod does not declare gotestsum as a tool")
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	runner, _, _ := strings.Cut(cmd, " -- ")
	if !strings.Contains(string(ci), runner+" ") {
		t.Errorf(".ci/run does not run the README's test runner %q", runner)
	}
	if testing.Short() {
		t.Skip("skipping: running the command on a fixture builds gotestsum (-short)")
	}

	// Run it on a fixture package with one skipped test.
	args := strings.Fields(strings.Replace(cmd, "./...", "./internal/testcommand/testdata/skips", 1))
	if args[0] != "go" {
		t.Fatalf("command %q does not start with go", cmd)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	c := exec.Command(gobin, args[1:]...)
	c.Dir = root
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	for _, want := range []string{"TestSkipsWithReason", "skipping: the fixture's reason, on one line", "2 tests, 1 skipped"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the test command's output lacks %q:\n%s", want, out)
		}
	}
}

// .ci/run keeps the CI gate's reports in ci-artifacts/ci-gate (git-ignored)
// for a CI system to collect, and never deletes them after the gate.
func TestCIKeepsGateReports(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	_, gate, ok := strings.Cut(string(ci), "bin/noisysim run scenarios/ci-gate.yaml")
	if !ok {
		t.Fatal(".ci/run does not run the CI gate")
	}
	line, rest, _ := strings.Cut(gate, "\n")
	if !strings.Contains(line, `--out "$artifacts/ci-gate"`) || !strings.Contains(string(ci), "\nartifacts=ci-artifacts\n") {
		t.Errorf(".ci/run writes the gate's reports elsewhere than ci-artifacts/ci-gate: %q", line)
	}
	if !strings.Contains(line, "--retry-disturbed") {
		t.Errorf(".ci/run's gate does not retry a failure on a disturbed machine (--retry-disturbed), as ci/gate.sh does: %q", line)
	}
	if strings.Contains(rest, "rm ") {
		t.Errorf(".ci/run removes something after the gate:\n%s", rest)
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil || !strings.Contains(string(ignore), "/ci-artifacts/") {
		t.Errorf(".gitignore does not ignore /ci-artifacts/ (%v)", err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil || !strings.Contains(string(readme), "ci-artifacts/") {
		t.Errorf("README.md does not say where CI's reports are (%v)", err)
	}
}
