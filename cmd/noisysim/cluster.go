package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// envTestPanicAfterUp, when "1", makes `cluster up` panic once the cluster
// is up: a hook for the tests that check teardown on panic.
const envTestPanicAfterUp = "NOISYSIM_TEST_PANIC_AFTER_UP"

func runCluster(ctx context.Context, a *app, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, `Usage:
  noisysim cluster up [--backend local|docker] [--topology single|replica|primaries|citus] [--keep] [--show-password] [--setting k=v ...]
                      [--node-cpu CPUS] [--role-cpu ROLE=CPUS ...] [--node-cpu-optional]
  noisysim cluster down [--dir DIR] | --backend docker [--run ID | --all]

up starts a throwaway PostgreSQL cluster, prints its nodes and DSNs and waits
for Ctrl-C, then stops it and removes its files. With --keep it returns and
leaves the cluster running; 'cluster down' stops it. With --backend docker,
'cluster down' removes the clusters started with --keep, --run ID one run,
--all every noisysim cluster on the daemon (also those other processes are
running); an unknown --run, or no kept cluster, exits 2. 'cluster down' also
removes what a noisysim killed with SIGKILL left behind (directories, CPU
budget groups).

--node-cpu gives every node its own CPU budget (0.4 = 40%% of one core; a
cgroup per node for local processes, Docker's CPU quota for containers),
--role-cpu overrides it per role. Where budgets cannot be enforced (not
root, no writable cgroup cpu controller) up exits 2, or with
--node-cpu-optional starts without them and says so.
`)
	}
	if len(args) == 0 {
		usage(a.stderr)
		return usagef("cluster: missing subcommand up or down")
	}
	switch args[0] {
	case "up":
		return clusterUp(ctx, a, args[1:])
	case "down":
		return clusterDown(ctx, a, args[1:])
	}
	if isHelp(args[0]) {
		usage(a.stdout)
		return nil
	}
	usage(a.stderr)
	return usagef("cluster: unknown subcommand %q", args[0])
}

// clusterRoles are the roles of the nodes each topology of cluster up
// starts.
var clusterRoles = map[backend.Topology][]backend.Role{
	backend.TopologySingle:    {backend.RolePrimary},
	backend.TopologyReplica:   {backend.RolePrimary, backend.RoleReplica},
	backend.TopologyPrimaries: {backend.RolePrimary},
	local.TopologyCitus:       {backend.RoleCoordinator, backend.RoleWorker},
}

func roleNames(roles []backend.Role) []string {
	out := make([]string, len(roles))
	for i, r := range roles {
		out[i] = string(r)
	}
	return out
}

// roleCPUFlag collects repeated --role-cpu role=cpus.
type roleCPUFlag map[backend.Role]float64

func (r roleCPUFlag) String() string { return "" }

func (r roleCPUFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want role=cpus, got %q", v)
	}
	cpus, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
	if err != nil {
		return fmt.Errorf("want role=cpus, got %q: %v", v, err)
	}
	role := backend.Role(strings.TrimSpace(k))
	switch role {
	case backend.RolePrimary, backend.RoleReplica, backend.RoleCoordinator, backend.RoleWorker:
	default:
		return fmt.Errorf("unknown role %q (want primary, replica, coordinator or worker)", role)
	}
	r[role] = cpus
	return nil
}

// printCPU prints the cluster's CPU budgets, if any were asked for.
func printCPU(w io.Writer, c backend.Cluster) {
	r, ok := c.(backend.CPUReporter)
	if !ok {
		return
	}
	st := r.CPUBudgets()
	switch {
	case st.Skipped != "":
		fmt.Fprintf(w, "  running WITHOUT CPU budgets: %s\n", st.Skipped)
	case st.Mechanism != "":
		var parts []string
		for _, n := range st.Nodes {
			v := "no budget"
			if n.CPUs > 0 {
				v = cgroup.FormatCPU(n.CPUs) + " CPU"
			}
			parts = append(parts, n.Node+" "+v)
		}
		fmt.Fprintf(w, "  CPU budgets (%s): %s\n", st.Mechanism, strings.Join(parts, ", "))
	}
}

// settingsFlag collects repeated --setting name=value.
type settingsFlag map[string]string

func (s settingsFlag) String() string { return "" }

func (s settingsFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	s[strings.TrimSpace(k)] = val
	return nil
}

