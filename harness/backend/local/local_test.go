package local_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestSingleStartStop(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c, err := local.Start(t.Context(), backend.Spec{Settings: map[string]string{"max_connections": "150", "work_mem": "8MB"}}, local.WithBaseDir(base))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nodes := c.Nodes()
	if len(nodes) != 1 || nodes[0].Role != backend.RolePrimary || nodes[0].Name != "primary" {
		t.Fatalf("nodes = %v, want one primary", nodes)
	}
	p := nodes[0]
	if p.Host != "127.0.0.1" {
		t.Errorf("host = %q, want 127.0.0.1", p.Host)
	}
	conn := connect(t, p.DSN())
	var maxConn, workMem, listen, fsync string
	if err := conn.QueryRow(t.Context(), "SELECT current_setting('max_connections'), current_setting('work_mem'), current_setting('listen_addresses'), current_setting('fsync')").
		Scan(&maxConn, &workMem, &listen, &fsync); err != nil {
		t.Fatal(err)
	}
	if maxConn != "150" || workMem != "8MB" || listen != "127.0.0.1" || fsync != "off" {
		t.Errorf("settings = %s %s %s %s, want 150 8MB 127.0.0.1 off", maxConn, workMem, listen, fsync)
	}
	if !strings.Contains(p.RedactedDSN(), "xxxxx") || strings.Contains(p.RedactedDSN(), p.Password) {
		t.Errorf("RedactedDSN %q leaks the password", p.RedactedDSN())
	}

	st := c.Stat()
	pid := st.Nodes[0].PID
	kids := childrenOf(pid)
	if len(kids) == 0 {
		t.Fatalf("postmaster %d has no children", pid)
	}
	if info, err := os.Stat(st.Nodes[0].SocketDir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode = %v, %v; want 0700", info.Mode().Perm(), err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if live := waitGone(append(kids, pid), 0); len(live) > 0 {
		t.Errorf("processes alive after Close: %v", live)
	}
	if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
		t.Errorf("after Close: dirs %v, processes %v", dirs, procs)
	}
}

func TestAuthentication(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	p, _ := backend.First(c, backend.RolePrimary)
	for name, dsn := range map[string]string{
		"wrong password": p.DSNFor(p.User, "not-the-password"),
		"no password":    p.DSNFor(p.User, ""),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pgx.Connect(t.Context(), dsn)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				// No password at all fails client-side before any SQLSTATE.
				if name == "no password" && err != nil {
					return
				}
				t.Fatalf("connect with %s: %v, want SQLSTATE 28P01", name, err)
			}
		})
	}
	st := c.Stat()
	for _, f := range []string{st.Nodes[0].LogPath, filepath.Join(st.Dir, "state.json"), filepath.Join(st.Nodes[0].DataDir, "postgresql.conf"), filepath.Join(st.Nodes[0].DataDir, "noisysim.conf")} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), p.Password) {
			t.Errorf("%s holds the password", f)
		}
	}
	hba, _ := os.ReadFile(filepath.Join(st.Nodes[0].DataDir, "pg_hba.conf"))
	if strings.Contains(string(hba), "trust") {
		t.Errorf("pg_hba.conf allows trust:\n%s", hba)
	}
}

func TestPasswordPerCluster(t *testing.T) {
	a := localtest.Start(t, backend.Spec{})
	b := localtest.Start(t, backend.Spec{})
	pa, _ := backend.First(a, backend.RolePrimary)
	pb, _ := backend.First(b, backend.RolePrimary)
	if pa.Password == pb.Password || len(pa.Password) < 24 {
		t.Fatalf("passwords not random per cluster (len %d, equal %v)", len(pa.Password), pa.Password == pb.Password)
	}
	// a's password does not open b.
	if conn, err := pgx.Connect(t.Context(), pb.DSNFor(pb.User, pa.Password)); err == nil {
		conn.Close(t.Context())
		t.Fatal("cluster b accepted cluster a's password")
	}
}

