package pgscript

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// env is one run's state: the variables by slot and the random source.
type env struct {
	vars []Value
	rng  *rand.Rand
	// names names the slots, for messages.
	names []string
}

// expr is a compiled expression.
type expr func(e *env) (Value, error)

// token kinds of the expression lexer.
type tokKind uint8

const (
	tEOF tokKind = iota
	tInt
	tDouble
	tVar
	tIdent
	tOp
)

type token struct {
	kind tokKind
	text string // operator, identifier (lower case for keywords), variable name
	i    int64
	f    float64
	col  int // 1-based column in the line
}

// lexExpr splits src (one \set expression) into tokens; col0 is the column
// of src's first byte in its line.
func lexExpr(src string, col0 int) ([]token, *posErr) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		col := col0 + i
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			j := i
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			double := false
			if j < len(src) && src[j] == '.' {
				double = true
				j++
				for j < len(src) && isDigit(src[j]) {
					j++
				}
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && isDigit(src[k]) {
					double = true
					for k < len(src) && isDigit(src[k]) {
						k++
					}
					j = k
				}
			}
			text := src[i:j]
			if double {
				f, err := strconv.ParseFloat(text, 64)
				if err != nil {
					return nil, &posErr{col, fmt.Sprintf("invalid double constant %q", text)}
				}
				out = append(out, token{kind: tDouble, f: f, text: text, col: col})
			} else {
				n, err := strconv.ParseInt(text, 10, 64)
				if err != nil {
					return nil, &posErr{col, fmt.Sprintf("bigint constant overflow: %s", text)}
				}
				out = append(out, token{kind: tInt, i: n, text: text, col: col})
			}
			i = j
		case c == ':':
			j := i + 1
			for j < len(src) && isNameByte(src[j]) {
				j++
			}
			if j == i+1 {
				return nil, &posErr{col, "a ':' must start a variable name"}
			}
			out = append(out, token{kind: tVar, text: src[i+1 : j], col: col})
			i = j
		case isNameStart(c):
			j := i
			for j < len(src) && isNameByte(src[j]) {
				j++
			}
			out = append(out, token{kind: tIdent, text: strings.ToLower(src[i:j]), col: col})
			i = j
		default:
			op := string(c)
			if i+1 < len(src) {
				switch two := src[i : i+2]; two {
				case "<=", ">=", "<>", "!=", "<<", ">>":
					op = two
				}
			}
			if !strings.Contains("+-*/%()<>=&|#~,", op[:1]) || op == "!" {
				return nil, &posErr{col, fmt.Sprintf("unexpected character %q", c)}
			}
			out = append(out, token{kind: tOp, text: op, col: col})
			i += len(op)
		}
	}
	return append(out, token{kind: tEOF, col: col0 + len(src)}), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
func isNameByte(c byte) bool { return isNameStart(c) || isDigit(c) }

// posErr is a parse error at a column of the line.
type posErr struct {
	col int
	msg string
}

// Precedence levels, lowest first, as exprparse.y declares them.
const (
	precNone = iota
	precOr
	precAnd
	precNot
	precIs
	precCmp
	precBit
	precAdd
	precMul
	precUnary
)

// resolver maps a variable name to its slot; ok false for a name nothing
// sets before this point.
type resolver func(name string) (slot int, ok bool)

// exprParser is a precedence-climbing parser of one expression.
type exprParser struct {
	toks    []token
	pos     int
	resolve resolver
	err     *posErr
	kind    error
}

func (p *exprParser) peek() token { return p.toks[p.pos] }
func (p *exprParser) next() token { t := p.toks[p.pos]; p.pos = min(p.pos+1, len(p.toks)-1); return t }

func (p *exprParser) fail(col int, kind error, format string, args ...any) {
	if p.err == nil {
		p.err = &posErr{col, fmt.Sprintf(format, args...)}
		p.kind = kind
	}
}

