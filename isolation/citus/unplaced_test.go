package citus

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
)

// A tag that is not a tenant key (t:abc, an empty t:, an out-of-range
// number) on an integer-distributed table is unplaced load: the other
// tenants are still placed, State and Decide still run. This runs on plain
// PostgreSQL: get_shard_id_for_distribution_column is stood in for by a
// SQL function, so the casts the server refuses are PostgreSQL's own.
func TestTenantShardsLeavesNonKeysUnplaced(t *testing.T) {
	c := localtest.Start(t, backend.Spec{})
	node, _ := backend.First(c, backend.RolePrimary)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, node.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (tenant_id bigint);
		CREATE FUNCTION get_shard_id_for_distribution_column(regclass, anyelement) RETURNS bigint
		LANGUAGE sql IMMUTABLE AS 'SELECT 100 + $2::bigint % 2'`); err != nil {
		t.Fatal(err)
	}
	l := Layout{Table: "orders", columnType: "bigint", Placements: map[int64]string{100: "w1", 101: "w2"},
		Workers: []Worker{{Name: "w1", ShouldHaveShards: true}, {Name: "w2", ShouldHaveShards: true}}}

	for _, tc := range []struct {
		name    string
		tenants []string
		want    map[string]int64
	}{
		{"all keys", []string{"7", "8"}, map[string]int64{"7": 101, "8": 100}},
		{"one bad tag", []string{"7", "abc", ""}, map[string]int64{"7": 101}},
		{"bad tags among many", []string{"1", "2", "3", "multi", "4", "5", "99999999999999999999", "6", "7", ""},
			map[string]int64{"1": 101, "2": 100, "3": 101, "4": 100, "5": 101, "6": 100, "7": 101}},
		{"only bad tags", []string{"abc", ""}, map[string]int64{}},
		{"none", nil, map[string]int64{}},
	} {
		got, err := l.TenantShards(ctx, conn, tc.tenants)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}

	// Any other error still fails the call.
	missing := l
	missing.Table = "no_such_table"
	if _, err := missing.TenantShards(ctx, conn, []string{"7"}); err == nil {
		t.Error("a missing table: no error")
	} else if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "42P01" {
		t.Errorf("a missing table: %v, want 42P01", err)
	}

	// State places the key and reports the bad tags with their shares;
	// Decide runs and lists them, the largest first.
	load := Load{Workers: map[string]float64{"w1": 1, "w2": 3}, Tenants: map[string]float64{"7": 0.5, "abc": 0.3, "": 0.2}}
	s, err := l.State(ctx, conn, load)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if len(s.Tenants) != 1 || s.Tenants[0].ID != "7" || s.Tenants[0].ShardID != 101 || s.ShardLoad[101] != 0.5 {
		t.Errorf("State tenants %+v, shard load %v: want tenant 7 on shard 101 with 0.5", s.Tenants, s.ShardLoad)
	}
	p := Decide(s, Thresholds{})
	want := []Tenant{{ID: "abc", Share: 0.3}, {ID: "", Share: 0.2}}
	if !slices.Equal(p.Unplaced, want) {
		t.Errorf("Plan.Unplaced = %+v, want %+v", p.Unplaced, want)
	}
	if !slices.ContainsFunc(p.Steps, func(st Step) bool { return st.Tenant == "7" && st.Action == ActionIsolate }) {
		t.Errorf("steps %v: want tenant 7 (50%%) isolated", p.Steps)
	}
	for _, st := range p.Steps {
		if st.Tenant == "abc" || (st.Tenant == "" && st.Action != ActionMove) {
			t.Errorf("a step for an unplaced tag: %v", st)
		}
	}
}
