package container_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPgImageScriptDebootstrapMissing runs .ci/pg-image.sh on a PATH where
// the image is absent and debootstrap cannot be had: either apt-get cannot
// install it, or it is there and fails. The script must say so in one line
// on stderr and exit 2 (the machine lacks a prerequisite), not go on to a
// "command not found" or a log tail.
func TestPgImageScriptDebootstrapMissing(t *testing.T) {
	tests := []struct {
		name  string
		fakes map[string]string // command → shell body
		want  string
	}{
		{"install fails", map[string]string{"apt-get": "echo 'E: Unable to locate package debootstrap' >&2; exit 100"},
			"debootstrap is not installed and apt-get could not install it"},
		{"install succeeds without it", map[string]string{"apt-get": "exit 0"},
			"debootstrap is not installed and apt-get could not install it"},
		{"debootstrap fails", map[string]string{"apt-get": "exit 0",
			"debootstrap": "echo 'W: Failure trying to run: chroot' >&2; echo 'E: Release signed by unknown key' >&2; exit 1"},
			"failed: E: Release signed by unknown key (log: "},
	}
	script, err := filepath.Abs("../../../.ci/pg-image.sh")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, tool := range []string{"bash", "env", "awk", "cat", "head", "tail", "mktemp", "flock", "rm", "umount", "mkdir", "chmod"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("skipping: %s is not installed", tool)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	// docker answers, and the image is absent.
	writeFake(t, bin, "docker", `[ "$1" = info ] && exit 0; [ "$1 $2" = "image inspect" ] && exit 1; exit 3`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"apt-get", "debootstrap"} {
				os.Remove(filepath.Join(bin, f))
			}
			for name, body := range tc.fakes {
				writeFake(t, bin, name, body)
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(filepath.Join(bin, "bash"), script, "noisysim-test/absent:0")
			cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + dir}
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			out := strings.TrimSpace(stderr.String())
			if strings.Contains(out, "no apt source for Debian") {
				t.Skip("skipping: this machine's apt configuration names no Debian bookworm source")
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v, want 2; stderr:\n%s", err, out)
			}
			// The progress lines start "pg-image: "; the failure is the last
			// line and the only one that is not progress.
			lines := strings.Split(out, "\n")
			last := lines[len(lines)-1]
			if !strings.Contains(last, tc.want) {
				t.Errorf("last stderr line = %q, want it to contain %q", last, tc.want)
			}
			for _, l := range lines[:len(lines)-1] {
				if !strings.HasPrefix(l, "pg-image: ") || strings.Contains(l, "failed") || strings.Contains(l, "not installed") {
					t.Errorf("stderr has more than one line about the failure: %q in\n%s", l, out)
				}
			}
		})
	}
}

// writeFake writes an executable shell script name into dir.
func writeFake(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!"+filepath.Join(dir, "bash")+"\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