// parseExpr compiles src; the error carries its column and kind.
func parseExpr(src string, col0 int, resolve resolver) (expr, *posErr, error) {
	toks, perr := lexExpr(src, col0)
	if perr != nil {
		return nil, perr, ErrSyntax
	}
	p := &exprParser{toks: toks, resolve: resolve}
	if p.peek().kind == tEOF {
		return nil, &posErr{col0, "missing expression"}, ErrSyntax
	}
	e := p.parse(precNone)
	if p.err == nil && p.peek().kind != tEOF {
		t := p.peek()
		p.fail(t.col, ErrSyntax, "unexpected %q after the expression", t.text)
	}
	if p.err != nil {
		return nil, p.err, p.kind
	}
	return e, nil, nil
}

// binary returns the precedence of the operator token t; 0 when it is none.
func binaryPrec(t token) int {
	switch t.kind {
	case tOp:
		switch t.text {
		case "+", "-":
			return precAdd
		case "*", "/", "%":
			return precMul
		case "|", "#", "&", "<<", ">>":
			return precBit
		case "<", ">", "=", "<=", ">=", "<>", "!=":
			return precCmp
		}
	case tIdent:
		switch t.text {
		case "or":
			return precOr
		case "and":
			return precAnd
		case "is", "isnull", "notnull":
			return precIs
		}
	}
	return precNone
}

// parse parses operators of precedence above rbp.
func (p *exprParser) parse(rbp int) expr {
	left := p.prefix()
	for p.err == nil {
		t := p.peek()
		prec := binaryPrec(t)
		if prec <= rbp {
			return left
		}
		p.next()
		switch prec {
		case precIs:
			left = p.isTest(t, left)
		default:
			right := p.parse(prec)
			left = binaryOp(t.text, left, right)
		}
		if (prec == precCmp || prec == precIs) && binaryPrec(p.peek()) == prec && p.err == nil {
			p.fail(p.peek().col, ErrSyntax, "%q cannot follow a comparison without parentheses", p.peek().text)
		}
	}
	return left
}

// isTest parses what follows IS, or applies ISNULL / NOTNULL.
func (p *exprParser) isTest(t token, left expr) expr {
	switch t.text {
	case "isnull":
		return isOp(left, Null(), false)
	case "notnull":
		return isOp(left, Null(), true)
	}
	not := false
	if n := p.peek(); n.kind == tIdent && n.text == "not" {
		not = true
		p.next()
	}
	switch n := p.next(); {
	case n.kind == tIdent && n.text == "null":
		return isOp(left, Null(), not)
	case n.kind == tIdent && n.text == "true":
		return isOp(left, Bool(true), not)
	case n.kind == tIdent && n.text == "false":
		return isOp(left, Bool(false), not)
	default:
		p.fail(n.col, ErrSyntax, "IS must be followed by [NOT] NULL, TRUE or FALSE")
		return nil
	}
}

// prefix parses a primary expression or a prefix operator.
func (p *exprParser) prefix() expr {
	t := p.next()
	switch t.kind {
	case tInt:
		v := Int(t.i)
		return func(*env) (Value, error) { return v, nil }
	case tDouble:
		v := Double(t.f)
		return func(*env) (Value, error) { return v, nil }
	case tVar:
		slot, ok := p.resolve(t.text)
		if !ok {
			p.fail(t.col, ErrUnknownVariable, "unknown variable :%s: no \\set, \\gset or noisysim builtin sets it before this line", t.text)
			return nil
		}
		name := t.text
		return func(e *env) (Value, error) {
			v := e.vars[slot]
			if !v.Set() {
				return v, fmt.Errorf("undefined variable :%s", name)
			}
			return v, nil
		}
	case tOp:
		switch t.text {
		case "(":
			e := p.parse(precNone)
			if c := p.next(); p.err == nil && (c.kind != tOp || c.text != ")") {
				p.fail(c.col, ErrSyntax, "missing ')'")
			}
			return e
		case "+":
			return p.parse(precUnary)
		case "-":
			zero := func(*env) (Value, error) { return Int(0), nil }
			return binaryOp("-", zero, p.parse(precUnary))
		case "~":
			ones := func(*env) (Value, error) { return Int(-1), nil }
			return binaryOp("#", ones, p.parse(precBit))
		}
	case tIdent:
		switch t.text {
		case "null":
			return func(*env) (Value, error) { return Null(), nil }
		case "true", "false":
			v := Bool(t.text == "true")
			return func(*env) (Value, error) { return v, nil }
		case "not":
			return notOp(p.parse(precNot))
		case "case":
			return p.caseExpr(t)
		}
		if n := p.peek(); n.kind == tOp && n.text == "(" {
			p.next()
			return p.call(t)
		}
		p.fail(t.col, ErrSyntax, "unexpected %q: a function name must be followed by '('", t.text)
		return nil
	case tEOF:
		p.fail(t.col, ErrSyntax, "unexpected end of expression")
		return nil
	}
	p.fail(t.col, ErrSyntax, "unexpected %q", t.text)
	return nil
}

