package pgscript

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// ran is one statement a fakeConn ran.
type ran struct {
	sql  string
	args []any
}

// fakeConn records statements; Query answers with row.
type fakeConn struct {
	calls []ran
	names []string
	row   []any
	rows  int
}

func (f *fakeConn) Exec(_ context.Context, sql string, args []any) error {
	f.calls = append(f.calls, ran{sql, slices.Clone(args)})
	return nil
}

func (f *fakeConn) Query(_ context.Context, sql string, args []any) ([]string, []any, int, error) {
	f.calls = append(f.calls, ran{sql, slices.Clone(args)})
	return f.names, f.row, f.rows, nil
}

var builtins = Options{Builtins: []string{"tenant", "scale"}}

func TestTPCBLikeScript(t *testing.T) {
	s, err := ParseFile("testdata/tpcb-like.sql", builtins)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"BEGIN",
		"UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2 AND tenant = $3",
		"SELECT abalance FROM pgbench_accounts WHERE aid = $1 AND tenant = $2",
		"UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2 AND tenant = $3",
		"UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2 AND tenant = $3",
		"INSERT INTO pgbench_history (tenant, tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, $5, CURRENT_TIMESTAMP)",
		"END",
	}
	if got := s.Statements(); !slices.Equal(got, want) {
		t.Fatalf("statements:\n%q\nwant\n%q", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const runs = 20000
	minAid, maxAid := int64(math.MaxInt64), int64(0)
	minDelta, maxDelta := int64(math.MaxInt64), int64(math.MinInt64)
	tids := map[int64]int{}
	for range runs {
		f := &fakeConn{}
		if err := s.Run(context.Background(), f, rng, []Value{Text("acme-7"), Int(1)}); err != nil {
			t.Fatal(err)
		}
		if len(f.calls) != 7 {
			t.Fatalf("ran %d statements, want 7", len(f.calls))
		}
		up, sel, tel, br, ins := f.calls[1].args, f.calls[2].args, f.calls[3].args, f.calls[4].args, f.calls[5].args
		delta, aid := up[0].(int64), up[1].(int64)
		tid, bid := tel[1].(int64), br[1].(int64)
		// The same variables bind the same values in every statement.
		if !slices.Equal(sel, []any{aid, "acme-7"}) || tel[0] != delta || br[0] != delta ||
			!slices.Equal(ins[:5], []any{"acme-7", tid, bid, aid, delta}) || up[2] != "acme-7" {
			t.Fatalf("inconsistent arguments: %v", f.calls)
		}
		if bid != 1 {
			t.Fatalf("bid = %d, random(1, 1 * 1) must be 1", bid)
		}
		minAid, maxAid = min(minAid, aid), max(maxAid, aid)
		minDelta, maxDelta = min(minDelta, delta), max(maxDelta, delta)
		tids[tid]++
	}
	// random(lb, ub) is uniform over [lb, ub], bounds included.
	if minAid < 1 || maxAid > 100000 || minAid > 50 || maxAid < 99950 {
		t.Errorf("aid over %d runs in [%d, %d], want about [1, 100000] and never outside", runs, minAid, maxAid)
	}
	if minDelta < -5000 || maxDelta > 5000 || minDelta > -4990 || maxDelta < 4990 {
		t.Errorf("delta in [%d, %d], want about [-5000, 5000]", minDelta, maxDelta)
	}
	if len(tids) != 10 {
		t.Errorf("tid took %d values, want the 10 of [1, 10]", len(tids))
	}
	for tid, n := range tids {
		if tid < 1 || tid > 10 || math.Abs(float64(n)-runs/10) > 0.1*runs/10 {
			t.Errorf("tid %d drawn %d times of %d, want about %d", tid, n, runs, runs/10)
		}
	}
}

// draw evaluates one expression n times.
func draw(t *testing.T, src string, n int) []int64 {
	t.Helper()
	s, err := Parse([]byte(`\set x `+src+"\nSELECT :x;\n"), "draw.sql", Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([]int64, 0, n)
	f := &fakeConn{}
	for range n {
		f.calls = f.calls[:0]
		if err := s.Run(context.Background(), f, rng, nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, f.calls[0].args[0].(int64))
	}
	return out
}

func TestRandomZipfianSkew(t *testing.T) {
	const n = 100000
	counts := map[int64]int{}
	for _, v := range draw(t, "random_zipfian(1, 1000, 1.5)", n) {
		if v < 1 || v > 1000 {
			t.Fatalf("random_zipfian(1, 1000, 1.5) = %d, outside [1, 1000]", v)
		}
		counts[v]++
	}
	// P(k) = k^-s / H(1000, s): value 1 about 39.3%, and P(1)/P(2) = 2^1.5.
	h := 0.0
	for k := 1; k <= 1000; k++ {
		h += math.Pow(float64(k), -1.5)
	}
	for _, k := range []int64{1, 2, 3, 10} {
		want := math.Pow(float64(k), -1.5) / h
		got := float64(counts[k]) / n
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("P(%d) = %.4f, want %.4f (zipfian s=1.5)", k, got, want)
		}
	}
}

func TestRandomExponentialAndGaussian(t *testing.T) {
	const n = 50000
	// random_exponential(1, 100, 5): the value is 1 + floor(100 X) with
	// P(X <= x) = (1 - e^(-5x)) / (1 - e^-5): the first tenth takes 39.6%.
	first := 0
	for _, v := range draw(t, "random_exponential(1, 100, 5)", n) {
		if v < 1 || v > 100 {
			t.Fatalf("random_exponential = %d, outside [1, 100]", v)
		}
		if v <= 10 {
			first++
		}
	}
	want := (1 - math.Exp(-0.5)) / (1 - math.Exp(-5))
	if got := float64(first) / n; math.Abs(got-want) > 0.02 {
		t.Errorf("random_exponential: %.3f of values in the first tenth, want %.3f", got, want)
	}
	// random_gaussian(1, 100, 2.5): symmetric around 50.5, never outside.
	sum := 0.0
	for _, v := range draw(t, "random_gaussian(1, 100, 2.5)", n) {
		if v < 1 || v > 100 {
			t.Fatalf("random_gaussian = %d, outside [1, 100]", v)
		}
		sum += float64(v)
	}
	if mean := sum / n; math.Abs(mean-50.5) > 0.5 {
		t.Errorf("random_gaussian mean %.2f, want about 50.5", mean)
	}
}

func TestExpressions(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"1 + 2 * 3", "7"},
		{"(1 + 2) * 3", "9"},
		{"-2 * 3", "-6"},
		{"7 / 2", "3"},
		{"-7 / 2", "-3"},
		{"7 % 3", "1"},
		{"-7 % 3", "-1"},
		{"5 % -1", "0"},
		{"7.0 / 2", "3.5"},
		{"1 / 0.0", "+Inf"},
		{"int(2.5)", "2"},
		{"int(3.5)", "4"},
		{"int(-2.7)", "-3"},
		{"double(3)", "3"},
		{"abs(-3)", "3"},
		{"abs(-2.5)", "2.5"},
		{"least(3, 1, 2)", "1"},
		{"least(3, 1.5)", "1.5"},
		{"greatest(3, 7, 5)", "7"},
		{"greatest(1, 2.0)", "2"},
		{"~0", "-1"},
		{"1 << 3 | 1", "9"},
		{"6 & 3 # 1", "3"},
		{"2 < 3", "true"},
		{"2 <> 2", "false"},
		{"1 = 1 and 2 < 1", "false"},
		{"1 = 2 or not 2 < 1", "true"},
		{"null is null", "true"},
		{"1 is not null", "true"},
		{"1 + null", "null"},
		{"case when 1 > 2 then 1 when 2 > 1 then 2 else 3 end", "2"},
		{"case when false then 1 end", "null"},
		{"pow(2, 10)", "1024"},
		{"sqrt(16)", "4"},
		{"mod(10, 4)", "2"},
		{":scale * 10", "10"},
		{":tenant + 1", "43"},
		{":t is true", "true"},
		{":y and true", "true"},
		{":n or false", "false"},
		{"random(5, 5)", "5"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			opts := Options{Builtins: []string{"tenant", "scale", "t", "y", "n"}}
			s, err := Parse([]byte(`\set x `+tc.expr+"\nSELECT :x;\n"), "e.sql", opts)
			if err != nil {
				t.Fatal(err)
			}
			f := &fakeConn{}
			if err := s.Run(context.Background(), f, rand.New(rand.NewPCG(1, 1)), []Value{Text("42"), Int(1), Text("tr"), Text("YE"), Text("no")}); err != nil {
				t.Fatal(err)
			}
			if got := FromAny(f.calls[0].args[0]).String(); got != tc.want {
				t.Errorf("%s = %s, want %s", tc.expr, got, tc.want)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"9223372036854775807 + 1", "bigint add out of range"},
		{"1 / 0", "division by zero"},
		{"random(5, 1)", "empty range given to random"},
		{"random_zipfian(1, 10, 1.0)", "zipfian parameter must be in range [1.001, 1000]"},
		{"random_gaussian(1, 10, 1.5)", "gaussian parameter must be at least 2"},
		{"random_exponential(1, 10, 0)", "exponential parameter must be greater than zero"},
		{"true + 1", "cannot coerce boolean to int"},
		{":tenant * 2", `malformed variable value "acme"`},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			s, err := Parse([]byte("SELECT 1;\n\\set x "+tc.expr+"\n"), "e.sql", builtins)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Run(context.Background(), &fakeConn{}, rand.New(rand.NewPCG(1, 1)), []Value{Text("acme"), Int(1)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "e.sql:2: ") {
				t.Errorf("error %v, want e.sql:2: ... %s", err, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		kind      error
		want      string
	}{
		{"setshell", "SELECT 1;\n\\setshell x echo 1\n", ErrUnsupported, `f.sql:2:1: meta-command \setshell is not supported by noisysim`},
		{"if", "\\if 1\nSELECT 1;\n\\endif\n", ErrUnsupported, `f.sql:1:1: meta-command \if is not supported`},
		{"aset", "SELECT 1 \\aset\n", ErrUnsupported, `f.sql:1:10: meta-command \aset is not supported`},
		{"hash", "\\set h hash(1)\n", ErrUnsupported, "f.sql:1:8: \\set h: function hash is not supported by noisysim"},
		{"expression syntax", "SELECT 1;\n\n\\set x 1 +\n", ErrSyntax, "f.sql:3:11: \\set x: unexpected end of expression"},
		{"unknown function", "\\set x nope(1)\n", ErrSyntax, "f.sql:1:8: \\set x: unknown function nope"},
		{"arity", "\\set x random(1)\n", ErrSyntax, "f.sql:1:8: \\set x: random: 2 arguments expected, got 1"},
		{"chained comparison", "\\set x 1 < 2 < 3\n", ErrSyntax, "f.sql:1:14: \\set x: \"<\" cannot follow a comparison"},
		{"unknown variable in SQL", "SELECT 1;\nSELECT *\n  FROM t WHERE id = :nope;\n", ErrUnknownVariable, "f.sql:3:21: unknown variable :nope"},
		{"unknown variable in set", "\\set x :y + 1\n", ErrUnknownVariable, "f.sql:1:8: \\set x: unknown variable :y"},
		{"used before set", "SELECT :x;\n\\set x 1\n", ErrUnknownVariable, "f.sql:1:8: unknown variable :x"},
		{"did you mean", "\\set aid 1\nSELECT :tenat, :aid;\n", ErrUnknownVariable, "f.sql:2:8: unknown variable :tenat: no \\set, \\gset or noisysim builtin sets it before this statement; did you mean :tenant?"},
		{"sleep unit", "\\sleep 10 min\n", ErrSyntax, `f.sql:1:1: \sleep: unknown unit "min"`},
		{"gset first", "\\gset\n", ErrSyntax, `f.sql:1:1: \gset must follow an SQL command`},
		{"unterminated quote", "SELECT 1;\nSELECT 'abc\n", ErrSyntax, "f.sql:2:8: unterminated quoted string"},
		{"compound", "SELECT 1 \\; SELECT 2;\n", ErrUnsupported, `f.sql:1:10: "\;"`},
		{"empty", "-- nothing\n", ErrSyntax, "f.sql: the script has no SQL statement"},
		{"repeat unclosed", "SELECT 1;\n\\repeat 2\nSELECT 2;\n", ErrSyntax, `f.sql:2:1: \repeat has no matching \endrepeat`},
		{"endrepeat alone", "SELECT 1;\n\\endrepeat\n", ErrSyntax, `f.sql:2:1: \endrepeat without \repeat`},
		{"repeat no count", "\\repeat\nSELECT 1;\n\\endrepeat\n", ErrSyntax, `f.sql:1:1: \repeat needs an expression`},
		{"repeat unknown variable", "\\repeat :n\nSELECT 1;\n\\endrepeat\n", ErrUnknownVariable, `f.sql:1:9: \repeat: unknown variable :n`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "f.sql", builtins)
			if !errors.Is(err, tc.kind) || err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v (kind %v), want %q... of kind %v", err, errors.Unwrap(err), tc.want, tc.kind)
			}
		})
	}
}