func TestReplica(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyReplica})
	p, ok1 := backend.First(c, backend.RolePrimary)
	r, ok2 := backend.First(c, backend.RoleReplica)
	if !ok1 || !ok2 {
		t.Fatalf("nodes = %v, want a primary and a replica", c.Nodes())
	}
	pc, rc := connect(t, p.DSN()), connect(t, r.DSN())

	var inRecovery bool
	var feedback string
	if err := rc.QueryRow(t.Context(), "SELECT pg_is_in_recovery(), current_setting('hot_standby_feedback')").Scan(&inRecovery, &feedback); err != nil {
		t.Fatal(err)
	}
	if !inRecovery || feedback != "off" {
		t.Errorf("replica: in recovery %v, hot_standby_feedback %s; want true, off", inRecovery, feedback)
	}
	var slotActive bool
	if err := pc.QueryRow(t.Context(), "SELECT active FROM pg_replication_slots WHERE slot_type = 'physical'").Scan(&slotActive); err != nil || !slotActive {
		t.Errorf("primary's physical slot active = %v, %v; want true", slotActive, err)
	}

	if _, err := pc.Exec(t.Context(), "CREATE TABLE t (id int primary key); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		err := rc.QueryRow(t.Context(), "SELECT count(*) FROM t WHERE id = 42").Scan(&n)
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("row not visible on the standby within 5 s (last: %d, %v)", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	_, err := rc.Exec(t.Context(), "INSERT INTO t VALUES (43)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("write on standby: %v, want SQLSTATE 25006", err)
	}
}

func TestReplicaStartsCaughtUp(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyReplica})
	p, _ := backend.First(c, backend.RolePrimary)
	r, _ := backend.First(c, backend.RoleReplica)
	// The password was set on the primary after the base backup; the standby
	// can only accept it if it replayed that WAL before Start returned.
	conn, err := pgx.Connect(t.Context(), r.DSN())
	if err != nil {
		t.Fatalf("connect to standby right after Start: %v", err)
	}
	conn.Close(t.Context())
	if p.Password != r.Password {
		t.Fatal("nodes of one cluster have different passwords")
	}
}

func TestPrimaries(t *testing.T) {
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 3})
	nodes := c.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("got %d nodes, want 3", len(nodes))
	}
	ports := map[int]bool{}
	for _, n := range nodes {
		ports[n.Port] = true
		connect(t, n.DSN())
	}
	if len(ports) != 3 {
		t.Errorf("ports %v not distinct", ports)
	}
}

func TestBadInput(t *testing.T) {
	needPostgres(t)
	emptyBin := t.TempDir()
	occupied, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer occupied.Close()
	busyPort := occupied.Addr().(*net.TCPAddr).Port

	cases := []struct {
		name string
		spec backend.Spec
		opts []local.Option
		want []error
	}{
		{"unknown topology", backend.Spec{Topology: "ring"}, nil, []error{backend.ErrBadInput}},
		{"bindir without postgres", backend.Spec{}, []local.Option{local.WithBinDir(emptyBin)}, []error{local.ErrBinariesNotFound, backend.ErrNotInstalled}},
		{"occupied port", backend.Spec{}, []local.Option{local.WithPort(busyPort)}, []error{local.ErrPortInUse, backend.ErrBadInput}},
		{"reserved setting", backend.Spec{Settings: map[string]string{"port": "1"}}, nil, []error{local.ErrBadSetting, backend.ErrBadInput}},
		{"malformed setting name", backend.Spec{Settings: map[string]string{"a b": "1"}}, nil, []error{local.ErrBadSetting}},
		{"value with line break", backend.Spec{Settings: map[string]string{"work_mem": "1MB\nfsync = on"}}, nil, []error{local.ErrBadSetting}},
		{"value PostgreSQL rejects", backend.Spec{Settings: map[string]string{"max_connections": "lots"}}, nil, []error{local.ErrBadSetting, backend.ErrBadInput}},
		{"unknown parameter", backend.Spec{Settings: map[string]string{"no_such_parameter": "1"}}, nil, []error{local.ErrBadSetting}},
		{"too many nodes", backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 1000}, nil, []error{backend.ErrBadInput}},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name string
			spec backend.Spec
			opts []local.Option
			want []error
		}{"no such server user", backend.Spec{}, []local.Option{local.WithServerUser("no-such-user-noisysim")}, []error{local.ErrNoServerUser, backend.ErrNotInstalled}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := privateBase(t)
			c, err := local.Start(t.Context(), tc.spec, append(tc.opts, local.WithBaseDir(base))...)
			if err == nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q is not %v", err, w)
				}
			}
			if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
				t.Errorf("left behind: dirs %v, processes %v", dirs, procs)
			}
		})
	}
}

