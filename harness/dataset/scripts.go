package dataset

import (
	"embed"
	"fmt"
	"time"

	"github.com/noisysim/noisysim/workload/pgscript"
)

// scripts are the query kinds as pgbench scripts: the built-in data set's
// queries run by the same script executor as a user's own.
//
//go:embed scripts/*.sql
var scripts embed.FS

// ScriptParams are the class parameters the shipped scripts read, bound
// as variables (pgbench's -D): :customers, :batch and :sleep.
type ScriptParams struct {
	// Customers is Spec.Customers as loaded (page).
	Customers int
	// Batch is export's rows per batch; 0 means DefaultBatch.
	Batch int
	// Sleep is sleep's pg_sleep duration.
	Sleep time.Duration
}

// DefaultBatch is export's rows per batch when ScriptParams.Batch is 0.
const DefaultBatch = 1000

// ScriptSource returns kind k's shipped pgbench script and the name it
// has in errors ("builtin:lookup.sql").
func ScriptSource(k Kind) (name string, src []byte, err error) {
	if !k.Valid() {
		return "", nil, fmt.Errorf("dataset: unknown query kind %q", k)
	}
	src, err = scripts.ReadFile("scripts/" + string(k) + ".sql")
	return "builtin:" + string(k) + ".sql", src, err
}

// Script parses kind k's shipped script. builtins are the variables the
// caller binds on every run (they must include tenant and rows_orders);
// p's values are bound as :customers, :batch and :sleep (seconds).
func Script(k Kind, builtins []string, p ScriptParams) (*pgscript.Script, error) {
	name, src, err := ScriptSource(k)
	if err != nil {
		return nil, err
	}
	if p.Batch <= 0 {
		p.Batch = DefaultBatch
	}
	return pgscript.Parse(src, name, pgscript.Options{Builtins: builtins, Define: map[string]pgscript.Value{
		"customers": pgscript.Int(int64(p.Customers)),
		"batch":     pgscript.Int(int64(p.Batch)),
		"sleep":     pgscript.Double(p.Sleep.Seconds()),
	}})
}
