package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/workload"
	"github.com/noisysim/noisysim/workload/pgscript"
)

// script runs a class's pgbench script (or inline statement) for op's
// tenant. A script of one statement goes through the stack's Query (tag
// and statement in one round trip); a longer one holds a connection for
// its whole run, as a pgbench client does, and rolls back a transaction an
// error left open. Random draws are seeded by the scenario's seed and the
// op's sequence number: the same run draws the same values.
func (e *executor) script(ctx context.Context, prog *pgscript.Script, class pools.Class, tenant string, op workload.Op) error {
	rng := rand.New(rand.NewPCG(uint64(e.r.sc.Seed), uint64(op.Seq)))
	bind := e.r.bind[op.Tenant-1]
	if sql, args, ok, err := prog.Single(rng, bind); err != nil {
		return err
	} else if ok {
		_, err = e.stack.Query(ctx, class, tenant, sql, asText(args)...)
		return err
	}
	_, err := e.stack.WithConn(ctx, class, tenant, func(ctx context.Context, conn *pgx.Conn) error {
		err := prog.Run(ctx, scriptConn{conn}, rng, bind)
		if err != nil && !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			// Roll back what the script began, so the connection goes back
			// clean; if this fails the stack discards the connection.
			rctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
		return err
	})
	return err
}

// scriptConn runs a script's statements on a pgx connection.
type scriptConn struct{ c *pgx.Conn }

var _ pgscript.Conn = scriptConn{}

func (s scriptConn) Exec(ctx context.Context, sql string, args []any) error {
	_, err := s.c.Exec(ctx, sql, asText(args)...)
	return err
}

func (s scriptConn) Query(ctx context.Context, sql string, args []any) ([]string, []any, int, error) {
	rows, err := s.c.Query(ctx, sql, asText(args)...)
	if err != nil {
		return nil, nil, 0, err
	}
	defer rows.Close()
	var names []string
	for _, f := range rows.FieldDescriptions() {
		names = append(names, f.Name)
	}
	var last []any
	n := 0
	for rows.Next() {
		if last, err = rows.Values(); err != nil {
			return nil, nil, 0, err
		}
		n++
	}
	for i, v := range last {
		last[i] = gsetValue(v)
	}
	return names, last, n, rows.Err()
}

// asText turns a script's numbers and booleans into their text, in place:
// pgbench sends every parameter as text and the server reads it as the
// type the statement gives the parameter (int, numeric, text, uuid, ...);
// a Go int64 would only encode into a numeric parameter. Strings and NULL
// stay as they are.
func asText(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case int64:
			args[i] = strconv.FormatInt(v, 10)
		case float64:
			args[i] = strconv.FormatFloat(v, 'g', 15, 64) // pgbench's "%.*g" with DBL_DIG
		case bool:
			args[i] = strconv.FormatBool(v)
		}
	}
	return args
}

// rollbackTimeout bounds the ROLLBACK after a failed script.
const rollbackTimeout = 5 * time.Second

// gsetValue turns a pgx column value into one pgscript reads: numerics as
// doubles, uuids and times as their text.
func gsetValue(v any) any {
	switch t := v.(type) {
	case pgtype.Numeric:
		f, err := t.Float64Value()
		if err != nil || !f.Valid {
			return nil
		}
		return f.Float64
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", t[0:4], t[4:6], t[6:8], t[8:10], t[10:16])
	case time.Time:
		return t.Format(time.RFC3339Nano)
	}
	return v
}
