package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// binomCDF is P(B <= k) for B ~ Binomial(n, p), summed term by term in log
// space: an independent check of the library's incomplete beta.
func binomCDF(n, k int64, p float64) float64 {
	if k < 0 {
		return 0
	}
	if k >= n {
		return 1
	}
	lg := func(x float64) float64 { v, _ := math.Lgamma(x); return v }
	s := 0.0
	for i := int64(0); i <= k; i++ {
		s += math.Exp(lg(float64(n+1)) - lg(float64(i+1)) - lg(float64(n-i+1)) + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return s
}

func TestOrderStatRanks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int64
		q      float64
		lo, hi int64
		cov    float64 // 0: check against the brute-force sum only
	}{
		// The textbook median interval of 100 samples: X(40), X(61), 96.48%.
		{name: "median of 100", n: 100, q: 0.5, lo: 40, hi: 61, cov: 0.9648},
		// p99 needs 368 samples for an upper bound at 95%: 1-0.99^368 =
		// 0.97524 >= 0.975, 1-0.99^367 = 0.97499 is not.
		{name: "p99 of 368: max is the upper bound", n: 368, q: 0.99, lo: 360, hi: 368},
		{name: "p99 of 367: no upper bound", n: 367, q: 0.99, lo: 359, hi: 368},
		{name: "p99 of 100: no upper bound", n: 100, q: 0.99, lo: 97, hi: 101},
		{name: "p99 of 1000", n: 1000, q: 0.99, lo: 983, hi: 997},
		{name: "p99 of 100000", n: 100000, q: 0.99, lo: 98938, hi: 99062},
		// One sample is below the true p99 with probability 0.99: a lower
		// bound, no upper one.
		{name: "one sample", n: 1, q: 0.99, lo: 1, hi: 2},
		// The 1st percentile of one sample: no lower bound, the sample an
		// upper one.
		{name: "p1 of one sample", n: 1, q: 0.01, lo: 0, hi: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, cov := OrderStatRanks(tc.n, tc.q, 0.95)
			if lo != tc.lo || hi != tc.hi {
				t.Errorf("ranks %d, %d; want %d, %d", lo, hi, tc.lo, tc.hi)
			}
			want := binomCDF(tc.n, hi-1, tc.q) - binomCDF(tc.n, lo-1, tc.q)
			if math.Abs(cov-want) > 1e-6 {
				t.Errorf("coverage %.6f, brute force %.6f", cov, want)
			}
			if tc.cov != 0 && math.Abs(cov-tc.cov) > 5e-5 {
				t.Errorf("coverage %.5f, want %.4f", cov, tc.cov)
			}
			if lo >= 1 && hi <= tc.n && cov < 0.95 {
				t.Errorf("a two-sided interval covers only %.4f", cov)
			}
			// Each bound is the tightest: one rank further in breaks it.
			if lo >= 1 && binomCDF(tc.n, lo, tc.q) <= 0.025 {
				t.Errorf("rank %d would do as the lower bound", lo+1)
			}
			if hi <= tc.n && hi > 1 && binomCDF(tc.n, hi-2, tc.q) >= 0.975 {
				t.Errorf("rank %d would do as the upper bound", hi-1)
			}
		})
	}
	if lo, hi, cov := OrderStatRanks(0, 0.99, 0.95); lo != 0 || hi != 1 || cov != 0 {
		t.Errorf("no samples: %d %d %v", lo, hi, cov)
	}
}

func TestQuantileCIOf(t *testing.T) {
	h := hdr.NewPacked(1, int64(time.Hour), 3)
	const n = 1000
	for i := 1; i <= n; i++ {
		h.RecordValue(int64(i) * 10_000) // 10 µs .. 10 ms, one per bucket
	}
	ci := QuantileCIOf(h, 0.99, 0.95, 0)
	if ci.LoRank != 983 || ci.HiRank != 997 || !ci.LoBounded || !ci.HiBounded {
		t.Fatalf("ranks %+v, want 983 and 997, both bounded", ci)
	}
	near := func(got time.Duration, rank int) bool {
		want := time.Duration(rank) * 10 * time.Microsecond
		return got >= want && float64(got) <= float64(want)*1.001
	}
	if !near(ci.Lo, 983) || !near(ci.Hi, 997) {
		t.Errorf("bounds %v, %v; want X(983) ≈ 9.83ms, X(997) ≈ 9.97ms", ci.Lo, ci.Hi)
	}
	p99 := time.Duration(h.ValueAtPercentile(99))
	if !ci.Contains(p99) || ci.Contains(ci.Hi+time.Millisecond) || ci.Contains(ci.Lo-time.Millisecond) {
		t.Errorf("Contains is wrong for p99 %v in [%v, %v]", p99, ci.Lo, ci.Hi)
	}
	// Capped at the exact maximum, as percentiles are.
	if c := QuantileCIOf(h, 0.99, 0.95, 9*time.Millisecond); c.Hi != 9*time.Millisecond {
		t.Errorf("Hi capped at 9ms = %v", c.Hi)
	}

	small := hdr.NewPacked(1, int64(time.Hour), 3)
	for i := 1; i <= 100; i++ {
		small.RecordValue(int64(i) * 10_000)
	}
	c := QuantileCIOf(small, 0.99, 0.95, 0)
	if c.HiBounded || !near(c.Hi, 100) || !c.Contains(time.Hour) {
		t.Errorf("100 samples: %+v; want no upper bound, Hi the largest sample", c)
	}
	if empty := QuantileCIOf(hdr.NewPacked(1, int64(time.Hour), 3), 0.99, 0.95, 0); empty.LoBounded || empty.HiBounded || empty.Hi != 0 {
		t.Errorf("empty: %+v", empty)
	}
}

// Over many samples of a known distribution the interval holds the true p99
// about 95% of the time (seeded: the same draws every run).
func TestQuantileCICoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	trueP99 := time.Duration(-math.Log(0.01) * float64(time.Millisecond)) // exponential, mean 1 ms
	const trials, n = 1000, 2000
	hits := 0
	for range trials {
		h := hdr.NewPacked(1, int64(time.Hour), 3)
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = int64(rng.ExpFloat64() * float64(time.Millisecond))
			h.RecordValue(vals[i])
		}
		ci := QuantileCIOf(h, 0.99, 0.95, time.Duration(slices.Max(vals)))
		if ci.Contains(trueP99) {
			hits++
		}
	}
	if rate := float64(hits) / trials; rate < 0.93 || rate > 0.99 {
		t.Errorf("the 95%% interval held the true p99 in %.1f%% of %d trials", 100*rate, trials)
	}
}
