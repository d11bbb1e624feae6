// Package guard watches the machine during a measured run: for each window it
// measures the CPU used by processes outside noisysim's own process tree
// (and its database servers) and the steal time, from /proc, so that a
// verdict taken on a busy machine says so.
//
//	g := guard.New(guard.Options{MaxForeignCPU: 0.5})
//	g.Begin("solo")   // ends the window before, if any
//	…                 // measure
//	g.Begin("run")
//	…
//	windows := g.End()
//
// CPU is counted from the kernel's tick counters: the machine's busy time
// (/proc/stat: user, nice, system, irq, softirq), minus the time of the
// processes of the run's tree (/proc/PID/stat: utime, stime and the reaped
// children's cutime, cstime, so that short-lived children count), is the
// foreign CPU; steal is /proc/stat's steal column. A window is disturbed
// when the foreign CPU and the steal pass MaxForeignCPU, or the steal
// alone passes MaxStealShare of the CPU the machine ran: a hypervisor that
// withholds the CPUs the run wants delays it as a busy neighbour would.
// Of the run's own CPU, the root process's own time (utime, stime) is
// noisysim's (its load generator), the rest its servers' and other
// children's. Figures are averages over the window, in CPUs.
//
// An average hides a pause: a second in which the whole machine stood
// still (a hypervisor that did not schedule it, a kernel busy reclaiming
// memory, a stop-the-world pause of noisysim's own runtime) costs a 10 s
// window only a tenth of a CPU, yet every call in flight then takes a
// second longer, enough to decide a p99. So, as jHiccup does, a goroutine
// wakes every StallTick and records how late it woke: a wake-up later than
// StallMin is a stall, and a window whose longest stall reaches
// Options.MaxStall is disturbed too.
package guard

import (
	"bytes"
	"cmp"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/noisysim/noisysim/reports"
)

// DefaultMaxForeignCPU is the default threshold: a window during which
// other processes (and steal) took more than half a CPU on average is
// disturbed.
const DefaultMaxForeignCPU = 0.5

// DefaultMaxStealShare is the default bound on steal: a window in which a
// hypervisor took more than 5% of the CPU the machine ran (and at least
// reports.MinStealCPU) is disturbed. On a machine of its own steal is 0; a
// quiet virtual machine shows about 1%.
const DefaultMaxStealShare = 0.05

// userHZ is the unit of /proc's tick counters (USER_HZ, 100 on Linux).
const userHZ = 100

// topN is how many foreign processes a window names.
const topN = 8

const (
	// StallTick is how often the stall meter wakes.
	StallTick = 5 * time.Millisecond
	// StallMin is how late a wake-up must be to count as a stall: well
	// above the scheduling delay of a busy 2-core machine (a few ms).
	StallMin = 50 * time.Millisecond
	// DefaultMaxStall is the default longest stall a window may hold and
	// not be disturbed.
	DefaultMaxStall = 250 * time.Millisecond
)

// Options configures a Guard.
type Options struct {
	// MaxForeignCPU is the threshold in CPUs; 0 means DefaultMaxForeignCPU.
	MaxForeignCPU float64
	// MaxStealShare is the bound on steal as a share of the CPU the
	// machine ran (reports.StealDisturbs); 0 means DefaultMaxStealShare,
	// negative judges the steal by MaxForeignCPU alone.
	MaxStealShare float64
	// Root is the pid whose process tree is the run's own; 0 means this
	// process.
	Root int
	// OwnCgroups are substrings of /proc/PID/cgroup that mark processes
	// outside Root's tree as the run's own, e.g. the ids of the containers
	// of the run's database servers.
	OwnCgroups []string
	// Proc is the proc file system's mount point; "" means /proc.
	Proc string
	// MaxStall is the longest stall a window may hold and not be
	// disturbed; 0 means DefaultMaxStall, negative turns the stall meter
	// off.
	MaxStall time.Duration
}

// Guard measures windows one after the other. Its methods are safe for
// concurrent use; the zero value is not usable, use New.
type Guard struct {
	opts Options

	mu      sync.Mutex
	cur     string
	began   time.Time
	start   snapshot
	stalls  stalls // the open window's
	windows []reports.WindowLoad
	// readFile reads a /proc file: os.ReadFile, or a test's.
	readFile func(string) ([]byte, error)
	// stop ends the stall meter; nil when it is not running.
	stop chan struct{}
	done chan struct{}
}

// stalls are one window's stalls.
type stalls struct {
	n       int
	total   time.Duration
	longest time.Duration
	at      time.Time // when the longest began
}

// New returns a Guard with no window open.
func New(opts Options) *Guard {
	if opts.MaxForeignCPU <= 0 {
		opts.MaxForeignCPU = DefaultMaxForeignCPU
	}
	if opts.MaxStealShare == 0 {
		opts.MaxStealShare = DefaultMaxStealShare
	}
	if opts.Root == 0 {
		opts.Root = os.Getpid()
	}
	if opts.Proc == "" {
		opts.Proc = "/proc"
	}
	if opts.MaxStall == 0 {
		opts.MaxStall = DefaultMaxStall
	}
	return &Guard{opts: opts, readFile: os.ReadFile}
}

