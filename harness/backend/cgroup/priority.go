package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// DefaultWeight is how many times the default CPU weight Prioritize gives
// noisysim's process: 8 (cpu.shares 8192 on v1, cpu.weight 800 on v2), so
// that it weighs as much as eight busy server processes, not as one.
const DefaultWeight = 8

// Priority is this process moved into a cpu group of its own with a larger
// CPU weight than the default, for as long as a measured run lasts.
//
// Why: a load generator on the machine of the servers it loads shares the
// CPUs with them. Where the kernel groups processes by session (autogroup,
// the default of desktop and many server kernels), every PostgreSQL backend
// is a session of its own and weighs as much as the whole of noisysim, so
// 40 busy backends leave noisysim 1/41 of a CPU: it wakes up late, sends
// late and measures its own delay as the database's. In a group whose weight
// is DefaultWeight times the default it gets the CPU it asks for (it asks
// for little); the servers share the rest among themselves exactly as
// before, since they stay where they were.
//
// Children started while a Priority is in force must not inherit it: start
// them through StartChild (or Priority.Start), which forks them in the group
// the process was in before.
type Priority struct {
	h      Hierarchy
	g      *Group
	home   *Group
	weight int
	closed bool
}

// current is the Priority in force, nil for none: StartChild reads it.
var current atomic.Pointer[Priority]

// Prioritize moves this process into the group rel (created, with weight
// times the default CPU weight; a weight counts against the group's
// siblings only, so rel should be a child of the root to weigh against the
// servers) and returns the Priority in force until
// Close. Only one Priority can be in force at a time. Errors from a
// machine whose cgroups noisysim cannot write are *UnavailableError.
func (h Hierarchy) Prioritize(rel string, weight int) (*Priority, error) {
	if weight < 1 {
		return nil, fmt.Errorf("prioritize: weight %d: must be at least 1", weight)
	}
	home, err := processGroup(h)
	if err != nil {
		return nil, err
	}
	g, err := h.Create(rel)
	if err != nil {
		return nil, err
	}
	p := &Priority{h: h, g: g, home: home, weight: weight}
	if !current.CompareAndSwap(nil, p) {
		g.Remove()
		return nil, errors.New("prioritize: this process is already prioritized")
	}
	fail := func(err error) (*Priority, error) {
		current.Store(nil)
		h.writeFile(filepath.Join(home.Path, "cgroup.procs"), strconv.Itoa(os.Getpid()))
		g.Remove()
		return nil, err
	}
	file, value := "cpu.shares", strconv.Itoa(1024*weight)
	if h.Version == V2 {
		file, value = "cpu.weight", strconv.Itoa(min(100*weight, 10000))
	}
	if err := h.writeFile(filepath.Join(g.Path, file), value); err != nil {
		return fail(fmt.Errorf("set %s of %s: %w", file, g.Path, err))
	}
	if err := h.writeFile(filepath.Join(g.Path, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fail(&UnavailableError{Reason: fmt.Sprintf("move noisysim into %s: %v", g.Path, err)})
		}
		return fail(fmt.Errorf("move noisysim into %s: %w", g.Path, err))
	}
	return p, nil
}

// String says where the process runs and with what weight, e.g.
// "cgroup v1 /sys/fs/cgroup/cpu/noisysim-gen-123, cpu.shares 8192".
func (p *Priority) String() string {
	if p.h.Version == V2 {
		return fmt.Sprintf("cgroup v2 %s, cpu.weight %d", p.g.Path, min(100*p.weight, 10000))
	}
	return fmt.Sprintf("cgroup v1 %s, cpu.shares %d", p.g.Path, 1024*p.weight)
}

// Group is the group the process runs in.
func (p *Priority) Group() *Group { return p.g }

// Home is the group the process was in, where its children start.
func (p *Priority) Home() *Group { return p.home }

// Start starts cmd (through start, e.g. exec.Cmd.Start) in the group the
// process was in before Prioritize. On cgroup v1 the calling goroutine's
// thread joins that group for the fork and comes back (Group.StartOnThread);
// the thread then goes on serving goroutines as any other, so a
// parent-death signal (SysProcAttr.Pdeathsig) behaves as after a plain
// Start. Should it fail to come back, the thread is left locked and exits
// with the goroutine rather than run noisysim outside its group. On v2 the
// child is cloned into that group (CLONE_INTO_CGROUP).
func (p *Priority) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if p.h.Version == V2 {
		return p.home.StartOnThread(cmd, start)
	}
	runtime.LockOSThread()
	err := p.home.StartOnThread(cmd, start)
	if g, gerr := threadGroup(p.h, strconv.Itoa(syscall.Gettid())); gerr == nil && g == p.g.Path {
		runtime.UnlockOSThread()
	}
	return err
}

// Close moves the process back into the group it was in and removes its
// group. It is idempotent.
func (p *Priority) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.h.writeFile(filepath.Join(p.home.Path, "cgroup.procs"), strconv.Itoa(os.Getpid()))
	current.CompareAndSwap(p, nil)
	if err != nil {
		return fmt.Errorf("move noisysim back into %s: %w", p.home.Path, err)
	}
	return p.g.Remove()
}

// StartChild starts cmd through start, outside the Priority in force if
// there is one (Priority.Start), else as start does. Every long-lived child
// of noisysim (servers, services, tools it measures) is started so.
func StartChild(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if p := current.Load(); p != nil {
		return p.Start(cmd, start)
	}
	return start(cmd)
}

// Current returns the Priority in force, nil for none.
func Current() *Priority { return current.Load() }

// processGroup returns the cpu group this process is in.
func processGroup(h Hierarchy) (*Group, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if (h.Version == V1 && hasCPU(f[1])) || (h.Version == V2 && f[0] == "0" && f[1] == "") {
			return &Group{h: h, Path: filepath.Join(h.Root, filepath.FromSlash(f[2]))}, nil
		}
	}
	return nil, fmt.Errorf("no cpu cgroup in /proc/self/cgroup")
}

func hasCPU(controllers string) bool {
	for _, c := range strings.Split(controllers, ",") {
		if c == "cpu" {
			return true
		}
	}
	return false
}
