package local

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/internal/affinity"
)

// DefaultServerUser is the system user PostgreSQL runs as when noisysim runs
// as root.
const DefaultServerUser = "postgres"

// osUser is who PostgreSQL's programs run as and who owns their files.
type osUser struct {
	name     string
	uid, gid int
	// switchTo is true when noisysim runs as root and must switch to this
	// user to run PostgreSQL's programs.
	switchTo bool
}

// serverUser returns the user to run PostgreSQL as: the current user, or
// name when running as root.
func serverUser(name string) (osUser, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return osUser{}, fmt.Errorf("look up current user: %w", err)
		}
		return osUser{name: u.Username, uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	if name == "" {
		name = DefaultServerUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		return osUser{}, &ServerUserError{User: name, Err: err}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil || uid == 0 {
		return osUser{}, &ServerUserError{User: name, Err: fmt.Errorf("unusable uid %s gid %s", u.Uid, u.Gid)}
	}
	return osUser{name: u.Username, uid: uid, gid: gid, switchTo: true}, nil
}

// chown gives path to u when noisysim switches users; otherwise it does
// nothing (files are already ours).
func (u osUser) chown(path string) error {
	if !u.switchTo {
		return nil
	}
	if err := os.Lchown(path, u.uid, u.gid); err != nil {
		return fmt.Errorf("chown %s: %w", path, err)
	}
	return nil
}

// cancelWaitDelay bounds how long a cancelled command's output is waited
// for once its process group has been killed.
const cancelWaitDelay = 5 * time.Second

// command prepares cmd to run as u in its own process group (so that a
// Ctrl-C at the terminal does not reach it before noisysim can stop it),
// with a minimal environment (no PG* variable of the caller leaks in) and
// dir as working directory. For a cmd made by exec.CommandContext,
// cancelling the context kills the whole process group, not only cmd:
// pg_basebackup -X stream and initdb fork children that would otherwise
// survive and hold cmd's output pipe open forever. It returns cmd.
func (u osUser) command(cmd *exec.Cmd, dir string) *exec.Cmd {
	if cmd.Cancel != nil {
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = cancelWaitDelay
	}
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "LANG=C"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		cmd.Env = append(cmd.Env, "TZ="+tz)
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if u.switchTo {
		attr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}
	}
	cmd.SysProcAttr = attr
	return cmd
}

// The postmasters of a non-kept cluster are started with a parent-death
// signal (SIGQUIT: immediate shutdown), so that the kernel stops them if
// noisysim dies without tearing down, even by SIGKILL. The kernel sends it
// when the *thread* that forked the child exits, so every such child is
// forked from one goroutine locked to its OS thread, which lives exactly as
// long as one such child does.
var deathSpawner spawner

type spawnReq struct {
	cmd   *exec.Cmd
	group *cgroup.Group // nil: none
	cores []int         // nil: any
	reply chan error
}

type spawner struct {
	mu   sync.Mutex
	live int
	reqs chan spawnReq
	done chan struct{}
}

// start starts cmd from the locked thread with Pdeathsig set, in group
// when not nil (the thread joins it for the fork only), pinned to cores
// when not nil (the thread takes them for the fork only). On success the
// caller must call release once cmd has been waited for.
func (s *spawner) start(cmd *exec.Cmd, group *cgroup.Group, cores []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reqs == nil {
		s.reqs = make(chan spawnReq)
		s.done = make(chan struct{})
		go s.loop(s.reqs, s.done)
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	reply := make(chan error)
	s.reqs <- spawnReq{cmd, group, cores, reply}
	if err := <-reply; err != nil {
		s.stopIfIdle()
		return err
	}
	s.live++
	return nil
}

// release records that a child started by start has been waited for.
func (s *spawner) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	s.stopIfIdle()
}

func (s *spawner) stopIfIdle() {
	if s.live > 0 || s.reqs == nil {
		return
	}
	close(s.reqs)
	<-s.done
	s.reqs, s.done = nil, nil
}

func (s *spawner) loop(reqs <-chan spawnReq, done chan<- struct{}) {
	// Never unlocked: when the loop ends its thread exits, which is harmless
	// because no child forked from it is alive by then.
	runtime.LockOSThread()
	for r := range reqs {
		start := func(cmd *exec.Cmd) error { return affinity.OnThread(r.cores, cmd.Start) }
		group := r.group
		if p := cgroup.Current(); group == nil && p != nil {
			// Not in noisysim's own group (cgroup.Prioritize): a server
			// keeps the weight every process has.
			group = p.Home()
		}
		if group != nil {
			r.reply <- group.StartOnThread(r.cmd, start)
			continue
		}
		r.reply <- start(r.cmd)
	}
	close(done)
}

// onLockedThread runs f on an OS thread of its own (affinity.OnThread
// changes the thread's affinity for a fork). The thread is never unlocked:
// it exits with the goroutine, whatever affinity f left it with.
func onLockedThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- f()
	}()
	return <-errc
}
