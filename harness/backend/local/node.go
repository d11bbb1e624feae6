package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/internal/affinity"
)

// errClosing is returned by a node start racing with Close.
var errClosing = errors.New("cluster is closing")

// maxPortAttempts bounds retries when a picked port is taken before the
// server binds it.
const maxPortAttempts = 8

// pollInterval is how often start-up conditions are polled.
const pollInterval = 5 * time.Millisecond

type node struct {
	backend.Node
	c        *Cluster
	plan     nodePlan
	upstream *node

	dir, dataDir, sockDir, logPath string
	fixedPort                      int

	mu       sync.Mutex
	cmd      *exec.Cmd
	pid      int
	exited   chan struct{} // closed once the postmaster has been waited for
	deathsig bool
	// faulted is true while Inject's fault holds; paused lists the pids a
	// pause stopped, the postmaster first (nil when not paused).
	faulted bool
	paused  []int
}

func newNode(c *Cluster, p nodePlan) *node {
	dir := filepath.Join(c.dir, p.name)
	return &node{
		Node: backend.Node{
			Name: p.name, Role: p.role, Host: "127.0.0.1",
			Database: database, User: superuser, Password: c.password,
		},
		c:       c,
		plan:    p,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		sockDir: filepath.Join(dir, "sock"),
		logPath: filepath.Join(dir, "server.log"),
	}
}

// slot is the replication slot a replica streams through.
func (n *node) slot() string { return "noisysim_" + n.Name }

func (n *node) stat() NodeStat {
	n.mu.Lock()
	defer n.mu.Unlock()
	running := false
	if n.exited != nil {
		select {
		case <-n.exited:
		default:
			running = true
		}
	}
	return NodeStat{Node: n.Node, PID: n.pid, Running: running, DataDir: n.dataDir, LogPath: n.logPath, SocketDir: n.sockDir}
}

// start creates the node's data directory and starts its server.
func (n *node) start(ctx context.Context) error {
	c := n.c
	for _, d := range []string{n.dir, n.sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("create node dir: %w", err)
		}
		if err := c.user.chown(d); err != nil {
			return err
		}
	}
	if n.upstream == nil {
		t := time.Now()
		if err := copyTree(ctx, c.template, n.dataDir, c.user); err != nil {
			return fmt.Errorf("copy template for %s: %w", n.Name, err)
		}
		c.step(n.Name, "copy", t)
	} else if err := n.baseBackup(ctx); err != nil {
		return err
	}
	if err := n.writeAuth(); err != nil {
		return err
	}
	if n.upstream != nil {
		if err := writeFileAs(filepath.Join(n.dataDir, "standby.signal"), nil, 0o600, c.user); err != nil {
			return fmt.Errorf("write standby.signal: %w", err)
		}
	}
	t := time.Now()
	if err := n.launch(ctx); err != nil {
		return err
	}
	c.step(n.Name, "launch", t)

	t = time.Now()
	conn, err := n.connect(ctx)
	if err != nil {
		return n.startError(err)
	}
	defer conn.Close(context.Background())
	if n.upstream == nil {
		// Set per cluster, after the copy: the template holds no secret.
		// Only the SCRAM verifier travels, so the password is never in
		// the server or its log.
		v, err := scramVerifier(c.password)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "ALTER ROLE "+superuser+" PASSWORD '"+v+"'"); err != nil {
			return n.startError(fmt.Errorf("set password: %w", err))
		}
		c.step(n.Name, "password", t)
		return nil
	}
	if err := n.catchUp(ctx, conn); err != nil {
		return n.startError(err)
	}
	c.step(n.Name, "catchup", t)
	return nil
}

// baseBackup makes n's data directory from its upstream with pg_basebackup
// over the upstream's unix socket, creating n's physical replication slot.
func (n *node) baseBackup(ctx context.Context) error {
	c, up := n.c, n.upstream
	t := time.Now()
	cmd := exec.CommandContext(ctx, c.bin.Path("pg_basebackup"),
		"-D", n.dataDir, "-h", up.sockDir, "-p", strconv.Itoa(up.Port), "-U", superuser,
		"-X", "stream", "-c", "fast", "-C", "-S", n.slot(), "-N", "-w")
	c.user.command(cmd, n.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return &NodeStartError{Node: n.Name, Err: fmt.Errorf("run pg_basebackup: %w", err), Log: tail(string(out), 20)}
	}
	c.step(n.Name, "basebackup", t)
	return nil
}

