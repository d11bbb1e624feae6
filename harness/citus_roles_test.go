package harness_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

// citusRoles is a short Citus run whose heavy class has a 100 ms
// statement_timeout and sleeps 0.3 s on its tenant's shard.
const citusRoles = `
name: citus-roles
seed: 11
backend: {kind: local, topology: citus, workers: 2}
tenants: {count: 8}
data: {orders: 2000, days: 30, customers: 10, citus: {shards: 4}}
classes:
  - {name: page, isolation_class: interactive, query: page, rate: 40}
  - {name: slow, isolation_class: heavy, sql: "SELECT pg_sleep(0.3) FROM orders WHERE tenant_id = $1 LIMIT 1", args: [":tenant"], rate: 4}
phases: {warmup: 500ms, solo: 1s, run: 3s, drain: 1s}
configurations:
  - name: roles
    mode: isolated
    interactive: {pool_size: 4, role: {statement_timeout: 5s, work_mem: 2MB, connection_limit: 20}}
    heavy: {pool_size: 2, target: primary, role: {statement_timeout: 100ms, connection_limit: 10}}
assertions: {quiet_p99: {min_samples: 1000000}, allowed_errors: [statement_timeout]}
`

// TestRunCitusRoles runs a scenario on a local Citus cluster: the
// configuration's class roles are made on the coordinator and log in to
// the workers as themselves (pg_stat_activity there), the heavy role's
// 100 ms statement_timeout cancels its 0.3 s sleeps on the tenants' shards
// (SQLSTATE 57014, statement_timeout) while the interactive class runs
// clean, and afterwards no role of noisysim's and no pg_dist_authinfo row
// is left on the coordinator or a worker.
func TestRunCitusRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: the Citus run takes about a minute (-short)")
	}
	sc := parse(t, citusRoles)
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	// The roles seen on the workers while the run lasts.
	var workers []backend.Node
	for _, n := range c.Nodes() {
		if n.Role == backend.RoleWorker {
			workers = append(workers, n)
		}
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	for _, n := range workers {
		watch.Go(func() {
			conn, err := pgx.Connect(watchCtx, n.DSN())
			if err != nil {
				t.Errorf("%s: %v", n.Name, err)
				return
			}
			defer conn.Close(context.Background())
			for watchCtx.Err() == nil {
				rows, err := conn.Query(watchCtx, "SELECT DISTINCT usename::text FROM pg_stat_activity WHERE usename LIKE 'noisysim%'")
				if err != nil {
					return
				}
				names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
				mu.Lock()
				for _, u := range names {
					seen[u] = true
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	rep, err := harness.Run(ctx, sc, harness.Options{Cluster: c, MaxForeignCPU: -1})
	stopWatch()
	watch.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "log in as their own roles") }) {
		t.Errorf("notes %q: none says the configurations log in as their roles", rep.Notes)
	}
	for _, role := range []string{"noisysim_roles_interactive", "noisysim_roles_heavy"} {
		if !seen[role] {
			t.Errorf("no session of %s on a worker during the run (seen %v)", role, seen)
		}
	}
	errs := map[string]map[string]int64{}
	ran := map[string]int64{}
	for _, row := range rep.Configurations[0].Tenants {
		ran[row.Class] += row.Count
		if errs[row.Class] == nil {
			errs[row.Class] = map[string]int64{}
		}
		for k, v := range row.ErrorsByClass {
			errs[row.Class][k] += v
		}
	}
	if errs["slow"]["statement_timeout"] == 0 {
		t.Errorf("class slow errors %v: want its 0.3 s sleeps cut by the heavy role's 100 ms statement_timeout", errs["slow"])
	}
	if ran["page"] == 0 || len(errs["page"]) > 0 {
		t.Errorf("class page: %d measured, errors %v; want some, none failed", ran["page"], errs["page"])
	}

	for _, n := range c.Nodes() {
		conn, err := pgx.Connect(t.Context(), n.DSN())
		if err != nil {
			t.Fatal(err)
		}
		var left string
		err = conn.QueryRow(t.Context(), `SELECT concat_ws(' ',
			(SELECT string_agg(rolname, ',') FROM pg_roles WHERE rolname LIKE 'noisysim%'),
			(SELECT string_agg(rolename, ',') FROM pg_dist_authinfo))`).Scan(&left)
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if left != "" {
			t.Errorf("%s: left behind: %s", n.Name, left)
		}
	}
}
