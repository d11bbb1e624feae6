package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/cgroup"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// ServiceError is a service that could not be started: it exited early,
// never got ready, or its migrate command failed. It matches
// scenario.ErrInvalid (exit 2): the scenario's service section, or the
// service, needs fixing. Log holds its last lines.
type ServiceError struct {
	What string // "instance 0 of configuration isolated", "migrate"
	Err  error
	Log  []string
}

func (e *ServiceError) Error() string {
	msg := fmt.Sprintf("service %s: %v", e.What, e.Err)
	if len(e.Log) > 0 {
		msg += "; its last lines:\n  " + strings.Join(e.Log, "\n  ")
	}
	return msg
}

func (e *ServiceError) Unwrap() error { return e.Err }

// Is makes a ServiceError match scenario.ErrInvalid.
func (e *ServiceError) Is(target error) bool { return target == scenario.ErrInvalid }

// tailLines is how many last lines of a service's output an error shows.
const tailLines = 20

// tailLineBytes is how much of each of those lines is kept: its end, after
// "…" when cut. A service that writes without newlines (progress bars, a
// dump) would otherwise be held whole in memory.
const tailLineBytes = 4096

// tail keeps the last lines written to it (and passes everything on to w).
type tail struct {
	mu    sync.Mutex
	w     *os.File
	lines []string
	part  []byte
	cut   bool // part lost its beginning
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w != nil {
		t.w.Write(p)
	}
	written := len(p)
	for len(p) > 0 {
		line, rest, nl := bytes.Cut(p, []byte{'\n'})
		if len(line) >= tailLineBytes { // only its end stays
			t.cut = t.cut || len(t.part)+len(line) > tailLineBytes
			t.part = append(t.part[:0], line[len(line)-tailLineBytes:]...)
		} else {
			t.part = append(t.part, line...)
		}
		if n := len(t.part); n > tailLineBytes {
			t.part = append(t.part[:0], t.part[n-tailLineBytes:]...)
			t.cut = true
		}
		if !nl {
			break
		}
		t.lines = append(t.lines, t.partString())
		t.part, t.cut, p = t.part[:0], false, rest
		if len(t.lines) > tailLines {
			t.lines = t.lines[len(t.lines)-tailLines:]
		}
	}
	return written, nil
}

func (t *tail) partString() string {
	if t.cut {
		return "…" + string(t.part)
	}
	return string(t.part)
}

func (t *tail) last() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]string(nil), t.lines...)
	if len(t.part) > 0 {
		out = append(out, t.partString())
	}
	return out
}

// instance is one running service process.
type instance struct {
	cmd    *exec.Cmd
	out    *tail
	base   string
	exited chan struct{} // closed when the process has been waited for
	err    error         // Wait's result, after exited
}

// serviceWaitDelay is how long an instance's output is read after its
// process has exited: a child that left its process group (setsid, a
// daemon) keeps the output pipe open, and its end would otherwise be waited
// for (a run hung as long as such a child lived).
const serviceWaitDelay = 2 * time.Second

// serviceCommand returns the command of one instance: in a process group of
// its own, killed whole, and killed with noisysim should noisysim die
// without stopping it; its output to out.
func serviceCommand(argv []string, dir string, env []string, out io.Writer) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = serviceWaitDelay
	return cmd
}

// serviceRun is one configuration's service.
type serviceRun struct {
	sc        *scenario.Service
	instances []*instance
	bases     []string
	logs      []string
	ready     time.Duration
	stopOnce  sync.Once
}

