package pgscript

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Conn runs a script's SQL statements on one connection.
type Conn interface {
	// Exec runs sql with args (one per $n) and discards what it returns.
	Exec(ctx context.Context, sql string, args []any) error
	// Query runs sql with args and returns its column names, the values
	// of its last row, and its number of rows (for \gset).
	Query(ctx context.Context, sql string, args []any) (names []string, last []any, rows int, err error)
}

// Options tunes parsing.
type Options struct {
	// Builtins are the variables the caller binds on every run, in this
	// order; Run takes their values in the same order.
	Builtins []string
	// Define sets variables to the same value on every run, as pgbench's
	// -D NAME=VALUE does (a shipped script's class parameters: a batch
	// size, a sleep).
	Define map[string]Value
}

// Script is a parsed script, safe to run from many goroutines at once.
type Script struct {
	// File is the path the script was parsed from.
	File  string
	cmds  []command
	slots map[string]int
	names []string
	nb    int
	// defines are Options.Define's slots and values.
	defines []define
}

type define struct {
	slot int
	v    Value
}

type cmdKind uint8

const (
	cmdSQL cmdKind = iota
	cmdSet
	cmdSleep
	cmdRepeat
	cmdEndRepeat
)

// command is one SQL statement or meta-command.
type command struct {
	kind cmdKind
	line int
	// SQL: the statement with $n for each :variable, the slot of each
	// $n, the expressions of an inline statement's arguments, and \gset.
	sql    string
	params []int
	args   []expr
	gset   bool
	prefix string
	// \set: the slot assigned and its expression.
	slot int
	expr expr
	// \sleep: a literal count or the slot of a variable, and the unit.
	count     int64
	countSlot int // -1: literal
	unit      time.Duration
	// \repeat: the count is expr; jump is the index of the matching
	// \endrepeat (and the \endrepeat's, of its \repeat).
	jump int
}

// Statements returns the script's SQL statements as sent to the server,
// with $n for variables, in order.
func (s *Script) Statements() []string {
	var out []string
	for _, c := range s.cmds {
		if c.kind == cmdSQL {
			out = append(out, c.sql)
		}
	}
	return out
}

// ParseFile reads and parses the script at path.
func ParseFile(path string, opts Options) (*Script, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		var pe *os.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, &Error{File: path, Msg: "read script: " + msg, Kind: ErrSyntax}
	}
	return Parse(src, path, opts)
}

var varName = regexp.MustCompile(`^[A-Za-z0-9_\x80-\xff]+$`)

// parser holds a parse's state.
type parser struct {
	s *Script
	// known: the variables set before the current command; prefixes: the
	// \gset prefixes before it ("" sets any name).
	known    map[string]bool
	prefixes []string
	// missed is the last name resolve did not know, for a suggestion.
	missed string
	// open are the indexes of the \repeat commands not yet closed.
	open []int
}

func newParser(file string, opts Options) (*parser, error) {
	s := &Script{File: file, slots: map[string]int{}}
	p := &parser{s: s, known: map[string]bool{}}
	for _, b := range opts.Builtins {
		if !varName.MatchString(b) {
			return nil, fmt.Errorf("pgscript: builtin %q is not a variable name", b)
		}
		p.slot(b)
		p.known[b] = true
	}
	s.nb = len(s.names)
	names := make([]string, 0, len(opts.Define))
	for name := range opts.Define {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !varName.MatchString(name) {
			return nil, fmt.Errorf("pgscript: define %q is not a variable name", name)
		}
		if p.known[name] {
			return nil, fmt.Errorf("pgscript: define %q is also a builtin", name)
		}
		s.defines = append(s.defines, define{slot: p.slot(name), v: opts.Define[name]})
		p.known[name] = true
	}
	return p, nil
}

func (p *parser) slot(name string) int {
	if i, ok := p.s.slots[name]; ok {
		return i
	}
	p.s.slots[name] = len(p.s.names)
	p.s.names = append(p.s.names, name)
	return len(p.s.names) - 1
}

