package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is a cgroup hierarchy's version.
type Version int

// Versions.
const (
	V1 Version = 1
	V2 Version = 2
)

// ErrUnavailable marks a machine where CPU budgets cannot be enforced: no
// cgroup hierarchy with the cpu controller, or one noisysim cannot write
// (not root, mounted read-only).
var ErrUnavailable = errors.New("CPU budgets unavailable")

// UnavailableError says why CPU budgets cannot be enforced. It unwraps to
// ErrUnavailable.
type UnavailableError struct {
	Reason string
}

func (e *UnavailableError) Error() string {
	return "cannot give nodes CPU budgets: " + e.Reason
}

// Unwrap returns ErrUnavailable.
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// Hierarchy is a mounted cgroup hierarchy with the cpu controller.
type Hierarchy struct {
	// Root is the mount point, e.g. /sys/fs/cgroup/cpu (v1) or
	// /sys/fs/cgroup (v2).
	Root    string
	Version Version

	// write writes one control file; nil means writeFile. Tests replace it
	// with a model of the kernel's checks.
	write func(path, value string) error
}

// Detect finds the cpu controller's hierarchy from /proc/self/mountinfo: a
// cgroup v1 mount with the cpu option wins (on a hybrid machine the v2
// mount then has no cpu controller), else a cgroup2 mount whose
// cgroup.controllers lists cpu. It checks that noisysim can create groups
// there. Errors are *UnavailableError.
func Detect() (Hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Hierarchy{}, &UnavailableError{Reason: "read mounts: " + err.Error()}
	}
	defer f.Close()
	var v1, v2 string
	var v1ro, v2ro bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 6 || len(qf) < 3 {
			continue
		}
		mnt, ro := unescape(pf[4]), slices.Contains(strings.Split(pf[5], ","), "ro")
		switch qf[0] {
		case "cgroup":
			if v1 == "" && slices.Contains(strings.Split(qf[2], ","), "cpu") {
				v1, v1ro = mnt, ro
			}
		case "cgroup2":
			if v2 == "" {
				v2, v2ro = mnt, ro
			}
		}
	}
	var h Hierarchy
	switch {
	case v1 != "":
		if v1ro {
			return h, &UnavailableError{Reason: v1 + " (cgroup v1 cpu) is mounted read-only"}
		}
		h = Hierarchy{Root: v1, Version: V1}
	case v2 != "":
		ctl, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers"))
		if err != nil || !slices.Contains(strings.Fields(string(ctl)), "cpu") {
			return h, &UnavailableError{Reason: "the cgroup v2 hierarchy at " + v2 + " has no cpu controller"}
		}
		if v2ro {
			return h, &UnavailableError{Reason: v2 + " (cgroup v2) is mounted read-only"}
		}
		h = Hierarchy{Root: v2, Version: V2}
	default:
		return h, &UnavailableError{Reason: "no cgroup hierarchy with the cpu controller is mounted"}
	}
	if err := syscall.Access(h.Root, 0o2); err != nil { // W_OK
		return h, &UnavailableError{Reason: fmt.Sprintf("%s is not writable (%v); run as root", h.Root, err)}
	}
	return h, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Group is one cgroup of a Hierarchy.
type Group struct {
	h Hierarchy
	// Path is the group's directory.
	Path string
}

// Group returns the group at rel (slash-separated, relative to the root)
// without creating it.
func (h Hierarchy) Group(rel string) *Group {
	return &Group{h: h, Path: filepath.Join(h.Root, filepath.FromSlash(rel))}
}

// Create makes the group at rel and its missing ancestors and returns it.
// On cgroup v2 it enables the cpu controller for the children of each
// ancestor from the root down. An existing group is reused.
func (h Hierarchy) Create(rel string) (*Group, error) {
	g := h.Group(rel)
	parts := strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/")
	dir := h.Root
	for _, p := range parts {
		if h.Version == V2 {
			if err := h.enableCPU(dir); err != nil {
				return nil, err
			}
		}
		dir = filepath.Join(dir, p)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
				return nil, &UnavailableError{Reason: fmt.Sprintf("create cgroup %s: %v", dir, err)}
			}
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
	return g, nil
}

