// Package affinity pins processes and threads to CPU cores, so that one
// machine can behave like several: a node of a local cluster that runs on
// cores of its own is not slowed by the wake-ups of another node's busy
// backends on the same core, which a CPU budget (a quota) alone cannot
// prevent.
//
// Cores are written as Linux writes CPU lists (cpuset(7)): "0", "1-3",
// "0,2-3".
package affinity

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxCores is how many cores a unix.CPUSet holds (the kernel's
// CPU_SETSIZE, 1024).
var maxCores = len(unix.CPUSet{}) * int(unsafe.Sizeof(unix.CPUSet{}[0])) * 8

// ErrBadList marks a CPU list that cannot be parsed or names a core this
// process may not run on.
var ErrBadList = errors.New("bad CPU list")

// Parse reads a CPU list such as "0,2-3" into sorted, distinct core
// numbers. An empty list is an error.
func Parse(list string) ([]int, error) {
	s := strings.TrimSpace(list)
	if s == "" {
		return nil, fmt.Errorf("%w: empty (want e.g. \"0\", \"1-3\" or \"0,2\")", ErrBadList)
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := core(lo)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadList, list, err)
		}
		b := a
		if isRange {
			if b, err = core(hi); err != nil {
				return nil, fmt.Errorf("%w: %q: %v", ErrBadList, list, err)
			}
			if b < a {
				return nil, fmt.Errorf("%w: %q: range %s runs backwards", ErrBadList, list, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func core(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a core number", s)
	}
	if n >= maxCores {
		return 0, fmt.Errorf("core %d is beyond the kernel's %d", n, maxCores)
	}
	return n, nil
}

// Format writes cores as a CPU list ("0,2-3").
func Format(cores []int) string {
	var b strings.Builder
	for i := 0; i < len(cores); {
		j := i
		for j+1 < len(cores) && cores[j+1] == cores[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cores[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cores[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Allowed returns the cores this process may run on now.
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read CPU affinity: %w", err)
	}
	return cores(&set), nil
}

// Check returns an error wrapping ErrBadList unless every core is one this
// process may run on.
func Check(cores []int) error {
	allowed, err := Allowed()
	if err != nil {
		return err
	}
	for _, c := range cores {
		if !slices.Contains(allowed, c) {
			return fmt.Errorf("%w: core %d is not one this machine lets noisysim use (%s)", ErrBadList, c, Format(allowed))
		}
	}
	return nil
}

func cores(set *unix.CPUSet) []int {
	var out []int
	for c := 0; c < maxCores; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

func setOf(cores []int) *unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cores {
		set.Set(c)
	}
	return &set
}

// OnThread runs fork with the calling OS thread pinned to cores, then puts
// the thread's affinity back: a process forked by fork inherits the cores,
// and so do all its children (PostgreSQL's backends). The caller must hold
// its OS thread (runtime.LockOSThread) for the call. No cores runs fork as
// it is.
func OnThread(cores []int, fork func() error) error {
	if len(cores) == 0 {
		return fork()
	}
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return fmt.Errorf("read CPU affinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, setOf(cores)); err != nil {
		return fmt.Errorf("pin to cores %s: %w", Format(cores), err)
	}
	ferr := fork()
	if err := unix.SchedSetaffinity(0, &was); err != nil {
		return errors.Join(ferr, fmt.Errorf("restore CPU affinity: %w", err))
	}
	return ferr
}

// Pin pins every thread of this process to cores (threads started later
// inherit it from the thread that starts them) and returns the function
// that puts each thread's affinity back to what the process had. No cores
// pins nothing.
//
// It also lowers GOMAXPROCS to the number of cores while pinned: the Go
// runtime sizes it from the cores at start and does not follow a later
// affinity change, so two Ps on one core would run two threads the kernel
// time-slices against each other, and a goroutine ready to send or time a
// request would wait a scheduler slice (milliseconds) behind the other, or
// behind a GC worker. The restore function puts GOMAXPROCS back.
func Pin(cores []int) (restore func() error, err error) {
	if len(cores) == 0 {
		return func() error { return nil }, nil
	}
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return nil, fmt.Errorf("read CPU affinity: %w", err)
	}
	if err := setAll(setOf(cores)); err != nil {
		setAll(&was)
		return nil, fmt.Errorf("pin noisysim to cores %s: %w", Format(cores), err)
	}
	procs := runtime.GOMAXPROCS(0)
	if len(cores) < procs {
		runtime.GOMAXPROCS(len(cores))
	}
	return func() error {
		if len(cores) < procs {
			runtime.GOMAXPROCS(procs)
		}
		return setAll(&was)
	}, nil
}

// setAll sets every thread's affinity, going over the threads until a pass
// finds no thread it has not set (one may start during a pass).
func setAll(set *unix.CPUSet) error {
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		fresh := 0
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh++
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			done[tid] = true
		}
		if fresh == 0 {
			return nil
		}
	}
	return nil
}

// Of returns the cores process (or thread) pid may run on.
func Of(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, fmt.Errorf("read CPU affinity of %d: %w", pid, err)
	}
	return cores(&set), nil
}
