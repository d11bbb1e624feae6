// Package pgscript runs pgbench custom scripts as noisysim queries: SQL
// statements (several between BEGIN and COMMIT make one transaction),
// \set with pgbench's expression language, \sleep and \gset, plus one
// meta-command of noisysim's own, \repeat.
//
// A script is parsed once (Parse, ParseFile, ParseStatement) and run many
// times (Script.Run); running never parses again. Parsing checks
// everything it can, each error an *Error naming file:line:col:
//
//   - a syntax error in SQL or in an expression (ErrSyntax);
//   - a meta-command noisysim does not run, \setshell, \shell, \if,
//     \aset, \startpipeline, ... (ErrUnsupported): never ignored;
//   - a :variable no \set, \gset or builtin sets before it (ErrUnknownVariable).
//
// Differences from pgbench, on purpose:
//
//   - \repeat EXPR ... \endrepeat (noisysim's, pgbench has no loop) runs
//     the commands between them EXPR times, evaluated when the \repeat
//     runs (0: none); loops nest. The shipped export script reads a
//     tenant's rows in batches with it;
//   - Options.Define binds variables to fixed values, as pgbench's -D
//     NAME=VALUE does;
//   - a :variable in SQL becomes a bind parameter ($1, $2, ... one per
//     occurrence, as pgbench's prepared mode numbers them), never text
//     pasted into the statement; inside quotes, comments and dollar quotes
//     a :name is left alone;
//   - builtins are the caller's (Options.Builtins): noisysim binds :tenant
//     (the tenant's key), :rows_<name> (the tenant's row counts) and :scale
//     (1);
//   - a variable's value keeps its type up to the Conn: Run hands it an
//     int64, a float64, a bool, a string (a tenant key, a \gset column) or
//     nil; noisysim's Conn sends each as text, as pgbench does, and the
//     server reads it as the type the statement gives the parameter; a
//     NULL value is sent as SQL NULL (pgbench sends the text "NULL").
//
// The expression language follows pgbench (src/bin/pgbench/exprparse.y
// and pgbench.c of PostgreSQL): integer and double arithmetic with
// pgbench's overflow and division-by-zero errors, comparisons, AND/OR/NOT,
// IS [NOT] NULL, CASE, bitwise operators, and the functions abs, least,
// greatest, int (rounds half to even, as rint), double, sqrt, ln, exp, pi,
// pow/power, mod, random, random_exponential, random_gaussian and
// random_zipfian with pgbench's algorithms and parameter bounds.
//
// Example:
//
//	s, err := pgscript.Parse([]byte(`
//	\set aid random(1, 100000 * :scale)
//	SELECT abalance FROM accounts WHERE tenant = :tenant AND aid = :aid;
//	`), "lookup.sql", pgscript.Options{Builtins: []string{"tenant", "scale"}})
//	...
//	err = s.Run(ctx, conn, rng, []pgscript.Value{pgscript.Text("acme-1"), pgscript.Int(1)})
package pgscript
