// Package footprint keeps what noisysim creates on a database to what it
// can find and remove again, and never touches anything else.
//
// A run's tables live in a schema of noisysim's own (DefaultSchema, or the
// scenario's data.schema), and its login roles carry a comment that marks
// them as noisysim's (Mark). The contract, step by step:
//
//   - Claim, before anything is created: when the schema or one of the
//     roles the run will create exists without the mark, it returns a
//     *ForeignError (backend.ErrBadInput) and changes nothing; when they
//     carry the mark of another run that still runs (its holder session,
//     Holding, is connected), a *BusyError. A marked schema an earlier run
//     left is dropped and made again, marked.
//   - InSchema gives the nodes whose DSNs set search_path to the schema
//     alone: unqualified names in noisysim's sessions resolve there.
//   - EnsureRoles creates the roles (pools.EnsureRoles) and marks them in
//     one transaction.
//   - CitusAuthinfo, on a Citus coordinator: records the marked roles'
//     passwords in pg_dist_authinfo, so that the coordinator reaches the
//     workers as the roles (Citus propagates the roles themselves, their
//     settings and grants to the workers).
//   - Remove, at the end of the run whatever its outcome: ends the marked
//     roles' sessions, drops the schema if marked, revokes the roles'
//     privileges, deletes their pg_dist_authinfo rows and drops them.
//     Unmarked objects, and the rows of their names, are never dropped.
//
// Example:
//
//	p := footprint.Plan{Schema: footprint.DefaultSchema, Roles: []string{"noisysim_app"}, Run: runID}
//	if err := footprint.Claim(ctx, admin, `database "app"`, p); err != nil {
//		return err // a *ForeignError names what exists
//	}
//	defer footprint.Remove(context.WithoutCancel(ctx), admin, p)
//	node = footprint.InSchema(node, p.Schema)
package footprint
