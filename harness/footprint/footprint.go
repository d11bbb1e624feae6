package footprint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/isolation/pools"
)

// DefaultSchema is the schema noisysim creates its objects in when a
// scenario names none (data.schema).
const DefaultSchema = "noisysim"

// markPrefix starts the comment on every schema and role noisysim creates;
// an object whose comment does not start with it is not noisysim's.
const markPrefix = "created by noisysim"

// Mark returns the comment noisysim puts on a schema or role it creates in
// run.
func Mark(run string) string {
	return markPrefix + " run " + run + "; removed at the end of the run unless kept"
}

func marked(comment *string) bool { return comment != nil && strings.HasPrefix(*comment, markPrefix) }

// markedBy returns the run a mark names ("" for an object without one).
func markedBy(comment *string) string {
	if !marked(comment) {
		return ""
	}
	run, _, _ := strings.Cut(strings.TrimPrefix(*comment, markPrefix+" run "), ";")
	return run
}

// HolderName is the application_name of the session a run keeps open on
// every database it creates objects in, for as long as it runs (Holding):
// a run finding objects marked by a run whose holder is connected leaves
// them alone (*BusyError).
// It has no space: backend.Node's DSNs would carry it as "+", which the
// driver does not decode.
func HolderName(run string) string { return "noisysim-run-" + run }

// Holding returns n whose DSNs name the session as run's holder.
func Holding(n backend.Node, run string) backend.Node {
	params := maps.Clone(n.Params)
	if params == nil {
		params = map[string]string{}
	}
	params["application_name"] = HolderName(run)
	n.Params = params
	return n
}

// schemaName is what data.schema may be: a lower-case identifier that
// needs no quoting, not in PostgreSQL's reserved pg_ prefix.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidSchema returns an error saying what is wrong with name as the
// schema of noisysim's objects, or nil.
func ValidSchema(name string) error {
	switch {
	case !schemaName.MatchString(name):
		return fmt.Errorf("must be a lower-case identifier (letters a-z, digits, '_', not starting with a digit, at most 63), got %q", name)
	case strings.HasPrefix(name, "pg_") || name == "public" || name == "information_schema":
		return fmt.Errorf("%q is PostgreSQL's own or the default schema of user tables; name a schema for noisysim alone", name)
	}
	return nil
}

// Plan is what one run creates on one database: a schema holding every
// table it makes, and login roles (cluster-wide). Run names the run in the
// mark.
type Plan struct {
	Schema string
	Roles  []string
	Run    string
}

// ForeignError reports objects a run would create that already exist and
// were not created by noisysim: it refuses to touch them. It unwraps to
// backend.ErrBadInput.
type ForeignError struct {
	// Where is the database, e.g. `database "app" on primary`.
	Where string
	// Objects are the objects found, e.g. `schema "noisysim"`.
	Objects []string
}

func (e *ForeignError) Error() string {
	verb, it := "exists", "it"
	if len(e.Objects) > 1 {
		verb, it = "exist", "them"
	}
	return fmt.Sprintf("%s: %s %s and noisysim did not create %s (no %q comment); noisysim will not touch %s: choose another data.schema or configuration name, or remove %s yourself",
		e.Where, strings.Join(e.Objects, ", "), verb, it, markPrefix, it, it)
}

// Unwrap returns backend.ErrBadInput.
func (e *ForeignError) Unwrap() error { return backend.ErrBadInput }

// BusyError reports objects a run would create that another noisysim run,
// still running, created and uses: taking them over would break that run.
// It unwraps to backend.ErrBadInput.
type BusyError struct {
	Where   string
	Objects []string
	// Run is the run that holds them.
	Run string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s: %s in use by noisysim run %s, which is still running (session %q): wait for it to end, or choose another data.schema or configuration name",
		e.Where, strings.Join(e.Objects, ", "), e.Run, HolderName(e.Run))
}

// Unwrap returns backend.ErrBadInput.
func (e *BusyError) Unwrap() error { return backend.ErrBadInput }