// meter wakes every StallTick until stop is closed and books each late
// wake-up as a stall of the window open then.
func (g *Guard) meter(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(StallTick)
	defer t.Stop()
	want := time.Now().Add(StallTick)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			// Not the channel's value: that is when the timer was due.
			now := time.Now()
			g.late(want, now.Sub(want))
			want = now.Add(StallTick)
			t.Reset(StallTick)
		}
	}
}

// late books a wake-up that was due at due and came late by d.
func (g *Guard) late(due time.Time, d time.Duration) {
	if d < StallMin {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == "" {
		return
	}
	s := &g.stalls
	s.n++
	s.total += d
	if d > s.longest {
		s.longest, s.at = d, due
	}
}

// MaxForeignCPU returns the threshold in use.
func (g *Guard) MaxForeignCPU() float64 { return g.opts.MaxForeignCPU }

// MaxStealShare returns the steal bound in use; 0 when steal is judged by
// MaxForeignCPU alone.
func (g *Guard) MaxStealShare() float64 { return max(g.opts.MaxStealShare, 0) }

// MaxStall returns the stall bound in use; 0 when the meter is off.
func (g *Guard) MaxStall() time.Duration { return max(g.opts.MaxStall, 0) }

// SetOwnCgroups replaces Options.OwnCgroups, e.g. once the containers are up.
func (g *Guard) SetOwnCgroups(ids []string) {
	g.mu.Lock()
	g.opts.OwnCgroups = slices.Clone(ids)
	g.mu.Unlock()
}

// Begin ends the open window, if any, and opens one named name; an empty
// name opens none (a phase that is not measured). Beginning the window that
// is open keeps it open.
func (g *Guard) Begin(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if name != "" && name == g.cur {
		return
	}
	now := time.Now()
	snap := g.snap()
	g.closeLocked(now, snap)
	if name != "" {
		g.cur, g.began, g.start, g.stalls = name, now, snap, stalls{}
		if g.stop == nil && g.opts.MaxStall > 0 {
			g.stop, g.done = make(chan struct{}), make(chan struct{})
			go g.meter(g.stop, g.done)
		}
	}
}

// End ends the open window and returns every window measured, in order.
func (g *Guard) End() []reports.WindowLoad {
	g.mu.Lock()
	stop, done := g.stop, g.done
	g.stop, g.done = nil, nil
	g.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done // books nothing after this: the window closes below
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closeLocked(time.Now(), g.snap())
	return slices.Clone(g.windows)
}

func (g *Guard) closeLocked(now time.Time, end snapshot) {
	if g.cur == "" {
		return
	}
	secs := now.Sub(g.began).Seconds()
	w := measure(g.cur, secs, g.start, end)
	w.Disturbed = w.ForeignCPU+w.StealCPU > g.opts.MaxForeignCPU || reports.StealDisturbs(w, g.opts.MaxStealShare)
	if s := g.stalls; s.n > 0 {
		w.Stalls = s.n
		w.StalledMs = ms(s.total)
		w.StallMaxMs = ms(s.longest)
		w.StallAtS = max(0, s.at.Sub(g.began).Seconds()) // due before the window began: at its start
		if g.opts.MaxStall > 0 && s.longest >= g.opts.MaxStall {
			w.Disturbed = true
		}
	}
	g.windows = append(g.windows, w)
	g.cur = ""
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// snapshot is the machine's tick counters at one instant.
type snapshot struct {
	busy, steal int64
	own         int64           // the run's tree, children reaped included
	root        int64           // the root process's own time (noisysim's)
	procs       map[int]procCPU // every process outside the run
	ok          bool
}

type procCPU struct {
	comm  string
	ticks int64 // utime + stime + cutime + cstime: the tree's time, children reaped included
	self  int64 // utime + stime: the process's own time
	start int64 // start time in ticks since boot: tells a reused pid apart
}

// measure turns two snapshots into a window's figures.
func measure(name string, secs float64, a, b snapshot) reports.WindowLoad {
	w := reports.WindowLoad{Window: name, Seconds: secs}
	if !a.ok || !b.ok || secs <= 0 {
		return w
	}
	cpus := func(ticks int64) float64 { return float64(max(ticks, 0)) / userHZ / secs }
	w.OwnCPU = cpus(b.own - a.own)
	w.NoisysimCPU = min(cpus(b.root-a.root), w.OwnCPU)
	w.ForeignCPU = cpus((b.busy - a.busy) - (b.own - a.own))
	w.StealCPU = cpus(b.steal - a.steal)
	for pid, p := range b.procs {
		before, seen := a.procs[pid]
		var d int64
		switch {
		// A process's own time: a parent reaping a child that ran
		// before the window would otherwise take the child's lifetime.
		case seen && before.start == p.start:
			d = p.self - before.self
		default:
			d = p.self // born during the window
		}
		if d > 0 {
			w.Top = append(w.Top, reports.ForeignProc{PID: pid, Comm: p.comm, CPUs: cpus(d)})
		}
	}
	slices.SortFunc(w.Top, func(x, y reports.ForeignProc) int {
		return cmp.Or(cmp.Compare(y.CPUs, x.CPUs), cmp.Compare(x.PID, y.PID))
	})
	w.Top = w.Top[:min(topN, len(w.Top))]
	return w
}

// snapTries bounds how often snap reads /proc again for a consistent view
// of the run's tree.
const snapTries = 5

// snap reads /proc. A machine without /proc gives a snapshot that is not
// ok, and windows with zero figures.
//
// The run's CPU is its tree's ticks, its reaped children's included, and
// that sum holds only in a consistent view: a server that reaps a child
// between the reading of its own stat and the child's takes the child's
// whole lifetime out of the sum (a backend that ran reports for 10 s, say,
// and the window's own CPU comes out near 0, the rest foreign), and a
// reap between the child's reading and its parent's counts it twice. So
// snap reads the tree's members again after the scan and takes the view
// only when every one is still there with the same reaped-children time;
// otherwise it scans again, up to snapTries times (then the last view).
func (g *Guard) snap() snapshot {
	var s snapshot
	for range snapTries {
		var own map[int]procCPU
		s, own = g.scan()
		if !s.ok || g.settled(own) {
			break
		}
	}
	return s
}

// settled reports whether every process of own is still there with the
// reaped-children time it had.
func (g *Guard) settled(own map[int]procCPU) bool {
	for pid, was := range own {
		b, err := g.readFile(g.opts.Proc + "/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		_, _, p, ok := parseStat(b)
		if !ok || p.start != was.start || p.ticks-p.self != was.ticks-was.self {
			return false
		}
	}
	return true
}

// scan reads /proc once: the snapshot and the run's tree's processes.
func (g *Guard) scan() (snapshot, map[int]procCPU) {
	s := snapshot{procs: map[int]procCPU{}}
	stat, err := g.readFile(g.opts.Proc + "/stat")
	if err != nil {
		return s, nil
	}
	s.busy, s.steal, s.ok = cpuLine(stat)
	if !s.ok {
		return s, nil
	}
	entries, err := os.ReadDir(g.opts.Proc)
	if err != nil {
		s.ok = false
		return s, nil
	}
	type info struct {
		ppid int
		procCPU
	}
	all := map[int]info{}
	kids := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := g.readFile(g.opts.Proc + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		comm, ppid, p, ok := parseStat(b)
		if !ok {
			continue
		}
		p.comm = comm
		all[pid] = info{ppid, p}
		kids[ppid] = append(kids[ppid], pid)
	}
	own := map[int]bool{}
	queue := []int{g.opts.Root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if own[p] {
			continue
		}
		own[p] = true
		queue = append(queue, kids[p]...)
	}
	tree := map[int]procCPU{}
	for pid, in := range all {
		if !own[pid] && len(g.opts.OwnCgroups) > 0 && g.inOwnCgroup(pid) {
			own[pid] = true
		}
		if own[pid] {
			s.own += in.ticks
			tree[pid] = in.procCPU
			if pid == g.opts.Root {
				s.root = in.self
			}
			continue
		}
		s.procs[pid] = in.procCPU
	}
	return s, tree
}

func (g *Guard) inOwnCgroup(pid int) bool {
	b, err := g.readFile(g.opts.Proc + "/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, id := range g.opts.OwnCgroups {
		if id != "" && bytes.Contains(b, []byte(id)) {
			return true
		}
	}
	return false
}

// cpuLine reads the machine-wide "cpu" line of /proc/stat: busy ticks
// (user, nice, system, irq, softirq; guest time is inside user) and steal.
func cpuLine(stat []byte) (busy, steal int64, ok bool) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	n := make([]int64, len(f)-1)
	for i := range n {
		n[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal …
	return n[0] + n[1] + n[2] + n[5] + n[6], n[7], true
}

// parseStat reads /proc/PID/stat: comm, ppid and the CPU ticks of the
// process and of its reaped children.
func parseStat(b []byte) (comm string, ppid int, p procCPU, ok bool) {
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return "", 0, p, false
	}
	comm = string(b[open+1 : close])
	f := strings.Fields(string(b[close+1:]))
	// f[0] is field 3 (state): field k is f[k-3].
	if len(f) < 20 {
		return "", 0, p, false
	}
	ppid, _ = strconv.Atoi(f[1])
	var t [4]int64 // utime stime cutime cstime: fields 14..17
	for i := range t {
		t[i], _ = strconv.ParseInt(f[14+i-3], 10, 64)
	}
	p.self = t[0] + t[1]
	p.ticks = p.self + t[2] + t[3]
	p.start, _ = strconv.ParseInt(f[22-3], 10, 64)
	return comm, ppid, p, true
}
