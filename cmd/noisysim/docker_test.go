package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend/container"
)

// TestDockerErrorsExit2: no daemon and a missing image are the machine's
// prerequisites, an unknown run id bad input, so exit 2 with one line.
func TestDockerErrorsExit2(t *testing.T) {
	for _, err := range []error{
		&container.DockerError{Err: errors.New("dial unix /var/run/docker.sock: connect: no such file or directory")},
		&container.ImageError{Image: "postgres:15", Err: errors.New("no route")},
		&container.NotFoundError{Run: "0123456789ab"},
	} {
		if got := exitCode(err); got != exitUsage {
			t.Errorf("exitCode(%v) = %d, want 2", err, got)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("error is more than one line: %q", err)
		}
	}
}

func TestRunBackendFlagBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", "--backend", "kube", "../../scenarios/ci-gate.yaml"}, `--backend "kube": want local or docker`},
		{[]string{"run", "--image", "pg:15", "../../scenarios/ci-gate.yaml"}, "--image needs backend kind docker"},
		{[]string{"cluster", "up", "--backend", "kube"}, `--backend "kube"`},
		{[]string{"cluster", "down", "--backend", "kube"}, `--backend "kube"`},
		{[]string{"cluster", "down", "--all"}, "--run and --all need --backend docker"},
		{[]string{"cluster", "down", "--backend", "docker", "--all", "--run", "x"}, "--all and --run exclude each other"},
	} {
		var out, errOut bytes.Buffer
		if got := realMain(tc.args, &out, &errOut); got != exitUsage {
			t.Errorf("%v: exit %d, want 2; stderr:\n%s", tc.args, got, errOut.String())
		}
		if !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: stderr lacks %q:\n%s", tc.args, tc.msg, errOut.String())
		}
	}
}
