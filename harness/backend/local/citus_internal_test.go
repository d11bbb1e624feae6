package local

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
)

func TestPlanNodesCitus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   int
		want    []string
		wantErr bool
	}{
		{"default four workers", 0, []string{"coordinator", "worker1", "worker2", "worker3", "worker4"}, false},
		{"two workers", 2, []string{"coordinator", "worker1", "worker2"}, false},
		{"negative", -1, nil, true},
		{"too many", 65, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans, err := planNodes(backend.Spec{Topology: TopologyCitus, Nodes: tc.nodes})
			if tc.wantErr {
				if !errors.Is(err, backend.ErrBadInput) {
					t.Fatalf("err = %v, want backend.ErrBadInput", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for i, p := range plans {
				names = append(names, p.name)
				want := backend.RoleWorker
				if i == 0 {
					want = backend.RoleCoordinator
				}
				if p.role != want || p.upstream != "" {
					t.Errorf("%s: role %s upstream %q, want %s and none", p.name, p.role, p.upstream, want)
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("nodes = %v, want %v", names, tc.want)
			}
		})
	}
}

func TestCitusSettings(t *testing.T) {
	bin := Binaries{Dir: t.TempDir(), Major: 15} // no postgres: no output_plugin_libraries probe
	for _, tc := range []struct {
		name string
		spec map[string]string
		want map[string]string
	}{
		{"defaults", nil, map[string]string{
			"shared_preload_libraries": "citus", "wal_level": "logical",
			"citus.node_conninfo": "sslmode=disable", "citus.local_hostname": "127.0.0.1",
		}},
		{"citus goes first in the spec's preload list", map[string]string{"shared_preload_libraries": "pg_stat_statements"},
			map[string]string{"shared_preload_libraries": "citus,pg_stat_statements"}},
		{"a preload list naming citus is kept", map[string]string{"shared_preload_libraries": "pg_stat_statements, citus"},
			map[string]string{"shared_preload_libraries": "pg_stat_statements, citus"}},
		{"spec settings win", map[string]string{"citus.stat_tenants_track": "none"},
			map[string]string{"citus.stat_tenants_track": "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := citusSettings(context.Background(), bin, tc.spec)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if _, ok := got["output_plugin_libraries"]; ok {
				t.Errorf("output_plugin_libraries set for a server that does not know it")
			}
		})
	}
}

func TestCheckCitusMissing(t *testing.T) {
	bin := Binaries{Dir: t.TempDir() + "/bin", Major: 15}
	err := CheckCitus(context.Background(), bin)
	var ce *CitusNotInstalledError
	if !errors.As(err, &ce) || !errors.Is(err, backend.ErrNotInstalled) || !errors.Is(err, ErrCitusNotInstalled) {
		t.Fatalf("err = %v, want *CitusNotInstalledError unwrapping backend.ErrNotInstalled", err)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "citus.so") {
		t.Errorf("error is not one line naming citus.so: %q", err)
	}
	_, err = New(WithBinDir(bin.Dir)).StartCluster(context.Background(), backend.Spec{Topology: TopologyCitus})
	if !errors.Is(err, backend.ErrNotInstalled) {
		t.Errorf("StartCluster without binaries: %v, want backend.ErrNotInstalled", err)
	}
}
