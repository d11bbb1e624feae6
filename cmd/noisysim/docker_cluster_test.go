package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
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

// TestDockerClusterDownKeptOnly: `cluster down --backend docker` removes the
// clusters started with --keep and leaves one another process is running;
// --run with an unknown id says nothing was found and exits 2; --all removes
// every cluster. The test's clusters carry a label of their own
// (envTestLabel) and cluster down only sees those, so that other processes'
// clusters on the same daemon are safe from the test.
func TestDockerClusterDownKeptOnly(t *testing.T) {
	image := needDockerImage(t)
	sel := "org.noisysim.test=cli-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv(envTestLabel, sel)
	key, value, _ := strings.Cut(sel, "=")
	ctx := t.Context()

	_, kept := keptUp(t, image)
	b := container.New(container.WithImages(image), container.WithLabel(key, value))
	running, err := b.StartCluster(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	present := func(run string) bool {
		t.Helper()
		cs, ns, err := container.Leftovers(ctx, container.LabelRun+"="+run)
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)+len(ns) > 0
	}
	down := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := realMain(append([]string{"cluster", "down", "--backend", "docker"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := down()
	if code != exitOK || !strings.Contains(out, kept) {
		t.Errorf("cluster down: exit %d, want 0 naming run %s\n%s%s", code, kept, out, errOut)
	}
	if present(kept) {
		t.Errorf("cluster down left the kept cluster %s", kept)
	}
	if !present(running.RunID()) {
		t.Fatalf("cluster down removed cluster %s that was started without --keep and is still running", running.RunID())
	}

	code, _, errOut = down()
	if code != exitUsage || !strings.Contains(errOut, "no kept") {
		t.Errorf("cluster down with no kept cluster: exit %d, want 2 saying no kept cluster was found\n%s", code, errOut)
	}
	code, _, errOut = down("--run", "0123456789ab")
	if code != exitUsage || !strings.Contains(errOut, "nothing found") {
		t.Errorf("cluster down --run unknown: exit %d, want 2 saying nothing was found\n%s", code, errOut)
	}
	code, _, errOut = down("--all", "--run", running.RunID())
	if code != exitUsage || !strings.Contains(errOut, "--all") {
		t.Errorf("cluster down --all --run: exit %d, want 2 (usage)\n%s", code, errOut)
	}
	if !present(running.RunID()) {
		t.Fatalf("a refused cluster down removed cluster %s", running.RunID())
	}
	code, out, errOut = down("--all")
	if code != exitOK || !strings.Contains(out, running.RunID()) {
		t.Errorf("cluster down --all: exit %d, want 0 naming run %s\n%s%s", code, running.RunID(), out, errOut)
	}
	if present(running.RunID()) {
		t.Errorf("cluster down --all left cluster %s", running.RunID())
	}
}