// Querier runs queries: *pgx.Conn and pgx.Tx satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// foreign checks p's schema and roles on db: a *ForeignError for those
// that exist without noisysim's mark, a *BusyError for those marked by
// another run whose holder session is connected; else whether the schema
// exists (with the mark).
func foreign(ctx context.Context, db Querier, where string, p Plan) (schemaExists bool, err error) {
	rows, err := db.Query(ctx, `
		SELECT 'schema', nspname::text, obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1
		UNION ALL
		SELECT 'role', rolname::text, shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = ANY($2)
		ORDER BY 1 DESC, 2`, p.Schema, p.Roles)
	if err != nil {
		return false, fmt.Errorf("read existing schema and roles: %w", err)
	}
	var objects []string
	byRun := map[string][]string{}
	for rows.Next() {
		var kind, name string
		var comment *string
		if err := rows.Scan(&kind, &name, &comment); err != nil {
			rows.Close()
			return false, err
		}
		object := fmt.Sprintf("%s %q", kind, name)
		switch run := markedBy(comment); {
		case !marked(comment):
			objects = append(objects, object)
		case run != p.Run:
			byRun[run] = append(byRun[run], object)
		}
		schemaExists = schemaExists || kind == "schema"
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read existing schema and roles: %w", err)
	}
	if len(objects) > 0 {
		return false, &ForeignError{Where: where, Objects: objects}
	}
	for run, objects := range byRun {
		var live bool
		err := db.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = $1)", HolderName(run)).Scan(&live)
		if err != nil {
			return false, fmt.Errorf("read sessions: %w", err)
		}
		if live {
			return false, &BusyError{Where: where, Objects: objects, Run: run}
		}
	}
	return schemaExists, nil
}

// Claim makes p's schema on the database conn is connected to: it refuses,
// before changing anything, when the schema or one of p.Roles exists
// without noisysim's mark (*ForeignError) or is marked by another run whose
// holder session (Holding) is connected (*BusyError); else it drops the
// schema an earlier run left (kept, or cut off before its end), creates it
// again and marks it, in one transaction. where names the database in
// errors. conn should be p.Run's holder, kept open until the run ends.
func Claim(ctx context.Context, conn *pgx.Conn, where string, p Plan) error {
	if err := ValidSchema(p.Schema); err != nil {
		return fmt.Errorf("schema: %w: %w", err, backend.ErrBadInput)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		ours, err := foreign(ctx, tx, where, p)
		if err != nil {
			return err
		}
		schema := ident(p.Schema)
		if ours {
			if _, err := tx.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				return fmt.Errorf("drop schema %s an earlier run left: %w", p.Schema, err)
			}
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			return fmt.Errorf("create schema %s: %w", p.Schema, err)
		}
		if _, err := tx.Exec(ctx, "COMMENT ON SCHEMA "+schema+" IS "+literal(Mark(p.Run))); err != nil {
			return fmt.Errorf("mark schema %s: %w", p.Schema, err)
		}
		return nil
	})
}

// EnsureRoles creates or updates roles as pools.EnsureRoles does and marks
// each as noisysim's for run, all in one transaction: a role is never left
// created but unmarked. It refuses, changing nothing, when one of them
// exists without noisysim's mark (*ForeignError) or is held by another
// live run (*BusyError).
func EnsureRoles(ctx context.Context, conn *pgx.Conn, where, database, run string, roles ...pools.RoleConfig) (map[string]string, error) {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = r.Name
	}
	var passwords map[string]string
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// GRANT CONNECT rewrites the database's row of pg_database: two
		// runs granting at once fail with "tuple concurrently updated"
		// (agents of one run start together). One at a time.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", rolesLockKey); err != nil {
			return fmt.Errorf("wait for other runs' role changes: %w", err)
		}
		// No schema is checked here: no schema is named "".
		if _, err := foreign(ctx, tx, where, Plan{Roles: names, Run: run}); err != nil {
			return err
		}
		var err error
		if passwords, err = pools.EnsureRoles(ctx, tx, database, roles...); err != nil {
			return err
		}
		for _, n := range names {
			if _, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(n)+" IS "+literal(Mark(run))); err != nil {
				return fmt.Errorf("mark role %s: %w", n, err)
			}
		}
		return nil
	})
	return passwords, err
}

