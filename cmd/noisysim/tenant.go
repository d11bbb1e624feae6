package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/isolation/directory"
)

const tenantUsage = `usage: noisysim tenant move --tenant ID --to NODE --node NAME=DSN ... [flags]

Moves one tenant of a directory-sharded database to node NODE under live
traffic: copy in key-ordered batches, capture of concurrent writes, a brief
fenced write pause, validation (row count and checksum per table), switch
in the catalog, grace delete at the source. Every step is recorded in the
catalog: run the same command again to finish an interrupted move.

The catalog lives on the control node (--catalog, default the first
--node). With --install the catalog is created if missing and the --node
nodes are registered: on a new catalog all in the hash ring except --to;
nodes added to an existing catalog stay outside the ring, and registered
nodes keep their place (changing the ring would re-place tenants without
their data).

flags:
  --tenant ID          tenant to move: the text form of a value of its tenant
                       column ("42" for a bigint column); anything else is
                       bad input and writes nothing
  --to NODE            destination node name
  --node NAME=DSN      a data node (repeat); the source and NODE are needed
  --catalog DSN        control node holding the catalog (default: first --node)
  --install            create the catalog and register the nodes first
  --tables LIST        comma-separated tables holding tenant data (default tenants,orders)
  --tenant-column COL  tenant column of every table (default tenant_id)
  --batch-rows N       rows per copy batch (default 1000)
  --max-pause D        bound of the write pause (default 1s)
  --grace D            wait between the switch and the delete at the source (default 5s)
  --overwrite-target   delete rows of the tenant the target already holds; without
                       it a move towards a node holding rows of the tenant that no
                       earlier attempt of the move copied there is refused (exit 2)

exit codes: 0 moved (or already there), 2 bad input (an invalid --tenant, a
target holding rows of the tenant), 1 any other error.
`

// nodeFlags collects repeated --node NAME=DSN flags.
type nodeFlags struct {
	names []string
	dsn   map[string]string
}

func (n *nodeFlags) String() string { return strings.Join(n.names, ",") }

func (n *nodeFlags) Set(v string) error {
	name, dsn, ok := strings.Cut(v, "=")
	if !ok || name == "" || dsn == "" {
		return fmt.Errorf("want NAME=DSN, got %q", v)
	}
	if _, dup := n.dsn[name]; dup {
		return fmt.Errorf("node %q given twice", name)
	}
	n.names = append(n.names, name)
	n.dsn[name] = dsn
	return nil
}

