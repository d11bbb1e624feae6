package guard

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noisysim/noisysim/reports"
)

func TestParseStat(t *testing.T) {
	line := "4242 (a) (b c)) S 17 4242 4242 0 -1 4194304 100 0 0 0 250 30 7 3 20 0 1 0 123456 1000 10 18446744073709551615\n"
	comm, ppid, p, ok := parseStat([]byte(line))
	if !ok || comm != "a) (b c)" || ppid != 17 || p.ticks != 290 || p.self != 280 || p.start != 123456 {
		t.Errorf("parseStat = %q %d %+v %v; want comm \"a) (b c)\", ppid 17, 290 ticks (280 its own), start 123456", comm, ppid, p, ok)
	}
	if _, _, _, ok := parseStat([]byte("1 (x) S 0")); ok {
		t.Error("a short stat line parsed")
	}
}

func TestCPULine(t *testing.T) {
	busy, steal, ok := cpuLine([]byte("cpu  100 5 50 9000 20 3 2 7 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"))
	if !ok || busy != 160 || steal != 7 {
		t.Errorf("cpuLine = %d %d %v, want busy 160 (user+nice+system+irq+softirq), steal 7", busy, steal, ok)
	}
	if _, _, ok := cpuLine([]byte("intr 1 2 3\n")); ok {
		t.Error("a line that is not cpu parsed")
	}
}

const loop = `while :; do :; done`

