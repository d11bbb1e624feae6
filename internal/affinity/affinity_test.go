package affinity

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		out  string
	}{
		{"0", []int{0}, "0"},
		{"1-3", []int{1, 2, 3}, "1-3"},
		{" 0, 2-3 ,2", []int{0, 2, 3}, "0,2-3"},
		{"5,1", []int{1, 5}, "1,5"},
	} {
		got, err := Parse(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		if s := Format(got); s != tc.out {
			t.Errorf("Format(%v) = %q, want %q", got, s, tc.out)
		}
	}
	for _, bad := range []string{"", " ", "a", "-1", "3-1", "0,,1", "1-", "99999"} {
		if _, err := Parse(bad); !errors.Is(err, ErrBadList) {
			t.Errorf("Parse(%q) = %v, want ErrBadList", bad, err)
		}
	}
}

func TestCheck(t *testing.T) {
	allowed, err := Allowed()
	if err != nil || len(allowed) == 0 {
		t.Fatalf("Allowed() = %v, %v", allowed, err)
	}
	if err := Check(allowed); err != nil {
		t.Errorf("Check(allowed %v) = %v", allowed, err)
	}
	if err := Check([]int{allowed[len(allowed)-1] + 1}); !errors.Is(err, ErrBadList) {
		t.Errorf("Check(a core past the allowed ones) = %v, want ErrBadList", err)
	}
}

// TestOnThread forks a process from a pinned thread: the child runs on the
// cores, the thread gets its own affinity back.
func TestOnThread(t *testing.T) {
	allowed, _ := Allowed()
	if len(allowed) < 2 {
		t.Skip("one core: nothing to pin apart")
	}
	want := allowed[len(allowed)-1:]
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("sleep", "5")
	if err := OnThread(want, cmd.Start); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	got, err := Of(cmd.Process.Pid)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("child on %v (%v), want %v", got, err, want)
	}
	back, _ := Of(0)
	if !slices.Equal(back, allowed) {
		t.Errorf("thread left on %v, want %v back", back, allowed)
	}
}

// TestPin pins every thread of the process and puts them back.
func TestPin(t *testing.T) {
	allowed, _ := Allowed()
	if len(allowed) < 2 {
		t.Skip("one core: nothing to pin apart")
	}
	want := allowed[:1]
	procs := runtime.GOMAXPROCS(0)
	restore, err := Pin(want)
	if err != nil {
		t.Fatal(err)
	}
	// One core, one P: two Ps would time-slice two threads on it.
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d while pinned to one core, want 1", got)
	}
	threads := func() map[int][]int {
		out := map[int][]int{}
		entries, _ := readTasks()
		for _, tid := range entries {
			if c, err := Of(tid); err == nil {
				out[tid] = c
			}
		}
		return out
	}
	for tid, c := range threads() {
		if !slices.Equal(c, want) {
			t.Errorf("thread %d on %v while pinned, want %v", tid, c, want)
		}
	}
	// A thread started now inherits the pin.
	done := make(chan []int)
	go func() {
		runtime.LockOSThread()
		c, _ := Of(0)
		done <- c
	}()
	if c := <-done; !slices.Equal(c, want) {
		t.Errorf("a new thread runs on %v, want %v", c, want)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after restore, want %d back", got, procs)
	}
	for tid, c := range threads() {
		if !slices.Equal(c, allowed) {
			t.Errorf("thread %d on %v after restore, want %v", tid, c, allowed)
		}
	}
}

func readTasks() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	return tids, nil
}
