package pgscript

import (
	"fmt"
	"strconv"
	"strings"
)

// piece is one SQL statement (without its ';') or one meta-command
// (without its backslash) of a script, with where it starts.
type piece struct {
	meta      bool
	text      string
	line, col int
	// afterSQL: a meta-command that ends the SQL statement before it in
	// place of its ';' (\gset).
	afterSQL bool
}

// splitErr is a problem found while splitting.
type splitErr struct {
	line, col int
	msg       string
	kind      error
}

// cursor walks a text keeping its line and column.
type cursor struct {
	src       string
	i         int
	line, col int
}

func (c *cursor) eof() bool { return c.i >= len(c.src) }
func (c *cursor) at(k int) byte {
	if c.i+k < len(c.src) {
		return c.src[c.i+k]
	}
	return 0
}
func (c *cursor) advance(n int) {
	for ; n > 0 && c.i < len(c.src); n-- {
		if c.src[c.i] == '\n' {
			c.line, c.col = c.line+1, 1
		} else {
			c.col++
		}
		c.i++
	}
}

// skipQuoted advances past a quoted literal, a comment or a dollar quote
// starting at the cursor and reports whether there was one; an
// unterminated one is an error.
func (c *cursor) skipQuoted() (bool, *splitErr) {
	line, col := c.line, c.col
	unterminated := func(what string) *splitErr {
		return &splitErr{line, col, "unterminated " + what, ErrSyntax}
	}
	switch ch := c.at(0); {
	case ch == '-' && c.at(1) == '-':
		for !c.eof() && c.at(0) != '\n' {
			c.advance(1)
		}
		return true, nil
	case ch == '/' && c.at(1) == '*':
		c.advance(2)
		for depth := 1; depth > 0; {
			switch {
			case c.eof():
				return true, unterminated("/* comment")
			case c.at(0) == '*' && c.at(1) == '/':
				depth--
				c.advance(2)
			case c.at(0) == '/' && c.at(1) == '*':
				depth++
				c.advance(2)
			default:
				c.advance(1)
			}
		}
		return true, nil
	case ch == '\'' || ch == '"':
		escapes := ch == '\'' && c.i > 0 && (c.src[c.i-1] == 'E' || c.src[c.i-1] == 'e') &&
			(c.i < 2 || !isNameByte(c.src[c.i-2]))
		c.advance(1)
		for {
			switch {
			case c.eof():
				if ch == '"' {
					return true, unterminated("quoted identifier")
				}
				return true, unterminated("quoted string")
			case escapes && c.at(0) == '\\':
				c.advance(2)
			case c.at(0) == ch && c.at(1) == ch:
				c.advance(2)
			case c.at(0) == ch:
				c.advance(1)
				return true, nil
			default:
				c.advance(1)
			}
		}
	case ch == '$' && (c.i == 0 || !isNameByte(c.src[c.i-1])):
		j := c.i + 1
		for j < len(c.src) && (isNameStart(c.src[j]) || j > c.i+1 && isDigit(c.src[j])) {
			j++
		}
		if j >= len(c.src) || c.src[j] != '$' {
			return false, nil // $1 or a stray $
		}
		tag := c.src[c.i : j+1]
		c.advance(len(tag))
		end := strings.Index(c.src[c.i:], tag)
		if end < 0 {
			c.advance(len(c.src))
			return true, unterminated("dollar-quoted string " + tag)
		}
		c.advance(end + len(tag))
		return true, nil
	}
	return false, nil
}

// split cuts a script into SQL statements and meta-commands.
func split(src string) ([]piece, *splitErr) {
	c := &cursor{src: src, line: 1, col: 1}
	var out []piece
	for {
		// Skip blanks and comments between commands.
		for !c.eof() {
			if ch := c.at(0); ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == ';' {
				c.advance(1)
				continue
			}
			if (c.at(0) == '-' && c.at(1) == '-') || (c.at(0) == '/' && c.at(1) == '*') {
				if _, err := c.skipQuoted(); err != nil {
					return nil, err
				}
				continue
			}
			break
		}
		if c.eof() {
			return out, nil
		}
		if c.at(0) == '\\' {
			out = append(out, c.meta(false))
			continue
		}
		start, line, col := c.i, c.line, c.col
		depth, ended := 0, false
		for !c.eof() && !ended {
			skipped, err := c.skipQuoted()
			if err != nil {
				return nil, err
			}
			if skipped {
				continue
			}
			switch c.at(0) {
			case '(':
				depth++
			case ')':
				depth--
			case ';':
				if depth <= 0 {
					ended = true
					continue
				}
			case '\\':
				if c.at(1) == ';' {
					return nil, &splitErr{c.line, c.col, `"\;" (several statements in one command) is not supported by noisysim: end each statement with ";"`, ErrUnsupported}
				}
				out = append(out, piece{text: strings.TrimSpace(src[start:c.i]), line: line, col: col})
				out = append(out, c.meta(true))
				start = -1
				ended = true
				continue
			}
			c.advance(1)
		}
		if start >= 0 {
			out = append(out, piece{text: strings.TrimSpace(src[start:c.i]), line: line, col: col})
			c.advance(1) // the ';'
		}
	}
}