// CitusAuthinfo records each of passwords' roles, with its password, in
// pg_dist_authinfo of the Citus coordinator conn is connected to, for every
// node (nodeid 0): the coordinator then logs in to the workers as the role
// itself, which a worker authenticating by password (scram-sha-256) needs
// (Citus docs, "pg_dist_authinfo": nodeid 0 is every node, authinfo a
// libpq conninfo). A role's row is replaced, in one transaction with the
// others. It refuses, changing nothing, a role that does not carry
// noisysim's mark for run (*ForeignError): only EnsureRoles' roles get a
// row. Remove deletes the rows with the roles. Writing pg_dist_authinfo
// takes a superuser.
func CitusAuthinfo(ctx context.Context, conn *pgx.Conn, where, run string, passwords map[string]string) error {
	names := slices.Sorted(maps.Keys(passwords))
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT rolname::text FROM pg_roles
			WHERE rolname = ANY($1) AND shobj_description(oid, 'pg_authid') IS NOT DISTINCT FROM $2`, names, Mark(run))
		if err != nil {
			return fmt.Errorf("read roles: %w", err)
		}
		ours, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("read roles: %w", err)
		}
		var foreign []string
		for _, n := range names {
			if !slices.Contains(ours, n) {
				foreign = append(foreign, fmt.Sprintf("role %q", n))
			}
		}
		if len(foreign) > 0 {
			return &ForeignError{Where: where, Objects: foreign}
		}
		for _, n := range names {
			if _, err := tx.Exec(ctx, "DELETE FROM pg_catalog.pg_dist_authinfo WHERE rolename = $1 AND nodeid = 0", n); err != nil {
				return fmt.Errorf("record role %s's password in pg_dist_authinfo: %w", n, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO pg_catalog.pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, $1, $2)",
				n, "password="+conninfoValue(passwords[n])); err != nil {
				return fmt.Errorf("record role %s's password in pg_dist_authinfo: %w", n, err)
			}
		}
		return nil
	})
}

// conninfoValue quotes s as a value of a libpq key=value conninfo.
func conninfoValue(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// SessionWait bounds how long Remove waits for the sessions of the roles it
// drops to end.
const SessionWait = 10 * time.Second

// Remove undoes p on the database conn is connected to, taking only what
// carries noisysim's mark: it ends the sessions of p's marked roles and
// waits for them to go (up to SessionWait), drops p's schema with all it
// holds, then revokes what was granted to the roles, deletes their rows of
// pg_dist_authinfo on a Citus coordinator (CitusAuthinfo) and drops them.
// A schema or role without the mark, and the rows of its name, are left as
// they are. It returns the first error after trying every step.
func Remove(ctx context.Context, conn *pgx.Conn, p Plan) error {
	var errs []error
	roles, err := markedRoles(ctx, conn, p.Roles)
	errs = append(errs, err)
	errs = append(errs, joinRoles(ctx, conn, roles))
	if len(roles) > 0 {
		errs = append(errs, endSessions(ctx, conn, roles))
	}
	if p.Schema != "" {
		var comment *string
		err := conn.QueryRow(ctx, "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1", p.Schema).Scan(&comment)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			errs = append(errs, fmt.Errorf("read schema %s: %w", p.Schema, err))
		case marked(comment):
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+ident(p.Schema)+" CASCADE"); err != nil {
				errs = append(errs, fmt.Errorf("drop schema %s: %w", p.Schema, err))
			}
		}
	}
	if len(roles) > 0 {
		errs = append(errs, dropAuthinfo(ctx, conn, roles))
		// Revoking CONNECT rewrites the database's row of pg_database:
		// one noisysim run at a time (agents of one run end together).
		unlock, err := lockRoles(ctx, conn)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		defer unlock()
	}
	for _, r := range roles {
		if _, err := conn.Exec(ctx, "DROP OWNED BY "+ident(r)); err != nil {
			errs = append(errs, fmt.Errorf("revoke role %s's privileges: %w", r, err))
			continue
		}
		if _, err := conn.Exec(ctx, "DROP ROLE "+ident(r)); err != nil {
			errs = append(errs, fmt.Errorf("drop role %s: %w", r, err))
		}
	}
	return errors.Join(errs...)
}

// RemoveStaleRoles removes, as Remove does, every role on conn's server
// that carries noisysim's mark and whose run is over (its holder session is
// gone): the roles of a run stopped at once by a second signal, killed, or
// kept, whatever their names. Roles of a live run, and roles without the
// mark, are left alone. It returns the roles it removed.
func RemoveStaleRoles(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT rolname::text, shobj_description(oid, 'pg_authid') FROM pg_roles
		WHERE starts_with(coalesce(shobj_description(oid, 'pg_authid'), ''), $1) ORDER BY 1`, markPrefix)
	if err != nil {
		return nil, fmt.Errorf("read roles: %w", err)
	}
	byRun := map[string][]string{}
	for rows.Next() {
		var name string
		var comment *string
		if err := rows.Scan(&name, &comment); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read roles: %w", err)
		}
		byRun[markedBy(comment)] = append(byRun[markedBy(comment)], name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read roles: %w", err)
	}
	var stale []string
	for run, names := range byRun {
		var live bool
		err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = $1)", HolderName(run)).Scan(&live)
		if err != nil {
			return nil, fmt.Errorf("read sessions: %w", err)
		}
		if !live {
			stale = append(stale, names...)
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	slices.Sort(stale)
	return stale, Remove(ctx, conn, Plan{Roles: stale})
}

