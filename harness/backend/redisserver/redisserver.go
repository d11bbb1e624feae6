// Package redisserver starts a throwaway redis-server on loopback, the way
// the local backend starts PostgreSQL: Debian's redis-server binary, found
// on the machine, a port of its own, no persistence, a temporary directory
// removed on Stop. It serves the global limiter of `app.limiter: global`
// when the scenario gives no redis_url, and the Redis limiter's tests.
//
//	bin, err := redisserver.Find("")
//	if err != nil {
//		return err // *NotFoundError: backend.ErrNotInstalled (exit 2)
//	}
//	srv, err := redisserver.Start(ctx, bin)
//	if err != nil {
//		return err
//	}
//	defer srv.Stop()
//	url := srv.URL() // redis://127.0.0.1:<port>/0
package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
)

// EnvBinary names the environment variable that, when set, is the only
// redis-server binary tried.
const EnvBinary = "NOISYSIM_REDIS_SERVER"

// StartTimeout bounds the wait for a started server to answer PING.
const StartTimeout = 10 * time.Second

// ErrNotFound is matched by *NotFoundError.
var ErrNotFound = errors.New("redis-server not found")

// NotFoundError says where redis-server was looked for. It unwraps to
// ErrNotFound and backend.ErrNotInstalled.
type NotFoundError struct{ Searched []string }

// Error names the places searched and the package to install.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("redis-server not found (searched %s); install Debian's redis-server package: apt-get install redis-server",
		strings.Join(e.Searched, ", "))
}

// Unwrap returns ErrNotFound and backend.ErrNotInstalled.
func (e *NotFoundError) Unwrap() []error { return []error{ErrNotFound, backend.ErrNotInstalled} }

// Find returns the path of redis-server: path when non-empty (only it),
// else $NOISYSIM_REDIS_SERVER when set (only it), else PATH, then
// /usr/bin/redis-server (Debian's package) and /usr/local/bin/redis-server.
// It returns a *NotFoundError when none is an executable file.
func Find(path string) (string, error) {
	ok := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
	}
	if path != "" {
		if ok(path) {
			return path, nil
		}
		return "", &NotFoundError{Searched: []string{path}}
	}
	if p := os.Getenv(EnvBinary); p != "" {
		if ok(p) {
			return p, nil
		}
		return "", &NotFoundError{Searched: []string{EnvBinary + "=" + p}}
	}
	searched := []string{"PATH"}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if ok(p) {
			return p, nil
		}
		searched = append(searched, p)
	}
	return "", &NotFoundError{Searched: searched}
}

// Server is a running throwaway redis-server. Stop it when done.
type Server struct {
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	stop sync.Once
}

// Start runs bin on 127.0.0.1 at a free port, without persistence, in a
// new temporary directory, and waits until it answers PING. On error
// nothing is left running or on disk.
func Start(ctx context.Context, bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "noisysim-redis-")
	if err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{bin: bin, dir: dir, port: port}
	if err := s.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"), "--protected-mode", "yes")
	if err := cgroup.StartChild(cmd, (*exec.Cmd).Start); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(StartTimeout)
	for {
		if ping(s.Addr()) == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("start redis-server: exited at start: %s", s.logTail())
		case <-ctx.Done():
			s.kill()
			return fmt.Errorf("start redis-server: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("start redis-server: no answer on %s within %v: %s", s.Addr(), StartTimeout, s.logTail())
		}
	}
}

// ping sends PING in RESP and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("ping: %q", strings.TrimSpace(line))
	}
	return nil
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// kill stops the process at once (SIGKILL) and waits for it.
func (s *Server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's redis:// URL (database 0).
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Restart kills the server (SIGKILL: its data is gone, as after a crash
// without persistence) and starts a new one on the same port.
func (s *Server) Restart(ctx context.Context) error {
	s.kill()
	return s.start(ctx)
}

// Kill stops the server at once without restarting it; Restart or Stop
// may follow.
func (s *Server) Kill() { s.kill() }

// Stop kills the server and removes its directory. It is idempotent.
func (s *Server) Stop() {
	s.stop.Do(func() {
		s.kill()
		os.RemoveAll(s.dir)
	})
}
