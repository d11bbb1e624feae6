package directory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/isolation/directory"
)

// schema is a small tenant data set: every table carries tenant_id in its
// primary key.
const schema = `
CREATE TABLE accounts (tenant_id bigint PRIMARY KEY, name text NOT NULL, plan text);
CREATE TABLE items (
	tenant_id bigint NOT NULL,
	id        bigint NOT NULL,
	val       text NOT NULL,
	amount    numeric(12,2),
	at        timestamptz NOT NULL DEFAULT now(),
	score     double precision,
	PRIMARY KEY (tenant_id, id)
);`

var tables = []string{"accounts", "items"}

// shards is a started cluster with a catalog on its first node.
type shards struct {
	cluster *local.Cluster
	nodes   map[string]string // name → superuser DSN
	names   []string
	cat     *directory.Catalog
	pools   map[string]*pgxpool.Pool
}

// startShards starts n primaries, loads tenants 1..tenants on the node
// the ring places each on (rows: tenant 1 gets big, the rest small) and
// installs a catalog whose ring is every node but the last.
func startShards(t *testing.T, n, tenants, big int) *shards {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := localtest.Start(t, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: n})
	s := &shards{cluster: c, nodes: map[string]string{}, pools: map[string]*pgxpool.Pool{}}
	var specs []directory.NodeSpec
	for i, node := range c.Nodes() {
		s.nodes[node.Name] = node.DSN()
		s.names = append(s.names, node.Name)
		specs = append(specs, directory.NodeSpec{Name: node.Name, Ring: i < n-1})
		p, err := pgxpool.New(ctx, node.DSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		s.pools[node.Name] = p
		if _, err := p.Exec(ctx, schema); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := directory.OpenCatalog(ctx, s.nodes[s.names[0]], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	if err := cat.Install(ctx, specs...); err != nil {
		t.Fatal(err)
	}
	s.cat = cat
	snap, err := cat.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := 1; id <= tenants; id++ {
		rows := 50
		if id == 1 {
			rows = big
		}
		node := snap.Resolve(strconv.Itoa(id))
		if _, err := s.pools[node].Exec(ctx, `
			INSERT INTO accounts VALUES ($1::bigint, 'tenant-' || $1::bigint, CASE WHEN $1::bigint = 1 THEN NULL ELSE 'std' END)
			`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.pools[node].Exec(ctx, `INSERT INTO items (tenant_id, id, val, amount, at, score)
			SELECT $1, g, repeat('v', 10 + g % 40), CASE WHEN g % 7 = 0 THEN NULL ELSE (g % 10000) / 100.0 END,
			       '2024-01-01'::timestamptz + make_interval(secs => g), g / 3.0
			FROM generate_series(1, $2::int) g`, id, rows); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *shards) conn(t *testing.T, node string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), s.nodes[node])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(t.Context(), "SET TimeZone = 'UTC'; SET extra_float_digits = 3"); err != nil {
		t.Fatal(err)
	}
	return c
}

// sums returns tenant's (rows, checksum) per table on node.
func (s *shards) sums(t *testing.T, node, tenant string) map[string]string {
	t.Helper()
	c := s.conn(t, node)
	out := map[string]string{}
	for _, tb := range tables {
		n, sum, err := directory.TableSum(t.Context(), c, tb, "tenant_id", tenant)
		if err != nil {
			t.Fatal(err)
		}
		out[tb] = fmt.Sprintf("%d/%s", n, sum)
	}
	return out
}

// others returns the checksum of every tenant but tenant, per node.
func (s *shards) others(t *testing.T, tenant string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, node := range s.names {
		var v string
		err := s.pools[node].QueryRow(t.Context(), `SELECT count(*) || '/' || `+directory.ChecksumSQL+
			` FROM (SELECT tenant_id, id, val, amount::text, at::text, score::text FROM items WHERE tenant_id::text <> $1) t`, tenant).Scan(&v)
		if err != nil {
			t.Fatal(err)
		}
		out[node] = v
	}
	return out
}

func (s *shards) moveConfig(gates ...directory.Gate) directory.MoveConfig {
	return directory.MoveConfig{
		Catalog: s.cat, Nodes: s.nodes, Tables: tables, BatchRows: 500,
		Grace: 100 * time.Millisecond, Gates: gates,
	}
}

// writer writes tenant's rows through a router at a steady pace and keeps
// what the database acknowledged.
type writer struct {
	s      *shards
	router *directory.Router
	tenant string
	rng    *rand.Rand

	mu       sync.Mutex
	acked    map[int64]string   // id → last acknowledged val
	possible map[int64][]string // id → vals written without an answer after the last ack
	inserts  int
	updates  int
	errs     int
	maxWait  time.Duration
}

func newWriter(s *shards, r *directory.Router, tenant string, seed uint64) *writer {
	return &writer{s: s, router: r, tenant: tenant, rng: rand.New(rand.NewPCG(seed, 7)),
		acked: map[int64]string{}, possible: map[int64][]string{}}
}

// run writes every 2 ms until ctx ends: a new row, or an update of a row
// it inserted earlier.
func (w *writer) run(ctx context.Context, id0 int64) {
	next := id0
	for seq := 0; ctx.Err() == nil; seq++ {
		var id int64
		insert := len(w.acked) == 0 || w.rng.IntN(3) > 0
		if insert {
			next++
			id = next
		} else {
			id = id0 + 1 + w.rng.Int64N(next-id0)
		}
		val := fmt.Sprintf("w%d", seq)
		t0 := time.Now()
		err := w.write(ctx, insert, id, val)
		w.mu.Lock()
		w.maxWait = max(w.maxWait, time.Since(t0))
		switch {
		case err == nil && (insert || w.has(id)):
			w.acked[id] = val
			delete(w.possible, id)
			if insert {
				w.inserts++
			} else {
				w.updates++
			}
		case err != nil:
			w.errs++
			w.possible[id] = append(w.possible[id], val)
		}
		w.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

func (w *writer) has(id int64) bool { _, ok := w.acked[id]; return ok }

// write routes one write, retrying once when it reached a fenced node.
func (w *writer) write(ctx context.Context, insert bool, id int64, val string) error {
	for attempt := 0; ; attempt++ {
		node, done, err := w.router.Route(ctx, w.tenant)
		if err != nil {
			return err
		}
		if insert {
			_, err = w.s.pools[node].Exec(ctx, `INSERT INTO items (tenant_id, id, val, amount, score) VALUES ($1::text::bigint, $2, $3, 1.5, 0.1)`, w.tenant, id, val)
		} else {
			_, err = w.s.pools[node].Exec(ctx, `UPDATE items SET val = $3 WHERE tenant_id = $1::text::bigint AND id = $2`, w.tenant, id, val)
		}
		done()
		if directory.IsFenced(err) && attempt < 3 {
			if rerr := w.router.Refresh(ctx); rerr != nil {
				return errors.Join(err, rerr)
			}
			continue
		}
		return err
	}
}

// check verifies every acknowledged write at node: present once, with its
// last acknowledged value (or a later unanswered one).
func (w *writer) check(t *testing.T, node string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	rows, err := w.s.pools[node].Query(t.Context(), `SELECT id, val, count(*) OVER (PARTITION BY id) FROM items WHERE tenant_id = $1::text::bigint AND id > 1000000`, w.tenant)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	var id, n int64
	var val string
	if _, err := pgx.ForEachRow(rows, []any{&id, &val, &n}, func() error {
		if n != 1 {
			t.Errorf("id %d present %d times", id, n)
		}
		got[id] = val
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for id, want := range w.acked {
		v, ok := got[id]
		if !ok {
			lost++
			continue
		}
		if v != want && !contains(w.possible[id], v) {
			t.Errorf("id %d: value %q, last acknowledged %q", id, v, want)
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged rows lost", lost, len(w.acked))
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
