package guard

import (
	"os/exec"
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