// serviceVars returns the values of the service templates for
// configuration c (instance and port set per instance by the caller).
func (r *runner) serviceVars(c *scenario.Configuration) map[string]string {
	dsn := func(node backend.Node, pool string) string {
		role := roleName(r.roleTag, c.Name, pool)
		if r.sc.Data.IsExisting() {
			node = readOnly(node)
		}
		return libpqNode(node).DSNFor(role, r.passwords[role])
	}
	v := map[string]string{
		"configuration": c.Name,
		"admin_dsn":     libpqNode(r.primary).DSN(),
		"schema":        r.sc.Data.SchemaName(),
		"tenants":       strconv.Itoa(r.pop.Len()),
		"dir":           r.serviceDir(),
		"work":          r.serviceWorkDir(),
	}
	if c.Mode == scenario.ModeShared {
		v["shared_dsn"] = dsn(r.primary, "shared")
		v["interactive_dsn"], v["heavy_dsn"], v["replica_dsn"] = v["shared_dsn"], v["shared_dsn"], v["shared_dsn"]
	} else {
		v["interactive_dsn"] = dsn(r.primary, string(scenarioInteractive))
		v["heavy_dsn"] = dsn(r.primary, string(scenarioHeavy))
		v["shared_dsn"] = v["interactive_dsn"]
		v["replica_dsn"] = v["heavy_dsn"]
		if r.hasReplica {
			v["replica_dsn"] = dsn(r.replica, string(scenarioHeavy))
		}
	}
	return v
}

// libpqKeywords are the connection parameters libpq itself reads (the
// ones noisysim's nodes carry); any other parameter is a server setting.
var libpqKeywords = map[string]bool{
	"sslmode": true, "sslrootcert": true, "sslcert": true, "sslkey": true, "connect_timeout": true,
	"application_name": true, "target_session_attrs": true, "options": true,
}

// libpqNode returns node with its server settings (search_path,
// default_transaction_read_only) moved into options ("-c name=value"), so
// that its DSNs work with every libpq-based driver, not only those that
// pass unknown parameters on to the server as pgx does.
func libpqNode(node backend.Node) backend.Node {
	params := map[string]string{}
	var opts []string
	if o := node.Params["options"]; o != "" {
		opts = append(opts, o)
	}
	for _, k := range slices.Sorted(maps.Keys(node.Params)) {
		switch {
		case k == "options":
		case libpqKeywords[k]:
			params[k] = node.Params[k]
		default:
			opts = append(opts, "-c "+k+"="+strings.ReplaceAll(node.Params[k], " ", `\ `))
		}
	}
	if len(opts) > 0 {
		params["options"] = strings.Join(opts, " ")
	}
	node.Params = params
	return node
}

const (
	scenarioInteractive = scenario.IsolationInteractive
	scenarioHeavy       = scenario.IsolationHeavy
)

// serviceDir is the service's working directory.
func (r *runner) serviceDir() string {
	d := "."
	if sv := r.sc.Service; sv != nil && sv.Dir != "" {
		d = sv.Dir
	}
	p := r.sc.Path(d)
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// serviceEnv returns noisysim's environment with the service's env added.
func serviceEnv(sv *scenario.Service, value func(string) string) []string {
	env := os.Environ()
	for name, t := range sv.EnvTemplates() {
		env = append(env, name+"="+t.Expand(value))
	}
	return env
}

// expandArgv expands each word of an argv template.
func expandArgv(ts []scenario.Template, value func(string) string) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Expand(value)
	}
	return out
}

// migrate runs the service's migrate command once, before the first
// configuration, with the first configuration's variables.
func (r *runner) migrate(ctx context.Context) error {
	sv := r.sc.Service
	if !sv.Started() || len(sv.Migrate) == 0 {
		return nil
	}
	vars := r.serviceVars(&r.sc.Configurations[0])
	value := func(n string) string { return vars[n] }
	argv := expandArgv(sv.MigrateTemplates(), value)
	out := &tail{}
	if f, err := os.Create(filepath.Join(r.serviceLogDir(), "service-migrate.log")); err == nil {
		defer f.Close()
		out.w = f
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = r.serviceDir(), serviceEnv(sv, value), out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: service migrate: %w", ErrRun, ctx.Err())
		}
		return &ServiceError{What: "migrate (" + strings.Join(argv, " ") + ")", Err: err, Log: out.last()}
	}
	r.note("service migrate ran in %s: %s", time.Since(t0).Round(time.Millisecond), strings.Join(argv, " "))
	return nil
}

// serviceWorkDir is a directory of the run's own for the service (a
// binary its migrate builds), removed at the end of the run.
func (r *runner) serviceWorkDir() string {
	if r.workDir == "" {
		d, err := os.MkdirTemp("", "noisysim-work-")
		if err != nil {
			return os.TempDir()
		}
		r.workDir = d
		r.onTempDir(d)
	}
	return r.workDir
}

