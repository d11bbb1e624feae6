package sweep

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// DefaultSteps is the number of points of a range LO..HI given without
// :STEPS or *FACTOR.
const DefaultSteps = 5

// MaxPoints bounds the values of one --vary and the points of a sweep.
const MaxPoints = 1000

// Vary is one --vary KEY=LO..HI[:STEPS|*FACTOR] (or KEY=V, one value).
type Vary struct {
	Key    string
	Lo, Hi float64
	// Steps is the number of evenly spaced points from Lo to Hi (both
	// included); Factor, when not 0, replaces it: Lo, Lo×Factor, … up to Hi.
	Steps  int
	Factor float64
}

// String returns v as it is written on the command line.
func (v Vary) String() string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	s := v.Key + "=" + f(v.Lo)
	if v.Lo == v.Hi && v.Factor == 0 && v.Steps == 1 {
		return s
	}
	s += ".." + f(v.Hi)
	if v.Factor != 0 {
		return s + "*" + f(v.Factor)
	}
	return s + ":" + strconv.Itoa(v.Steps)
}

// ParseVary parses KEY=LO..HI[:STEPS|*FACTOR] or KEY=V. Errors match
// ErrBadInput and name what is wrong.
func ParseVary(s string) (Vary, error) {
	key, spec, ok := strings.Cut(s, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" || spec == "" {
		return Vary{}, badf("--vary %q: want KEY=LO..HI[:STEPS|*FACTOR], e.g. classes.report.rate=6..48*2", s)
	}
	num := func(what, x string) (float64, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, badf("--vary %s: %s %q is not a number", key, what, x)
		}
		return f, nil
	}
	lo, hi, isRange := strings.Cut(spec, "..")
	if !isRange {
		v, err := num("value", spec)
		return Vary{Key: key, Lo: v, Hi: v, Steps: 1}, err
	}
	v := Vary{Key: key, Steps: DefaultSteps}
	var err error
	if v.Lo, err = num("LO", lo); err != nil {
		return Vary{}, err
	}
	if h, f, ok := strings.Cut(hi, "*"); ok {
		if v.Factor, err = num("FACTOR", f); err != nil {
			return Vary{}, err
		}
		if !(v.Factor > 1) {
			return Vary{}, badf("--vary %s: FACTOR %s: want a number above 1", key, f)
		}
		if !(v.Lo > 0) {
			return Vary{}, badf("--vary %s: LO %s: a range by FACTOR starts above 0", key, lo)
		}
		v.Steps = 0
		hi = h
	} else if h, st, ok := strings.Cut(hi, ":"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(st))
		if err != nil || n < 1 || n > MaxPoints {
			return Vary{}, badf("--vary %s: STEPS %q: want a whole number of points 1..%d", key, st, MaxPoints)
		}
		v.Steps = n
		hi = h
	}
	if v.Hi, err = num("HI", hi); err != nil {
		return Vary{}, err
	}
	if v.Hi < v.Lo {
		return Vary{}, badf("--vary %s: HI %s is below LO %s", key, hi, lo)
	}
	if v.Factor != 0 && math.Log(v.Hi/v.Lo)/math.Log(v.Factor) > MaxPoints {
		return Vary{}, badf("--vary %s: more than %d points", key, MaxPoints)
	}
	return v, nil
}

// Values returns the points of v, rounded to whole numbers (and repeats
// dropped) when integer.
func (v Vary) Values(integer bool) []float64 {
	var out []float64
	add := func(x float64) {
		if integer {
			x = math.Round(x)
		} else {
			x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'g', 12, 64), 64) // no 0.30000000000000004
		}
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	switch {
	case v.Factor != 0:
		for x := v.Lo; x <= v.Hi*(1+1e-9); x *= v.Factor {
			add(x)
		}
	case v.Steps <= 1 || v.Lo == v.Hi:
		add(v.Lo)
	default:
		for i := range v.Steps {
			add(v.Lo + (v.Hi-v.Lo)*float64(i)/float64(v.Steps-1))
		}
	}
	return slices.Compact(out)
}