// caseExpr parses CASE WHEN c THEN v ... [ELSE v] END.
func (p *exprParser) caseExpr(start token) expr {
	type arm struct{ cond, val expr }
	var arms []arm
	var els expr = func(*env) (Value, error) { return Null(), nil }
	for p.err == nil {
		t := p.next()
		switch {
		case t.kind == tIdent && t.text == "when":
			c := p.parse(precNone)
			if th := p.next(); p.err == nil && !(th.kind == tIdent && th.text == "then") {
				p.fail(th.col, ErrSyntax, "expected THEN")
			}
			arms = append(arms, arm{c, p.parse(precNone)})
			continue
		case t.kind == tIdent && t.text == "else" && len(arms) > 0:
			els = p.parse(precNone)
			if end := p.next(); p.err == nil && !(end.kind == tIdent && end.text == "end") {
				p.fail(end.col, ErrSyntax, "expected END")
			}
		case t.kind == tIdent && t.text == "end" && len(arms) > 0:
		default:
			p.fail(t.col, ErrSyntax, "CASE needs WHEN ... THEN ... [ELSE ...] END")
		}
		break
	}
	return func(e *env) (Value, error) {
		for _, a := range arms {
			c, err := a.cond(e)
			if err != nil {
				return c, err
			}
			if truth(c) {
				return a.val(e)
			}
		}
		return els(e)
	}
}

// truth is pgbench's valueTruth: non-zero numbers and true are true.
func truth(v Value) bool {
	v, _ = v.number()
	switch v.k {
	case kindBool, kindInt:
		return v.i != 0
	case kindDouble:
		return v.f != 0
	}
	return false
}

// Bounds of pgbench's random functions' parameters.
const (
	minGaussianParam = 2.0
	minZipfianParam  = 1.001
	maxZipfianParam  = 1000.0
)

// arities of the functions noisysim runs; -1 is "one or more".
var functions = map[string]int{
	"abs": 1, "least": -1, "greatest": -1, "int": 1, "double": 1, "sqrt": 1, "ln": 1, "exp": 1, "pi": 0,
	"pow": 2, "power": 2, "mod": 2, "random": 2, "random_exponential": 3, "random_gaussian": 3, "random_zipfian": 3,
}

// unsupported are pgbench functions noisysim does not run.
var unsupported = map[string]bool{"debug": true, "hash": true, "hash_murmur2": true, "hash_fnv1a": true, "permute": true}

// call parses a function's arguments (after '(') and compiles the call.
func (p *exprParser) call(name token) expr {
	var args []expr
	if t := p.peek(); t.kind == tOp && t.text == ")" {
		p.next()
	} else {
		for p.err == nil {
			args = append(args, p.parse(precNone))
			t := p.next()
			if t.kind == tOp && t.text == "," {
				continue
			}
			if p.err == nil && !(t.kind == tOp && t.text == ")") {
				p.fail(t.col, ErrSyntax, "expected ',' or ')' in the arguments of %s", name.text)
			}
			break
		}
	}
	if p.err != nil {
		return nil
	}
	n, ok := functions[name.text]
	switch {
	case unsupported[name.text]:
		p.fail(name.col, ErrUnsupported, "function %s is not supported by noisysim", name.text)
		return nil
	case !ok:
		p.fail(name.col, ErrSyntax, "unknown function %s", name.text)
		return nil
	case n == -1 && len(args) == 0:
		p.fail(name.col, ErrSyntax, "%s: at least one argument expected", name.text)
		return nil
	case n >= 0 && len(args) != n:
		p.fail(name.col, ErrSyntax, "%s: %d arguments expected, got %d", name.text, n, len(args))
		return nil
	}
	if name.text == "mod" {
		return binaryOp("%", args[0], args[1])
	}
	return function(name.text, args)
}