// meta reads a meta-command from the backslash to the end of its line; a
// backslash ending a line continues it on the next.
func (c *cursor) meta(afterSQL bool) piece {
	p := piece{meta: true, line: c.line, col: c.col, afterSQL: afterSQL}
	c.advance(1)
	var b strings.Builder
	for !c.eof() && c.at(0) != '\n' {
		if c.at(0) == '\\' && (c.at(1) == '\n' || c.at(1) == '\r' && c.at(2) == '\n') {
			b.WriteByte(' ')
			for c.at(0) != '\n' {
				c.advance(1)
			}
			c.advance(1)
			continue
		}
		b.WriteByte(c.at(0))
		c.advance(1)
	}
	p.text = strings.TrimRight(b.String(), " \t\r")
	return p
}

// rewrite replaces each :variable of a SQL statement (outside quotes and
// comments; "::" is a cast) with $1, $2, ... and returns the slot of each.
// line and col place sql's first byte.
func rewrite(sql string, line, col int, resolve resolver) (string, []int, *splitErr) {
	c := &cursor{src: sql, line: line, col: col}
	var b strings.Builder
	var params []int
	last := 0
	for !c.eof() {
		skipped, err := c.skipQuoted()
		if err != nil {
			return "", nil, err
		}
		if skipped {
			continue
		}
		if c.at(0) != ':' {
			c.advance(1)
			continue
		}
		if c.at(1) == ':' {
			for c.at(0) == ':' {
				c.advance(1)
			}
			continue
		}
		j := c.i + 1
		if j >= len(sql) || !isNameStart(sql[j]) {
			c.advance(1)
			continue
		}
		for j < len(sql) && isNameByte(sql[j]) {
			j++
		}
		name := sql[c.i+1 : j]
		slot, ok := resolve(name)
		if !ok {
			return "", nil, &splitErr{c.line, c.col, fmt.Sprintf("unknown variable :%s: no \\set, \\gset or noisysim builtin sets it before this statement", name), ErrUnknownVariable}
		}
		params = append(params, slot)
		b.WriteString(sql[last:c.i])
		b.WriteString("$" + strconv.Itoa(len(params)))
		c.advance(j - c.i)
		last = c.i
	}
	b.WriteString(sql[last:])
	return b.String(), params, nil
}

// Statement is one SQL statement of a plain SQL file, where it starts.
type Statement struct {
	SQL       string
	Line, Col int
}

// SplitSQL cuts a plain SQL file (a setup file) into its statements at
// each ';' outside quotes, comments, dollar quotes and parentheses. A
// backslash command (psql's \copy, ...) is an *Error of kind
// ErrUnsupported; an unterminated quote or comment one of kind ErrSyntax.
func SplitSQL(src []byte, file string) ([]Statement, error) {
	pieces, perr := split(string(src))
	if perr != nil {
		return nil, &Error{File: file, Line: perr.line, Col: perr.col, Msg: perr.msg, Kind: perr.kind}
	}
	var out []Statement
	for _, p := range pieces {
		if p.meta {
			name, _, _ := strings.Cut(p.text, " ")
			return nil, &Error{File: file, Line: p.line, Col: p.col, Kind: ErrUnsupported,
				Msg: fmt.Sprintf(`\%s: a setup file is plain SQL, run statement by statement; noisysim runs no psql meta-commands`, name)}
		}
		if p.text != "" {
			out = append(out, Statement{SQL: p.text, Line: p.line, Col: p.col})
		}
	}
	return out, nil
}
