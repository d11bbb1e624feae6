package container

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// dialTimeout bounds finding and pinging the Docker daemon.
const dialTimeout = 10 * time.Second

// dial connects to the Docker daemon testcontainers finds (DOCKER_HOST,
// the Docker context, the default socket) and pings it. A DOCKER_HOST that
// does not answer is no daemon: testcontainers would fall back to the
// default socket, another daemon than the one the user named. A ctx that
// ends first returns ctx.Err() wrapped: an interruption is not a missing
// daemon.
func dial(ctx context.Context) (*testcontainers.DockerClient, error) {
	setup()
	noDaemon := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("connect to docker: %w", ctx.Err())
		}
		return &DockerError{Err: err}
	}
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if host := os.Getenv("DOCKER_HOST"); host != "" {
		if err := pingEnv(pctx); err != nil {
			return nil, noDaemon(fmt.Errorf("DOCKER_HOST=%s: %w", host, err))
		}
	}
	// testcontainers finds the host once per process and keeps what it
	// found, a failure too: a search ended by ctx's cancellation would fail
	// every later call. So it gets a context ctx does not cancel.
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
	defer tcancel()
	cli, err := testcontainers.NewDockerClientWithOpts(tctx)
	if err != nil {
		return nil, noDaemon(err)
	}
	if _, err := cli.Ping(pctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, noDaemon(err)
	}
	return cli, nil
}

// pingEnv pings the daemon the environment names (DOCKER_HOST and its TLS
// variables).
func pingEnv(ctx context.Context) error {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Ping(ctx, client.PingOptions{})
	return err
}

// Available returns nil when a Docker daemon answers, or a *DockerError
// (ErrNoDocker, backend.ErrNotInstalled).
func Available(ctx context.Context) error {
	cli, err := dial(ctx)
	if err != nil {
		return err
	}
	return cli.Close()
}

// ImagePresent reports whether image is on the machine (no pull is tried).
// Errors: *DockerError when no daemon answers.
func ImagePresent(ctx context.Context, image string) (bool, error) {
	cli, err := dial(ctx)
	if err != nil {
		return false, err
	}
	defer cli.Close()
	return imagePresent(ctx, cli, image)
}

func imagePresent(ctx context.Context, cli *testcontainers.DockerClient, image string) (bool, error) {
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspect image %s: %w", image, err)
	}
	return true, nil
}

func isNotFound(err error) bool {
	type notFound interface{ NotFound() }
	var nf notFound
	return errors.As(err, &nf) || strings.Contains(strings.ToLower(err.Error()), "no such")
}

// Leftovers lists the names of containers and networks labelled
// LabelManaged, of any run; each extra "key=value" in labels narrows the
// list to things carrying that label too (see WithLabel). Errors:
// *DockerError when no daemon answers.
func Leftovers(ctx context.Context, labels ...string) (containers, networks []string, err error) {
	cli, err := dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer cli.Close()
	return leftovers(ctx, cli, "", labels...)
}

func labelFilter(runID string, labels ...string) client.Filters {
	f := make(client.Filters).Add("label", LabelManaged+"=true")
	if runID != "" {
		f.Add("label", LabelRun+"="+runID)
	}
	for _, l := range labels {
		f.Add("label", l)
	}
	return f
}

func leftovers(ctx context.Context, cli *testcontainers.DockerClient, runID string, labels ...string) (containers, networks []string, err error) {
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilter(runID, labels...)})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		containers = append(containers, name)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilter(runID, labels...)})
	if err != nil {
		return nil, nil, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range ns.Items {
		networks = append(networks, n.Name)
	}
	return containers, networks, nil
}

// Remove force-removes the containers (with their anonymous volumes) and
// then the networks of run runID (`noisysim cluster down --backend docker
// --run ID`), kept or not. Errors: *DockerError when no daemon answers;
// *NotFoundError (ErrNoCluster, backend.ErrBadInput) when nothing of
// noisysim's carries run id runID, or runID is ""; otherwise the joined
// removal errors.
func Remove(ctx context.Context, runID string) error {
	if runID == "" {
		return &NotFoundError{}
	}
	cli, err := dial(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	n, err := removeRun(ctx, cli, runID)
	if err == nil && n == 0 {
		return &NotFoundError{Run: runID}
	}
	return err
}

// RemoveKept removes every cluster started WithKeep (its containers and
// network carry LabelKept), of any run, and returns their run ids, sorted;
// none is no error. Clusters started without it belong to the process
// running them and are left alone. Each extra "key=value" in labels narrows
// the clusters removed to those carrying that label too (see WithLabel).
// Errors: *DockerError when no daemon answers; otherwise the joined removal
// errors.
func RemoveKept(ctx context.Context, labels ...string) ([]string, error) {
	return removeRuns(ctx, append([]string{LabelKept + "=true"}, labels...))
}

// RemoveAll removes every noisysim cluster on the daemon, kept or not,
// including those other processes are still running (`noisysim cluster down
// --backend docker --all`), and returns their run ids, sorted. labels
// narrow it as in RemoveKept. Errors: as RemoveKept's.
func RemoveAll(ctx context.Context, labels ...string) ([]string, error) {
	return removeRuns(ctx, labels)
}

// removeRuns removes every run whose containers or network carry all of
// labels (and LabelManaged).
func removeRuns(ctx context.Context, labels []string) ([]string, error) {
	cli, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	runs := map[string]bool{}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilter("", labels...)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		runs[c.Labels[LabelRun]] = true
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilter("", labels...)})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	for _, n := range ns.Items {
		runs[n.Labels[LabelRun]] = true
	}
	delete(runs, "") // not ours to name: LabelManaged without a run id
	ids := slices.Sorted(maps.Keys(runs))
	var errs []error
	for _, id := range ids {
		if _, err := removeRun(ctx, cli, id); err != nil {
			errs = append(errs, fmt.Errorf("remove run %s: %w", id, err))
		}
	}
	return ids, errors.Join(errs...)
}

// removeRun removes the containers, then the networks, of run runID and
// returns how many of them there were.
func removeRun(ctx context.Context, cli *testcontainers.DockerClient, runID string) (int, error) {
	var errs []error
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilter(runID)})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID[:12], err))
		}
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilter(runID)})
	if err != nil {
		return len(cs.Items), errors.Join(append(errs, fmt.Errorf("list networks: %w", err))...)
	}
	for _, n := range ns.Items {
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
		}
	}
	return len(cs.Items) + len(ns.Items), errors.Join(errs...)
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