func clusterUp(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("cluster up", flag.ContinueOnError)
	topology := fs.String("topology", "single", "cluster shape: single, replica, primaries or citus (a coordinator and workers)")
	nodes := fs.Int("nodes", 0, "node count: topology primaries' N independent primaries, topology citus's workers (default 4)")
	keep := fs.Bool("keep", false, "leave the cluster running and exit; stop it with 'noisysim cluster down'")
	showPassword := fs.Bool("show-password", false, "print DSNs with the password instead of xxxxx")
	port := fs.Int("port", 0, "TCP port of the primary (0: pick a free one)")
	binDir := fs.String("bindir", "", "directory of PostgreSQL's server binaries (default: search, see "+local.EnvBinDir+")")
	baseDir := fs.String("base-dir", "", "directory to create the cluster in (default: the temp dir)")
	timings := fs.Bool("timings", false, "print the duration of each start-up step")
	kind := backendFlag(fs, "local", "where the cluster runs: local (processes) or docker (containers)")
	image := fs.String("image", "", "container image of every node (backend docker; default: the official images)")
	settings := settingsFlag{}
	fs.Var(settings, "setting", "server setting name=value, repeatable (e.g. --setting max_connections=200)")
	nodeCPU := fs.Float64("node-cpu", 0, "CPU budget of every node in CPUs, e.g. 0.4 (0: none)")
	roleCPU := roleCPUFlag{}
	fs.Var(roleCPU, "role-cpu", "CPU budget of a role's nodes, role=cpus, repeatable (e.g. --role-cpu worker=0.5)")
	cpuOptional := fs.Bool("node-cpu-optional", false, "start without CPU budgets where the machine cannot enforce them")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("cluster up: unexpected argument %q", fs.Arg(0))
	}
	if *port < 0 || *port > 65535 {
		return usagef("cluster up: --port %d out of range", *port)
	}
	if t := backend.Topology(*topology); *nodes != 0 && t != backend.TopologyPrimaries && t != local.TopologyCitus {
		return usagef("cluster up: --nodes applies only to --topology %s or %s, not %q", backend.TopologyPrimaries, local.TopologyCitus, *topology)
	}
	spec := backend.Spec{Topology: backend.Topology(*topology), Nodes: *nodes,
		CPU: backend.CPUBudget{Node: *nodeCPU, Roles: roleCPU, Optional: *cpuOptional}}
	if err := cgroup.CheckCPU(*nodeCPU); err != nil {
		return usagef("cluster up: --node-cpu: %v", err)
	}
	for _, r := range slices.Sorted(maps.Keys(roleCPU)) {
		if err := cgroup.CheckCPU(roleCPU[r]); err != nil {
			return usagef("cluster up: --role-cpu %s: %v", r, err)
		}
		if roles, ok := clusterRoles[spec.Topology]; ok && !slices.Contains(roles, r) {
			return usagef("cluster up: --role-cpu %s: topology %s has no %s node (its nodes' roles: %s): the budget would apply to nothing",
				r, spec.Topology, r, strings.Join(roleNames(roles), ", "))
		}
	}
	if len(settings) > 0 {
		spec.Settings = settings
	}
	switch *kind {
	case "local":
	case "docker":
		return dockerClusterUp(ctx, a, spec, *image, *keep, *showPassword)
	default:
		return usagef("cluster up: --backend %q: want local or docker", *kind)
	}
	b := local.New(local.WithLogger(a.log), local.WithKeep(*keep), local.WithPort(*port),
		local.WithBinDir(*binDir), local.WithBaseDir(*baseDir))
	// Registered before Start so that a panic or a second signal also stops
	// a cluster that is still starting.
	td := a.teardown.add(b.CloseAll, b.KillAll)
	c, err := b.StartCluster(ctx, spec)
	if bde := (*local.BaseDirError)(nil); errors.As(err, &bde) {
		return fmt.Errorf("cluster up: --base-dir: %w", err)
	}
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	st := c.Stat()
	fmt.Fprintf(a.stdout, "cluster up: %s, %d node(s), ready in %.2f s, PostgreSQL %d, dir %s\n",
		spec.Topology, len(st.Nodes), st.Ready.Seconds(), st.Binaries.Major, st.Dir)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, n := range st.Nodes {
		dsn := n.RedactedDSN()
		if *showPassword {
			dsn = n.DSN()
		}
		fmt.Fprintf(tw, "  %s\t%s\tpid %d\t%s\n", n.Name, n.Role, n.PID, dsn)
	}
	tw.Flush()
	printCPU(a.stdout, c)
	if *timings {
		printTimings(a.stdout, st)
	}
	if os.Getenv(envTestPanicAfterUp) == "1" {
		panic("test hook " + envTestPanicAfterUp)
	}
	if *keep {
		if err := c.Detach(); err != nil {
			return err
		}
		a.teardown.forget(td)
		primary := entryNode(c.Nodes())
		fmt.Fprintf(a.stdout, "The cluster keeps running.\n  connect: PGPASSFILE=%s psql '%s'\n  stop:    noisysim cluster down --dir %s\n",
			c.PassFile(), primary.DSNFor(primary.User, ""), c.Dir())
		return nil
	}
	primary := entryNode(c.Nodes())
	if !*showPassword {
		fmt.Fprintf(a.stdout, "The password shows as xxxxx; it is in the cluster's password file:\n  connect: PGPASSFILE=%s psql '%s'\n  (or start the cluster with --show-password to print the DSNs with it)\n",
			c.PassFile(), primary.DSNFor(primary.User, ""))
	}
	fmt.Fprintf(a.stdout, "Press Ctrl-C to stop the cluster and remove its files.\n")
	<-ctx.Done()
	fmt.Fprintf(a.stderr, "noisysim: stopping cluster\n")
	if err := a.teardown.finish(td); err != nil {
		return fmt.Errorf("stop cluster: %w", err)
	}
	fmt.Fprintf(a.stderr, "noisysim: cluster stopped and removed\n")
	return nil
}

