// Package dataset creates and loads noisysim's generated multi-tenant data set
// and ships each query kind a scenario can name as a pgbench script
// (scripts/*.sql), run by the same executor as a user's own scripts.
//
// The schema is that of a typical multi-tenant SaaS: a tenants catalog and an
// orders table, tenant_id in every table and leading every primary key. Rows
// per tenant follow the traffic power law, so the dominant tenant holds the
// most. Every generated value is a pure function of (tenant_id, id), so the
// same counts always load the same rows, with no server-side random().
// Load creates the tables in the schema it is given, which must exist; the
// queries name the tables unqualified, for sessions whose search_path is
// that schema (footprint.InSchema).
//
//	counts := dataset.Counts(shares, 200000)
//	spec := dataset.Spec{Schema: "noisysim", Orders: counts, Days: 365, Customers: 1000}
//	if err := dataset.Load(ctx, conn, spec, time.Now()); err != nil { ... }
//	prog, err := dataset.Script(dataset.KindLookup, []string{"tenant", "rows_orders"}, dataset.ScriptParams{})
//	err = prog.Run(ctx, conn, rng, []pgscript.Value{pgscript.Int(tenant), pgscript.Int(counts[tenant])})
package dataset
