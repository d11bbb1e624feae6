package pgscript

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// kind is a Value's type; the zero kind is "not set".
type kind uint8

const (
	kindUnset kind = iota
	kindNull
	kindBool
	kindInt
	kindDouble
	kindText
)

// Value is a script variable's value: NULL, a boolean, a 64-bit integer, a
// double or a text. The zero Value is "not set".
type Value struct {
	k kind
	i int64
	f float64
	s string
}

// Int returns an integer value.
func Int(i int64) Value { return Value{k: kindInt, i: i} }

// Double returns a double value.
func Double(f float64) Value { return Value{k: kindDouble, f: f} }

// Text returns a text value (a tenant key, a column read by \gset). In an
// expression it reads as pgbench reads a variable's string: null, true or
// false, an integer, a double, or else an error.
func Text(s string) Value { return Value{k: kindText, s: s} }

// Bool returns a boolean value.
func Bool(b bool) Value {
	v := Value{k: kindBool}
	if b {
		v.i = 1
	}
	return v
}

// Null returns the NULL value.
func Null() Value { return Value{k: kindNull} }

// Set reports whether v holds a value.
func (v Value) Set() bool { return v.k != kindUnset }

// Any returns v as a bind argument: int64, float64, string, bool or nil.
func (v Value) Any() any {
	switch v.k {
	case kindInt:
		return v.i
	case kindDouble:
		return v.f
	case kindText:
		return v.s
	case kindBool:
		return v.i != 0
	}
	return nil
}

// String formats v as pgbench prints it.
func (v Value) String() string {
	switch v.k {
	case kindInt:
		return strconv.FormatInt(v.i, 10)
	case kindDouble:
		return strconv.FormatFloat(v.f, 'g', 15, 64)
	case kindText:
		return v.s
	case kindBool:
		return strconv.FormatBool(v.i != 0)
	case kindNull:
		return "null"
	}
	return "<unset>"
}

// AppendText appends String's form of v to b.
func (v Value) AppendText(b []byte) []byte {
	switch v.k {
	case kindInt:
		return strconv.AppendInt(b, v.i, 10)
	case kindDouble:
		return strconv.AppendFloat(b, v.f, 'g', 15, 64)
	case kindBool:
		return strconv.AppendBool(b, v.i != 0)
	}
	return append(b, v.String()...)
}

// FromAny converts a column value as a driver returns it (integers,
// floats, string, bool, nil, or anything with a String or text form) into
// a Value for \gset.
func FromAny(x any) Value {
	switch t := x.(type) {
	case nil:
		return Null()
	case int64:
		return Int(t)
	case int32:
		return Int(int64(t))
	case int16:
		return Int(int64(t))
	case int8:
		return Int(int64(t))
	case int:
		return Int(int64(t))
	case float64:
		return Double(t)
	case float32:
		return Double(float64(t))
	case string:
		return Text(t)
	case bool:
		return Bool(t)
	case []byte:
		return Text(string(t))
	case fmt.Stringer:
		return Text(t.String())
	}
	return Text(fmt.Sprint(x))
}

// typeName names v's type as pgbench's messages do.
func (v Value) typeName() string {
	switch v.k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindInt:
		return "int"
	case kindDouble:
		return "double"
	case kindText:
		return "text"
	}
	return "none"
}

// number returns v as pgbench's expression evaluator sees it: a text is
// read as null, a boolean, an integer or a double (pgbench's
// makeVariableValue).
func (v Value) number() (Value, error) {
	if v.k != kindText {
		return v, nil
	}
	s := v.s
	l := strings.ToLower(s)
	prefixOf := func(word string) bool { return l != "" && strings.HasPrefix(word, l) }
	switch {
	case s == "":
		return v, errors.New("malformed variable value \"\": empty")
	case l == "null":
		return Null(), nil
	// pgbench accepts prefixes of true, yes, false and no (not "o").
	case prefixOf("true") || prefixOf("yes") || l == "on":
		return Bool(true), nil
	case prefixOf("false") || prefixOf("no") || l == "off" || l == "of":
		return Bool(false), nil
	}
	s = strings.TrimSpace(s)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return Int(i), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return Double(f), nil
	}
	return v, fmt.Errorf("malformed variable value %q: not a number, boolean or null", v.s)
}

// Sentinels the *Error of a parse matches (errors.Is).
var (
	// ErrSyntax: a SQL or expression syntax error.
	ErrSyntax = errors.New("syntax error")
	// ErrUnsupported: a meta-command or function noisysim does not run.
	ErrUnsupported = errors.New("not supported by noisysim")
	// ErrUnknownVariable: a :variable nothing sets before its use.
	ErrUnknownVariable = errors.New("unknown variable")
)

// Error is a problem in a script, at File:Line:Col (Col 0 when the line
// says enough).
type Error struct {
	File      string
	Line, Col int
	Msg       string
	// Kind is ErrSyntax, ErrUnsupported or ErrUnknownVariable; nil for an
	// error while running.
	Kind error
}

// Error returns "file:line:col: msg".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }
