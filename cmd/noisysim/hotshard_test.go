package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/noisysim/noisysim/harness/scenario"
)

// TestCitusBadNumbers: values the flag package accepts but no run can use
// (NaN, infinities, rates beyond the scenario bounds, non-positive bounds
// that would silently take a default) are exit 2 with one line naming the
// flag, before any cluster is started or any DSN dialled.
func TestCitusBadNumbers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"citus", "hot-shard", "--rate", "NaN"}, "--rate"},
		{[]string{"citus", "hot-shard", "--rate", "1e9"}, "--rate"},
		{[]string{"citus", "hot-shard", "--hot-share", "NaN"}, "--hot-share"},
		{[]string{"citus", "hot-shard", "--tenants", "1000000000"}, "--tenants"},
		{[]string{"citus", "hot-shard", "--detect-within", "0s"}, "--detect-within"},
		{[]string{"citus", "hot-shard", "--max-pause", "-1s"}, "--max-pause"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--skew", "NaN"}, "--skew"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--skew", "+Inf"}, "--skew"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--isolate", "NaN"}, "--isolate"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--isolate", "2"}, "--isolate"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--isolate", "0.5", "--dedicate-share", "0.1"}, "--isolate <= --dedicate-share <= --cluster"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := realMain(tc.args, &out, &errOut); got != exitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", got, errOut.String())
			}
			msg := strings.TrimSpace(errOut.String())
			if !strings.Contains(msg, tc.msg) || strings.Contains(msg, "\n") {
				t.Errorf("stderr is not one line naming %q:\n%s", tc.msg, msg)
			}
		})
	}
}

// TestHotShardScenario: the scenario citus hot-shard makes with its
// default flags is scenarios/hot-shard.yaml (with --apply, which run
// --apply sets) in every key but the name of its class; each flag lands on
// its key.
func TestHotShardScenario(t *testing.T) {
	parse := func(args ...string) *scenario.Scenario {
		t.Helper()
		var out, errOut bytes.Buffer
		if got := realMain(append([]string{"citus", "hot-shard", "--print-scenario"}, args...), &out, &errOut); got != 0 {
			t.Fatalf("exit %d; stderr:\n%s", got, errOut.String())
		}
		sc, err := scenario.Parse(out.Bytes(), "flags")
		if err != nil {
			t.Fatalf("the printed scenario does not parse: %v\n%s", err, out.String())
		}
		return sc
	}
	got := parse("--apply")
	want, err := scenario.Load("../../scenarios/hot-shard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !want.SetApply() {
		t.Fatal("hot-shard.yaml has no ladder watch to apply")
	}
	got.File, got.Classes[0].Name = want.File, want.Classes[0].Name
	gy, err1 := yaml.Marshal(got)
	wy, err2 := yaml.Marshal(want)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if g, w := strings.Split(string(gy), "\n"), strings.Split(string(wy), "\n"); !slices.Equal(g, w) {
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Errorf("default flags' scenario differs from hot-shard.yaml at line %d of its keys: flags %q, file %q", i+1, g[i], w[i])
				break
			}
		}
		t.Errorf("default flags' scenario differs from hot-shard.yaml (%d against %d lines of keys)", len(g), len(w))
	}

	sc := parse("--workers", "3", "--node-cpu", "0", "--rate", "50", "--query", "lookup", "--update-share", "0.3",
		"--before", "7s", "--max-pause", "2s", "--mode", "block_writes", "--split-mode", "block_writes", "--seed", "5")
	ladder, _ := sc.Phase("ladder")
	before, _ := sc.Phase("before")
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"workers", sc.Backend.Workers, 3}, {"node_cpu", sc.Backend.NodeCPU, 0.0}, {"rate", sc.Classes[0].Rate, 50.0},
		{"query", sc.Classes[0].Query, scenario.QueryLookup}, {"update_share", sc.Writer.UpdateShare, 0.3},
		{"before", before.Length.Duration(), 7 * time.Second}, {"write_pause", sc.Assertions.WritePause.Max.Duration(), 2 * time.Second},
		{"seed", sc.Seed, int64(5)}, {"apply", strings.Contains(fmt.Sprint(ladder.Watch), "apply:true"), false},
		{"split_mode", ladder.Watch.Config.(*scenario.HotShardLadder).SplitMode, "block_writes"},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
