// Package local is noisysim's default backend: it starts throwaway
// PostgreSQL clusters as local processes and removes them on Close.
//
//	c, err := local.Start(ctx, backend.Spec{Topology: backend.TopologyReplica})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	primary, _ := backend.First(c, backend.RolePrimary)
//	pool, err := pgxpool.New(ctx, primary.DSN())
//
// # Binaries
//
// The server binaries are searched in $NOISYSIM_PG_BINDIR, `pg_config
// --bindir`, the newest /usr/lib/postgresql/*/bin, then PATH (FindBinaries).
//
// # Fast start
//
// initdb runs once per PostgreSQL version and initdb arguments into a cached
// template (see WithCacheDir), guarded by a lock file and installed by an
// atomic rename; each node's data directory is a copy of it. The template
// holds no password: each cluster gets a random one (192 bits), set after
// start by sending only its SCRAM-SHA-256 verifier over the unix socket.
//
// # Layout, security and settings
//
// A cluster lives in <base>/noisysim-*/ (default /tmp): per node a data
// directory, a private 0700 unix-socket directory and server.log; plus
// pgpass (libpq password file, 0600) and state.json (pids, ports; no
// secret). Servers listen on 127.0.0.1 only. pg_hba.conf allows the unix
// socket to the superuser only, for the server's OS user or the invoking
// user (peer), and TCP from 127.0.0.1 with scram-sha-256, replication
// included; there is no trust authentication. Settings come from
// DefaultSettings then Spec.Settings, written by code into noisysim.conf,
// which postgresql.conf includes. fsync is off: clusters are throwaway.
//
// # Citus
//
// TopologyCitus starts a coordinator and Spec.Nodes workers (default 4)
// when the citus extension is installed for the server binaries
// (CheckCitus; otherwise *CitusNotInstalledError, which unwraps to
// backend.ErrNotInstalled). Every node preloads citus with wal_level
// logical; servers get the cluster's password file (PGPASSFILE) for
// node-to-node connections, which stay on 127.0.0.1 without TLS.
//
// # Faults
//
// Cluster.Inject stops a node (an immediate shutdown; the Restore starts it
// again from its data directory on its port, through the same spawner:
// parent-death signal, CPU budget group, cores) or pauses it (SIGSTOP to
// the postmaster, then to every process it forked; the Restore sends
// SIGCONT). Close, StopKept and the sweep of leftovers resume a paused node
// before stopping it: a stopped process heeds no signal but SIGKILL.
//
// # Root
//
// PostgreSQL refuses to run as root. When noisysim runs as root, initdb,
// pg_basebackup and postgres run as the postgres system user
// (WithServerUser), which owns the data directories.
//
// # Teardown
//
// Close stops every node (fast shutdown, then immediate, then SIGKILL) and
// removes the cluster directory. Servers run in their own process group, so a
// Ctrl-C at the terminal reaches noisysim only, which then stops them
// cleanly. Each postmaster is started directly (`postgres -D`, not pg_ctl) as
// a child with a parent-death signal (SIGQUIT), so if noisysim dies without
// tearing down — even by SIGKILL — the kernel stops its servers; only its
// directory remains. Clusters started WithKeep run in their own session
// without that signal, so they can outlive noisysim (Cluster.Detach,
// StopKept).
package local
