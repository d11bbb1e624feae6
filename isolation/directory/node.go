package directory

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// nodeDDL creates the change-capture objects on a data node. It is
// idempotent.
//
// capture lists the tenants under capture on this node: a move's source
// while the move runs (fenced = false), and tenants moved away (fenced =
// true, kept as a tombstone so that a stale writer's write fails). changes
// holds the keys written for captured tenants until the mover applies them
// at the target. copies lists the tenants whose rows on this node are a
// move's copy (from before the copy writes its first row until the move is
// done): a later attempt may delete them; a fresh move never deletes rows
// of a tenant not listed there unless told to (MoveConfig.Overwrite). The
// trigger function runs as its owner (SECURITY DEFINER, fixed search_path), so least-privilege application roles need no access
// to the schema. The trigger takes a FOR SHARE lock on the tenant's
// capture row, so fencing it waits for every write transaction in flight
// and no write can commit after the fence. A statement trigger refuses
// every write of a connection tagged t:<tenant> (application_name, as the
// isolation stack tags them) for a fenced tenant, even one matching no
// row.
const nodeDDL = `
CREATE SCHEMA IF NOT EXISTS noisysim_directory;
CREATE TABLE IF NOT EXISTS noisysim_directory.capture (
	tenant_id text PRIMARY KEY,
	fenced    boolean NOT NULL DEFAULT false,
	since     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS noisysim_directory.changes (
	seq       bigserial PRIMARY KEY,
	tbl       oid NOT NULL,
	tenant_id text NOT NULL,
	key       jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_tenant ON noisysim_directory.changes (tenant_id, seq);
CREATE TABLE IF NOT EXISTS noisysim_directory.copies (
	tenant_id  text PRIMARY KEY,
	source     text NOT NULL,
	started_at timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION noisysim_directory.capture_trigger() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
	recs   jsonb[];
	r      jsonb;
	t      text;
	k      jsonb;
	is_fenced boolean;
BEGIN
	IF current_setting('noisysim.directory_bypass', true) = 'on' THEN
		RETURN NULL;
	END IF;
	IF TG_OP = 'INSERT' THEN
		recs := ARRAY[to_jsonb(NEW)];
	ELSIF TG_OP = 'DELETE' THEN
		recs := ARRAY[to_jsonb(OLD)];
	ELSE
		recs := ARRAY[to_jsonb(OLD), to_jsonb(NEW)];
	END IF;
	FOREACH r IN ARRAY recs LOOP
		t := r ->> TG_ARGV[0];
		SELECT c.fenced INTO is_fenced FROM noisysim_directory.capture c WHERE c.tenant_id = t FOR SHARE;
		IF FOUND THEN
			IF is_fenced THEN
				RAISE EXCEPTION 'tenant % is fenced on this node: it moved (or is switching) to another node', t
					USING ERRCODE = 'NSMOV';
			END IF;
			k := '{}'::jsonb;
			FOR i IN 1 .. TG_NARGS - 1 LOOP
				k := k || jsonb_build_object(TG_ARGV[i], r -> TG_ARGV[i]);
			END LOOP;
			INSERT INTO noisysim_directory.changes (tbl, tenant_id, key) VALUES (TG_RELID, t, k);
		END IF;
	END LOOP;
	RETURN NULL;
END
$f$;
CREATE OR REPLACE FUNCTION noisysim_directory.fence_trigger() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
	app text := coalesce(current_setting('application_name', true), '');
BEGIN
	IF app LIKE 't:%' AND current_setting('noisysim.directory_bypass', true) IS DISTINCT FROM 'on'
		AND EXISTS (SELECT FROM noisysim_directory.capture c WHERE c.tenant_id = substr(app, 3) AND c.fenced) THEN
		RAISE EXCEPTION 'tenant % is fenced on this node: it moved (or is switching) to another node', substr(app, 3)
			USING ERRCODE = 'NSMOV';
	END IF;
	RETURN NULL;
END
$f$;`

// column is one column of a moved table.
type column struct {
	name, typ string
}