// catchUp waits until n has replayed the upstream's current WAL position.
func (n *node) catchUp(ctx context.Context, conn *pgx.Conn) error {
	up, err := n.upstream.connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to upstream: %w", err)
	}
	var lsn string
	err = up.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	up.Close(context.Background())
	if err != nil {
		return fmt.Errorf("read upstream WAL position: %w", err)
	}
	for {
		var done bool
		err := conn.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done)
		if err != nil {
			return fmt.Errorf("read replay position: %w", err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for replay of %s: %w", lsn, ctx.Err())
		case <-n.exited:
			return errors.New("server exited while catching up")
		case <-time.After(pollInterval):
		}
	}
}

// connect opens a connection as the superuser over n's unix socket.
func (n *node) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable application_name=noisysim-backend connect_timeout=10",
		n.sockDir, n.Port, superuser, database))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", n.Name, err)
	}
	cfg.RuntimeParams = map[string]string{"application_name": "noisysim-backend"}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", n.Name, err)
	}
	return conn, nil
}

// launch starts the postmaster, retrying with another port when a picked
// one turns out to be taken, and waits until it accepts connections.
func (n *node) launch(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		port := n.fixedPort
		if port != 0 {
			if !portFree(port) {
				return &PortInUseError{Port: port}
			}
		} else {
			p, err := pickPort()
			if err != nil {
				return err
			}
			port = p
		}
		n.mu.Lock()
		n.Port = port
		n.mu.Unlock()
		if err := n.writeConf(port); err != nil {
			return err
		}
		logOffset, err := n.spawn()
		if err != nil {
			return err
		}
		err = n.waitReady(ctx)
		if err == nil {
			return nil
		}
		n.kill()
		<-n.exited
		log := n.logSince(logOffset)
		if bindFailed(log) {
			if n.fixedPort != 0 {
				return &PortInUseError{Port: port}
			}
			if attempt < maxPortAttempts && ctx.Err() == nil {
				n.c.log.Debug("port taken before bind, retrying", "node", n.Name, "port", port)
				continue
			}
		}
		if serr := settingFailure(log); serr != nil {
			return serr
		}
		return &NodeStartError{Node: n.Name, Err: err, Log: tail(log, 20)}
	}
}