// serviceLogDir is where the service's output goes: Options.ServiceLogDir,
// or a directory of its own under the system's temporary directory.
func (r *runner) serviceLogDir() string {
	if r.logDir != "" {
		return r.logDir
	}
	d := r.opts.ServiceLogDir
	if d == "" {
		var err error
		if d, err = os.MkdirTemp("", "noisysim-service-"); err != nil {
			d = os.TempDir()
		} else {
			r.logTemp = true
			r.onTempDir(d)
		}
	}
	os.MkdirAll(d, 0o755)
	r.logDir = d
	return d
}

// onTempDir hands a temporary directory of the run to Options.OnTempDir.
func (r *runner) onTempDir(d string) {
	if r.opts.OnTempDir != nil {
		r.opts.OnTempDir(d)
	}
}

// startService starts configuration c's service instances and waits until
// each is ready. On error nothing it started is left running.
func (r *runner) startService(ctx context.Context, c *scenario.Configuration) (*serviceRun, error) {
	sv := r.sc.Service
	run := &serviceRun{sc: sv}
	if !sv.Started() {
		run.bases = []string{sv.URL}
		return run, nil
	}
	ports, err := r.servicePorts(sv.Instances)
	if err != nil {
		return nil, err
	}
	vars := r.serviceVars(c)
	t0 := time.Now()
	for i := range sv.Instances {
		v := map[string]string{}
		for k, x := range vars {
			v[k] = x
		}
		v["port"] = strconv.Itoa(ports[i])
		v["instance"] = strconv.Itoa(i)
		v["base_url"] = "http://127.0.0.1:" + v["port"]
		value := func(n string) string { return v[n] }
		argv := expandArgv(sv.CommandTemplates(), value)
		logPath := filepath.Join(r.serviceLogDir(), fmt.Sprintf("service-%s-%d.log", c.Name, i))
		f, err := os.Create(logPath)
		if err != nil {
			run.stop()
			return nil, fmt.Errorf("%w: service log: %w", ErrRun, err)
		}
		in := &instance{out: &tail{w: f}, base: v["base_url"], exited: make(chan struct{})}
		cmd := serviceCommand(argv, r.serviceDir(), serviceEnv(sv, value), in.out)
		in.cmd = cmd
		if err := cgroup.StartChild(cmd, (*exec.Cmd).Start); err != nil {
			f.Close()
			run.stop()
			return nil, &ServiceError{What: fmt.Sprintf("instance %d of configuration %s (%s)", i, c.Name, strings.Join(argv, " ")),
				Err: fmt.Errorf("%s: %w", r.sc.Where("service.command"), err)}
		}
		go func() {
			in.err = cmd.Wait()
			f.Close()
			close(in.exited)
		}()
		run.instances = append(run.instances, in)
		run.bases = append(run.bases, in.base)
		run.logs = append(run.logs, logPath)
		if r.opts.OnService != nil {
			r.opts.OnService(run.kill)
		}
	}
	for i, in := range run.instances {
		if err := r.waitReady(ctx, sv, in, ports[i]); err != nil {
			run.stop()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: service: %w", ErrRun, ctx.Err())
			}
			return nil, &ServiceError{What: fmt.Sprintf("instance %d of configuration %s", i, c.Name), Err: err, Log: in.out.last()}
		}
	}
	run.ready = time.Since(t0)
	return run, nil
}

