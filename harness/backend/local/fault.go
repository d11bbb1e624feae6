package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

// Fault is what Inject does to a node's processes.
type Fault string

// Faults.
const (
	// FaultStop shuts the node down at once (SIGQUIT: an immediate
	// shutdown, sessions fail, the restart recovers from the WAL);
	// restoring starts it again from the same data directory on the same
	// port, in its CPU budget group and on its cores, and waits until it
	// accepts connections.
	FaultStop Fault = "stop"
	// FaultPause freezes the node: SIGSTOP to the postmaster, then to every
	// process it forked (sessions hang rather than fail); restoring sends
	// them SIGCONT.
	FaultPause Fault = "pause"
)

// Faults lists the faults Inject knows. A local node cannot be
// disconnected: every node listens on the loopback interface noisysim
// itself uses.
var Faults = []Fault{FaultStop, FaultPause}

// ErrFaulted is returned by Inject for a node already under a fault.
var ErrFaulted = errors.New("node already under a fault")

// haltWait bounds how long an immediate shutdown is waited for before
// the node's processes are killed.
const haltWait = 5 * time.Second

// Restore undoes a fault: it starts a stopped node again and waits until it
// accepts connections (FaultStop), or resumes a paused one (FaultPause).
// Calling it more than once is harmless: later calls return the first
// call's error.
type Restore func(ctx context.Context) error

// Inject applies fault to the node named name and returns how to undo it.
// Errors: an unknown node or fault (backend.ErrBadInput), a node already
// under a fault (ErrFaulted) or not running. Close undoes a fault left in
// place (it resumes a paused node before stopping it).
func (c *Cluster) Inject(ctx context.Context, name string, fault Fault) (Restore, error) {
	var n *node
	for _, m := range c.nodes {
		if m.Name == name {
			n = m
		}
	}
	if n == nil {
		return nil, fmt.Errorf("inject %s: unknown node %q: %w", fault, name, backend.ErrBadInput)
	}
	var undo func(context.Context) error
	switch fault {
	case FaultStop:
		if err := n.claimFault(); err != nil {
			return nil, err
		}
		if err := n.halt(); err != nil {
			n.endFault()
			return nil, err
		}
		undo = func(ctx context.Context) error {
			defer n.endFault()
			if err := n.relaunch(ctx); err != nil {
				return err
			}
			return c.writeState()
		}
	case FaultPause:
		if err := n.claimFault(); err != nil {
			return nil, err
		}
		if err := n.pause(); err != nil {
			n.resume()
			n.endFault()
			return nil, err
		}
		undo = func(context.Context) error {
			defer n.endFault()
			n.resume()
			return nil
		}
	default:
		return nil, fmt.Errorf("inject: unknown fault %q (known: %v): %w", fault, Faults, backend.ErrBadInput)
	}
	c.log.Debug("fault injected", "node", name, "fault", fault)
	var once sync.Once
	var err error
	return func(ctx context.Context) error {
		once.Do(func() {
			err = undo(ctx)
			c.log.Debug("fault restored", "node", name, "fault", fault, "error", err)
		})
		return err
	}, nil
}

// claimFault marks n as under a fault.
func (n *node) claimFault() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.faulted {
		return fmt.Errorf("inject on %s: %w", n.Name, ErrFaulted)
	}
	if !n.runningLocked() {
		return fmt.Errorf("inject on %s: server not running", n.Name)
	}
	n.faulted = true
	return nil
}

func (n *node) endFault() {
	n.mu.Lock()
	n.faulted = false
	n.mu.Unlock()
}

// runningLocked reports whether the postmaster runs; n.mu is held.
func (n *node) runningLocked() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// halt shuts n down at once: SIGQUIT, and after haltWait SIGKILL to it and
// its descendants.
func (n *node) halt() error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
		return nil
	case <-time.After(haltWait):
	}
	n.kill()
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop node %s: pid %d survived SIGKILL", n.Name, n.pid)
	}
}

// relaunch starts n's server again, from its data directory on its port,
// as spawn does (the same CPU group, cores and parent-death signal), and
// waits until it accepts connections.
func (n *node) relaunch(ctx context.Context) error {
	off, err := n.spawn()
	if err != nil {
		return err
	}
	if err := n.waitReady(ctx); err != nil {
		n.kill()
		<-n.exited
		log := n.logSince(off)
		if bindFailed(log) {
			return &PortInUseError{Port: n.Port}
		}
		return &NodeStartError{Node: n.Name, Err: fmt.Errorf("restart: %w", err), Log: tail(log, 20)}
	}
	return nil
}

// pause stops the postmaster, waits until the kernel has stopped it (so
// that it is not between a fork and its return), then stops its
// descendants until a scan finds no new one, and waits until the kernel
// has stopped them too: a SIGSTOP takes effect only once its process next
// runs, and on a busy machine a backend woken by it can wait for a CPU
// long enough to answer a query after the pause was reported. The pids
// stopped are kept in n.paused for resume.
func (n *node) pause() error {
	n.mu.Lock()
	pid := n.pid
	n.paused = []int{pid}
	n.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause node %s: %w", n.Name, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for procState(pid) != 'T' {
		if time.Now().After(deadline) {
			return fmt.Errorf("pause node %s: pid %d did not stop", n.Name, pid)
		}
		time.Sleep(time.Millisecond)
	}
	seen := map[int]bool{pid: true}
	for {
		var fresh []int
		for _, d := range descendants(pid) {
			if !seen[d] {
				seen[d] = true
				fresh = append(fresh, d)
			}
		}
		if len(fresh) == 0 {
			break
		}
		for _, d := range fresh {
			syscall.Kill(d, syscall.SIGSTOP)
		}
		n.mu.Lock()
		n.paused = append(n.paused, fresh...)
		n.mu.Unlock()
	}
	for d := range seen {
		// 0: the process has exited and been reaped; 'Z': exited.
		for st := procState(d); st != 'T' && st != 0 && st != 'Z'; st = procState(d) {
			if time.Now().After(deadline) {
				return fmt.Errorf("pause node %s: pid %d did not stop (state %c)", n.Name, d, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// resume sends SIGCONT to the processes pause stopped and to every
// descendant of the postmaster, the postmaster last. It does nothing for
// a node not paused.
func (n *node) resume() {
	n.mu.Lock()
	paused := n.paused
	n.paused = nil
	n.mu.Unlock()
	if len(paused) == 0 {
		return
	}
	// Every process is listed before any is continued: the scan of /proc
	// takes tens of milliseconds on a busy machine, and backends
	// continued before it would answer the queries the pause held while
	// the restore is still under way.
	procs := append(descendants(paused[0]), paused[1:]...)
	for _, p := range procs {
		syscall.Kill(p, syscall.SIGCONT)
	}
	syscall.Kill(paused[0], syscall.SIGCONT)
}

// resumeTree sends SIGCONT to pid's descendants, then to pid.
func resumeTree(pid int) {
	for _, d := range descendants(pid) {
		syscall.Kill(d, syscall.SIGCONT)
	}
	syscall.Kill(pid, syscall.SIGCONT)
}

// procState returns the state letter of /proc/pid/stat (R, S, T, …), 0
// when it cannot be read.
func procState(pid int) byte {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0
	}
	return data[i+2]
}
