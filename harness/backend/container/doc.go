// Package container is noisysim's Docker backend: it starts throwaway
// PostgreSQL clusters in containers through testcontainers-go and removes
// them on Close.
//
//	c, err := container.Start(ctx, backend.Spec{Topology: backend.TopologyReplica})
//	if err != nil {
//		return err // *container.DockerError when no daemon answers
//	}
//	defer c.Close()
//	primary, _ := backend.First(c, backend.RolePrimary)
//	pool, err := pgxpool.New(ctx, primary.DSN())
//
// # Topologies
//
// single (node "primary"), replica ("primary" and "replica1", a hot standby
// made by pg_basebackup through a replication slot), primaries (Spec.Nodes
// plain primaries) and TopologyCitus (a "coordinator" and Spec.Nodes
// workers, default 4, with CitusSettings — logical WAL for shard moves,
// citus_stat_tenants — registered with citus_add_node by network alias:
// pg_dist_node names worker1:5432, which Cluster.PeerAddr maps back to the
// node this process reaches at 127.0.0.1:<published port>).
// Every cluster gets its own Docker network, noisysim-<run id>; each node
// has its name as network alias and publishes port 5432 on 127.0.0.1 at a
// free port.
//
// # Images
//
// Plain nodes run DefaultImage (the official postgres image) and Citus
// nodes DefaultCitusImage, both at pinned tags; WithImage sets one per role
// (a scenario's backend.image and backend.images, `noisysim run --image`).
// A Citus node's image needs the citus extension installed for its
// PostgreSQL; one without it fails Start with *CitusImageError.
// Any image whose entry point honours the official image's POSTGRES_USER,
// POSTGRES_PASSWORD, POSTGRES_DB and /docker-entrypoint-initdb.d works:
// LocalTestImage, built by .ci/pg-image.sh from Debian's packages, is what
// noisysim's tests use on machines without a registry. A missing image is
// pulled once; if that fails Start returns *ImageError.
//
// # Readiness
//
// A fresh PostgreSQL container logs "ready to accept connections" twice:
// once for the entry point's temporary server, once for the real one. Start
// waits for the second occurrence (a standby's "ready to accept read-only
// connections" once), then for a real query over the published port, and
// for replicas until they have replayed the primary's WAL position.
//
// # Cleanup
//
// Every container and network carries LabelManaged, LabelRun (the run id)
// and, for containers, LabelNode; a cluster started WithKeep also carries
// LabelKept. Close, a failed Start and Backend.CloseAll force-remove by
// those labels; Remove does the same for one run id, RemoveKept for every
// kept cluster and RemoveAll for every run on the daemon, including those
// other processes are still running. testcontainers' reaper container is not used
// (its image may not be pullable): the package sets
// TESTCONTAINERS_RYUK_DISABLED=true unless the environment says otherwise.
//
// # Faults
//
// Cluster.Inject stops, pauses or disconnects one node and returns a
// Restore that undoes it; the harness uses it for scenario fault steps.
//
// Security: each cluster gets a random 192-bit password for the postgres
// superuser, passed to containers by environment (visible to whoever can
// inspect them); connections from outside use scram-sha-256 through
// 127.0.0.1 only.
package container
