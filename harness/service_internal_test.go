package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/scenario"
)

// TestLibpqNode: a service's DSN carries server settings in options, as
// libpq reads them, and pgx still parses it.
func TestLibpqNode(t *testing.T) {
	n := backend.Node{Host: "127.0.0.1", Port: 5432, Database: "app",
		Params: map[string]string{"search_path": "noisysim", "default_transaction_read_only": "on", "sslmode": "disable"}}
	dsn := libpqNode(n).DSNFor("u", "p w")
	want := "postgres://u:p%20w@127.0.0.1:5432/app?options=-c%20default_transaction_read_only%3Don%20-c%20search_path%3Dnoisysim&sslmode=disable"
	if dsn != want {
		t.Errorf("dsn %s\nwant %s", dsn, want)
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.RuntimeParams["options"]; got != "-c default_transaction_read_only=on -c search_path=noisysim" {
		t.Errorf("options %q", got)
	}
}

// TestServiceStopIgnoresTERM: instances that ignore SIGTERM are killed
// after stop_grace, every one of them: with two such instances the grace
// timer fired once and stop waited for the second one forever.
func TestServiceStopIgnoresTERM(t *testing.T) {
	sc := &scenario.Service{StopGrace: scenario.Duration(200 * time.Millisecond)}
	run := &serviceRun{sc: sc}
	for range 3 {
		cmd := exec.Command("/bin/sh", "-c", `trap "" TERM; echo up; while :; do sleep 1; done`)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the trap to be set before stop sends SIGTERM.
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		in := &instance{cmd: cmd, exited: make(chan struct{})}
		go func() { in.err = cmd.Wait(); close(in.exited) }()
		run.instances = append(run.instances, in)
	}
	done := make(chan struct{})
	start := time.Now()
	go func() { run.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		run.kill()
		<-done
		t.Fatalf("stop did not return 10 s after SIGTERM with stop_grace %s", sc.StopGrace)
	}
	if took := time.Since(start); took < sc.StopGrace.Duration() {
		t.Errorf("stop returned after %s, before stop_grace %s", took, sc.StopGrace)
	}
	for i, in := range run.instances {
		var ee *exec.ExitError
		if !errors.As(in.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("instance %d: %v, want killed by SIGKILL", i, in.err)
		}
	}
}

// TestTailBounded: the last lines of a service's output are kept, each cut
// to its last tailLineBytes, so output without newlines is not held whole.
func TestTailBounded(t *testing.T) {
	var tl tail
	for i := range 30 {
		fmt.Fprintf(&tl, "line %d\n", i)
	}
	chunk := bytes.Repeat([]byte("x"), 1<<16)
	for range 64 { // 4 MiB without a newline, in writes
		if n, err := tl.Write(chunk); n != len(chunk) || err != nil {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if len(tl.part) > tailLineBytes || cap(tl.part) > 4*tailLineBytes {
		t.Errorf("partial line holds %d bytes (capacity %d), want at most %d", len(tl.part), cap(tl.part), tailLineBytes)
	}
	tl.Write([]byte("end\nlast words\npartial"))
	got := tl.last()
	if len(got) != tailLines+1 || got[tailLines-3] != "line 29" || got[tailLines-1] != "last words" || got[tailLines] != "partial" {
		t.Fatalf("last lines %d: %q ... %q", len(got), got[:2], got[len(got)-4:])
	}
	if long := got[tailLines-2]; !strings.HasPrefix(long, "…x") || !strings.HasSuffix(long, "xend") || len(long) != len("…")+tailLineBytes {
		t.Errorf("long line: %d bytes, %q...%q", len(long), long[:8], long[len(long)-8:])
	}
}

// TestServiceCommandEscapedChild: an instance whose child left its process
// group (setsid) and holds the output pipe is seen to exit when its own
// process does, within serviceWaitDelay, not when the child ends.
func TestServiceCommandEscapedChild(t *testing.T) {
	var out tail
	cmd := serviceCommand([]string{"/bin/sh", "-c", `setsid sleep 60 & echo "child $!"; sleep 0.2`}, t.TempDir(), nil, &out)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		var pid int
		for _, l := range out.last() {
			fmt.Sscanf(l, "child %d", &pid)
		}
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	select {
	case <-waited:
	case <-time.After(serviceWaitDelay + 10*time.Second):
		t.Fatalf("Wait did not return %s after the instance's start: its escaped child holds the output", time.Since(start))
	}
}