// evalArgs evaluates args into vals; null reports whether one is NULL.
func evalArgs(e *env, args []expr, vals []Value) (null bool, err error) {
	for i, a := range args {
		v, err := a(e)
		if err != nil {
			return false, err
		}
		if v, err = v.number(); err != nil {
			return false, err
		}
		vals[i] = v
		null = null || v.k == kindNull
	}
	return null, nil
}

// toInt is pgbench's coerceToInt: a double is rounded half to even (rint).
func toInt(v Value) (int64, error) {
	switch v.k {
	case kindInt:
		return v.i, nil
	case kindDouble:
		d := math.RoundToEven(v.f)
		if math.IsNaN(d) || d < -9.223372036854775808e18 || d >= 9.223372036854775808e18 {
			return 0, fmt.Errorf("double to int overflow for %g", v.f)
		}
		return int64(d), nil
	}
	return 0, fmt.Errorf("cannot coerce %s to int", v.typeName())
}

// toDouble is pgbench's coerceToDouble.
func toDouble(v Value) (float64, error) {
	switch v.k {
	case kindDouble:
		return v.f, nil
	case kindInt:
		return float64(v.i), nil
	}
	return 0, fmt.Errorf("cannot coerce %s to double", v.typeName())
}

func toBool(v Value) (bool, error) {
	if v.k == kindBool {
		return v.i != 0, nil
	}
	return false, fmt.Errorf("cannot coerce %s to boolean", v.typeName())
}

// binaryOp compiles an arithmetic, comparison, bitwise or logical operator.
func binaryOp(op string, l, r expr) expr {
	switch op {
	case "and", "or":
		and := op == "and"
		return func(e *env) (Value, error) {
			a, err := l(e)
			if err == nil {
				a, err = a.number()
			}
			if err != nil || a.k == kindNull {
				return a, err
			}
			ba, err := toBool(a)
			if err != nil {
				return a, err
			}
			if ba != and {
				return Bool(ba), nil
			}
			b, err := r(e)
			if err == nil {
				b, err = b.number()
			}
			if err != nil || b.k == kindNull {
				return b, err
			}
			bb, err := toBool(b)
			return Bool(bb), err
		}
	}
	args := []expr{l, r}
	return func(e *env) (Value, error) {
		var vals [2]Value
		null, err := evalArgs(e, args, vals[:])
		if err != nil || null {
			return Null(), err
		}
		return arith(op, vals[0], vals[1])
	}
}

