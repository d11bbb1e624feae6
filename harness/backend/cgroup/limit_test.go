package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Field case L15: CPU budgets written as the kernel takes them.

func TestLimitFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cpus   float64
		period int64
		want   Limit
		v2     string
		bad    bool
	}{
		{name: "no limit", cpus: 0, want: Limit{-1, 100_000}, v2: "max 100000"},
		{name: "0.42 CPU", cpus: 0.42, want: Limit{42_000, 100_000}, v2: "42000 100000"},
		{name: "4.096 CPU", cpus: 4.096, want: Limit{409_600, 100_000}, v2: "409600 100000"},
		{name: "0.051 CPU", cpus: 0.051, want: Limit{5_100, 100_000}, v2: "5100 100000"},
		{name: "minimum", cpus: 0.01, want: Limit{1_000, 100_000}, v2: "1000 100000"},
		{name: "short period", cpus: 0.5, period: 10_000, want: Limit{5_000, 10_000}, v2: "5000 10000"},
		{name: "below the kernel's 1 ms quota", cpus: 0.005, bad: true},
		{name: "rounds under 1 ms at a short period", cpus: 0.05, period: 10_000, bad: true},
		{name: "negative", cpus: -1, bad: true},
		{name: "NaN", cpus: nan(), bad: true},
		{name: "too many", cpus: 5000, bad: true},
		{name: "period too short", cpus: 1, period: 500, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LimitFor(tc.cpus, tc.period)
			if tc.bad {
				if !errors.Is(err, ErrBadBudget) {
					t.Fatalf("LimitFor(%g, %d) = %v, %v; want ErrBadBudget", tc.cpus, tc.period, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("LimitFor(%g, %d) = %v, %v; want %v", tc.cpus, tc.period, got, err, tc.want)
			}
			if got.V2() != tc.v2 {
				t.Errorf("V2() = %q, want %q", got.V2(), tc.v2)
			}
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestReadBack(t *testing.T) {
	for _, tc := range []struct {
		in   string
		cpus float64
		unl  bool
	}{
		{in: "max 100000\n", unl: true},
		{in: "42000 100000\n", cpus: 0.42},
		{in: "max", unl: true},
	} {
		l, err := ParseV2(tc.in)
		if err != nil {
			t.Fatalf("ParseV2(%q): %v", tc.in, err)
		}
		if l.IsUnlimited() != tc.unl || l.CPUs() != tc.cpus {
			t.Errorf("ParseV2(%q) = %v (%g CPU, unlimited %v), want %g CPU unlimited %v", tc.in, l, l.CPUs(), l.IsUnlimited(), tc.cpus, tc.unl)
		}
	}
	for _, bad := range []string{"", "x 100000", "100 0", "1 2 3"} {
		if _, err := ParseV2(bad); err == nil {
			t.Errorf("ParseV2(%q) accepted", bad)
		}
	}
	l, err := ParseV1("-1\n", "100000\n")
	if err != nil || !l.IsUnlimited() {
		t.Errorf("ParseV1(-1, 100000) = %v, %v; want no limit", l, err)
	}
	l, err = ParseV1("42000\n", "100000\n")
	if err != nil || l.CPUs() != 0.42 {
		t.Errorf("ParseV1(42000, 100000) = %v, %v; want 0.42 CPU", l, err)
	}
}

func TestWithin(t *testing.T) {
	p, _ := LimitFor(4.096, 0)
	c, _ := LimitFor(4.096, 0)
	if !c.Within(p) {
		t.Errorf("%v not within equal parent %v", c, p)
	}
	// Same 4.096 CPU at another period: still equal, still within.
	if c2 := (Limit{40_960, 10_000}); !c2.Within(p) || !p.Within(c2) {
		t.Errorf("%v and %v should be within each other", c2, p)
	}
	if over := (Limit{409_601, 100_000}); over.Within(p) {
		t.Errorf("%v within %v", over, p)
	}
	if Unlimited.Within(p) {
		t.Errorf("no limit within %v", p)
	}
	if !p.Within(Unlimited) {
		t.Errorf("%v not within no limit", p)
	}
}

// fakeKernel models cgroup v1's checks over a directory tree of plain
// files: a write of cpu.cfs_quota_us or cpu.cfs_period_us that would put a
// group above its parent (or below a child) fails with EINVAL, as
// tg_cfs_schedulable_down does.
type fakeKernel struct {
	t      *testing.T
	writes []string
}

func (k *fakeKernel) write(path, value string) error {
	dir, file := filepath.Split(path)
	dir = filepath.Clean(dir)
	k.writes = append(k.writes, file+"="+value)
	q, p := read(k.t, dir)
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return syscall.EINVAL
	}
	switch file {
	case "cpu.cfs_quota_us":
		q = n
	case "cpu.cfs_period_us":
		if n < MinPeriod || n > MaxPeriod {
			return syscall.EINVAL
		}
		p = n
	default:
		return os.WriteFile(path, []byte(value), 0o644)
	}
	// No limit under a limited parent is allowed: the group takes the
	// parent's.
	if pq, pp := read(k.t, filepath.Dir(dir)); q >= 0 && pq >= 0 && !(Limit{q, p}).Within(Limit{pq, pp}) {
		return syscall.EINVAL
	}
	return os.WriteFile(path, []byte(value+"\n"), 0o644)
}

func read(t *testing.T, dir string) (int64, int64) {
	q, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	p, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return -1, DefaultPeriod
	}
	l, err := ParseV1(string(q), string(p))
	if err != nil {
		t.Fatal(err)
	}
	return l.Quota, l.Period
}

func fakeGroup(t *testing.T, root, rel string, l Limit) {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(strconv.FormatInt(l.Quota, 10)+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.FormatInt(l.Period, 10)+"\n"), 0o644)
}

func TestSetV1Order(t *testing.T) {
	for _, tc := range []struct {
		name        string
		parent, cur Limit
		next        Limit
		quotaFirst  bool
	}{
		// (vi): 200000/100000 under 100000/100000 changed to 5000/10000;
		// the period first would pass through 200000/10000 (20 CPU).
		{name: "shrink quota and period", parent: Limit{100_000, 100_000}, cur: Limit{200_000, 100_000}, next: Limit{5_000, 10_000}, quotaFirst: true},
		// Growing period and quota: the period first passes through
		// 5000/100000 (0.05), the quota first through 100000/10000 (10).
		{name: "grow quota and period", parent: Limit{100_000, 100_000}, cur: Limit{5_000, 10_000}, next: Limit{100_000, 100_000}, quotaFirst: false},
		{name: "from no limit", parent: Limit{100_000, 100_000}, cur: Limit{-1, 100_000}, next: Limit{5_000, 10_000}, quotaFirst: false},
		{name: "to no limit", parent: Limit{-1, 100_000}, cur: Limit{5_000, 10_000}, next: Limit{-1, 100_000}, quotaFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			fakeGroup(t, root, "p", tc.parent)
			fakeGroup(t, root, "p/c", tc.cur)
			k := &fakeKernel{t: t}
			h := Hierarchy{Root: root, Version: V1, write: k.write}
			g := h.Group("p/c")
			if err := g.Set(tc.next); err != nil {
				t.Fatalf("Set(%v): %v (writes %v)", tc.next, err, k.writes)
			}
			if got, _ := g.Limit(); got != tc.next {
				t.Errorf("read back %v, want %v", got, tc.next)
			}
			if first := strings.HasPrefix(k.writes[0], "cpu.cfs_quota_us="); first != tc.quotaFirst {
				t.Errorf("writes %v: quota first = %v, want %v", k.writes, first, tc.quotaFirst)
			}
		})
	}
}

