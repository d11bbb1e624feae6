package pgscript

import (
	"context"
	"math/rand/v2"
	"testing"
)

// nopConn runs nothing.
type nopConn struct{}

func (nopConn) Exec(context.Context, string, []any) error { return nil }
func (nopConn) Query(context.Context, string, []any) ([]string, []any, int, error) {
	return nil, nil, 1, nil
}

// BenchmarkRunTPCB is the cost of one run of pgbench's TPC-B-like script
// without a database: four \set with random(), seven statements' arguments.
func BenchmarkRunTPCB(b *testing.B) {
	s, err := ParseFile("testdata/tpcb-like.sql", builtins)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	bind := []Value{Text("acme-1"), Int(1)}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Run(context.Background(), nopConn{}, rng, bind); err != nil {
			b.Fatal(err)
		}
	}
}