// arith applies op to two non-NULL values as pgbench's evalStandardFunc.
func arith(op string, a, b Value) (Value, error) {
	switch op {
	case "&", "|", "#", "<<", ">>":
		x, err := toInt(a)
		if err != nil {
			return Value{}, err
		}
		y, err := toInt(b)
		if err != nil {
			return Value{}, err
		}
		switch op {
		case "&":
			return Int(x & y), nil
		case "|":
			return Int(x | y), nil
		case "#":
			return Int(x ^ y), nil
		case "<<":
			return Int(x << uint64(y&63)), nil
		default:
			return Int(x >> uint64(y&63)), nil
		}
	}
	if (a.k == kindDouble || b.k == kindDouble) && op != "%" {
		x, err := toDouble(a)
		if err != nil {
			return Value{}, err
		}
		y, err := toDouble(b)
		if err != nil {
			return Value{}, err
		}
		switch op {
		case "+":
			return Double(x + y), nil
		case "-":
			return Double(x - y), nil
		case "*":
			return Double(x * y), nil
		case "/":
			return Double(x / y), nil
		}
		return compare(op, x < y, x == y), nil
	}
	x, err := toInt(a)
	if err != nil {
		return Value{}, err
	}
	y, err := toInt(b)
	if err != nil {
		return Value{}, err
	}
	switch op {
	case "+":
		s := x + y
		if (s > x) != (y > 0) {
			return Value{}, errors.New("bigint add out of range")
		}
		return Int(s), nil
	case "-":
		s := x - y
		if (s < x) != (y > 0) {
			return Value{}, errors.New("bigint sub out of range")
		}
		return Int(s), nil
	case "*":
		if x != 0 && y != 0 {
			m := x * y
			if m/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
				return Value{}, errors.New("bigint mul out of range")
			}
			return Int(m), nil
		}
		return Int(0), nil
	case "/", "%":
		switch {
		case y == 0:
			return Value{}, errors.New("division by zero")
		case y == -1 && op == "/":
			if x == math.MinInt64 {
				return Value{}, errors.New("bigint div out of range")
			}
			return Int(-x), nil
		case y == -1:
			return Int(0), nil
		case op == "/":
			return Int(x / y), nil
		}
		return Int(x % y), nil
	}
	return compare(op, x < y, x == y), nil
}

func compare(op string, lt, eq bool) Value {
	switch op {
	case "=":
		return Bool(eq)
	case "<>", "!=":
		return Bool(!eq)
	case "<":
		return Bool(lt)
	case "<=":
		return Bool(lt || eq)
	case ">":
		return Bool(!lt && !eq)
	default: // ">="
		return Bool(!lt)
	}
}

// isOp is pgbench's "!is": x IS NULL / TRUE / FALSE, negated with not.
func isOp(x expr, want Value, not bool) expr {
	return func(e *env) (Value, error) {
		v, err := x(e)
		if err == nil {
			v, err = v.number()
		}
		if err != nil {
			return v, err
		}
		is := v.k == want.k && (want.k == kindNull || v.i == want.i)
		return Bool(is != not), nil
	}
}

func notOp(x expr) expr {
	return func(e *env) (Value, error) {
		v, err := x(e)
		if err == nil {
			v, err = v.number()
		}
		if err != nil || v.k == kindNull {
			return v, err
		}
		b, err := toBool(v)
		return Bool(!b), err
	}
}

// function compiles a call of a known function with the right arity.
func function(name string, args []expr) expr {
	return func(e *env) (Value, error) {
		var buf [4]Value
		vals := buf[:0]
		if len(args) > len(buf) {
			vals = make([]Value, len(args))
		} else {
			vals = buf[:len(args)]
		}
		null, err := evalArgs(e, args, vals)
		if err != nil {
			return Value{}, err
		}
		if null {
			return Null(), nil
		}
		v, err := call(e, name, vals)
		if err != nil {
			return v, fmt.Errorf("%s: %w", name, err)
		}
		return v, nil
	}
}