// resolve gives the slot of a variable set before this point.
func (p *parser) resolve(name string) (int, bool) {
	if p.known[name] {
		return p.slot(name), true
	}
	for _, pre := range p.prefixes {
		if strings.HasPrefix(name, pre) {
			return p.slot(name), true
		}
	}
	p.missed = name
	return 0, false
}

// hint returns "; did you mean :x?" for the known variable closest to the
// last name resolve missed (at most 2 edits), or "".
func (p *parser) hint() string {
	best, bestD := "", 3
	for k := range p.known {
		if d := distance(p.missed, k); d < bestD || d == bestD && k < best {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean :" + best + "?"
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Parse parses a script; file names it in errors. Every problem is an
// *Error with the file:line:col of the command.
func Parse(src []byte, file string, opts Options) (*Script, error) {
	p, err := newParser(file, opts)
	if err != nil {
		return nil, err
	}
	pieces, perr := split(string(src))
	if perr != nil {
		return nil, &Error{File: file, Line: perr.line, Col: perr.col, Msg: perr.msg, Kind: perr.kind}
	}
	for _, pc := range pieces {
		if err := p.piece(pc); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Kind == ErrUnknownVariable {
				e.Msg += p.hint()
			}
			return nil, err
		}
	}
	if n := len(p.open); n > 0 {
		c := p.s.cmds[p.open[n-1]]
		return nil, &Error{File: file, Line: c.line, Col: 1, Msg: `\repeat has no matching \endrepeat`, Kind: ErrSyntax}
	}
	if len(p.s.cmds) == 0 {
		return nil, &Error{File: file, Msg: "the script has no SQL statement or meta-command", Kind: ErrSyntax}
	}
	return p.s, nil
}

// ParseStatement parses one SQL statement with $1..$n placeholders and
// one pgbench expression per placeholder (an inline class: sql plus args).
// file and line place it in errors; argLines, when given, are the lines of
// each argument.
func ParseStatement(sql string, args []string, file string, line int, argLines []int, opts Options) (*Script, error) {
	p, err := newParser(file, opts)
	if err != nil {
		return nil, err
	}
	c := command{kind: cmdSQL, line: line, sql: strings.TrimSpace(sql)}
	if c.sql == "" {
		return nil, &Error{File: file, Line: line, Msg: "empty SQL statement", Kind: ErrSyntax}
	}
	for i, a := range args {
		l := line
		if i < len(argLines) {
			l = argLines[i]
		}
		e, perr, kind := parseExpr(a, 1, p.resolve)
		if perr != nil {
			msg := fmt.Sprintf("args[%d]: %s", i, perr.msg)
			if kind == ErrUnknownVariable {
				msg += p.hint()
			}
			return nil, &Error{File: file, Line: l, Msg: msg, Kind: kind}
		}
		c.args = append(c.args, e)
	}
	p.s.cmds = append(p.s.cmds, c)
	return p.s, nil
}

// piece turns one split piece into a command.
func (p *parser) piece(pc piece) error {
	fail := func(col int, kind error, format string, args ...any) error {
		return &Error{File: p.s.File, Line: pc.line, Col: col, Msg: fmt.Sprintf(format, args...), Kind: kind}
	}
	if !pc.meta {
		sql, params, perr := rewrite(pc.text, pc.line, pc.col, p.resolve)
		if perr != nil {
			return &Error{File: p.s.File, Line: perr.line, Col: perr.col, Msg: perr.msg, Kind: perr.kind}
		}
		p.s.cmds = append(p.s.cmds, command{kind: cmdSQL, line: pc.line, sql: sql, params: params})
		return nil
	}
	// pc.text is the meta-command without its backslash.
	name, rest := pc.text, ""
	if i := strings.IndexAny(name, " \t\r\n"); i >= 0 {
		name, rest = name[:i], name[i:]
	}
	argCol := pc.col + 1 + len(name) + (len(rest) - len(strings.TrimLeft(rest, " \t\r\n")))
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(name) {
	case "set":
		v, exprSrc := rest, ""
		if i := strings.IndexAny(rest, " \t\r\n"); i >= 0 {
			v, exprSrc = rest[:i], rest[i:]
		}
		if v == "" {
			return fail(pc.col, ErrSyntax, `\set needs a variable name and an expression`)
		}
		if !varName.MatchString(v) {
			return fail(argCol, ErrSyntax, `\set: invalid variable name %q`, v)
		}
		col := argCol + len(v) + (len(exprSrc) - len(strings.TrimLeft(exprSrc, " \t\r\n")))
		e, perr, kind := parseExpr(strings.TrimSpace(exprSrc), col, p.resolve)
		if perr != nil {
			return fail(perr.col, kind, `\set %s: %s`, v, perr.msg)
		}
		p.s.cmds = append(p.s.cmds, command{kind: cmdSet, line: pc.line, slot: p.slot(v), expr: e})
		p.known[v] = true
	case "sleep":
		f := strings.Fields(rest)
		if len(f) < 1 || len(f) > 2 {
			return fail(pc.col, ErrSyntax, `\sleep needs a number or :variable and an optional unit us, ms or s`)
		}
		c := command{kind: cmdSleep, line: pc.line, countSlot: -1, unit: time.Second}
		if strings.HasPrefix(f[0], ":") {
			slot, ok := p.resolve(f[0][1:])
			if !ok {
				return fail(argCol, ErrUnknownVariable, `\sleep: unknown variable %s: no \set, \gset or noisysim builtin sets it before this line`, f[0])
			}
			c.countSlot = slot
		} else {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || n < 0 {
				return fail(argCol, ErrSyntax, `\sleep: %q is not a whole number >= 0 or a :variable`, f[0])
			}
			c.count = n
		}
		if len(f) == 2 {
			switch strings.ToLower(f[1]) {
			case "us":
				c.unit = time.Microsecond
			case "ms":
				c.unit = time.Millisecond
			case "s":
				c.unit = time.Second
			default:
				return fail(pc.col, ErrSyntax, `\sleep: unknown unit %q; want us, ms or s`, f[1])
			}
		}
		p.s.cmds = append(p.s.cmds, c)
	case "gset":
		f := strings.Fields(rest)
		if len(f) > 1 {
			return fail(argCol, ErrSyntax, `\gset takes at most one prefix`)
		}
		n := len(p.s.cmds)
		if n == 0 || p.s.cmds[n-1].kind != cmdSQL {
			return fail(pc.col, ErrSyntax, `\gset must follow an SQL command`)
		}
		if p.s.cmds[n-1].gset {
			return fail(pc.col, ErrSyntax, `\gset cannot follow another \gset`)
		}
		prefix := ""
		if len(f) == 1 {
			if !varName.MatchString(f[0]) {
				return fail(argCol, ErrSyntax, `\gset: invalid prefix %q`, f[0])
			}
			prefix = f[0]
		}
		p.s.cmds[n-1].gset, p.s.cmds[n-1].prefix = true, prefix
		p.prefixes = append(p.prefixes, prefix)
	case "repeat":
		if rest == "" {
			return fail(pc.col, ErrSyntax, `\repeat needs an expression: how many times to run the commands up to \endrepeat`)
		}
		e, perr, kind := parseExpr(rest, argCol, p.resolve)
		if perr != nil {
			return fail(perr.col, kind, `\repeat: %s`, perr.msg)
		}
		p.open = append(p.open, len(p.s.cmds))
		p.s.cmds = append(p.s.cmds, command{kind: cmdRepeat, line: pc.line, expr: e})
	case "endrepeat":
		if rest != "" {
			return fail(argCol, ErrSyntax, `\endrepeat takes no argument`)
		}
		n := len(p.open)
		if n == 0 {
			return fail(pc.col, ErrSyntax, `\endrepeat without \repeat`)
		}
		start := p.open[n-1]
		p.open = p.open[:n-1]
		p.s.cmds[start].jump = len(p.s.cmds)
		p.s.cmds = append(p.s.cmds, command{kind: cmdEndRepeat, line: pc.line, jump: start})
	default:
		return fail(pc.col, ErrUnsupported, `meta-command \%s is not supported by noisysim (it runs \set, \sleep, \gset and \repeat)`, name)
	}
	return nil
}

// Run runs the script once on c: builtins are the values of
// Options.Builtins, in order; rng draws the random functions. It stops at
// the first error: a statement's error as the Conn returns it, wrapped
// with the script's file:line; an expression's error (division by zero,
// an empty random range, ...) as an *Error. A transaction left open by an
// error is the caller's to roll back.
func (s *Script) Run(ctx context.Context, c Conn, rng *rand.Rand, builtins []Value) error {
	if len(builtins) != s.nb {
		return fmt.Errorf("pgscript: %s takes %d builtins, got %d", s.File, s.nb, len(builtins))
	}
	e := s.newEnv(rng, builtins)
	// left counts down the runs of each open \repeat, innermost last.
	var left []int64
	for i := 0; i < len(s.cmds); i++ {
		cmd := &s.cmds[i]
		switch cmd.kind {
		case cmdRepeat:
			v, err := cmd.expr(e)
			if err == nil {
				v, err = v.number()
			}
			if err == nil && (v.k != kindInt || v.i < 0) {
				err = fmt.Errorf(`\repeat: count %s is not a whole number >= 0`, v.String())
			}
			if err != nil {
				return s.runErr(cmd, err)
			}
			if v.i == 0 {
				i = cmd.jump // past the \endrepeat
				continue
			}
			left = append(left, v.i)
		case cmdEndRepeat:
			if err := ctx.Err(); err != nil {
				return err
			}
			if left[len(left)-1]--; left[len(left)-1] > 0 {
				i = cmd.jump // the loop's first command next
			} else {
				left = left[:len(left)-1]
			}
		default:
			if err := s.exec(ctx, c, e, cmd); err != nil {
				return err
			}
		}
	}
	return nil
}

// newEnv returns a run's variables: builtins, then the defines.
func (s *Script) newEnv(rng *rand.Rand, builtins []Value) *env {
	e := &env{vars: make([]Value, len(s.names)), rng: rng, names: s.names}
	copy(e.vars, builtins)
	for _, d := range s.defines {
		e.vars[d.slot] = d.v
	}
	return e
}

func (s *Script) runErr(cmd *command, err error) error {
	return &Error{File: s.File, Line: cmd.line, Msg: err.Error()}
}

func (s *Script) exec(ctx context.Context, c Conn, e *env, cmd *command) error {
	switch cmd.kind {
	case cmdSet:
		v, err := cmd.expr(e)
		if err != nil {
			return s.runErr(cmd, err)
		}
		e.vars[cmd.slot] = v
	case cmdSleep:
		n := cmd.count
		if cmd.countSlot >= 0 {
			v, err := e.vars[cmd.countSlot].number()
			if err == nil && v.k != kindInt {
				err = fmt.Errorf("invalid sleep time %q for variable :%s", e.vars[cmd.countSlot].String(), s.names[cmd.countSlot])
			}
			if err != nil {
				return s.runErr(cmd, err)
			}
			n = v.i
		}
		t := time.NewTimer(time.Duration(n) * cmd.unit)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	case cmdSQL:
		args, err := s.args(e, cmd)
		if err != nil {
			return err
		}
		if !cmd.gset {
			if err := c.Exec(ctx, cmd.sql, args); err != nil {
				return fmt.Errorf("%s:%d: %w", s.File, cmd.line, err)
			}
			return nil
		}
		names, last, n, err := c.Query(ctx, cmd.sql, args)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", s.File, cmd.line, err)
		}
		if n != 1 {
			return s.runErr(cmd, fmt.Errorf(`\gset: expected one row, got %d`, n))
		}
		for i, name := range names {
			if slot, ok := s.slots[cmd.prefix+name]; ok && i < len(last) {
				e.vars[slot] = FromAny(last[i])
			}
		}
	}
	return nil
}

// Single returns, for a script that is one SQL statement without \gset,
// preceded by \set commands only (an inline class, or a one-query script),
// that statement and its arguments after running the \set commands; ok is
// false for any other script, which Run must run. It lets a caller send
// the statement in one round trip with whatever it sends beside it.
func (s *Script) Single(rng *rand.Rand, builtins []Value) (sql string, args []any, ok bool, err error) {
	if !s.single() {
		return "", nil, false, nil
	}
	if len(builtins) != s.nb {
		return "", nil, false, s.builtinsErr(len(builtins))
	}
	e := s.newEnv(rng, builtins)
	var buf [8]Value
	sql, vals, err := s.draw(e, buf[:0])
	if err != nil {
		return "", nil, false, err
	}
	args = make([]any, len(vals))
	for i, v := range vals {
		args[i] = v.Any()
	}
	return sql, args, true, nil
}

// single reports whether s is one SQL statement without \gset preceded by
// \set commands only (see Single).
func (s *Script) single() bool {
	last := len(s.cmds) - 1
	if last < 0 || s.cmds[last].kind != cmdSQL || s.cmds[last].gset {
		return false
	}
	for _, c := range s.cmds[:last] {
		if c.kind != cmdSet {
			return false
		}
	}
	return true
}

func (s *Script) builtinsErr(n int) error {
	return fmt.Errorf("pgscript: %s takes %d builtins, got %d", s.File, s.nb, n)
}

// draw runs a single script's \set commands in e and appends its
// statement's arguments to dst.
func (s *Script) draw(e *env, dst []Value) (string, []Value, error) {
	last := len(s.cmds) - 1
	for i := range s.cmds[:last] {
		if err := s.exec(context.Background(), nil, e, &s.cmds[i]); err != nil {
			return "", dst, err
		}
	}
	cmd := &s.cmds[last]
	dst, err := s.appendArgs(e, cmd, dst)
	return cmd.sql, dst, err
}

// Drawer draws a single script's statement (see Single) again and again on
// one goroutine, reusing its variables and arguments: no allocation per
// draw.
type Drawer struct {
	s    *Script
	e    env
	args []Value
}

// Drawer returns a Drawer of s, or nil and false if s is not a single
// statement (see Single).
func (s *Script) Drawer() (*Drawer, bool) {
	if !s.single() {
		return nil, false
	}
	return &Drawer{s: s, e: env{vars: make([]Value, len(s.names)), names: s.names}}, true
}

// Draw returns what Single returns for the same rng and builtins, the
// arguments as Values (valid until the next Draw) instead of []any.
func (d *Drawer) Draw(rng *rand.Rand, builtins []Value) (sql string, args []Value, err error) {
	s := d.s
	if len(builtins) != s.nb {
		return "", nil, s.builtinsErr(len(builtins))
	}
	d.e.rng = rng
	copy(d.e.vars, builtins)
	clear(d.e.vars[len(builtins):])
	for _, df := range s.defines {
		d.e.vars[df.slot] = df.v
	}
	sql, d.args, err = s.draw(&d.e, d.args[:0])
	return sql, d.args, err
}

// args evaluates a SQL command's bind arguments.
func (s *Script) args(e *env, cmd *command) ([]any, error) {
	var buf [8]Value
	vals, err := s.appendArgs(e, cmd, buf[:0])
	if err != nil {
		return nil, err
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v.Any()
	}
	return args, nil
}

// appendArgs appends a SQL command's bind arguments to dst.
func (s *Script) appendArgs(e *env, cmd *command, dst []Value) ([]Value, error) {
	for _, slot := range cmd.params {
		v := e.vars[slot]
		if !v.Set() {
			return dst, s.runErr(cmd, fmt.Errorf("undefined variable :%s", s.names[slot]))
		}
		dst = append(dst, v)
	}
	for _, a := range cmd.args {
		v, err := a(e)
		if err != nil {
			return dst, s.runErr(cmd, err)
		}
		dst = append(dst, v)
	}
	return dst, nil
}