func TestVariablesOutsideQuotesOnly(t *testing.T) {
	s, err := Parse([]byte("SELECT ':tenant', \"a:tenant\", $$ :tenant $$, $q$:tenant$q$, 1::int, E'\\':tenant', /* :tenant */ :tenant -- :tenant\n;"), "q.sql", builtins)
	if err != nil {
		t.Fatal(err)
	}
	want := "SELECT ':tenant', \"a:tenant\", $$ :tenant $$, $q$:tenant$q$, 1::int, E'\\':tenant', /* :tenant */ $1 -- :tenant"
	if got := s.Statements(); len(got) != 1 || got[0] != want {
		t.Errorf("statements %q, want [%q]", got, want)
	}
}

func TestGsetAndSleep(t *testing.T) {
	src := `SELECT count(*) AS n, max(id) AS top FROM t WHERE tenant = :tenant \gset c_
\set next :c_top + 1
\sleep 0 ms
SELECT :c_n, :next;
SELECT 1 AS one
\gset
\set two :one * 2
SELECT :two;
`
	s, err := Parse([]byte(src), "g.sql", builtins)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeConn{names: []string{"n", "top"}, row: []any{int64(3), int64(41)}, rows: 1}
	if err := s.Run(context.Background(), f, rand.New(rand.NewPCG(1, 1)), []Value{Text("a"), Int(1)}); err == nil {
		t.Fatal("the second \\gset found no column one, but :one was bound")
	} else if !strings.Contains(err.Error(), "g.sql:7: undefined variable :one") {
		t.Errorf("error %v, want g.sql:7: undefined variable :one", err)
	}
	if got := f.calls[1].args; !slices.Equal(got, []any{int64(3), int64(42)}) {
		t.Errorf("after \\gset c_: bound %v, want [3 42]", got)
	}
	f = &fakeConn{rows: 0}
	err = s.Run(context.Background(), f, rand.New(rand.NewPCG(1, 1)), []Value{Text("a"), Int(1)})
	if err == nil || !strings.Contains(err.Error(), "g.sql:1: \\gset: expected one row, got 0") {
		t.Errorf("error %v, want the \\gset row count with g.sql:1", err)
	}
}