func TestBinariesNotFoundMessage(t *testing.T) {
	t.Setenv(local.EnvBinDir, t.TempDir())
	_, err := local.FindBinaries(t.Context(), "")
	var nf *local.BinariesNotFoundError
	if !errors.As(err, &nf) || len(nf.Searched) != 1 {
		t.Fatalf("err = %v, want *BinariesNotFoundError with one searched place", err)
	}
	for _, want := range []string{local.EnvBinDir, "server package", "postgres"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestCancelledStart(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	for _, after := range []time.Duration{0, 30 * time.Millisecond, 150 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), after)
		c, err := local.Start(ctx, backend.Spec{Topology: backend.TopologyReplica}, local.WithBaseDir(base))
		cancel()
		if err == nil {
			c.Close()
			continue // fast machine: it was up before the deadline
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cancel after %v: err = %v, want context.DeadlineExceeded", after, err)
		}
		if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
			t.Errorf("cancel after %v left: dirs %v, processes %v", after, dirs, procs)
		}
	}
}

func TestCloseAndKillConcurrently(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	c, err := local.Start(t.Context(), backend.Spec{Topology: backend.TopologyReplica}, local.WithBaseDir(base))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if i%2 == 0 {
				c.Close()
			} else {
				c.Kill()
			}
		})
	}
	wg.Wait()
	if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
		t.Errorf("left behind: dirs %v, processes %v", dirs, procs)
	}
}

func TestKeepDetachStopKept(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	b := local.New(local.WithBaseDir(base), local.WithKeep(true))
	c, err := b.StartCluster(t.Context(), backend.Spec{Topology: backend.TopologyReplica})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Kill() })
	if err := c.Detach(); err != nil {
		t.Fatal(err)
	}
	c.Close() // a no-op once detached
	p, _ := backend.First(c, backend.RolePrimary)
	connect(t, p.DSN()).Close(t.Context())

	kept, err := local.KeptClusters(base)
	if err != nil || len(kept) != 1 || kept[0] != c.Dir() {
		t.Fatalf("KeptClusters = %v, %v; want [%s]", kept, err, c.Dir())
	}
	var pids []int
	for _, n := range c.Stat().Nodes {
		pids = append(pids, n.PID)
		pids = append(pids, childrenOf(n.PID)...)
	}
	if err := b.StopKept(t.Context(), c.Dir()); err != nil {
		t.Fatalf("StopKept: %v", err)
	}
	// StopKept returns once every server process has exited, not before.
	if live := waitGone(pids, 0); len(live) > 0 {
		t.Errorf("alive when StopKept returned: %v", live)
	}
	if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
		t.Errorf("left behind: dirs %v, processes %v", dirs, procs)
	}
	if err := b.StopKept(t.Context(), c.Dir()); !errors.Is(err, local.ErrNotKept) {
		t.Errorf("StopKept of a removed dir: %v, want ErrNotKept", err)
	}
}

func TestDetachWithoutKeep(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	if err := c.Detach(); !errors.Is(err, local.ErrNotKept) {
		t.Fatalf("Detach = %v, want ErrNotKept", err)
	}
}

func TestTemplateCreatedOnceConcurrently(t *testing.T) {
	needPostgres(t)
	cache := privateBase(t)
	base := privateBase(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for range 3 {
		wg.Go(func() {
			c, err := local.Start(t.Context(), backend.Spec{}, local.WithBaseDir(base), local.WithCacheDir(filepath.Join(cache, "c")))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			mu.Lock()
			if c.Stat().TemplateCreated {
				created++
			}
			mu.Unlock()
			connect(t, c.Nodes()[0].DSN())
		})
	}
	wg.Wait()
	if created != 1 {
		t.Errorf("initdb ran %d times, want 1", created)
	}
	if leftover, _ := filepath.Glob(filepath.Join(cache, "c", "tmp-*")); len(leftover) > 0 {
		t.Errorf("temporary templates left: %v", leftover)
	}
}

// CloseAll (the CLI's teardown on panic or a second signal) stops a cluster
// whose Start has not returned yet; that Start fails and nothing remains.
func TestCloseAllDuringStart(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	for i, after := range []time.Duration{5 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond, 700 * time.Millisecond} {
		b := local.New(local.WithBaseDir(base))
		done := make(chan error, 1)
		go func() {
			c, err := b.StartCluster(t.Context(), backend.Spec{Topology: backend.TopologyReplica})
			if err == nil {
				c.Close()
			}
			done <- err
		}()
		time.Sleep(after)
		if i%2 == 0 {
			b.KillAll()
		} else {
			b.CloseAll()
		}
		err := <-done
		t.Logf("after %v: Start returned %v", after, err)
		if dirs, procs := leftovers(t, base); len(dirs)+len(procs) > 0 {
			t.Errorf("after %v: left behind: dirs %v, processes %v", after, dirs, procs)
		}
	}
}
