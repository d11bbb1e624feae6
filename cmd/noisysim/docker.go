package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
	"github.com/noisysim/noisysim/harness/scenario"
)

// needDocker returns a one-line error (exit 2) when no Docker daemon answers.
func needDocker(ctx context.Context, cmd string) error {
	if err := container.Available(ctx); err != nil {
		return fmt.Errorf("%s --backend docker: %w", cmd, err)
	}
	return nil
}

// overrideBackend applies `run --backend KIND [--image IMAGE]` to sc and
// re-validates it.
func overrideBackend(sc *scenario.Scenario, kind, image string) error {
	switch kind {
	case "":
	case string(scenario.BackendLocal), string(scenario.BackendDocker):
		sc.Backend.Kind = scenario.BackendKind(kind)
	default:
		return usagef("run: --backend %q: want local or docker", kind)
	}
	if image != "" {
		if sc.Backend.Kind != scenario.BackendDocker {
			return usagef("run: --image needs backend kind docker")
		}
		sc.Backend.Image = image
	}
	if errs := sc.Validate(); len(errs) > 0 {
		return fmt.Errorf("run: --backend %s: %w: %w", sc.Backend.Kind, scenario.ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// dockerClusterUp is `cluster up --backend docker`.
func dockerClusterUp(ctx context.Context, a *app, spec backend.Spec, image string, keep, showPassword bool) error {
	if err := needDocker(ctx, "cluster up"); err != nil {
		return err
	}
	opts := []container.Option{container.WithLogger(a.log), container.WithKeep(keep), container.WithImages(image)}
	if k, v, ok := strings.Cut(os.Getenv(envTestLabel), "="); ok {
		opts = append(opts, container.WithLabel(k, v))
	}
	b := container.New(opts...)
	// Registered before Start so that a panic or a second signal also
	// removes a cluster that is still starting.
	td := a.teardown.add(b.CloseAll, b.CloseAll)
	c, err := b.StartCluster(ctx, spec)
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	fmt.Fprintf(a.stdout, "cluster up: docker %s, %d node(s), ready in %.2f s, run %s, network %s\n",
		c.Topology(), len(c.Nodes()), c.Ready().Seconds(), c.RunID(), c.Network())
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, n := range c.Nodes() {
		dsn := n.RedactedDSN()
		if showPassword {
			dsn = n.DSN()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", n.Name, n.Role, dsn)
	}
	tw.Flush()
	if os.Getenv(envTestPanicAfterUp) == "1" {
		panic("test hook " + envTestPanicAfterUp)
	}
	if keep {
		c.Close() // releases the client only: the cluster was started WithKeep
		a.teardown.forget(td)
		fmt.Fprintf(a.stdout, "The cluster keeps running.\n  stop: noisysim cluster down --backend docker --run %s\n", c.RunID())
		// The password is in every container's environment: anyone who may
		// use this Docker daemon can read it.
		fmt.Fprintf(a.stdout, "  password: in each container's environment (POSTGRES_PASSWORD), visible to anyone who can use this Docker daemon:\n"+
			"    docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' %s | grep POSTGRES_PASSWORD\n", c.ContainerName(c.Nodes()[0].Name))
		if !showPassword {
			fmt.Fprintf(a.stdout, "  (or start it with --show-password to print the DSNs with it)\n")
		}
		return nil
	}
	if !showPassword {
		fmt.Fprintf(a.stdout, "The password shows as xxxxx; it is in each container's environment (POSTGRES_PASSWORD):\n"+
			"    docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' %s | grep POSTGRES_PASSWORD\n"+
			"  (or start the cluster with --show-password to print the DSNs with it)\n", c.ContainerName(c.Nodes()[0].Name))
	}
	fmt.Fprintf(a.stdout, "Press Ctrl-C to stop the cluster and remove its containers.\n")
	<-ctx.Done()
	fmt.Fprintf(a.stderr, "noisysim: removing cluster\n")
	if err := a.teardown.finish(td); err != nil {
		return fmt.Errorf("remove cluster: %w", err)
	}
	fmt.Fprintf(a.stderr, "noisysim: cluster removed\n")
	return nil
}

// dockerClusterDown is `cluster down --backend docker [--run ID | --all]`:
// with --run that run (nothing found exits 2), with --all every noisysim
// cluster on the daemon, else the clusters started with --keep (none found
// exits 2, as with the local backend).
func dockerClusterDown(ctx context.Context, a *app, run string, all bool) error {
	if all && run != "" {
		return usagef("cluster down: --all and --run exclude each other")
	}
	if err := needDocker(ctx, "cluster down"); err != nil {
		return err
	}
	if run != "" {
		if err := container.Remove(ctx, run); err != nil {
			return fmt.Errorf("cluster down: %w", err)
		}
		fmt.Fprintf(a.stdout, "run %s removed\n", run)
		return nil
	}
	var labels []string
	if l := os.Getenv(envTestLabel); l != "" {
		labels = append(labels, l)
	}
	remove, what := container.RemoveKept, "kept (--keep) "
	if all {
		remove, what = container.RemoveAll, ""
	}
	runs, err := remove(ctx, labels...)
	for _, r := range runs {
		fmt.Fprintf(a.stdout, "run %s removed\n", r)
	}
	switch {
	case err != nil:
		return fmt.Errorf("cluster down: %w", err)
	case len(runs) == 0 && !all:
		return fmt.Errorf("cluster down: no kept (--keep) noisysim cluster found; --run ID removes one run, --all every noisysim cluster: %w", container.ErrNoCluster)
	case len(runs) == 0:
		fmt.Fprintf(a.stdout, "no noisysim cluster found\n")
	default:
		fmt.Fprintf(a.stdout, "%d %snoisysim cluster(s) removed\n", len(runs), what)
	}
	return nil
}

// backendFlag registers --backend on fs.
func backendFlag(fs *flag.FlagSet, def, usage string) *string {
	return fs.String("backend", def, usage)
}

// envTestLabel, when "key=value", is added to every container cluster up
// --backend docker starts, and cluster down --backend docker only sees
// clusters carrying it: a hook for tests that share a daemon with other
// processes.
const envTestLabel = "NOISYSIM_TEST_LABEL"