func runTenant(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(a.stdout, tenantUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "move" {
		fmt.Fprint(a.stderr, tenantUsage)
		if len(args) == 0 {
			return usagef("tenant: missing subcommand (move)")
		}
		return usagef("tenant: unknown subcommand %q (want move)", args[0])
	}
	fs := flag.NewFlagSet("tenant move", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), tenantUsage) }
	nodes := &nodeFlags{dsn: map[string]string{}}
	tenant := fs.String("tenant", "", "")
	to := fs.String("to", "", "")
	fs.Var(nodes, "node", "")
	catalogDSN := fs.String("catalog", "", "")
	install := fs.Bool("install", false, "")
	tables := fs.String("tables", "tenants,orders", "")
	column := fs.String("tenant-column", directory.DefaultTenantColumn, "")
	batch := fs.Int("batch-rows", directory.DefaultBatchRows, "")
	maxPause := fs.Duration("max-pause", directory.DefaultMaxPause, "")
	grace := fs.Duration("grace", directory.DefaultGrace, "")
	overwrite := fs.Bool("overwrite-target", false, "")
	if err := parseFlags(a, fs, args[1:]); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("tenant move: unexpected argument %q", fs.Arg(0))
	case *tenant == "":
		return usagef("tenant move: --tenant is required")
	case *to == "":
		return usagef("tenant move: --to is required")
	case len(nodes.names) == 0:
		return usagef("tenant move: at least one --node NAME=DSN is required")
	case *batch < 1:
		return usagef("tenant move: --batch-rows %d: must be > 0", *batch)
	case *maxPause <= 0:
		return usagef("tenant move: --max-pause %v: must be > 0", *maxPause)
	case *grace < 0:
		return usagef("tenant move: --grace %v: must be >= 0", *grace)
	}
	if _, ok := nodes.dsn[*to]; !ok {
		return usagef("tenant move: --to %q is not one of the --node names (%s)", *to, nodes)
	}
	if *catalogDSN == "" {
		*catalogDSN = nodes.dsn[nodes.names[0]]
	}
	// Every DSN logs in before anything is written: a wrong password or
	// database is bad input (exit 2), said as the server said it.
	if err := checkLogins(ctx, nodes, *catalogDSN); err != nil {
		return err
	}
	tableList := strings.Split(*tables, ",")
	// The tenant id is checked against the target's tables before anything
	// is written: a value its tenant column cannot hold would leave the
	// tenant stuck in the catalog.
	if err := checkTenant(ctx, nodes.dsn[*to], tableList, *column, *tenant); err != nil {
		return err
	}
	cat, err := directory.OpenCatalog(ctx, *catalogDSN, a.log)
	if err != nil {
		return fmt.Errorf("tenant move: %w", err)
	}
	defer cat.Close()
	if *install {
		// The ring is set by the first install only: later nodes join
		// outside it (joining would re-place hash-placed tenants).
		first, err := cat.Installed(ctx)
		if err != nil {
			return fmt.Errorf("tenant move: %w", err)
		}
		first = !first
		var specs []directory.NodeSpec
		for _, n := range nodes.names {
			specs = append(specs, directory.NodeSpec{Name: n, Ring: first && n != *to})
		}
		if err := cat.Install(ctx, specs...); err != nil {
			return fmt.Errorf("tenant move: %w", err)
		}
	}
	g := *grace
	if g == 0 {
		g = -1
	}
	fig, err := directory.Move(ctx, directory.MoveConfig{
		Catalog: cat, Nodes: nodes.dsn, Tables: tableList, TenantColumn: *column,
		BatchRows: *batch, MaxPause: *maxPause, Grace: g, Overwrite: *overwrite, Logger: a.log,
	}, *tenant, *to)
	var occupied *directory.TargetNotEmptyError
	switch {
	case errors.Is(err, directory.ErrInvalidTenant):
		return usagef("tenant move: --tenant %q: %v", *tenant, err)
	case errors.As(err, &occupied):
		return usagef("tenant move: --to %s: %v (nothing was written; --overwrite-target deletes them)", *to, occupied)
	case err != nil:
		return err
	}
	if fig.CancelledTarget != "" {
		fmt.Fprintf(a.stdout, "tenant %s never left %s: cancelled its interrupted move to %s (after step %s)\n",
			fig.Tenant, fig.Target, fig.CancelledTarget, fig.ResumedAfter)
		return nil
	}
	if fig.AlreadyThere {
		fmt.Fprintf(a.stdout, "tenant %s is already on %s: nothing to do\n", fig.Tenant, fig.Target)
		return nil
	}
	if fig.ResumedAfter != "" {
		fmt.Fprintf(a.stdout, "resumed an interrupted move after step %s\n", fig.ResumedAfter)
	}
	fmt.Fprintf(a.stdout, "tenant %s moved %s → %s in %s\n", fig.Tenant, fig.Source, fig.Target, seconds(fig.TotalSeconds))
	fmt.Fprintf(a.stdout, "  copy    %d rows, %.2f MB in %s: %.2f MB/s, %.0f rows/s\n",
		fig.CopiedRows, float64(fig.CopiedBytes)/(1<<20), seconds(fig.CopySeconds), fig.MBPerSecond, fig.RowsPerSecond)
	fmt.Fprintf(a.stdout, "  catchup %d captured writes in %d rounds\n", fig.Changes, fig.CatchUpRounds)
	fmt.Fprintf(a.stdout, "  pause   %s (%d attempts)\n", seconds(fig.PauseSeconds), fig.PauseAttempts)
	for _, t := range fig.Tables {
		fmt.Fprintf(a.stdout, "  valid   %s: %d rows, checksum %s\n", t.Table, t.TargetRows, t.TargetSum)
	}
	fmt.Fprintf(a.stdout, "  delete  %d rows at %s\n", fig.DeletedRows, fig.Source)
	return nil
}

// checkLogins connects once to each node and to the catalog.
func checkLogins(ctx context.Context, nodes *nodeFlags, catalogDSN string) error {
	check := func(what, dsn string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("tenant move: %w", backend.ConnectError(ctx, what, err))
		}
		return conn.Close(context.Background())
	}
	for _, name := range nodes.names {
		if err := check("node "+name, nodes.dsn[name]); err != nil {
			return err
		}
	}
	return check("the catalog (--catalog)", catalogDSN)
}

// checkTenant connects to the node at dsn and checks that tenant is a value
// of the tenant column of every table (directory.CheckTenant).
func checkTenant(ctx context.Context, dsn string, tables []string, column, tenant string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("tenant move: connect to the --to node: %w", err)
	}
	defer conn.Close(context.Background())
	err = directory.CheckTenant(ctx, conn, tables, column, tenant)
	if errors.Is(err, directory.ErrInvalidTenant) {
		return usagef("tenant move: --tenant %q: %v", tenant, err)
	}
	if err != nil {
		return fmt.Errorf("tenant move: %w", err)
	}
	return nil
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
