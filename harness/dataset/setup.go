package dataset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/workload/pgscript"
)

// TenantsTable is the table LoadSetup creates before the user's setup
// files run: one row per tenant.
const TenantsTable = "noisysim_tenants"

// SetupSpec is a data set of the user's own: noisysim's tenants (keys,
// shares, row counts), then the user's SQL files.
type SetupSpec struct {
	// Schema is the schema everything is created in; it must exist, and
	// conn's search_path must be it alone (the files name tables
	// unqualified).
	Schema string
	// KeyType is the key column's SQL type: bigint, text or uuid.
	KeyType string
	// Keys, Shares are tenant n's key and share at index n-1; tenant 1
	// is the dominant tenant.
	Keys   []string
	Shares []float64
	// RowNames name the row counts; Rows[name][n] is tenant n's count,
	// the column rows_<name>.
	RowNames []string
	Rows     map[string]map[int]int64
	// Files are the setup files' paths, run in order.
	Files []string
}

// SetupError is a setup statement the server refused, at File:Line:Col
// (the statement's start, or the server's error position in it).
type SetupError struct {
	File      string
	Line, Col int
	Err       error
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("%s:%d:%d: setup statement failed: %v", e.File, e.Line, e.Col, e.Err)
}

// Unwrap returns the server's error (a *pgconn.PgError) or the file's.
func (e *SetupError) Unwrap() error { return e.Err }

// LoadSetup creates TenantsTable in spec.Schema, fills it, runs spec.Files'
// statements one by one in order, each in its own implicit transaction,
// and vacuums and analyzes the schema's tables (as Load does). It stops at the first failing
// statement with a *SetupError naming it.
func LoadSetup(ctx context.Context, conn *pgx.Conn, spec SetupSpec) error {
	if spec.Schema == "" || len(spec.Keys) == 0 || len(spec.Keys) != len(spec.Shares) {
		return fmt.Errorf("%w: need a schema and a key and share per tenant", ErrSpec)
	}
	// Read and split every file first: a file with a syntax problem stops
	// the run before anything is created.
	type file struct {
		path  string
		stmts []pgscript.Statement
	}
	var files []file
	for _, path := range spec.Files {
		src, err := os.ReadFile(path)
		if err != nil {
			return &SetupError{File: path, Err: err}
		}
		stmts, err := pgscript.SplitSQL(src, path)
		if err != nil {
			return err
		}
		files = append(files, file{path, stmts})
	}
	tbl := pgx.Identifier{spec.Schema, TenantsTable}.Sanitize()
	cols := []string{"n integer PRIMARY KEY", "key " + spec.KeyType + " NOT NULL UNIQUE", "share double precision NOT NULL", "dominant boolean NOT NULL"}
	sel := []string{"t.n", "t.k::" + spec.KeyType, "t.s", "t.n = 1"}
	ns := make([]int32, len(spec.Keys))
	for i := range ns {
		ns[i] = int32(i + 1)
	}
	args := []any{ns, spec.Keys, spec.Shares}
	unnest := []string{"$1::integer[]", "$2::text[]", "$3::double precision[]"}
	alias := []string{"n", "k", "s"}
	for i, name := range spec.RowNames {
		col := pgx.Identifier{"rows_" + name}.Sanitize()
		cols = append(cols, col+" bigint NOT NULL")
		counts := make([]int64, len(spec.Keys))
		for n := range counts {
			counts[n] = spec.Rows[name][n+1]
		}
		args = append(args, counts)
		unnest = append(unnest, fmt.Sprintf("$%d::bigint[]", len(args)))
		alias = append(alias, fmt.Sprintf("r%d", i))
		sel = append(sel, "t."+alias[len(alias)-1])
	}
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+tbl+"; CREATE TABLE "+tbl+" ("+strings.Join(cols, ", ")+")"); err != nil {
		return fmt.Errorf("create %s: %w", TenantsTable, err)
	}
	ins := "INSERT INTO " + tbl + " SELECT " + strings.Join(sel, ", ") + " FROM unnest(" + strings.Join(unnest, ", ") + ") AS t(" + strings.Join(alias, ", ") + ")"
	if _, err := conn.Exec(ctx, ins, args...); err != nil {
		return fmt.Errorf("fill %s: %w", TenantsTable, err)
	}
	for _, f := range files {
		for _, st := range f.stmts {
			if _, err := conn.PgConn().Exec(ctx, st.SQL).ReadAll(); err != nil {
				line, col := st.Line, st.Col
				var pe *pgconn.PgError
				if errors.As(err, &pe) && pe.Position > 0 {
					line, col = position(st, int(pe.Position))
				}
				return &SetupError{File: f.path, Line: line, Col: col, Err: err}
			}
		}
	}
	tables, _, err := SchemaObjects(ctx, conn, spec.Schema)
	if err != nil {
		return fmt.Errorf("list the schema's tables: %w", err)
	}
	for _, t := range tables {
		schema, name, _ := strings.Cut(t, ".")
		if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+pgx.Identifier{schema, name}.Sanitize()); err != nil {
			return fmt.Errorf("vacuum %s: %w", t, err)
		}
	}
	return nil
}

// position turns the server's 1-based character position in st into a
// line and column of the file.
func position(st pgscript.Statement, pos int) (line, col int) {
	line, col = st.Line, st.Col
	for i, r := range []rune(st.SQL) {
		if i+1 >= pos {
			break
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// SchemaObjects returns the tables and sequences in schema, qualified, for
// the workload roles' grants.
func SchemaObjects(ctx context.Context, conn *pgx.Conn, schema string) (tables, sequences []string, err error) {
	rows, err := conn.Query(ctx, `SELECT c.relname::text, c.relkind = 'S' FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'S') ORDER BY 1`, schema)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var seq bool
		if err := rows.Scan(&name, &seq); err != nil {
			return nil, nil, err
		}
		q := schema + "." + name
		if seq {
			sequences = append(sequences, q)
		} else {
			tables = append(tables, q)
		}
	}
	return tables, sequences, rows.Err()
}