func TestSetRefusesAboveParent(t *testing.T) {
	// (iv): a parent rounded to whole percents (0.05 CPU) and a child at
	// 0.051 CPU: refused before anything is written.
	root := t.TempDir()
	fakeGroup(t, root, "p", Limit{5_000, 100_000})
	fakeGroup(t, root, "p/c", Unlimited)
	k := &fakeKernel{t: t}
	g := Hierarchy{Root: root, Version: V1, write: k.write}.Group("p/c")
	child, _ := LimitFor(0.051, 0)
	err := g.Set(child)
	if !errors.Is(err, ErrBadBudget) {
		t.Fatalf("Set(%v) under 0.05 CPU = %v, want ErrBadBudget", child, err)
	}
	if len(k.writes) != 0 {
		t.Errorf("wrote %v before refusing", k.writes)
	}
	// (iii): a child equal to its parent (4.096 CPU both) is taken.
	fakeGroup(t, root, "q", Limit{409_600, 100_000})
	fakeGroup(t, root, "q/c", Unlimited)
	g = Hierarchy{Root: root, Version: V1, write: k.write}.Group("q/c")
	same, _ := LimitFor(4.096, 0)
	if err := g.Set(same); err != nil {
		t.Fatalf("Set(%v) under an equal parent: %v", same, err)
	}
	// A grandparent's limit counts too.
	fakeGroup(t, root, "q/c/d", Unlimited)
	over, _ := LimitFor(4.1, 0)
	if err := (Hierarchy{Root: root, Version: V1, write: k.write}).Group("q/c/d").Set(over); !errors.Is(err, ErrBadBudget) {
		t.Errorf("Set(%v) under 4.096 CPU ancestors = %v, want ErrBadBudget", over, err)
	}
}

func TestSetV2(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "p", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "p", "cpu.max"), []byte("max 100000\n"), 0o644)
	os.WriteFile(filepath.Join(root, "p", "c", "cpu.max"), []byte("max 100000\n"), 0o644)
	var writes []string
	h := Hierarchy{Root: root, Version: V2, write: func(path, v string) error {
		writes = append(writes, filepath.Base(path)+"="+v)
		return os.WriteFile(path, []byte(v+"\n"), 0o644)
	}}
	g := h.Group("p/c")
	l, _ := LimitFor(0.42, 0)
	if err := g.Set(l); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(writes) != "[cpu.max=42000 100000]" {
		t.Errorf("writes %v", writes)
	}
	if got, _ := g.Limit(); got.CPUs() != 0.42 {
		t.Errorf("read back %v", got)
	}
	if err := g.Set(Unlimited); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.Limit(); !got.IsUnlimited() {
		t.Errorf("read back %v, want no limit", got)
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/sys/fs/cgroup/a\040b`); got != "/sys/fs/cgroup/a b" {
		t.Errorf("unescape = %q", got)
	}
	if got := unescape(`/x\04`); got != `/x\04` {
		t.Errorf("unescape of a short escape = %q", got)
	}
}