// dropAuthinfo deletes roles' rows of pg_dist_authinfo where the database
// has that Citus table and the current user may delete from it (without
// the privilege, CitusAuthinfo could not have written any).
func dropAuthinfo(ctx context.Context, conn *pgx.Conn, roles []string) error {
	var can bool
	err := conn.QueryRow(ctx, `SELECT coalesce(has_table_privilege(to_regclass('pg_catalog.pg_dist_authinfo'), 'DELETE'), false)`).Scan(&can)
	if err != nil {
		return fmt.Errorf("look up pg_dist_authinfo: %w", err)
	}
	if !can {
		return nil
	}
	if _, err := conn.Exec(ctx, "DELETE FROM pg_catalog.pg_dist_authinfo WHERE rolename = ANY($1)", roles); err != nil {
		return fmt.Errorf("delete the pg_dist_authinfo rows of %s: %w", strings.Join(roles, ", "), err)
	}
	return nil
}

// joinRoles makes the current user a member of each of roles it does not
// have the privileges of: a user with CREATEROLE but not superuser may
// then end the roles' sessions and DROP OWNED BY them, which PostgreSQL
// allows only to a role's members. The membership goes with the role.
func joinRoles(ctx context.Context, conn *pgx.Conn, roles []string) error {
	var errs []error
	for _, r := range roles {
		var member bool
		if err := conn.QueryRow(ctx, "SELECT pg_has_role($1, 'USAGE')", r).Scan(&member); err != nil {
			errs = append(errs, fmt.Errorf("read membership of role %s: %w", r, err))
			continue
		}
		if member {
			continue
		}
		if _, err := conn.Exec(ctx, "GRANT "+ident(r)+" TO CURRENT_USER"); err != nil {
			errs = append(errs, fmt.Errorf("join role %s to remove it: %w", r, err))
		}
	}
	return errors.Join(errs...)
}

// markedRoles returns those of names that exist with noisysim's mark.
func markedRoles(ctx context.Context, db Querier, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, `SELECT rolname::text FROM pg_roles
		WHERE rolname = ANY($1) AND starts_with(coalesce(shobj_description(oid, 'pg_authid'), ''), $2) ORDER BY 1`, names, markPrefix)
	if err != nil {
		return nil, fmt.Errorf("read roles: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read roles: %w", err)
	}
	return out, nil
}

// endSessions terminates the sessions logged in as roles and waits until
// none is left.
func endSessions(ctx context.Context, conn *pgx.Conn, roles []string) error {
	deadline := time.Now().Add(SessionWait)
	for {
		// Each round terminates what is left and counts it: a terminated
		// backend shows until it has exited.
		var left int
		err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE usename = ANY($1) AND pid <> pg_backend_pid()`, roles).Scan(&left)
		if err != nil {
			return fmt.Errorf("end the sessions of %s: %w", strings.Join(roles, ", "), err)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sessions of %s still there after %s", strings.Join(roles, ", "), SessionWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// InSchema returns n whose DSNs set search_path to schema alone, so that
// every unqualified table name of noisysim's sessions resolves in its own
// schema (and fails there rather than finding a user's table of the same
// name). pg_catalog is still searched first, as always.
func InSchema(n backend.Node, schema string) backend.Node {
	params := maps.Clone(n.Params)
	if params == nil {
		params = map[string]string{}
	}
	params["search_path"] = schema
	n.Params = params
	return n
}

// ident quotes one identifier.
func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// literal quotes s as a string literal; s holds no backslash or NUL.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// rolesLockKey is the advisory lock noisysim runs take on a server while
// they grant or revoke their roles' privileges on the database ("noisrole").
const rolesLockKey int64 = 0x6e6f6973726f6c65

// lockRoles takes rolesLockKey for conn's session and returns its release.
func lockRoles(ctx context.Context, conn *pgx.Conn) (unlock func(), err error) {
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", rolesLockKey); err != nil {
		return nil, fmt.Errorf("wait for other runs' role changes: %w", err)
	}
	return func() { conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", rolesLockKey) }, nil
}
