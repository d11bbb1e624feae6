package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend/container"
)

// needDockerImage skips t with one line unless a Docker daemon answers and
// the local test image is present; under .ci/run (NOISYSIM_REQUIRE_DOCKER=1)
// it fails instead.
func needDockerImage(t *testing.T) string {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("NOISYSIM_REQUIRE_DOCKER") == "1" {
		skip = t.Fatalf
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if err := container.Available(ctx); err != nil {
		skip("skipping: no Docker daemon reachable")
	}
	image := container.LocalTestImage
	if ok, err := container.ImagePresent(ctx, image); err != nil || !ok {
		skip("skipping: image %s is absent (build it with .ci/pg-image.sh)", image)
	}
	return image
}

var runIDRe = regexp.MustCompile(`, run (\S+), network `)

// keptUp runs `cluster up --backend docker --keep` with extra args and
// returns its stdout and the run id; the cluster is removed when t ends.
func keptUp(t *testing.T, image string, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"cluster", "up", "--backend", "docker", "--keep", "--image", image}, args...)
	if code := realMain(args, &out, &errOut); code != exitOK {
		t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errOut.String())
	}
	m := runIDRe.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no run id in:\n%s", out.String())
	}
	t.Cleanup(func() { container.Remove(context.Background(), m[1]) })
	return out.String(), m[1]
}

// TestDockerKeepPasswordWhere: --keep must not claim the password is kept
// nowhere; it says where it is (the containers' environment) with a command
// that shows it, and that command does show it.
func TestDockerKeepPasswordWhere(t *testing.T) {
	image := needDockerImage(t)
	out, _ := keptUp(t, image)
	if strings.Contains(out, "not kept anywhere") {
		t.Errorf("--keep claims the password is kept nowhere:\n%s", out)
	}
	m := regexp.MustCompile(`docker inspect (.*) (noisysim-\S+) \| grep POSTGRES_PASSWORD`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("--keep does not say where the password is visible:\n%s", out)
	}
	if !strings.Contains(out, "--show-password") {
		t.Errorf("--keep without --show-password does not mention it:\n%s", out)
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("skipping the check of the printed command: the docker CLI is not installed")
	}
	format := strings.Trim(strings.TrimPrefix(m[1], "-f "), "'")
	env, err := exec.Command(docker, "inspect", "-f", format, m[2]).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", m[2], err)
	}
	if !regexp.MustCompile(`(?m)^POSTGRES_PASSWORD=\S+$`).Match(env) {
		t.Errorf("the printed command does not show the password:\n%s", env)
	}
}