// call runs function name on non-NULL arguments.
func call(e *env, name string, a []Value) (Value, error) {
	switch name {
	case "pi":
		return Double(math.Pi), nil
	case "abs":
		switch a[0].k {
		case kindInt:
			if a[0].i < 0 {
				return Int(-a[0].i), nil
			}
			return a[0], nil
		case kindDouble:
			return Double(math.Abs(a[0].f)), nil
		}
		return Value{}, fmt.Errorf("cannot take abs of %s", a[0].typeName())
	case "int":
		i, err := toInt(a[0])
		return Int(i), err
	case "double", "sqrt", "ln", "exp":
		d, err := toDouble(a[0])
		switch name {
		case "sqrt":
			d = math.Sqrt(d)
		case "ln":
			d = math.Log(d)
		case "exp":
			d = math.Exp(d)
		}
		return Double(d), err
	case "pow", "power":
		x, err := toDouble(a[0])
		if err != nil {
			return Value{}, err
		}
		y, err := toDouble(a[1])
		return Double(math.Pow(x, y)), err
	case "least", "greatest":
		double := false
		for _, v := range a {
			double = double || v.k == kindDouble
		}
		if double {
			x, err := toDouble(a[0])
			for _, v := range a[1:] {
				if err != nil {
					break
				}
				var y float64
				y, err = toDouble(v)
				if name == "least" {
					x = math.Min(x, y)
				} else {
					x = math.Max(x, y)
				}
			}
			return Double(x), err
		}
		x, err := toInt(a[0])
		for _, v := range a[1:] {
			if err != nil {
				break
			}
			var y int64
			y, err = toInt(v)
			if name == "least" {
				x = min(x, y)
			} else {
				x = max(x, y)
			}
		}
		return Int(x), err
	}
	// random functions
	lo, err := toInt(a[0])
	if err != nil {
		return Value{}, err
	}
	hi, err := toInt(a[1])
	if err != nil {
		return Value{}, err
	}
	if lo > hi {
		return Value{}, errors.New("empty range given to random")
	}
	if d := hi - lo; d < 0 || d == math.MaxInt64 {
		return Value{}, errors.New("random range is too large")
	}
	if name == "random" {
		return Int(uniform(e.rng, lo, hi)), nil
	}
	param, err := toDouble(a[2])
	if err != nil {
		return Value{}, err
	}
	switch name {
	case "random_gaussian":
		if param < minGaussianParam {
			return Value{}, fmt.Errorf("gaussian parameter must be at least %f (not %f)", minGaussianParam, param)
		}
		return Int(gaussian(e.rng, lo, hi, param)), nil
	case "random_zipfian":
		if param < minZipfianParam || param > maxZipfianParam {
			return Value{}, fmt.Errorf("zipfian parameter must be in range [%.3f, %.0f] (not %f)", minZipfianParam, maxZipfianParam, param)
		}
		return Int(zipfian(e.rng, lo, hi, param)), nil
	default: // random_exponential
		if param <= 0 {
			return Value{}, fmt.Errorf("exponential parameter must be greater than zero (not %f)", param)
		}
		return Int(exponential(e.rng, lo, hi, param)), nil
	}
}

// uniform is pgbench's getrand: an integer in [lo, hi], each equally likely.
func uniform(r *rand.Rand, lo, hi int64) int64 {
	return lo + int64(r.Uint64N(uint64(hi-lo)+1))
}

// exponential is pgbench's getExponentialRand.
func exponential(r *rand.Rand, lo, hi int64, param float64) int64 {
	cut := math.Exp(-param)
	u := 1.0 - r.Float64() // (0, 1]
	x := -math.Log(cut+(1.0-cut)*u) / param
	return lo + int64(float64(hi-lo+1)*x)
}

// gaussian is pgbench's getGaussianRand (Box-Muller, rejecting draws
// beyond param standard deviations).
func gaussian(r *rand.Rand, lo, hi int64, param float64) int64 {
	var stdev float64
	for {
		r1 := 1.0 - r.Float64() // (0, 1]: log is finite
		r2 := r.Float64()
		stdev = math.Sqrt(-2.0*math.Log(r1)) * math.Sin(2.0*math.Pi*r2)
		if stdev >= -param && stdev < param {
			break
		}
	}
	x := (stdev + param) / (param * 2.0)
	return lo + int64(float64(hi-lo+1)*x)
}

// zipfian is pgbench's getZipfianRand: the rejection method of Devroye,
// "Non-Uniform Random Variate Generation" (Springer 1986), pp. 550-551,
// which pgbench's computeIterativeZipfian implements.
func zipfian(r *rand.Rand, lo, hi int64, s float64) int64 {
	n := hi - lo + 1
	if n <= 1 {
		return lo
	}
	b := math.Pow(2.0, s-1.0)
	var x float64
	for {
		u := r.Float64()
		v := r.Float64()
		x = math.Floor(math.Pow(u, -1.0/(s-1.0)))
		t := math.Pow(1.0+1.0/x, s-1.0)
		if v*x*(t-1.0)/(b-1.0) <= t/b && x <= float64(n) {
			break
		}
	}
	return lo - 1 + int64(x)
}
