package pgscript_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/noisysim/noisysim/workload/pgscript"
)

// printConn prints each statement with its arguments instead of running it.
type printConn struct{}

func (printConn) Exec(_ context.Context, sql string, args []any) error {
	fmt.Printf("%s %v\n", sql, args)
	return nil
}

func (printConn) Query(_ context.Context, sql string, args []any) ([]string, []any, int, error) {
	fmt.Printf("%s %v\n", sql, args)
	return []string{"balance"}, []any{int64(120)}, 1, nil
}

func Example() {
	s, err := pgscript.Parse([]byte(`
\set aid random(1, 100 * :scale)
SELECT abalance AS balance FROM accounts WHERE tenant = :tenant AND aid = :aid \gset
\set delta least(:balance, 50)
UPDATE accounts SET abalance = abalance - :delta WHERE tenant = :tenant AND aid = :aid;
`), "pay.sql", pgscript.Options{Builtins: []string{"tenant", "scale"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	rng := rand.New(rand.NewPCG(1, 1))
	err = s.Run(context.Background(), printConn{}, rng, []pgscript.Value{pgscript.Text("acme-1"), pgscript.Int(1)})
	fmt.Println(err)

	_, err = pgscript.Parse([]byte("SELECT 1;\n\\setshell x echo 1\n"), "bad.sql", pgscript.Options{})
	fmt.Println(err)
	// Output:
	// SELECT abalance AS balance FROM accounts WHERE tenant = $1 AND aid = $2 [acme-1 100]
	// UPDATE accounts SET abalance = abalance - $1 WHERE tenant = $2 AND aid = $3 [50 acme-1 100]
	// <nil>
	// bad.sql:2:1: meta-command \setshell is not supported by noisysim (it runs \set, \sleep, \gset and \repeat)
}
