// Package dataset creates and loads noisysim's generated multi-tenant data set
// and builds the SQL for each query kind a scenario can name.
//
// The schema is that of a typical multi-tenant SaaS: a tenants catalog and an
// orders table, tenant_id in every table and leading every primary key. Rows
// per tenant follow the traffic power law, so the dominant tenant holds the
// most. Every generated value is a pure function of (tenant_id, id), so the
// same counts always load the same rows, with no server-side random().
//
//	counts := dataset.Counts(shares, 200000)
//	if err := dataset.Load(ctx, conn, dataset.Spec{Orders: counts, Days: 365, Customers: 1000}); err != nil { ... }
//	q := dataset.Query(dataset.KindLookup, tenant, seq, dataset.Params{...})
//	_, err = stack.Query(ctx, class, tenantKey, q.SQL, q.Args...)
package dataset
