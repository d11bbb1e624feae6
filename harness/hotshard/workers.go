package hotshard

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/isolation/citus"
)

// PeerAddresser is an optional interface of a backend.Cluster whose nodes
// reach one another at other addresses than the Host and Port this process
// connects to: the container backend's Citus workers are "worker1:5432" in
// pg_dist_node and 127.0.0.1:<published port> here. PeerAddr returns the
// address the other nodes reach node (by Node.Name) at, and false for a
// node the cluster does not have.
type PeerAddresser interface {
	PeerAddr(node string) (host string, port int, ok bool)
}

// Worker pools of WorkerSampling's direct path.
const (
	// workerPoolConns bounds each worker's pool: Sample queries a worker
	// one sample at a time.
	workerPoolConns = 2
	// workerPingTimeout bounds the check that a worker answers directly.
	workerPingTimeout = 5 * time.Second
)

// WorkerSampling returns the worker part of a citus.Sampling for the Citus
// cluster c, whose coordinator coord is connected to, keyed by pg_dist_node
// names ("nodename:nodeport", as Layout.State looks them up):
//
//   - Workers, a pool of at most 2 connections to each worker (the faster
//     path), when every active primary worker of pg_dist_node is a worker
//     node of c — matched by Node.Host:Node.Port (the local backend
//     registers its workers so) or by PeerAddr when c is a PeerAddresser
//     (the container backend) — and each answers a ping within 5 s;
//   - otherwise WorkersVia: coord, every worker sampled through the
//     coordinator (citus.WorkerActivity: one run_command_on_workers call
//     per sample) — an existing cluster given by the coordinator's DSN
//     only, or workers this process cannot reach.
//
// The caller sets Coordinator and Interval. With WorkersVia, coord must not
// be used concurrently with Sample if it is a single connection. closeFn
// closes the pools; it is never nil (also on error) and may be called more
// than once. Errors: citus.ErrNotCitus (wrapped) when coord has no citus
// extension, the database error reading pg_dist_node, or a worker DSN
// pgxpool cannot parse.
func WorkerSampling(ctx context.Context, c backend.Cluster, coord citus.DB) (s citus.Sampling, closeFn func(), err error) {
	var pools []*pgxpool.Pool
	var once sync.Once
	closeFn = func() {
		once.Do(func() {
			for _, p := range pools {
				p.Close()
			}
		})
	}
	names, err := citus.WorkerNames(ctx, coord)
	if err != nil {
		return citus.Sampling{}, closeFn, err
	}
	via := citus.Sampling{WorkersVia: coord}
	nodes := matchWorkers(c, names)
	if nodes == nil {
		return via, closeFn, nil
	}
	workers := map[string]citus.DB{}
	for _, name := range names {
		n := nodes[name]
		cfg, err := pgxpool.ParseConfig(n.DSN())
		if err != nil {
			closeFn()
			return citus.Sampling{}, closeFn, fmt.Errorf("connect to worker %s: %w", n.Name, err)
		}
		cfg.MaxConns = workerPoolConns
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			closeFn()
			return citus.Sampling{}, closeFn, fmt.Errorf("connect to worker %s: %w", n.Name, err)
		}
		pools = append(pools, p)
		pctx, cancel := context.WithTimeout(ctx, workerPingTimeout)
		err = p.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				closeFn()
				return citus.Sampling{}, closeFn, fmt.Errorf("connect to worker %s: %w", n.Name, ctx.Err())
			}
			// Known to the cluster but not reachable from here: the
			// coordinator reaches it.
			closeFn()
			return via, closeFn, nil
		}
		workers[name] = p
	}
	return citus.Sampling{Workers: workers}, closeFn, nil
}

// matchWorkers returns the worker node of c behind each pg_dist_node name
// in names, or nil unless every name has one.
func matchWorkers(c backend.Cluster, names []string) map[string]backend.Node {
	if len(names) == 0 {
		return nil
	}
	peers, _ := c.(PeerAddresser)
	byAddr := map[string]backend.Node{}
	for _, n := range c.Nodes() {
		if n.Role != backend.RoleWorker {
			continue
		}
		byAddr[n.Host+":"+strconv.Itoa(n.Port)] = n
		if peers != nil {
			if host, port, ok := peers.PeerAddr(n.Name); ok {
				byAddr[host+":"+strconv.Itoa(port)] = n
			}
		}
	}
	out := map[string]backend.Node{}
	for _, name := range names {
		n, ok := byAddr[name]
		if !ok {
			return nil
		}
		out[name] = n
	}
	return out
}
