package container_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
)

// TestAvailableCancelled: a context that ends while dialling is an
// interruption, not a missing daemon (which the CLI maps to exit 2).
func TestAvailableCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := container.Available(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, container.ErrNoDocker) {
		t.Errorf("Available(cancelled ctx) = %v, want context.Canceled and not ErrNoDocker", err)
	}
}

// TestDockerHostHonoured: DOCKER_HOST naming a daemon that does not answer
// is no daemon, even when the default socket would answer (testcontainers
// falls back to it silently).
func TestDockerHostHonoured(t *testing.T) {
	for _, host := range []string{"unix:///nonexistent/docker.sock", "tcp://127.0.0.1:1"} {
		t.Setenv("DOCKER_HOST", host)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := container.Available(ctx)
		cancel()
		var de *container.DockerError
		if !errors.As(err, &de) || !errors.Is(err, backend.ErrNotInstalled) {
			t.Errorf("DOCKER_HOST=%s: Available = %v, want *DockerError", host, err)
		}
	}
}

// TestDialCancelledFirst: testcontainers finds the Docker host once per
// process and caches what it found; found through a context cancelled in
// flight, a failure stayed for every later call, or it panicked. Each
// delay runs in a fresh process, so that its call is the first.
func TestDialCancelledFirst(t *testing.T) {
	if d := os.Getenv("NOISYSIM_TEST_DIAL_DELAY"); d != "" {
		dialCancelledChild(t, d)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := container.Available(ctx); err != nil {
		t.Skip("skipping: no Docker daemon reachable")
	}
	for d := time.Duration(0); d <= 6*time.Millisecond; d += 250 * time.Microsecond {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDialCancelledFirst$")
		cmd.Env = append(os.Environ(), "NOISYSIM_TEST_DIAL_DELAY="+d.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("first dial cancelled after %v: %v\n%s", d, err, out)
		}
	}
}

func dialCancelledChild(t *testing.T, delay string) {
	d, err := time.ParseDuration(delay)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := container.Available(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("first Available (cancelled after %v) = %v, want nil or context.DeadlineExceeded", d, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := container.Available(ctx); err != nil {
		t.Errorf("second Available = %v, want nil", err)
	}
	if _, err := container.ImagePresent(ctx, "noisysim-absent/image:none"); err != nil {
		t.Errorf("ImagePresent = %v, want nil", err)
	}
}
