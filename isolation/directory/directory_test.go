package directory_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/noisysim/noisysim/internal/suitelock"

	"github.com/noisysim/noisysim/isolation/directory"
)

func TestMain(m *testing.M) {
	suitelock.Hold("isolation/directory") // the tests start PostgreSQL and measure: they take their turn
	goleak.VerifyTestMain(m)
}

func TestHashPlace(t *testing.T) {
	ring := []string{"a", "b", "c"}
	counts := map[string]int{}
	moved := 0
	for i := range 3000 {
		tenant := strconv.Itoa(i)
		n := directory.HashPlace(tenant, ring)
		if n != directory.HashPlace(tenant, ring) {
			t.Fatalf("tenant %s: placement not deterministic", tenant)
		}
		counts[n]++
		if m := directory.HashPlace(tenant, append(ring[:3:3], "d")); m != n {
			moved++
			if m != "d" {
				t.Fatalf("tenant %s moved from %s to %s when d joined: only moves to the new node are allowed", tenant, n, m)
			}
		}
	}
	for _, n := range ring {
		if counts[n] < 800 || counts[n] > 1200 {
			t.Errorf("node %s got %d of 3000 tenants, want about 1000", n, counts[n])
		}
	}
	if moved < 500 || moved > 1000 {
		t.Errorf("%d of 3000 tenants moved to a fourth node, want about 750", moved)
	}
	if directory.HashPlace("x", nil) != "" {
		t.Error("empty ring placed a tenant")
	}
}

