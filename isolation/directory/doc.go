// Package directory is directory sharding without Citus: a tenant catalog on
// a control node says which PostgreSQL node holds each tenant, a cached
// Router resolves tenants for the isolation stack (pools.Config.Router), and
// Move promotes a tenant to another node under live traffic without losing
// an acknowledged write.
//
// # Catalog
//
// The catalog (schema noisysim_directory on the control node) holds the
// registered nodes, a version bumped (and NOTIFYed) on every change, the
// explicit placements (tenant_id, node, state, version, updated_at) and the
// moves with their last completed step. Tenants without an explicit
// placement are placed by HashPlace (rendezvous hashing) over the ring
// nodes; promoted tenants get an explicit one.
//
// # Router
//
// A Router caches a catalog Snapshot and reloads it when the version
// changes (polled every RouterConfig.PollInterval, default 200 ms). It
// implements pools.Router, so code keeps calling the stack with a tenant
// and follows its moves. Hold pauses one tenant's new calls during a
// move's write pause.
//
// # Move
//
// Move runs Steps in order: prepare (catalog: state moving), capture
// (a trigger records the tenant's written keys at the source; older
// transactions are waited for), copy (key-ordered batches, upserted),
// catch-up (captured keys re-read at the source and applied at the
// target), switch (the write pause: hold the Gates, fence the tenant at the
// source — the trigger's FOR SHARE lock makes the fence wait for writes in
// flight, and any later write fails with FencedSQLState — apply the last
// changes, validate row count and an order-independent checksum per table,
// switch the catalog, resume), grace, delete at the source. Each step is
// idempotent and recorded, so an interrupted move leaves the catalog at a
// complete copy and running Move again finishes it. Writes at a fenced node
// fail (IsFenced): retry them through a refreshed Router.
//
// A tenant id is the text form of a value of the tenant column ("42" for a
// bigint): Move checks it with CheckTenant before it writes anything, so a
// mistyped id fails with a *TenantError and leaves no trace in the catalog.
// A fresh move never deletes rows of the tenant that its target already
// holds and no earlier attempt of the move copied there: it fails with a
// *TargetNotEmptyError, before writing anything, unless
// MoveConfig.Overwrite is set.
//
// TRUNCATE and writes that change a row's tenant are not captured. A
// write at a fenced node that matches no row (an UPDATE or DELETE after the
// delete at the source) fires no row trigger: it is refused only when its
// connection is tagged application_name t:<tenant>, as the isolation stack
// tags them; untagged callers must follow the catalog within Grace.
//
// # Example
//
//	cat, err := directory.OpenCatalog(ctx, controlDSN, nil)
//	// handle err
//	defer cat.Close()
//	err = cat.Install(ctx, directory.NodeSpec{Name: "n1", Ring: true}, directory.NodeSpec{Name: "n2"})
//	router, err := directory.NewRouter(ctx, directory.RouterConfig{Catalog: cat})
//	defer router.Close()
//	// pools.Config{Router: router, Pools: one pool per class per node, …}
//	fig, err := directory.Move(ctx, directory.MoveConfig{
//		Catalog: cat, Nodes: map[string]string{"n1": dsn1, "n2": dsn2},
//		Tables: []string{"tenants", "orders"}, Gates: []directory.Gate{router},
//	}, "42", "n2")
//	fmt.Printf("%.1f MB/s, pause %.0f ms\n", fig.MBPerSecond, fig.PauseSeconds*1000)
package directory
