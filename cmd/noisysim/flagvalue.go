package main

import (
	"flag"
	"fmt"
	"time"
)

// badValue is a flag value that did not parse: which flag, what was given
// and what the flag accepts.
type badValue struct {
	name, value, want, why string
}

func (b *badValue) Error() string {
	msg := fmt.Sprintf("--%s %q: want %s", b.name, b.value, b.want)
	if b.why != "" {
		msg += " (" + b.why + ")"
	}
	return msg
}

// explained wraps a flag of a built-in type while its flag set parses:
// the flag package says only "parse error" for a value that is not a
// number or a duration; explained records what the flag accepts instead.
type explained struct {
	flag.Value
	name, usage, want string
	bad               **badValue
}

func (e explained) Set(s string) error {
	err := e.Value.Set(s)
	if err != nil && *e.bad == nil {
		why := e.usage
		if err.Error() != "parse error" {
			why = err.Error() // "value out of range"
		}
		*e.bad = &badValue{name: e.name, value: s, want: e.want, why: why}
	}
	return err
}

// IsBoolFlag keeps a bool flag's --name (no value) working while wrapped.
func (e explained) IsBoolFlag() bool {
	b, ok := e.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// explainValues wraps each flag of fs whose value is a number, a duration
// or a bool (the flag package's own types) in explained, and returns a
// function that restores them (the usage names their types by the flag
// package's own) and the first value that did not parse.
func explainValues(fs *flag.FlagSet) (restore func() *badValue) {
	var bad *badValue
	var wrapped []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var want string
		switch g.Get().(type) {
		case time.Duration:
			want = "a duration with a unit (ms, s, m or h), e.g. 500ms, 90s, 10m or 1h30m"
		case int, int64:
			want = "a whole number"
		case uint, uint64:
			want = "a whole number ≥ 0"
		case float64:
			want = "a number"
		case bool:
			want = "true or false (or the flag alone for true)"
		default:
			return
		}
		f.Value = explained{Value: f.Value, name: f.Name, usage: f.Usage, want: want, bad: &bad}
		wrapped = append(wrapped, f)
	})
	return func() *badValue {
		for _, f := range wrapped {
			f.Value = f.Value.(explained).Value
		}
		return bad
	}
}