// table is a moved table as read from the source's catalog.
type table struct {
	name   string // as given, e.g. "orders" or "app.orders"
	ident  string // quoted
	cols   []column
	key    []column // primary key columns
	tenant column
	rest   []column // key columns other than the tenant column
	oid    uint32   // on the source
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// describe reads name's columns and primary key on conn.
func describe(ctx context.Context, conn *pgx.Conn, name, tenantCol string) (*table, error) {
	t := &table{name: name}
	var qualified string
	if err := conn.QueryRow(ctx, "SELECT $1::regclass::text", name).Scan(&qualified); err != nil {
		return nil, fmt.Errorf("describe table %s: %w", name, err)
	}
	t.ident = qualified // regclass output is already quoted where needed
	if err := conn.QueryRow(ctx, "SELECT $1::regclass::oid", name).Scan(&t.oid); err != nil {
		return nil, fmt.Errorf("describe table %s: %w", name, err)
	}
	rows, err := conn.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, name)
	if err != nil {
		return nil, fmt.Errorf("describe table %s: %w", name, err)
	}
	var c column
	if _, err := pgx.ForEachRow(rows, []any{&c.name, &c.typ}, func() error { t.cols = append(t.cols, c); return nil }); err != nil {
		return nil, fmt.Errorf("describe table %s: %w", name, err)
	}
	rows, err = conn.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod)
		FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
		WHERE i.indrelid = $1::regclass AND i.indisprimary
		ORDER BY array_position(i.indkey::int2[], a.attnum)`, name)
	if err != nil {
		return nil, fmt.Errorf("describe table %s: %w", name, err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&c.name, &c.typ}, func() error { t.key = append(t.key, c); return nil }); err != nil {
		return nil, fmt.Errorf("describe table %s: %w", name, err)
	}
	found := false
	for _, k := range t.key {
		if k.name == tenantCol {
			t.tenant, found = k, true
		} else {
			t.rest = append(t.rest, k)
		}
	}
	if !found {
		return nil, fmt.Errorf("describe table %s: its primary key must include the tenant column %s: %w", name, tenantCol, ErrInvalidConfig)
	}
	return t, nil
}

// sameShape reports a difference between the source's and the target's
// definition of a table.
func (t *table) sameShape(o *table) error {
	a, b := t.colList(), o.colList()
	if a != b {
		return fmt.Errorf("table %s differs between the nodes: (%s) vs (%s): %w", t.name, a, b, ErrInvalidConfig)
	}
	return nil
}

func (t *table) colList() string {
	parts := make([]string, len(t.cols))
	for i, c := range t.cols {
		parts[i] = c.name + " " + c.typ
	}
	return strings.Join(parts, ", ")
}

// installNode creates the capture objects on conn and the trigger on each
// table.
func installNode(ctx context.Context, conn *pgx.Conn, tables []*table) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('noisysim_directory.install', 0))"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, nodeDDL); err != nil {
			return fmt.Errorf("install change capture: %w", err)
		}
		for _, t := range tables {
			args := []string{literal(t.tenant.name)}
			for _, k := range t.key {
				args = append(args, literal(k.name))
			}
			// TG_ARGV[0] is the tenant column; the rest, the key.
			sql := fmt.Sprintf(`CREATE OR REPLACE TRIGGER noisysim_directory_capture
				AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW
				EXECUTE FUNCTION noisysim_directory.capture_trigger(%s)`, t.ident, strings.Join(args, ", "))
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("install capture trigger on %s: %w", t.name, err)
			}
			// A write that matches no row fires no row trigger: a stale
			// caller's UPDATE or DELETE after the delete at the source
			// would pass as a no-op. Calls tagged t:<tenant> (the
			// isolation stack's tag) are checked per statement.
			sql = fmt.Sprintf(`CREATE OR REPLACE TRIGGER noisysim_directory_fence
				BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT
				EXECUTE FUNCTION noisysim_directory.fence_trigger()`, t.ident)
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("install fence trigger on %s: %w", t.name, err)
			}
		}
		return nil
	})
}

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
