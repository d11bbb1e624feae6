package cgroup

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kernel bounds of CFS bandwidth control, in microseconds.
const (
	// DefaultPeriod is the period budgets are written with.
	DefaultPeriod int64 = 100_000
	// MinQuota and MinPeriod are the smallest quota and period the kernel
	// takes (1 ms); MaxPeriod the largest period (1 s).
	MinQuota  int64 = 1_000
	MinPeriod int64 = 1_000
	MaxPeriod int64 = 1_000_000
)

// Budget bounds, in CPUs.
const (
	// MinCPU is the smallest budget: MinQuota per DefaultPeriod.
	MinCPU = float64(MinQuota) / float64(DefaultPeriod)
	// MaxCPU is the largest budget accepted.
	MaxCPU = 1024.0
)

// ErrBadBudget marks a CPU budget that cannot be written: not a number,
// below MinCPU, above MaxCPU, or above the limit of the group it would live
// in.
var ErrBadBudget = errors.New("bad CPU budget")

// Limit is a CFS bandwidth limit: Quota microseconds of CPU time every
// Period microseconds, so Quota/Period CPUs. A negative Quota means no
// limit.
type Limit struct {
	Quota, Period int64
}

// Unlimited is no limit at DefaultPeriod.
var Unlimited = Limit{Quota: -1, Period: DefaultPeriod}

// LimitFor returns the limit of cpus CPUs at period µs (0 means
// DefaultPeriod): quota = cpus × period rounded to the nearest µs. cpus 0
// means no limit. A budget that is NaN, infinite, negative, below MinCPU (it
// would round to a quota under the kernel's 1 ms) or above MaxCPU is an
// error wrapping ErrBadBudget.
func LimitFor(cpus float64, period int64) (Limit, error) {
	if period == 0 {
		period = DefaultPeriod
	}
	if period < MinPeriod || period > MaxPeriod {
		return Limit{}, fmt.Errorf("%w: period %d µs is out of range %d..%d", ErrBadBudget, period, MinPeriod, MaxPeriod)
	}
	if err := CheckCPU(cpus); err != nil {
		return Limit{}, err
	}
	if cpus == 0 {
		return Limit{Quota: -1, Period: period}, nil
	}
	q := int64(math.Round(cpus * float64(period)))
	if q < MinQuota {
		return Limit{}, fmt.Errorf("%w: %g CPU is %d µs every %d µs, under the kernel's minimum quota of %d µs", ErrBadBudget, cpus, q, period, MinQuota)
	}
	return Limit{Quota: q, Period: period}, nil
}

// CheckCPU returns an error wrapping ErrBadBudget unless cpus is 0 (no
// budget) or in [MinCPU, MaxCPU].
func CheckCPU(cpus float64) error {
	switch {
	case math.IsNaN(cpus) || math.IsInf(cpus, 0):
		return fmt.Errorf("%w: %g is not a number of CPUs", ErrBadBudget, cpus)
	case cpus < 0:
		return fmt.Errorf("%w: %g CPU is negative (0 means no budget)", ErrBadBudget, cpus)
	case cpus == 0:
		return nil
	case cpus < MinCPU:
		return fmt.Errorf("%w: %g CPU is below the minimum %g CPU (the kernel's %d µs quota per %d µs period)", ErrBadBudget, cpus, MinCPU, MinQuota, DefaultPeriod)
	case cpus > MaxCPU:
		return fmt.Errorf("%w: %g CPU is above the maximum %g", ErrBadBudget, cpus, MaxCPU)
	}
	return nil
}

// IsUnlimited reports whether l sets no limit.
func (l Limit) IsUnlimited() bool { return l.Quota < 0 }

// CPUs returns Quota/Period, or 0 for no limit.
func (l Limit) CPUs() float64 {
	if l.IsUnlimited() || l.Period <= 0 {
		return 0
	}
	return float64(l.Quota) / float64(l.Period)
}

// Within reports whether l allows no more CPU than parent, exactly (by
// cross-multiplication, no rounding): the kernel's check on cgroup v1.
func (l Limit) Within(parent Limit) bool {
	if parent.IsUnlimited() {
		return true
	}
	if l.IsUnlimited() {
		return false
	}
	return l.Quota*parent.Period <= parent.Quota*l.Period
}

// String returns e.g. "0.42 CPU (42000/100000 µs)" or "no limit".
func (l Limit) String() string {
	if l.IsUnlimited() {
		return "no limit"
	}
	return fmt.Sprintf("%s CPU (%d/%d µs)", FormatCPU(l.CPUs()), l.Quota, l.Period)
}

// FormatCPU formats a CPU count with up to 3 decimals and no trailing zeros.
func FormatCPU(cpus float64) string {
	return strconv.FormatFloat(math.Round(cpus*1000)/1000, 'f', -1, 64)
}

// V2 returns l as cgroup v2's cpu.max takes it: "max 100000" or
// "42000 100000".
func (l Limit) V2() string {
	if l.IsUnlimited() {
		return "max " + strconv.FormatInt(l.Period, 10)
	}
	return strconv.FormatInt(l.Quota, 10) + " " + strconv.FormatInt(l.Period, 10)
}

// ParseV2 reads cgroup v2's cpu.max: "max 100000" is no limit, "42000
// 100000" 0.42 CPU. A lone quota takes DefaultPeriod.
func ParseV2(s string) (Limit, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return Limit{}, fmt.Errorf("parse cpu.max %q: want \"QUOTA PERIOD\"", s)
	}
	l := Limit{Period: DefaultPeriod}
	if len(f) == 2 {
		p, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || p <= 0 {
			return Limit{}, fmt.Errorf("parse cpu.max %q: bad period", s)
		}
		l.Period = p
	}
	if f[0] == "max" {
		l.Quota = -1
		return l, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || q <= 0 {
		return Limit{}, fmt.Errorf("parse cpu.max %q: bad quota", s)
	}
	l.Quota = q
	return l, nil
}

// ParseV1 reads cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us: quota
// -1 is no limit.
func ParseV1(quota, period string) (Limit, error) {
	q, err := strconv.ParseInt(strings.TrimSpace(quota), 10, 64)
	if err != nil {
		return Limit{}, fmt.Errorf("parse cpu.cfs_quota_us %q: %w", quota, err)
	}
	p, err := strconv.ParseInt(strings.TrimSpace(period), 10, 64)
	if err != nil || p <= 0 {
		return Limit{}, fmt.Errorf("parse cpu.cfs_period_us %q: bad period", period)
	}
	if q < 0 {
		q = -1
	}
	return Limit{Quota: q, Period: p}, nil
}

// v1Steps returns the order in which to write cgroup v1's two files to go
// from cur to next such that the state between the two writes allows no
// more CPU than the larger of cur and next: the kernel checks every write
// against the parent's limit (and the children's) and refuses one that
// exceeds it with EINVAL. Going from 200000/100000 to 5000/10000, writing
// the period first would pass through 200000/10000 (20 CPUs); the quota
// first passes through 5000/100000 (0.05 CPU).
func v1Steps(cur, next Limit) (quotaFirst bool) {
	if next.IsUnlimited() {
		return true // dropping the limit first: nothing to exceed
	}
	if cur.IsUnlimited() {
		return false // new period under no limit, then the quota
	}
	// Intermediates: (next.Quota, cur.Period) or (cur.Quota, next.Period).
	// Compare next.Quota/cur.Period with cur.Quota/next.Period.
	return next.Quota*next.Period <= cur.Quota*cur.Period
}
