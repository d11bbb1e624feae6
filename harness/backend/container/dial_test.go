package container_test

import (
	"context"
	"errors"
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
