package bench

import (
	"errors"
	"testing"
)

// A step probes its rate once when the probe sustains it and twice when
// the first misses (the second decides); an error ends it; the rate then
// moves halfway to the bound the outcome set.
func TestBisectionStep(t *testing.T) {
	for _, c := range []struct {
		name     string
		outcomes []bool // what each probe at the rate returns
		err      error
		probes   int
		best     bool
		next     float64
	}{
		{"sustained at once", []bool{true}, nil, 1, true, 150},
		{"missed, then sustained", []bool{false, true}, nil, 2, true, 150},
		{"missed twice", []bool{false, false}, nil, 2, false, 50},
		{"an error", []bool{true}, errors.New("probe failed"), 1, false, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBisection(100, 2)
			var retries []bool
			best, err := b.step(func(rate float64, retry bool) (bool, error) {
				if rate != 100 {
					t.Errorf("probe %d at %g, want 100", len(retries)+1, rate)
				}
				retries = append(retries, retry)
				return c.outcomes[len(retries)-1], c.err
			})
			if !errors.Is(err, c.err) || best != c.best || len(retries) != c.probes || b.rate != c.next {
				t.Errorf("step: best %v, err %v, %d probes (retry flags %v), next rate %g; want %v, %v, %d, %g",
					best, err, len(retries), retries, b.rate, c.best, c.err, c.probes, c.next)
			}
			for i, r := range retries {
				if r != (i > 0) {
					t.Errorf("probe %d marked retry %v", i+1, r)
				}
			}
		})
	}
}
