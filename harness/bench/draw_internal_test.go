package bench

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/noisysim/noisysim/harness/dataset"
	"github.com/noisysim/noisysim/workload"
	"github.com/noisysim/noisysim/workload/pgscript"
)

// TestLookupDrawAsSingle: a worker's lookup parameters are those the
// script's Single draws from the same seed and op (as the goroutine-per-op
// paths draw them), as text.
func TestLookupDrawAsSingle(t *testing.T) {
	script, err := dataset.Script(dataset.KindLookup, []string{"tenant", "rows_orders"}, dataset.ScriptParams{Customers: 100})
	if err != nil {
		t.Fatal(err)
	}
	c := &workerConn{}
	for seq := range int64(200) {
		op := workload.Op{Seq: seq, Tenant: 1 + int(seq%50)}
		rows := 1 + seq*37%5000
		sql, err := c.draw(script, 7, op, rows)
		if err != nil {
			t.Fatal(err)
		}
		wantSQL, want, _, err := script.Single(rand.New(rand.NewPCG(7, uint64(seq))), []pgscript.Value{pgscript.Int(int64(op.Tenant)), pgscript.Int(rows)})
		if err != nil {
			t.Fatal(err)
		}
		if sql != wantSQL || len(c.params) != len(want) {
			t.Fatalf("op %d: %q %q, want %q %v", seq, sql, c.params, wantSQL, want)
		}
		for i, w := range want {
			if got := string(c.params[i]); got != strconv.FormatInt(w.(int64), 10) {
				t.Errorf("op %d param %d: %s, want %d", seq, i, got, w)
			}
		}
	}
}

// BenchmarkLookupDraw is a worker's own work per op before it writes to
// the connection: the lookup's parameters drawn from the op's seed and
// encoded as text (no database).
func BenchmarkLookupDraw(b *testing.B) {
	script, err := dataset.Script(dataset.KindLookup, []string{"tenant", "rows_orders"}, dataset.ScriptParams{Customers: 100})
	if err != nil {
		b.Fatal(err)
	}
	c := &workerConn{}
	b.ReportAllocs()
	var seq int64
	for b.Loop() {
		if _, err := c.draw(script, 1, workload.Op{Seq: seq, Tenant: 1 + int(seq%50)}, 5000); err != nil {
			b.Fatal(err)
		}
		seq++
	}
}