func TestStatementArgs(t *testing.T) {
	s, err := ParseStatement("SELECT * FROM invoices WHERE account = $1 AND id = $2", []string{":tenant", "random(1, 10 * :scale)"}, "x.yaml", 12, nil, builtins)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeConn{}
	if err := s.Run(context.Background(), f, rand.New(rand.NewPCG(1, 1)), []Value{Text("k"), Int(1)}); err != nil {
		t.Fatal(err)
	}
	if a := f.calls[0].args; len(a) != 2 || a[0] != "k" || a[1].(int64) < 1 || a[1].(int64) > 10 {
		t.Errorf("args %v", a)
	}
	_, err = ParseStatement("SELECT $1", []string{":nope"}, "x.yaml", 12, []int{14}, builtins)
	if !errors.Is(err, ErrUnknownVariable) || !strings.HasPrefix(err.Error(), "x.yaml:14: args[0]: unknown variable :nope") {
		t.Errorf("error %v", err)
	}
}

func TestContinuationAndSleepVariable(t *testing.T) {
	s, err := Parse([]byte("\\set x 1 + \\\n  2 * 3\n\\set pause 0\n\\sleep :pause ms\nSELECT :x;\n"), "c.sql", Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeConn{}
	if err := s.Run(context.Background(), f, rand.New(rand.NewPCG(1, 1)), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.calls[0].args; len(got) != 1 || got[0] != int64(7) {
		t.Errorf("args %v, want [7]", got)
	}
	if got := f.calls[0].sql; got != "SELECT $1" {
		t.Errorf("sql %q", got)
	}
	// A cancelled run stops at its \sleep with the context's error.
	s, err = Parse([]byte("\\sleep 10 s\nSELECT 1;\n"), "c.sql", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx, &fakeConn{}, rand.New(rand.NewPCG(1, 1)), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// TestRepeat runs a loop's commands count times, nested loops included,
// and none for 0.
func TestRepeat(t *testing.T) {
	s, err := Parse([]byte(`\set after 0
\repeat :scale + 1
SELECT :after;
\set after :after + 10
\repeat 2
SELECT 'inner';
\endrepeat
\endrepeat
\repeat 0
SELECT 'never';
\endrepeat
SELECT 'last', :after;
`), "r.sql", builtins)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeConn{}
	if err := s.Run(context.Background(), f, rand.New(rand.NewPCG(1, 1)), []Value{Text("acme"), Int(2)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range f.calls {
		got = append(got, strings.TrimSpace(strings.Join(strings.Fields(c.sql+" "+fmtArgs(c.args)), " ")))
	}
	want := []string{"SELECT $1 0", "SELECT 'inner'", "SELECT 'inner'", "SELECT $1 10", "SELECT 'inner'", "SELECT 'inner'",
		"SELECT $1 20", "SELECT 'inner'", "SELECT 'inner'", "SELECT 'last', $1 30"}
	if !slices.Equal(got, want) {
		t.Errorf("ran\n%q\nwant\n%q", got, want)
	}
	bad, err := Parse([]byte("\\repeat :scale - 5\nSELECT 1;\n\\endrepeat\n"), "n.sql", builtins)
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Run(context.Background(), &fakeConn{}, rand.New(rand.NewPCG(1, 1)), []Value{Text("acme"), Int(2)})
	if err == nil || !strings.HasPrefix(err.Error(), "n.sql:1: \\repeat: count -3 is not a whole number >= 0") {
		t.Errorf("negative count: error %v", err)
	}
}

func fmtArgs(args []any) string {
	var out []string
	for _, a := range args {
		out = append(out, FromAny(a).String())
	}
	return strings.Join(out, " ")
}

// TestDefine binds Options.Define's values on every run, as pgbench -D.
func TestDefine(t *testing.T) {
	s, err := Parse([]byte("SELECT :batch, :tenant;\n"), "d.sql", Options{Builtins: []string{"tenant"}, Define: map[string]Value{"batch": Int(700)}})
	if err != nil {
		t.Fatal(err)
	}
	sql, args, ok, err := s.Single(rand.New(rand.NewPCG(1, 1)), []Value{Text("acme")})
	if err != nil || !ok || sql != "SELECT $1, $2" || args[0] != int64(700) || args[1] != "acme" {
		t.Errorf("got %q %v ok %v err %v; want SELECT $1, $2 with 700, acme", sql, args, ok, err)
	}
	if _, err := Parse([]byte("SELECT 1;"), "d.sql", Options{Builtins: []string{"tenant"}, Define: map[string]Value{"tenant": Int(1)}}); err == nil {
		t.Error("a define that is also a builtin: want an error")
	}
	if _, err := Parse([]byte("SELECT :batc;\n"), "d.sql", Options{Define: map[string]Value{"batch": Int(1)}}); err == nil || !strings.Contains(err.Error(), "did you mean :batch?") {
		t.Errorf("unknown variable near a define: error %v", err)
	}
}

// TestDrawerAsSingle: a Drawer draws what Single draws from the same random
// stream and builtins, draw after draw on its reused variables; a script
// that is not a single statement has no Drawer, and wrong builtins are an
// error.
func TestDrawerAsSingle(t *testing.T) {
	src := "\\set a random(1, :n)\n\\set b :a * :k + random(0, 9)\nSELECT :a, :b, :tenant, :k;\n"
	s, err := Parse([]byte(src), "draw.sql", Options{Builtins: []string{"tenant", "n"}, Define: map[string]Value{"k": Int(7)}})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := s.Drawer()
	if !ok {
		t.Fatal("no Drawer for a single statement")
	}
	for i := range 100 {
		builtins := []Value{Int(int64(1 + i%5)), Int(int64(10 + i))}
		wantSQL, want, ok, err := s.Single(rand.New(rand.NewPCG(1, uint64(i))), builtins)
		if err != nil || !ok {
			t.Fatalf("Single: %v, %v", ok, err)
		}
		sql, got, err := d.Draw(rand.New(rand.NewPCG(1, uint64(i))), builtins)
		if err != nil {
			t.Fatal(err)
		}
		if sql != wantSQL || len(got) != len(want) {
			t.Fatalf("draw %d: %q %v, want %q %v", i, sql, got, wantSQL, want)
		}
		for j := range got {
			if got[j].Any() != want[j] || string(got[j].AppendText(nil)) != got[j].String() {
				t.Errorf("draw %d arg %d: %v (text %q), want %v", i, j, got[j], got[j].AppendText(nil), want[j])
			}
		}
	}
	if _, _, err := d.Draw(rand.New(rand.NewPCG(1, 1)), []Value{Int(1)}); err == nil {
		t.Error("Draw with one builtin of two: no error")
	}
	multi, err := Parse([]byte("SELECT 1;\nSELECT 2;\n"), "multi.sql", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := multi.Drawer(); ok {
		t.Error("Drawer of a two-statement script")
	}
}
