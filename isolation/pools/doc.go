// Package pools is the database side of noisysim's isolation stack: one
// connection pool, database role and limiter per workload class, tenant
// tagging through application_name, and a per-tenant DB-time ledger.
//
// # Classes, pools and roles
//
// Work comes in two classes. Interactive work (short OLTP statements) and
// heavy work (reports, batch jobs) each get their own pgxpool pool, log in
// as their own least-privilege role whose ALTER ROLE settings bound it
// (statement_timeout, idle_in_transaction_session_timeout, work_mem,
// CONNECTION LIMIT), and pass their own isolation.Limiter. Heavy work goes
// to a hot standby when the caller gives its DSN. DefaultRoles,
// DefaultIsolated and DefaultNaive give the reference design's numbers (the
// exported constants); EnsureRoles creates the roles.
//
// # The one entry point
//
// Stack.Query, Stack.Tx and Stack.WithConn are the only path to a pool.
// Each call runs limiter → pool acquire (bounded by the pool's
// AcquireTimeout) → tag → the work → record DB time → reset → release the
// connection → release the limiter slot:
//
//   - Tag: "SELECT set_config('application_name', 't:<tenant>', false)" as
//     a statement of its own, outside any transaction of the tenant's, so
//     pg_stat_activity shows the tenant for every statement and no ROLLBACK
//     undoes it. A connection that cannot be tagged is closed and another
//     tried, at most pool size + 1 times.
//   - Reset: before the connection goes back, synchronously, the session is
//     restored (RESET ALL and the rest of DISCARD ALL except DEALLOCATE ALL
//     and DISCARD PLANS): role settings and the startup application_name
//     ("noisysim-<pool>") come back, pgx's prepared statements stay. It is
//     not done in pgxpool's AfterRelease hook, which runs asynchronously
//     and lets the pool open extra connections meanwhile. A connection that
//     is broken, busy, inside a transaction, or whose reset fails is closed
//     instead (a running statement is cancelled first).
//   - A connection closed instead leaves the pool only once its server
//     process has exited (the server closes the socket as the process
//     exits): the call returns at once, the pool keeps counting the
//     connection meanwhile (PoolStat.Closing; WaitClosed waits for it).
//     So a call whose deadline passes mid-statement never lets the pool
//     open a replacement while the old backend still counts against the
//     role's CONNECTION LIMIT, and a cancel storm is never refused with
//     53300.
//   - Query does it in one round trip and one implicit transaction: the
//     tag as set_config(..., true), local to the transaction (it ends with
//     it, committed or not: an idle connection never shows it), the
//     statement, then the reset's commands, each prepared on the
//     connection, one Sync. The reply comes from a connection already
//     reset and idle under its pool's name. A failed statement rolls the
//     transaction back and the full reset runs on its own (advisory locks
//     and sequence state outlive a rollback); a failed reset command rolls
//     the statement back with it and is the call's error. The first call
//     of a statement on a connection prepares it, tagged as WithConn tags;
//     a statement PostgreSQL refuses in a transaction block (VACUUM) runs
//     on its own.
//   - DB time is the wall time of the work as the client saw it, recorded
//     by the call itself whether it succeeded, failed or panicked.
//
// Slots and connections come back on error, context cancellation and
// panic (the panic continues after). Failures are counted per tenant and
// class by ErrorClass (Classify names them) and shown in Stat.
//
// # Routing (directory sharding)
//
// With Config.Router set, the Stack asks the Router for each call's node
// (after the limiter, before the pool) and runs the call on the pool of its
// class for that node: pools then share a Name and differ by
// PoolConfig.Node. Scenario and business code keep calling Query, Tx and
// WithConn with a tenant; when the tenant moves, its calls follow the
// Router. The directory package provides a Router backed by a tenant
// catalog.
//
// # Ledger and activity
//
// Ledger ranks tenants by DB time and raises an Alert when one holds more
// than a share (default 30%) of all DB time in every bucket of a sliding
// window (default 10 s). Activity reads pg_stat_activity grouped by
// application_name: who is using the database now.
//
// # Example
//
//	interactive, heavy := pools.DefaultRoles()
//	pw, err := pools.EnsureRoles(ctx, admin, "app", interactive, heavy)
//	// handle err
//	cfg, err := pools.DefaultIsolated(
//		primary.DSNFor(interactive.Name, pw[interactive.Name]),
//		replica.DSNFor(heavy.Name, pw[heavy.Name]))
//	// handle err
//	stack, err := pools.New(ctx, cfg)
//	// handle err
//	defer stack.Close()
//	res, err := stack.Query(ctx, pools.Interactive, "tenant-42", "SELECT * FROM orders WHERE tenant = $1", 42)
//	if pools.Classify(err) == pools.ErrorStatementTimeout { … }
package pools
