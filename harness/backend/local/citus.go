package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/noisysim/noisysim/harness/backend"
)

// TopologyCitus is a Citus coordinator ("coordinator") and Spec.Nodes
// workers ("worker1" …, default DefaultCitusWorkers), each with the citus
// extension created and the workers registered on the coordinator with
// citus_add_node. It needs the citus extension installed for the server
// binaries in use (see CitusNotInstalledError). It has the same name as the
// container backend's topology.
const TopologyCitus backend.Topology = "citus"

// DefaultCitusWorkers is the worker count of TopologyCitus when Spec.Nodes
// is 0.
const DefaultCitusWorkers = 4

// ErrCitusNotInstalled means the citus extension is not installed for the
// PostgreSQL server binaries in use.
var ErrCitusNotInstalled = errors.New("citus extension not installed")

// CitusNotInstalledError reports a missing citus extension and where it was
// looked for. It unwraps to ErrCitusNotInstalled and backend.ErrNotInstalled
// (the noisysim CLI exits 2 on it).
type CitusNotInstalledError struct {
	// Major is the PostgreSQL major version of the binaries in use.
	Major int
	// Missing lists the files looked for and not found.
	Missing []string
}

func (e *CitusNotInstalledError) Error() string {
	return fmt.Sprintf("Citus is not installed for PostgreSQL %d (missing %s): install the citus extension "+
		"for this server, or use backend kind docker with a Citus image (backend.image) or kind external with "+
		"a Citus coordinator's DSN (backend.primary_dsn)",
		e.Major, strings.Join(e.Missing, ", "))
}

// Unwrap returns ErrCitusNotInstalled and backend.ErrNotInstalled.
func (e *CitusNotInstalledError) Unwrap() []error {
	return []error{ErrCitusNotInstalled, backend.ErrNotInstalled}
}

// CheckCitus returns nil when the citus extension is installed for bin:
// citus.so in the server's package library directory and citus.control in
// its extension directory (both from bin's pg_config, else the Debian
// layout next to bin). Otherwise it returns *CitusNotInstalledError.
func CheckCitus(ctx context.Context, bin Binaries) error {
	libDir, shareDir := citusDirs(ctx, bin)
	var missing []string
	for _, f := range []string{filepath.Join(libDir, "citus.so"), filepath.Join(shareDir, "extension", "citus.control")} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return &CitusNotInstalledError{Major: bin.Major, Missing: missing}
	}
	return nil
}

// citusDirs returns the package library and share directories of bin.
func citusDirs(ctx context.Context, bin Binaries) (libDir, shareDir string) {
	pgConfig := bin.Path("pg_config")
	ask := func(flag string) string {
		out, err := exec.CommandContext(ctx, pgConfig, flag).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	libDir, shareDir = ask("--pkglibdir"), ask("--sharedir")
	if libDir == "" {
		libDir = filepath.Join(filepath.Dir(bin.Dir), "lib")
	}
	if shareDir == "" {
		shareDir = fmt.Sprintf("/usr/share/postgresql/%d", bin.Major)
	}
	return libDir, shareDir
}

// citusSettings returns the settings every Citus node needs: citus preloaded
// (added in front of a shared_preload_libraries of the spec), logical WAL
// for shard moves, plaintext node-to-node connections on loopback (no
// self-signed certificates made on CREATE EXTENSION) and to 127.0.0.1 for a
// node's connections to itself (pg_hba.conf and the password file name no
// other host), per-tenant
// statistics, and — on builds that have the parameter — citus allowed as a
// logical decoding output plugin. Spec settings win over the others.
func citusSettings(ctx context.Context, bin Binaries, spec map[string]string) map[string]string {
	s := map[string]string{
		"shared_preload_libraries":  "citus",
		"wal_level":                 "logical",
		"max_replication_slots":     "20",
		"max_wal_senders":           "20",
		"max_prepared_transactions": "100",
		"citus.node_conninfo":       "sslmode=disable",
		"citus.local_hostname":      "127.0.0.1",
		"citus.stat_tenants_track":  "all",
	}
	if hasParameter(ctx, bin, "output_plugin_libraries") {
		s["output_plugin_libraries"] = "citus, pgoutput"
	}
	for k, v := range spec {
		s[k] = v
	}
	if libs, ok := spec["shared_preload_libraries"]; ok {
		list := strings.Split(strings.ReplaceAll(libs, " ", ""), ",")
		if !slices.Contains(list, "citus") {
			s["shared_preload_libraries"] = strings.TrimSuffix("citus,"+libs, ",")
		}
	}
	return s
}

// hasParameter reports whether the server knows the parameter name.
func hasParameter(ctx context.Context, bin Binaries, name string) bool {
	out, err := exec.CommandContext(ctx, bin.Path("postgres"), "--describe-config").Output()
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(out), "\n") {
		if first, _, _ := strings.Cut(line, "\t"); first == name {
			return true
		}
	}
	return false
}

// registerCitus creates the citus extension on every node, then makes the
// coordinator know itself and every worker.
func (c *Cluster) registerCitus(ctx context.Context) error {
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range c.nodes {
		g.Go(func() error {
			conn, err := n.connect(gctx)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(gctx, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
				return n.startError(fmt.Errorf("create extension citus: %w", err))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	coord := c.nodes[0]
	conn, err := coord.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2)", coord.Host, coord.Port); err != nil {
		return coord.startError(fmt.Errorf("set coordinator host: %w", err))
	}
	for _, n := range c.nodes[1:] {
		if _, err := conn.Exec(ctx, "SELECT citus_add_node($1, $2)", n.Host, n.Port); err != nil {
			return coord.startError(fmt.Errorf("add worker %s: %w", n.Name, err))
		}
	}
	c.step("coordinator", "citus", t0)
	return nil
}
