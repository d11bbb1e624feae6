package reports

import (
	"slices"
	"testing"
)

func TestNaturalOrder(t *testing.T) {
	in := []string{"t10", "t2", "t1", "t02", "b", "a", "t", "t1a", "t1b", "", "10", "9"}
	slices.SortFunc(in, natural)
	want := []string{"", "9", "10", "a", "b", "t", "t1", "t1a", "t1b", "t02", "t2", "t10"}
	if !slices.Equal(in, want) {
		t.Errorf("natural order: got %q, want %q", in, want)
	}
	for _, s := range want {
		if natural(s, s) != 0 {
			t.Errorf("natural(%q, %q) != 0", s, s)
		}
	}
}

func TestFmtValue(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{
		{43.5, "ms", "43.50 ms"},
		{5, "ms", "5.00 ms"},
		{150, "", "150"},
		{0.6, "", "0.600"},
		{-0.0, "ms", "0.00 ms"},
		{1.25, "s", "1.25 s"},
	}
	for _, tt := range tests {
		if got := fmtValue(tt.v, tt.unit); got != tt.want {
			t.Errorf("fmtValue(%v, %q) = %q, want %q", tt.v, tt.unit, got, tt.want)
		}
	}
}