// entryNode is the node the connect hint names: the primary, or a Citus
// cluster's coordinator, else the first node.
func entryNode(nodes []backend.Node) backend.Node {
	for _, role := range []backend.Role{backend.RolePrimary, backend.RoleCoordinator} {
		for _, n := range nodes {
			if n.Role == role {
				return n
			}
		}
	}
	if len(nodes) == 0 {
		return backend.Node{}
	}
	return nodes[0]
}

func printTimings(w io.Writer, st local.Stat) {
	fmt.Fprintf(w, "timings:\n")
	for _, s := range st.Steps {
		name := s.Node
		if name == "" {
			name = "cluster"
		}
		fmt.Fprintf(w, "  %-10s %-11s %7.1f ms\n", name, s.Name, float64(s.Duration.Microseconds())/1000)
	}
	fmt.Fprintf(w, "  %-10s %-11s %7.1f ms\n", "total", "ready", float64(st.Ready.Microseconds())/1000)
}

func clusterDown(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("cluster down", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory of the kept cluster (default: the only one in --base-dir)")
	baseDir := fs.String("base-dir", "", "where to look for kept clusters (default: the temp dir)")
	kind := backendFlag(fs, "local", "where the kept cluster runs: local or docker")
	run := fs.String("run", "", "backend docker: the run id to remove (default: the clusters started with --keep)")
	all := fs.Bool("all", false, "backend docker: remove every noisysim cluster on the daemon, also those other processes are running")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("cluster down: unexpected argument %q", fs.Arg(0))
	}
	switch *kind {
	case "local":
		if *run != "" || *all {
			return usagef("cluster down: --run and --all need --backend docker")
		}
	case "docker":
		return dockerClusterDown(ctx, a, *run, *all)
	default:
		return usagef("cluster down: --backend %q: want local or docker", *kind)
	}
	b := local.New(local.WithLogger(a.log), local.WithBaseDir(*baseDir))
	swept := b.Sweep()
	for _, d := range swept {
		fmt.Fprintf(a.stdout, "removed %s, left by a noisysim that did not tear down\n", d)
	}
	for _, g := range harness.SweepPriorityGroups() {
		fmt.Fprintf(a.stdout, "removed cpu group %s, left by a noisysim run --priority that did not tear down\n", g)
		swept = append(swept, g)
	}
	if *dir == "" {
		kept, err := local.KeptClusters(*baseDir)
		if err != nil {
			return err
		}
		switch len(kept) {
		case 0:
			if len(swept) > 0 {
				return nil
			}
			return fmt.Errorf("cluster down: no kept cluster found: %w", local.ErrNotKept)
		case 1:
			*dir = kept[0]
		default:
			return usagef("cluster down: several kept clusters, choose one with --dir: %s", strings.Join(kept, " "))
		}
	}
	if err := b.StopKept(ctx, *dir); err != nil {
		if errors.Is(err, local.ErrNotKept) {
			return fmt.Errorf("cluster down: %w", err)
		}
		return fmt.Errorf("cluster down: %w", err)
	}
	fmt.Fprintf(a.stdout, "cluster in %s stopped and removed\n", *dir)
	return nil
}