// A CPU burner outside the run's tree is foreign and disturbs the window;
// one inside the tree (a child) is the run's own.
func TestForeignBurner(t *testing.T) {
	own := exec.Command("sh", "-c", loop)
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { own.Process.Kill(); own.Wait() }()
	// The shell exits at once: its background loop is reparented, out of
	// this process's tree.
	out, err := exec.Command("sh", "-c", loop+" >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(foreign, syscall.SIGKILL)

	g := New(Options{MaxForeignCPU: 0.05})
	g.Begin("burn")
	time.Sleep(1500 * time.Millisecond)
	g.Begin("") // ends the window, opens none
	time.Sleep(100 * time.Millisecond)
	ws := g.End()
	if len(ws) != 1 {
		t.Fatalf("windows %+v, want 1", ws)
	}
	w := ws[0]
	t.Logf("window: %+v", w)
	fp, found := find(w.Top, foreign)
	// On a busy machine the burner may get little CPU: ask only that it
	// is seen, and attributed to the right side.
	if !found || fp.CPUs < 0.05 {
		t.Fatalf("the foreign burner (pid %d) is not among the busiest foreign processes: %+v", foreign, w.Top)
	}
	if _, found := find(w.Top, own.Process.Pid); found {
		t.Errorf("the run's own child (pid %d) is counted as foreign: %+v", own.Process.Pid, w.Top)
	}
	if w.OwnCPU < 0.05 {
		t.Errorf("own CPU %.2f: the child burner's CPU is not counted as the run's", w.OwnCPU)
	}
	if w.ForeignCPU < 0.8*fp.CPUs {
		t.Errorf("foreign CPU %.2f is below the foreign burner's own %.2f", w.ForeignCPU, fp.CPUs)
	}
	if w.Disturbed != (w.ForeignCPU+w.StealCPU > 0.05) {
		t.Errorf("window with %.2f foreign CPU marked disturbed %v (threshold 0.05)", w.ForeignCPU, w.Disturbed)
	}
	if !w.Disturbed {
		t.Errorf("window with a CPU burner beside it not marked disturbed: %+v", w)
	}
}

func find(ps []reports.ForeignProc, pid int) (reports.ForeignProc, bool) {
	for _, p := range ps {
		if p.PID == pid {
			return p, true
		}
	}
	return reports.ForeignProc{}, false
}

// A process outside the tree is the run's own when its cgroup names one of
// OwnCgroups (a container of the run).
func TestOwnCgroups(t *testing.T) {
	g := New(Options{OwnCgroups: []string{"/"}}) // every process's cgroup path holds a slash
	g.Begin("all own")
	time.Sleep(200 * time.Millisecond)
	w := g.End()[0]
	if len(w.Top) != 0 {
		t.Errorf("processes counted as foreign although every cgroup is own: %+v", w.Top)
	}
}

func TestBeginSameWindowKeepsIt(t *testing.T) {
	g := New(Options{})
	g.Begin("move")
	g.Begin("move")
	g.Begin("after")
	ws := g.End()
	if len(ws) != 2 || ws[0].Window != "move" || ws[1].Window != "after" {
		t.Errorf("windows %+v, want move then after", ws)
	}
}

func TestNoProc(t *testing.T) {
	g := New(Options{Proc: t.TempDir()})
	g.Begin("x")
	w := g.End()
	if len(w) != 1 || w[0].Disturbed || w[0].ForeignCPU != 0 {
		t.Errorf("without /proc: %+v, want one window of zeros", w)
	}
}

// A late wake-up of the stall meter is booked to the window open then: the
// longest, its moment, their count and total; the longest makes the window
// disturbed when it reaches MaxStall.
func TestStallsBooked(t *testing.T) {
	for _, c := range []struct {
		max       time.Duration
		disturbed bool
	}{{250 * time.Millisecond, true}, {time.Hour, false}} {
		// Only the stalls may disturb: not other processes' CPU, nor the
		// hypervisor's steal (one tick of it in this short window is a
		// large share of the CPU the machine ran).
		g := New(Options{MaxForeignCPU: 1000, MaxStealShare: -1, MaxStall: c.max})
		g.Begin("run")
		t0 := g.began
		g.late(t0.Add(time.Second), 30*time.Millisecond) // below StallMin: not a stall
		g.late(t0.Add(2*time.Second), 300*time.Millisecond)
		g.late(t0.Add(3*time.Second), 80*time.Millisecond)
		w := g.End()[0]
		// The meter runs too: on a busy machine it may book a stall of
		// its own, never less than these.
		if w.Stalls < 2 || w.StallMaxMs < 300 || w.StalledMs < 380 {
			t.Errorf("max %s: stalls %d, longest %.0f ms, total %.0f ms; want at least 2, 300 ms, 380 ms", c.max, w.Stalls, w.StallMaxMs, w.StalledMs)
		}
		if w.StallMaxMs == 300 && w.StallAtS != 2 {
			t.Errorf("longest stall at %.2f s, want 2 s into the window", w.StallAtS)
		}
		if w.Disturbed != c.disturbed {
			t.Errorf("max %s: a 300 ms stall marked disturbed %v, want %v", c.max, w.Disturbed, c.disturbed)
		}
	}
	// No window open: nothing booked, nothing panics.
	g := New(Options{})
	g.late(time.Now(), time.Second)
	if ws := g.End(); len(ws) != 0 {
		t.Errorf("windows %+v with none begun", ws)
	}
}

// The meter sees the process stand still: another process stops it with
// SIGSTOP for half a second, as a hypervisor that does not schedule the
// machine would.
func TestStallSeen(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to stop this process from outside")
	}
	g := New(Options{MaxForeignCPU: 1000})
	g.Begin("run")
	time.Sleep(50 * time.Millisecond)
	pid := strconv.Itoa(os.Getpid())
	stopper := exec.Command("sh", "-c", "kill -STOP "+pid+"; sleep 0.5; kill -CONT "+pid)
	if err := stopper.Run(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the meter wakes, late
	w := g.End()[0]
	t.Logf("window: %+v", w)
	if w.StallMaxMs < 400 || !w.Disturbed {
		t.Errorf("stopped for 500 ms: longest stall %.0f ms, disturbed %v; want ≥ 400 ms and disturbed", w.StallMaxMs, w.Disturbed)
	}
	m := &reports.Machine{MaxForeignCPU: 1000, MaxStallMs: float64(DefaultMaxStall.Milliseconds())}
	if why := m.Why(w); !strings.Contains(why, "noisysim stood still") {
		t.Errorf("Why = %q, want the stall named", why)
	}
}

// Without a window begun, and after End, the meter is not running.
func TestMeterStops(t *testing.T) {
	g := New(Options{})
	if g.stop != nil {
		t.Fatal("meter running before any window")
	}
	g.Begin("a")
	if g.stop == nil {
		t.Fatal("meter not running in a window")
	}
	g.End()
	if g.stop != nil {
		t.Error("meter still running after End")
	}
	if New(Options{MaxStall: -1}).MaxStall() != 0 {
		t.Error("MaxStall -1 does not turn the meter off")
	}
}

// Of the run's own CPU, noisysim's process (here: a goroutine spinning in
// the test's process) is told apart from its children (a child burner, as
// a database server is).
func TestNoisysimCPUApart(t *testing.T) {
	child := exec.Command("sh", "-c", loop)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	g := New(Options{MaxStall: -1})
	g.Begin("both")
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	<-done
	w := g.End()[0]
	t.Logf("window: own %.2f CPU, noisysim %.2f CPU", w.OwnCPU, w.NoisysimCPU)
	// On a busy machine either burner may get little CPU: ask only that
	// each is seen on its side.
	if w.NoisysimCPU < 0.05 {
		t.Errorf("noisysim CPU %.2f: the spinning goroutine's CPU is not counted as noisysim's", w.NoisysimCPU)
	}
	if w.OwnCPU-w.NoisysimCPU < 0.05 {
		t.Errorf("own CPU %.2f − noisysim CPU %.2f: the child burner's CPU is counted as noisysim's", w.OwnCPU, w.NoisysimCPU)
	}
}

// Steal disturbs a window when it takes more than MaxStealShare of the CPU
// the machine ran, though far below MaxForeignCPU; the same steal beside
// much more work does not; a negative share leaves steal to MaxForeignCPU.
func TestStealShare(t *testing.T) {
	cases := []struct {
		name        string
		busy, steal int64 // ticks added during the window
		share       float64
		want        bool
	}{
		{"steal a third of what ran", 20, 10, 0, true},
		{"steal 1% of what ran", 990, 10, 0, false},
		{"no steal", 20, 0, 0, false},
		{"steal judged by MaxForeignCPU alone", 20, 10, -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			proc := t.TempDir()
			stat := func(busy, steal int64) {
				line := "cpu  " + strconv.FormatInt(busy, 10) + " 0 0 100000 0 0 0 " + strconv.FormatInt(steal, 10) + " 0 0\n"
				if err := os.WriteFile(proc+"/stat", []byte(line), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stat(1000, 50)
			// A large MaxForeignCPU: only the share can disturb.
			g := New(Options{Proc: proc, MaxForeignCPU: 1000, MaxStealShare: c.share, MaxStall: -1})
			g.Begin("w")
			stat(1000+c.busy, 50+c.steal)
			time.Sleep(50 * time.Millisecond)
			w := g.End()[0]
			if w.Disturbed != c.want {
				t.Errorf("busy +%d, steal +%d ticks (share %.2f of %.2f CPU): disturbed %v, want %v", c.busy, c.steal, w.StealShare(), w.ForeignCPU+w.StealCPU, w.Disturbed, c.want)
			}
			m := &reports.Machine{MaxForeignCPU: g.MaxForeignCPU(), MaxStealShare: g.MaxStealShare()}
			if why := m.Why(w); c.want != strings.Contains(why, "hypervisor took") {
				t.Errorf("Why = %q; want it to name the hypervisor's steal: %v", why, c.want)
			}
		})
	}
}

// A server that reaps a child while the guard reads /proc moves the child's
// whole lifetime into its own reaped-children time: read between the two
// (the parent before the reap, the child's stat gone after it), the tree's
// sum loses the child's lifetime, and a window in which the run worked
// came out as the run idle and the machine busy with foreign work (seen in
// real runs: own 0.00 CPU, foreign 1.18, DISTURBED). The guard reads the
// tree again and takes only a view in which it did not change.
func TestReapDuringScan(t *testing.T) {
	proc := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(proc+"/"+name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(proc+"/"+name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	busy := func(ticks int) { write("stat", "cpu  "+strconv.Itoa(ticks)+" 0 0 100000 0 0 0 0 0 0\n") }
	// proc writes pid's stat: parent ppid, utime self, cutime reaped.
	stat := func(pid, ppid, self, reaped int) {
		write(strconv.Itoa(pid)+"/stat", fmt.Sprintf("%d (p%d) S %d 1 1 0 -1 0 0 0 0 0 %d 0 %d 0 20 0 1 0 %d 1000 10\n",
			pid, pid, ppid, self, reaped, 500+pid))
	}
	// noisysim (100) → postmaster (101) → a backend (102) that has run
	// reports for 1,000 ticks.
	busy(5000)
	stat(100, 1, 10, 0)
	stat(101, 100, 5, 0)
	stat(102, 101, 1000, 0)

	for _, fixed := range []bool{true, false} {
		g := New(Options{Proc: proc, Root: 100, MaxStall: -1})
		g.Begin("run")
		// In the window: noisysim 10 ticks, the postmaster 1, the
		// backend 100, and the machine nothing else.
		busy(5111)
		stat(100, 1, 20, 0)
		stat(101, 100, 6, 0)
		stat(102, 101, 1100, 0)
		reaped := false
		g.readFile = func(name string) ([]byte, error) {
			b, err := os.ReadFile(name)
			if !reaped && name == proc+"/101/stat" {
				// Right after the postmaster's stat is read, it
				// reaps the backend.
				reaped = true
				if err := os.RemoveAll(proc + "/102"); err != nil {
					t.Fatal(err)
				}
				stat(101, 100, 6, 1100)
			}
			return b, err
		}
		time.Sleep(20 * time.Millisecond)
		var w reports.WindowLoad
		if fixed {
			w = g.End()[0]
		} else {
			// One scan, as before the fix: the view the reap broke.
			a := g.start
			b, _ := g.scan()
			w = measure("run", 1, a, b)
		}
		ownTicks := w.OwnCPU * userHZ * w.Seconds
		if fixed && (w.ForeignCPU != 0 || math.Abs(ownTicks-111) > 0.5 || w.Disturbed) {
			t.Errorf("reap during the scan: own %.0f ticks, foreign %.2f CPU, disturbed %v; want the run's 111 ticks, no foreign CPU", ownTicks, w.ForeignCPU, w.Disturbed)
		}
		if !fixed && w.ForeignCPU == 0 {
			t.Errorf("one scan across the reap: foreign %.2f CPU; the test does not reproduce the broken view", w.ForeignCPU)
		}
		// Back to before the reap for the next round.
		busy(5000)
		stat(100, 1, 10, 0)
		stat(101, 100, 5, 0)
		stat(102, 101, 1000, 0)
	}
}