// servicePorts returns a port per instance: service.port onward (each
// must be free, exit 2 otherwise), or free ports the kernel picks.
func (r *runner) servicePorts(n int) ([]int, error) {
	sv := r.sc.Service
	var ports []int
	if sv.Port != 0 {
		for i := range n {
			p := sv.Port + i
			if !scenario.PortFree(p) {
				return nil, fmt.Errorf("%w: %s: port %d (instance %d) is taken on 127.0.0.1; choose another port, or 0 for free ports",
					scenario.ErrInvalid, r.sc.Where("service.port"), p, i)
			}
			ports = append(ports, p)
		}
		return ports, nil
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("%w: find a free port: %w", ErrRun, err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady polls the instance until it answers (ready.path 2xx, or its
// port accepting), it exits, or ready.timeout passes.
func (r *runner) waitReady(ctx context.Context, sv *scenario.Service, in *instance, port int) error {
	deadline := time.Now().Add(sv.Ready.Timeout.Duration())
	client := &http.Client{Timeout: time.Second}
	var last error
	for {
		select {
		case <-in.exited:
			return fmt.Errorf("exited before it was ready (%v)", in.err)
		default:
		}
		if sv.Ready.Path != "" {
			resp, err := client.Get(in.base + sv.Ready.Path)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					return nil
				}
				err = fmt.Errorf("%s answered %s", sv.Ready.Path, resp.Status)
			}
			last = err
		} else {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
			if err == nil {
				conn.Close()
				return nil
			}
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s (ready.timeout): %v", sv.Ready.Timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-in.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exitedEarly returns an error when an instance has exited while it
// should be serving.
func (s *serviceRun) exitedEarly() error {
	for i, in := range s.instances {
		select {
		case <-in.exited:
			return &ServiceError{What: fmt.Sprintf("instance %d", i), Err: fmt.Errorf("exited during the run (%v)", in.err), Log: in.out.last()}
		default:
		}
	}
	return nil
}

// stop ends every instance: SIGTERM to its process group, SIGKILL after
// stop_grace. Idempotent.
func (s *serviceRun) stop() {
	if s == nil {
		return
	}
	s.stopOnce.Do(func() {
		for _, in := range s.instances {
			syscall.Kill(-in.cmd.Process.Pid, syscall.SIGTERM)
		}
		// One deadline for all: a channel that stays closed once the
		// grace is over (a timer's fires once, and the next instance
		// ignoring SIGTERM would be waited for forever).
		grace, cancel := context.WithTimeout(context.Background(), s.sc.StopGrace.Duration())
		defer cancel()
		for _, in := range s.instances {
			select {
			case <-in.exited:
			case <-grace.Done():
			}
		}
		for _, in := range s.instances {
			// The group may hold children that outlive the leader.
			syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
			<-in.exited
		}
	})
}

// kill ends every instance's process group at once (a second signal).
// An instance already waited for is left alone: its process group id may
// belong to another process by now.
func (s *serviceRun) kill() error {
	for _, in := range s.instances {
		select {
		case <-in.exited:
		default:
			syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	return nil
}

// report returns the service's part of the configuration's report.
func (s *serviceRun) report() *reports.ServiceRun {
	rep := &reports.ServiceRun{Instances: s.bases, Logs: s.logs, Ready: s.ready.Seconds()}
	for _, in := range s.instances {
		select {
		case <-in.exited:
			if in.err != nil {
				rep.Exit = append(rep.Exit, in.err.Error())
			} else {
				rep.Exit = append(rep.Exit, "exit status 0")
			}
		default:
			rep.Exit = append(rep.Exit, "running")
		}
	}
	return rep
}

// basesOrNil returns the instances' base URLs; nil for no service.
func (s *serviceRun) basesOrNil() []string {
	if s == nil {
		return nil
	}
	return s.bases
}

// configExtra is what a configuration's service adds to its report.
type configExtra struct {
	http     *reports.HTTPStats
	service  *reports.ServiceRun
	activity *reports.Activity
}

func (x configExtra) set(c *reports.Configuration) {
	c.HTTP, c.Service, c.Activity = x.http, x.service, x.activity
}

// rolesOfConfig returns the database roles configuration c logs in as.
func (r *runner) rolesOfConfig(c *scenario.Configuration) []string {
	if c.Mode == scenario.ModeShared {
		return []string{roleName(r.roleTag, c.Name, "shared")}
	}
	return []string{roleName(r.roleTag, c.Name, string(scenarioInteractive)), roleName(r.roleTag, c.Name, string(scenarioHeavy))}
}

// httpVar returns the value of an HTTP template variable for op: a
// script builtin of its tenant, or seq.
func (r *runner) httpVar(op workload.Op, name string) string {
	if name == "seq" {
		return strconv.FormatInt(op.Seq, 10)
	}
	for i, b := range r.builtins {
		if b == name {
			return r.bind[op.Tenant-1][i].String()
		}
	}
	return ""
}