func TestRouterFollowsCatalog(t *testing.T) {
	s := startShards(t, 3, 5, 50)
	ctx := t.Context()
	r, err := directory.NewRouter(ctx, directory.RouterConfig{Catalog: s.cat, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before := r.Node("3")
	if before == "" || before == s.names[2] {
		t.Fatalf("tenant 3 placed on %q, want a ring node", before)
	}
	// Another process changes the catalog: a second handle.
	other, err := directory.OpenCatalog(ctx, s.nodes[s.names[0]], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	v, err := other.Assign(ctx, "3", s.names[2])
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Node("3") != s.names[2] {
		if time.Now().After(deadline) {
			t.Fatalf("router still routes tenant 3 to %s 5 s after the catalog moved it", r.Node("3"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := r.Stat(); st.Version < v || st.Reloads < 1 {
		t.Errorf("stat %+v, want version >= %d and a reload", st, v)
	}
	node, done, err := r.Route(ctx, "3")
	if err != nil || node != s.names[2] {
		t.Fatalf("Route = %q, %v; want %s", node, err, s.names[2])
	}
	done()
	if _, err := other.Assign(ctx, "3", "nowhere"); !errors.Is(err, directory.ErrUnknownNode) {
		t.Errorf("assign to an unknown node: %v, want ErrUnknownNode", err)
	}

	// Hold: Route waits until resume, then sees the refreshed catalog.
	noPoll, err := directory.NewRouter(ctx, directory.RouterConfig{Catalog: s.cat, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer noPoll.Close()
	resume, err := noPoll.Hold(ctx, "4")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		n, done, _ := noPoll.Route(ctx, "4")
		if done != nil {
			done()
		}
		got <- n
	}()
	if _, err := other.Assign(ctx, "4", s.names[2]); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		t.Fatalf("Route returned %q while held", n)
	case <-time.After(50 * time.Millisecond):
	}
	resume()
	if n := <-got; n != s.names[2] {
		t.Errorf("after resume Route = %q, want %s (refreshed on resume)", n, s.names[2])
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	resume2, _ := noPoll.Hold(ctx, "5")
	defer resume2()
	if _, _, err := noPoll.Route(short, "5"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Route of a held tenant with a short context: %v, want DeadlineExceeded", err)
	}
}

// TestMoveUnderWrites moves the big tenant while writers write to it, for
// several seeds: every acknowledged write is at the target exactly once
// with its last value, the source holds nothing of it, other tenants are
// untouched and the write pause stays under its bound.
func TestMoveUnderWrites(t *testing.T) {
	s := startShards(t, 3, 12, 20000)
	target := s.names[2]
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := t.Context()
			r, err := directory.NewRouter(ctx, directory.RouterConfig{Catalog: s.cat, PollInterval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			source := r.Node("1")
			dest := target
			if source == target { // later seeds move it back and forth
				dest = s.names[0]
			}
			others := s.others(t, "1")
			w := newWriter(s, r, "1", seed)
			wctx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { w.run(wctx, int64(seed)*1_000_000) })
			time.Sleep(200 * time.Millisecond)
			fig, err := directory.Move(ctx, s.moveConfig(r), "1", dest)
			time.Sleep(200 * time.Millisecond)
			stop()
			wg.Wait()
			if err != nil {
				t.Fatalf("move: %v", err)
			}
			t.Logf("seed %d: %s → %s: %d rows (%d bytes) in %.3f s (%.1f MB/s, %.0f rows/s), %d changes, pause %.1f ms (%d attempts), total %.2f s; writer: %d inserts, %d updates, %d errors, max wait %s",
				seed, fig.Source, fig.Target, fig.CopiedRows, fig.CopiedBytes, fig.CopySeconds, fig.MBPerSecond, fig.RowsPerSecond,
				fig.Changes, fig.PauseSeconds*1000, fig.PauseAttempts, fig.TotalSeconds, w.inserts, w.updates, w.errs, w.maxWait)
			if fig.PauseSeconds <= 0 || fig.PauseSeconds > directory.DefaultMaxPause.Seconds() {
				t.Errorf("pause %.3f s, want in (0, %s]", fig.PauseSeconds, directory.DefaultMaxPause)
			}
			if w.inserts < 50 {
				t.Fatalf("only %d acknowledged inserts: the writer did not run", w.inserts)
			}
			if r.Node("1") != dest {
				t.Fatalf("router routes tenant 1 to %s after the move, want %s", r.Node("1"), dest)
			}
			w.check(t, dest)
			for tb, v := range s.sums(t, source, "1") {
				if v != "0/0" {
					t.Errorf("source %s still holds tenant 1 in %s: %s", source, tb, v)
				}
			}
			if got := s.others(t, "1"); fmt.Sprint(got) != fmt.Sprint(others) {
				t.Errorf("other tenants changed: %v, was %v", got, others)
			}
			// A stale writer's write at the source is refused.
			_, err = s.pools[source].Exec(ctx, "INSERT INTO items (tenant_id, id, val) VALUES (1, 1, 'stale')")
			if !directory.IsFenced(err) {
				t.Errorf("write at the old source: %v, want a fenced error", err)
			}
		})
	}
}

// TestMoveInterrupted stops a move before each step, as a killed process
// would: the catalog points at a complete copy, and running the move again
// finishes it.
func TestMoveInterrupted(t *testing.T) {
	s := startShards(t, 3, 12, 3000)
	ctx := t.Context()
	killed := errors.New("killed")
	for i, step := range directory.Steps {
		tenant := strconv.Itoa(2 + i)
		t.Run(string(step), func(t *testing.T) {
			source, _, _, err := s.cat.Lookup(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			want := s.sums(t, source, tenant)
			cfg := s.moveConfig()
			cfg.BeforeStep = func(st directory.Step) error {
				if st == step {
					return killed
				}
				return nil
			}
			_, err = directory.Move(ctx, cfg, tenant, s.names[2])
			var se *directory.StepError
			if !errors.As(err, &se) || se.Step != step || !errors.Is(err, killed) {
				t.Fatalf("interrupted move: %v, want a StepError at %s", err, step)
			}
			node, _, _, err := s.cat.Lookup(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			wantNode := source
			if stepIndex(step) > stepIndex(directory.StepSwitch) {
				wantNode = s.names[2]
			}
			if node != wantNode {
				t.Fatalf("after a kill before %s the catalog points at %s, want %s", step, node, wantNode)
			}
			if got := s.sums(t, node, tenant); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the catalog's node %s holds %v, want the complete %v", node, got, want)
			}
			fig, err := directory.Move(ctx, s.moveConfig(), tenant, s.names[2])
			if err != nil {
				t.Fatalf("rerun: %v", err)
			}
			if fig.ResumedAfter == "" && step != directory.StepPrepare {
				t.Errorf("rerun did not resume (figures %+v)", fig)
			}
			node, e, _, _ := s.cat.Lookup(ctx, tenant)
			if node != s.names[2] || e.State != directory.StateActive {
				t.Fatalf("after the rerun: node %s state %s, want %s active", node, e.State, s.names[2])
			}
			if got := s.sums(t, node, tenant); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("target holds %v, want %v", got, want)
			}
			for tb, v := range s.sums(t, source, tenant) {
				if v != "0/0" {
					t.Errorf("source still holds %s rows: %s", tb, v)
				}
			}
		})
	}
}

func stepIndex(s directory.Step) int {
	for i, x := range directory.Steps {
		if x == s {
			return i
		}
	}
	return -1
}

// TestMoveTargetStopped stops the target node in the middle of a move (in
// the copy, and inside the write pause): the move fails, the catalog still
// points at the complete source, the source takes writes (not left
// fenced), and the move run again towards another node finishes.
func TestMoveTargetStopped(t *testing.T) {
	s := startShards(t, 4, 12, 3000)
	ctx := t.Context()
	stat := s.cluster.Stat()
	pid := map[string]int{}
	for _, n := range stat.Nodes {
		pid[n.Name] = n.PID
	}
	stop := func(node string) {
		s.pools[node].Close()
		syscall.Kill(pid[node], syscall.SIGINT) // fast shutdown
		for i := 0; i < 200; i++ {
			if syscall.Kill(pid[node], 0) != nil {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	tenant := "1"
	source, _, _, _ := s.cat.Lookup(ctx, tenant)
	want := s.sums(t, source, tenant)
	// The ring is nodes 1–3; nodes 4 (and a ring node other than the
	// source) are targets.
	victim := s.names[3]
	cfg := s.moveConfig(gateFunc(func(ctx context.Context, tn string) (func(), error) {
		stop(victim) // inside the pause, before the fence
		return func() {}, nil
	}))
	_, err := directory.Move(ctx, cfg, tenant, victim)
	if err == nil {
		t.Fatal("move to a stopped target succeeded")
	}
	var se *directory.StepError
	if !errors.As(err, &se) || se.Step != directory.StepSwitch {
		t.Fatalf("move: %v, want a failure in the switch step", err)
	}
	node, _, _, _ := s.cat.Lookup(ctx, tenant)
	if node != source {
		t.Fatalf("catalog points at %s, want the source %s", node, source)
	}
	if got := s.sums(t, source, tenant); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("source holds %v, want %v", got, want)
	}
	if _, err := s.pools[source].Exec(ctx, "UPDATE accounts SET plan = 'p' WHERE tenant_id = 1"); err != nil {
		t.Fatalf("the source does not take writes after the failed move: %v", err)
	}
	want = s.sums(t, source, tenant)
	other := s.names[0]
	if other == source {
		other = s.names[1]
	}
	fig, err := directory.Move(ctx, s.moveConfig(), tenant, other)
	if err != nil {
		t.Fatalf("retargeted rerun: %v", err)
	}
	if node, _, _, _ := s.cat.Lookup(ctx, tenant); node != other {
		t.Fatalf("after the rerun the catalog points at %s, want %s", node, other)
	}
	if got := s.sums(t, other, tenant); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("target holds %v, want %v", got, want)
	}
	t.Logf("retargeted move: %+v", *fig)
}

type gateFunc func(ctx context.Context, tenant string) (func(), error)

func (f gateFunc) Hold(ctx context.Context, tenant string) (func(), error) { return f(ctx, tenant) }

func TestMoveLocked(t *testing.T) {
	s := startShards(t, 2, 3, 10)
	ctx := t.Context()
	block := make(chan struct{})
	entered := make(chan struct{})
	cfg := s.moveConfig()
	cfg.BeforeStep = func(st directory.Step) error {
		if st == directory.StepCopy {
			close(entered)
			<-block
		}
		return nil
	}
	errc := make(chan error, 1)
	go func() { _, err := directory.Move(ctx, cfg, "2", s.names[1]); errc <- err }()
	<-entered
	_, err := directory.Move(ctx, s.moveConfig(), "2", s.names[1])
	close(block)
	if !errors.Is(err, directory.ErrMoveInProgress) {
		t.Errorf("second mover: %v, want ErrMoveInProgress", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("first mover: %v", err)
	}
	fig, err := directory.Move(ctx, s.moveConfig(), "2", s.names[1])
	if err != nil || !fig.AlreadyThere {
		t.Errorf("moving a tenant to where it is: %+v, %v; want AlreadyThere", fig, err)
	}
}

// TestMoveBackToSourceCancels interrupts a move before its switch and then
// "moves" the tenant to the node it is still on: that cancels the move.
// The tenant's rows at the source stay whole (the copy step must never run
// with the source as its target: it empties the target first), the catalog
// says active on the source, and the source takes writes.
func TestMoveBackToSourceCancels(t *testing.T) {
	s := startShards(t, 3, 6, 2000)
	ctx := t.Context()
	killed := errors.New("killed")
	for _, step := range []directory.Step{directory.StepCopy, directory.StepSwitch} {
		tenant := map[directory.Step]string{directory.StepCopy: "1", directory.StepSwitch: "2"}[step]
		t.Run(string(step), func(t *testing.T) {
			source, _, _, err := s.cat.Lookup(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			target := s.names[2]
			want := s.sums(t, source, tenant)
			cfg := s.moveConfig()
			cfg.BeforeStep = func(st directory.Step) error {
				if st == step {
					return killed
				}
				return nil
			}
			if _, err := directory.Move(ctx, cfg, tenant, target); !errors.Is(err, killed) {
				t.Fatalf("interrupted move: %v", err)
			}
			fig, err := directory.Move(ctx, s.moveConfig(), tenant, source)
			if err != nil {
				t.Fatalf("move back to the source %s: %v", source, err)
			}
			if !fig.AlreadyThere {
				t.Errorf("move back to the source: %+v, want AlreadyThere", *fig)
			}
			if got := s.sums(t, source, tenant); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("source %s holds %v after the cancel, want %v", source, got, want)
			}
			node, e, _, err := s.cat.Lookup(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if node != source || e.State != directory.StateActive {
				t.Errorf("catalog: %s %s, want %s active", node, e.State, source)
			}
			if _, err := s.pools[source].Exec(ctx, "UPDATE accounts SET plan = 'p' WHERE tenant_id = $1::text::bigint", tenant); err != nil {
				t.Errorf("the source refuses writes after the cancel: %v", err)
			}
			var captured int
			if err := s.pools[source].QueryRow(ctx, "SELECT count(*) FROM noisysim_directory.changes WHERE tenant_id = $1", tenant).Scan(&captured); err != nil {
				t.Fatal(err)
			}
			if captured != 0 {
				t.Errorf("%d writes still captured at the source after the cancel", captured)
			}
			// A later move still works.
			if _, err := directory.Move(ctx, s.moveConfig(), tenant, target); err != nil {
				t.Fatalf("move after the cancel: %v", err)
			}
			if got := s.sums(t, target, tenant); fmt.Sprint(got) == fmt.Sprint(want) {
				t.Errorf("target holds %v, want the source's rows plus the update", got)
			}
		})
	}
}

// TestInstallKeepsRing installs an existing catalog again with other ring
// flags and an extra ring node (what `tenant move --install` towards another
// node did): hash-placed tenants must stay where their data is.
func TestInstallKeepsRing(t *testing.T) {
	s := startShards(t, 3, 1, 1)
	ctx := t.Context()
	place := func() map[string]string {
		snap, err := s.cat.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for id := 1; id <= 200; id++ {
			out[strconv.Itoa(id)] = snap.Resolve(strconv.Itoa(id))
		}
		return out
	}
	want := place()
	// The same nodes, the ring flags swapped between the last two.
	err := s.cat.Install(ctx, directory.NodeSpec{Name: s.names[0], Ring: true},
		directory.NodeSpec{Name: s.names[1], Ring: false}, directory.NodeSpec{Name: s.names[2], Ring: true})
	if err != nil {
		t.Fatalf("install again: %v", err)
	}
	if got := place(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("installing again with other ring flags re-placed hash-placed tenants")
	}
	// A new node cannot join a ring that already places tenants.
	err = s.cat.Install(ctx, directory.NodeSpec{Name: "n9", Ring: true})
	if !errors.Is(err, directory.ErrInvalidConfig) {
		t.Errorf("a new node joining the ring: %v, want ErrInvalidConfig", err)
	}
	if err := s.cat.Install(ctx, directory.NodeSpec{Name: "n9"}); err != nil {
		t.Errorf("a new node outside the ring: %v", err)
	}
	if got := place(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("adding nodes re-placed hash-placed tenants")
	}
}

// TestStaleWriteAfterDeleteRefused sends, after a finished move, the
// tenant's update and delete to the old source as a caller with a stale
// cache would (tagged t:<tenant> by the isolation stack): the rows are
// gone there, so no row trigger fires, but the write must still be refused
// rather than acknowledged as a no-op.
func TestStaleWriteAfterDeleteRefused(t *testing.T) {
	s := startShards(t, 3, 4, 100)
	ctx := t.Context()
	source, _, _, err := s.cat.Lookup(ctx, "2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := directory.Move(ctx, s.moveConfig(), "2", s.names[2]); err != nil {
		t.Fatal(err)
	}
	c := s.conn(t, source)
	if _, err := c.Exec(ctx, "SET application_name = 't:2'"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"UPDATE items SET val = 'stale' WHERE tenant_id = 2 AND id = 1",
		"DELETE FROM items WHERE tenant_id = 2 AND id = 2",
		"INSERT INTO items (tenant_id, id, val) VALUES (2, 999, 'stale')",
	} {
		tag, err := c.Exec(ctx, q)
		if !directory.IsFenced(err) {
			t.Errorf("%s at the old source: %v rows, err %v; want a fenced error", q, tag.RowsAffected(), err)
		}
	}
	// Other tenants' tagged writes there go on.
	other := "3"
	if n, _, _, _ := s.cat.Lookup(ctx, other); n != source {
		other = "4"
	}
	if _, err := c.Exec(ctx, "SET application_name = 't:"+other+"'"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "UPDATE items SET val = 'ok' WHERE tenant_id = $1::text::bigint AND id = 1", other); err != nil {
		t.Errorf("tenant %s's write at %s: %v", other, source, err)
	}
}

// TestMoveInvalidTenant: a tenant id the tenant column cannot hold is
// refused before anything is written: no catalog entry stuck in moving, no
// move record, no capture at the source.
func TestMoveInvalidTenant(t *testing.T) {
	s := startShards(t, 2, 3, 10)
	ctx := t.Context()
	before, err := s.cat.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, canonical string }{{"abc", ""}, {"1.5", ""}, {"", ""},
		{"99999999999999999999", ""}, {" 2", "2"}, {"002", "2"}} {
		_, err := directory.Move(ctx, s.moveConfig(), tc.tenant, s.names[1])
		var te *directory.TenantError
		if !errors.Is(err, directory.ErrInvalidTenant) || !errors.As(err, &te) || te.Canonical != tc.canonical || te.Column != "tenant_id" {
			t.Errorf("move of tenant %q: %v, want a *TenantError (canonical %q)", tc.tenant, err, tc.canonical)
		}
	}
	after, err := s.cat.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || len(after.Entries) != 0 {
		t.Errorf("catalog changed: version %d → %d, entries %v", before.Version, after.Version, after.Entries)
	}
	if moves, err := s.cat.Moves(ctx); err != nil || len(moves) != 0 {
		t.Errorf("moves recorded: %v (%v)", moves, err)
	}
	for _, node := range s.names {
		var n int
		err := s.pools[node].QueryRow(ctx, "SELECT count(*) FROM noisysim_directory.capture").Scan(&n)
		if err == nil && n > 0 {
			t.Errorf("%s captures %d tenants", node, n)
		}
	}
	if err := directory.CheckTenant(ctx, s.conn(t, s.names[0]), tables, "tenant_id", "2"); err != nil {
		t.Errorf("CheckTenant(2): %v", err)
	}
	if err := directory.CheckTenant(ctx, s.conn(t, s.names[0]), tables, "nope", "2"); !errors.Is(err, directory.ErrInvalidConfig) {
		t.Errorf("CheckTenant of a missing column: %v, want ErrInvalidConfig", err)
	}
}

// TestMoveRefusesOccupiedTarget: a fresh move towards a node that already
// holds rows of the tenant (not copied there by an earlier attempt) is
// refused before anything is written, and those rows stay; with Overwrite
// the move replaces them with the source's.
func TestMoveRefusesOccupiedTarget(t *testing.T) {
	s := startShards(t, 3, 6, 200)
	ctx := t.Context()
	tenant := "2"
	source, _, _, err := s.cat.Lookup(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	target := s.names[2]
	want := s.sums(t, source, tenant)
	if _, err := s.pools[target].Exec(ctx, `INSERT INTO items (tenant_id, id, val) VALUES (2, 1, 'restored by hand'), (2, 900, 'only here')`); err != nil {
		t.Fatal(err)
	}
	stray := s.sums(t, target, tenant)
	before, err := s.cat.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = directory.Move(ctx, s.moveConfig(), tenant, target)
	var te *directory.TargetNotEmptyError
	if !errors.Is(err, directory.ErrTargetNotEmpty) || !errors.As(err, &te) || te.Rows["items"] != 2 || te.Target != target {
		t.Fatalf("move to a target holding 2 rows of the tenant: %v, want a *TargetNotEmptyError counting them", err)
	}
	if got := s.sums(t, target, tenant); fmt.Sprint(got) != fmt.Sprint(stray) {
		t.Errorf("the refused move changed the target's rows: %v, were %v", got, stray)
	}
	after, err := s.cat.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || len(after.Entries) != 0 {
		t.Errorf("the refused move changed the catalog: version %d → %d, entries %v", before.Version, after.Version, after.Entries)
	}
	if moves, err := s.cat.Moves(ctx); err != nil || len(moves) != 0 {
		t.Errorf("the refused move is recorded: %v (%v)", moves, err)
	}
	cfg := s.moveConfig()
	cfg.Overwrite = true
	if _, err := directory.Move(ctx, cfg, tenant, target); err != nil {
		t.Fatalf("move with Overwrite: %v", err)
	}
	if got := s.sums(t, target, tenant); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("target holds %v after the overwriting move, want the source's %v", got, want)
	}
	// Back to the source: the delete emptied it, and the finished move's
	// rows are not a copy any more.
	if _, err := directory.Move(ctx, s.moveConfig(), tenant, source); err != nil {
		t.Fatalf("move back to %s: %v", source, err)
	}
	var marks int
	if err := s.pools[target].QueryRow(ctx, "SELECT count(*) FROM noisysim_directory.copies").Scan(&marks); err != nil || marks != 0 {
		t.Errorf("%d copies still marked at %s after the move finished (%v)", marks, target, err)
	}
}