// spawn starts the postmaster (`postgres -D`, not pg_ctl, so that it is our
// child: we can wait for it and the kernel can signal it if we die). It
// returns the log size before the start.
func (n *node) spawn() (int64, error) {
	c := n.c
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("open server log: %w", err)
	}
	defer logf.Close()
	if err := c.user.chown(n.logPath); err != nil {
		return 0, err
	}
	st, err := logf.Stat()
	if err != nil {
		return 0, fmt.Errorf("open server log: %w", err)
	}
	cmd := exec.Command(c.bin.Path("postgres"), "-D", n.dataDir)
	c.user.command(cmd, n.dir)
	if c.citus {
		// Citus connects node to node with libpq over TCP; the password
		// comes from the cluster's password file, never from a setting.
		cmd.Env = append(cmd.Env, "PGPASSFILE="+c.passfile())
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Holding c.mu from the closing check until n.cmd is recorded means a
	// concurrent Close either sees this server or prevents it.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return 0, fmt.Errorf("start postgres for %s: %w", n.Name, errClosing)
	}
	deathsig := !c.keep
	group := c.cpuGroup(n.Name)
	cores := c.cores[n.Name]
	if cores == nil {
		cores = c.anyCores
	}
	// pinned forks on the calling thread pinned to the node's cores: the
	// postmaster and every backend it forks inherit them.
	pinned := func(cmd *exec.Cmd) error { return affinity.OnThread(cores, cmd.Start) }
	switch {
	case deathsig:
		err = deathSpawner.start(cmd, group, cores)
	case group != nil:
		// A kept server must survive us and the terminal: new session,
		// no parent-death signal.
		cmd.SysProcAttr.Setpgid = false
		cmd.SysProcAttr.Setsid = true
		err = group.Start(cmd, pinned)
	default:
		cmd.SysProcAttr.Setpgid = false
		cmd.SysProcAttr.Setsid = true
		err = onLockedThread(func() error { return pinned(cmd) })
	}
	if err != nil {
		return 0, fmt.Errorf("start postgres for %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.pid, n.exited, n.deathsig = cmd, cmd.Process.Pid, exited, deathsig
	n.mu.Unlock()
	go func() {
		cmd.Wait()
		if deathsig {
			deathSpawner.release()
		}
		close(exited)
	}()
	c.log.Debug("postgres started", "node", n.Name, "pid", cmd.Process.Pid, "port", n.Port)
	return st.Size(), nil
}

// waitReady waits until postmaster.pid says the server accepts connections
// ("ready", or "standby" for a hot standby).
func (n *node) waitReady(ctx context.Context) error {
	pidFile := filepath.Join(n.dataDir, "postmaster.pid")
	want := strconv.Itoa(n.pid)
	for {
		if data, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(data), "\n")
			if len(lines) >= 8 && strings.TrimSpace(lines[0]) == want {
				switch strings.TrimSpace(lines[7]) {
				case "ready", "standby":
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.exited:
			return errors.New("postgres exited during start-up")
		case <-time.After(pollInterval):
		}
	}
}

func (n *node) logSince(off int64) string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

func (n *node) startError(err error) error {
	return &NodeStartError{Node: n.Name, Err: err, Log: tail(n.logSince(0), 20)}
}

func bindFailed(log string) bool {
	l := strings.ToLower(log)
	return strings.Contains(l, "could not bind") || strings.Contains(l, "address already in use")
}

var paramRE = regexp.MustCompile(`(unrecognized configuration parameter|invalid value for parameter|parameter) "([^"]+)"[^\n]*`)

// settingFailure returns a *SettingError when log shows the server rejected a
// setting, else nil.
func settingFailure(log string) error {
	if !strings.Contains(log, confFile) && !strings.Contains(log, "parameter") {
		return nil
	}
	m := paramRE.FindStringSubmatch(log)
	if m == nil {
		return nil
	}
	line := m[0]
	if i := bytes.IndexByte([]byte(line), '\n'); i >= 0 {
		line = line[:i]
	}
	return &SettingError{Name: m[2], Reason: "rejected by PostgreSQL: " + line}
}

// kill sends SIGKILL to the postmaster and all its descendants if it still
// runs. PostgreSQL puts each child in its own session (setsid), so a signal
// to the postmaster's process group would miss them: the postmaster is
// stopped (SIGSTOP) so that it forks no more, its descendants are found in
// /proc and killed, then the postmaster.
func (n *node) kill() {
	n.mu.Lock()
	pid, exited := n.pid, n.exited
	n.mu.Unlock()
	if exited == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	killTree(pid)
}

// killTree stops pid, SIGKILLs its descendants, then SIGKILLs pid.
func killTree(pid int) {
	syscall.Kill(pid, syscall.SIGSTOP)
	for _, d := range descendants(pid) {
		syscall.Kill(d, syscall.SIGKILL)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// descendants returns the pids of pid's descendants, from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentPID(p); ok {
			kids[pp] = append(kids[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, kids[p]...)
		queue = append(queue, kids[p]...)
	}
	return out
}

// parentPID reads the parent pid of p from /proc/p/stat.
func parentPID(p int) (int, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid …"; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

// stop shuts the node down: SIGINT (fast), after grace SIGQUIT (immediate),
// after 5 s more SIGKILL to it and its descendants.
func (n *node) stop(grace time.Duration) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	n.resume() // a paused server heeds no signal but SIGKILL
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, grace}, {syscall.SIGQUIT, 5 * time.Second}}
	for _, s := range steps {
		select {
		case <-exited:
			return nil
		default:
		}
		cmd.Process.Signal(s.sig)
		select {
		case <-exited:
			return nil
		case <-time.After(s.wait):
			n.c.log.Debug("node did not stop in time, escalating", "node", n.Name, "signal", s.sig)
		}
	}
	n.kill()
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop node %s: pid %d survived SIGKILL", n.Name, n.pid)
	}
}
