package metrics

import (
	"math"
	"sort"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/gonum/stat/distuv"
)

// DefaultConfidence is the confidence of the intervals Summary carries.
const DefaultConfidence = 0.95

// QuantileCI is a distribution-free confidence interval for a quantile of
// the response times: the order statistics X(LoRank) and X(HiRank) of the
// sorted samples bracket the true quantile with probability Coverage,
// whatever the distribution (the number of samples below the true q-th
// quantile is Binomial(n, q)).
//
// With few samples one side has no bound: for the p99 at 95%, an upper
// bound needs at least 368 samples (below that, even the largest sample is
// under the true p99 more than 2.5% of the time); HiBounded is then false
// and Hi is the largest sample, a floor of what the bound would be.
type QuantileCI struct {
	// Quantile is q in (0, 1), e.g. 0.99.
	Quantile float64
	// Coverage is the interval's exact coverage, at least the confidence
	// asked for when both sides are bounded.
	Coverage float64
	// Lo and Hi are the bounds; LoRank and HiRank the 1-based ranks of the
	// samples they are (0 when that side is unbounded).
	Lo, Hi         time.Duration
	LoRank, HiRank int64
	// LoBounded and HiBounded are false when there are too few samples for
	// a bound on that side.
	LoBounded, HiBounded bool
}

// Contains reports whether the interval contains v: with an unbounded
// side, every value on that side is inside.
func (c QuantileCI) Contains(v time.Duration) bool {
	if c.LoBounded && v < c.Lo {
		return false
	}
	if c.HiBounded && v > c.Hi {
		return false
	}
	return true
}

// OrderStatRanks returns the ranks (1-based) of the order statistics that
// bracket the q-th quantile of n samples with confidence conf, splitting the
// risk evenly between the two sides: lo is the largest rank with
// P(B < lo) <= (1-conf)/2 and hi the smallest with P(B < hi) >= 1-(1-conf)/2,
// for B ~ Binomial(n, q) the count of samples below the true quantile. lo is
// 0 when no sample is a lower bound, hi is n+1 when none is an upper bound.
// coverage is P(lo <= B < hi), the exact coverage.
func OrderStatRanks(n int64, q, conf float64) (lo, hi int64, coverage float64) {
	if n <= 0 || !(q > 0 && q < 1) || !(conf > 0 && conf < 1) {
		return 0, n + 1, 0
	}
	b := distuv.Binomial{N: float64(n), P: q}
	cdf := func(k int64) float64 { // P(B <= k)
		if k < 0 {
			return 0
		}
		if k >= n {
			return 1
		}
		return b.CDF(float64(k))
	}
	tail := (1 - conf) / 2
	// P(B <= r-1) grows with r: lo is the last r in 1..n with
	// cdf(r-1) <= tail, hi the first r in 1..n with cdf(r-1) >= 1-tail.
	lo = int64(sort.Search(int(n), func(i int) bool { return cdf(int64(i)) > tail })) // first r-1 failing
	hi = int64(sort.Search(int(n), func(i int) bool { return cdf(int64(i)) >= 1-tail })) + 1
	if hi > n {
		hi = n + 1
	}
	return lo, hi, cdf(hi-1) - cdf(lo-1)
}

// QuantileCIOf returns the conf confidence interval of the q-th quantile of
// the values recorded in h (ns), from its bucket counts. Each bound is its
// bucket's highest equivalent value (as HdrHistogram reports percentiles),
// capped at max when max > 0. An empty histogram gives a zero QuantileCI.
func QuantileCIOf(h *hdr.PackedHistogram, q, conf float64, max time.Duration) QuantileCI {
	ci := QuantileCI{Quantile: q}
	n := h.TotalCount()
	if n == 0 {
		return ci
	}
	lo, hi, cov := OrderStatRanks(n, q, conf)
	ci.Coverage = cov
	at := func(rank int64) time.Duration {
		// ValueAtPercentile takes rank = int(p/100*n + 0.5): ask for
		// rank - 0.25 to land on rank exactly.
		v := time.Duration(h.ValueAtPercentile(100 * (float64(rank) - 0.25) / float64(n)))
		if max > 0 {
			v = min(v, max)
		}
		return v
	}
	if lo >= 1 {
		ci.Lo, ci.LoRank, ci.LoBounded = at(lo), lo, true
	}
	if hi <= n {
		ci.Hi, ci.HiRank, ci.HiBounded = at(hi), hi, true
	} else {
		ci.Hi = at(n)
	}
	if math.IsNaN(ci.Coverage) {
		ci.Coverage = 0
	}
	return ci
}