func (h Hierarchy) enableCPU(dir string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	cur, err := os.ReadFile(f)
	if err == nil && slices.Contains(strings.Fields(string(cur)), "cpu") {
		return nil
	}
	if err := h.writeFile(f, "+cpu"); err != nil {
		return &UnavailableError{Reason: fmt.Sprintf("enable the cpu controller in %s: %v", dir, err)}
	}
	return nil
}

func (h Hierarchy) writeFile(path, value string) error {
	if h.write != nil {
		return h.write(path, value)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Limit reads the group's CPU limit back from the kernel's files.
func (g *Group) Limit() (Limit, error) {
	if g.h.Version == V2 {
		b, err := os.ReadFile(filepath.Join(g.Path, "cpu.max"))
		if err != nil {
			return Limit{}, fmt.Errorf("read cpu limit: %w", err)
		}
		return ParseV2(string(b))
	}
	q, err := os.ReadFile(filepath.Join(g.Path, "cpu.cfs_quota_us"))
	if err != nil {
		return Limit{}, fmt.Errorf("read cpu limit: %w", err)
	}
	p, err := os.ReadFile(filepath.Join(g.Path, "cpu.cfs_period_us"))
	if err != nil {
		return Limit{}, fmt.Errorf("read cpu limit: %w", err)
	}
	return ParseV1(string(q), string(p))
}

// Ceiling returns the tightest limit among the group's ancestors up to the
// hierarchy's root (the root's own files, where it has them, included), and
// the ancestor that sets it ("" when none does).
func (g *Group) Ceiling() (Limit, string, error) {
	ceil, by := Unlimited, ""
	root := filepath.Clean(g.h.Root)
	for dir := filepath.Dir(g.Path); ; dir = filepath.Dir(dir) {
		if !strings.HasPrefix(dir, root) {
			break
		}
		l, err := (&Group{h: g.h, Path: dir}).Limit()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Limit{}, "", err
		}
		if err == nil && !ceil.Within(l) {
			ceil, by = l, dir
		}
		if dir == root {
			break
		}
	}
	return ceil, by, nil
}

// Set writes l as the group's limit. It first checks l against the
// tightest ancestor limit (see Ceiling) and returns an error wrapping
// ErrBadBudget if it is above: cgroup v1 would refuse it with EINVAL and v2
// silently cap it. On v1 it writes quota and period in the order that never
// passes through a larger limit (see v1Steps); on v2 it writes cpu.max in
// one go. It reads the limit back and fails if the kernel holds another.
func (g *Group) Set(l Limit) error {
	ceil, by, err := g.Ceiling()
	if err != nil {
		return err
	}
	if !l.Within(ceil) {
		return fmt.Errorf("%w: %s is above the %s of cgroup %s, which holds it", ErrBadBudget, l, ceil, by)
	}
	if g.h.Version == V2 {
		if err := g.h.writeFile(filepath.Join(g.Path, "cpu.max"), l.V2()); err != nil {
			return fmt.Errorf("set cpu.max of %s to %q: %w", g.Path, l.V2(), err)
		}
	} else {
		cur, err := g.Limit()
		if err != nil {
			return err
		}
		quota := func() error {
			return g.h.writeFile(filepath.Join(g.Path, "cpu.cfs_quota_us"), strconv.FormatInt(l.Quota, 10))
		}
		period := func() error {
			return g.h.writeFile(filepath.Join(g.Path, "cpu.cfs_period_us"), strconv.FormatInt(l.Period, 10))
		}
		first, second := period, quota
		if v1Steps(cur, l) {
			first, second = quota, period
		}
		if err := first(); err != nil {
			return fmt.Errorf("set cpu limit of %s to %s: %w", g.Path, l, err)
		}
		if err := second(); err != nil {
			return fmt.Errorf("set cpu limit of %s to %s: %w", g.Path, l, err)
		}
	}
	got, err := g.Limit()
	if err != nil {
		return err
	}
	if got != l && !(got.IsUnlimited() && l.IsUnlimited()) {
		return fmt.Errorf("set cpu limit of %s: wrote %s, the kernel holds %s", g.Path, l, got)
	}
	return nil
}

// Procs returns the pids in the group.
func (g *Group) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.Path, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("read cgroup.procs: %w", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Start starts cmd (through start, e.g. exec.Cmd.Start or a spawner that
// sets more attributes) so that the process is in g from its first
// instruction, and its children with it. On cgroup v1 the starting OS
// thread joins g for the fork and leaves it right after; on v2 the process
// is cloned into g (CLONE_INTO_CGROUP).
//
// start runs on a thread locked for the call; if it needs to fork from a
// particular thread of its own (a parent-death signal), use StartOnThread.
func (g *Group) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: if leaving g fails, the thread dies with the
		// goroutine instead of running other goroutines inside g.
		runtime.LockOSThread()
		errc <- g.StartOnThread(cmd, start)
	}()
	return <-errc
}

// StartOnThread is Start for a caller already locked to its OS thread
// (runtime.LockOSThread): start runs on the calling thread. On cgroup v1
// the thread joins g for the fork and then goes back to the cgroup it was
// in.
func (g *Group) StartOnThread(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	if g.h.Version == V2 {
		dir, err := os.Open(g.Path)
		if err != nil {
			return fmt.Errorf("open cgroup %s: %w", g.Path, err)
		}
		defer dir.Close()
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(dir.Fd())
		return start(cmd)
	}
	tid := strconv.Itoa(syscall.Gettid())
	home, err := threadGroup(g.h, tid)
	if err != nil {
		return err
	}
	if err := g.h.writeFile(filepath.Join(g.Path, "tasks"), tid); err != nil {
		return fmt.Errorf("join cgroup %s: %w", g.Path, err)
	}
	serr := start(cmd)
	if err := g.h.writeFile(filepath.Join(home, "tasks"), tid); err != nil {
		return errors.Join(serr, fmt.Errorf("leave cgroup %s: %w", g.Path, err))
	}
	return serr
}

// threadGroup returns the directory of the v1 cpu group thread tid of this
// process is in.
func threadGroup(h Hierarchy, tid string) (string, error) {
	b, err := os.ReadFile("/proc/self/task/" + tid + "/cgroup")
	if err != nil {
		return "", fmt.Errorf("read thread cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return filepath.Join(h.Root, filepath.FromSlash(f[2])), nil
		}
	}
	return "", fmt.Errorf("thread %s: no cpu cgroup in /proc/self/task/%s/cgroup", tid, tid)
}

// removeWait bounds how long Remove waits for exiting processes to leave.
const removeWait = 5 * time.Second

// Remove removes the group (rmdir), first moving any process still in it
// to the hierarchy's root so that no process is left throttled; a group
// that does not exist is no error. It waits up to 5 s for exiting
// processes to leave.
func (g *Group) Remove() error {
	deadline := time.Now().Add(removeWait)
	for {
		err := syscall.Rmdir(g.Path)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", g.Path, err)
		}
		if pids, _ := g.Procs(); len(pids) > 0 {
			for _, p := range pids {
				g.h.writeFile(filepath.Join(g.h.Root, "cgroup.procs"), strconv.Itoa(p))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RemoveTree removes the group and every group under it, deepest first.
func (g *Group) RemoveTree() error {
	var dirs []string
	filepath.WalkDir(g.Path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := (&Group{h: g.h, Path: dirs[i]}).Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
