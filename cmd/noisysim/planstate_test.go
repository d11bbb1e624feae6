package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/isolation/citus"
)

// citus plan --apply prints the state before and after the ladder: each
// worker's host:port appears once, in the workers table printed first,
// and the state tables name the workers worker1… with their figures as
// rows, never Go's map syntax.
func TestPlanStateNamesWorkersOnce(t *testing.T) {
	const w1, w2, w3 = "127.0.0.1:5433", "127.0.0.1:34731", "127.0.0.1:54330"
	l := citus.Layout{
		Table:      "orders",
		Workers:    []citus.Worker{{Name: w2, ShouldHaveShards: true}, {Name: w3, ShouldHaveShards: true}, {Name: w1, ShouldHaveShards: false}},
		Placements: map[int64]string{101: w2, 102: w2, 103: w3, 104: w1},
	}
	load := citus.Load{Samples: 20, Duration: 2 * time.Second,
		Workers: map[string]float64{w1: 0.5, w2: 3, w3: 0.5},
		Tenants: map[string]float64{"7": 0.6, "8": 0.1, "abc": 0.3}}
	plan := citus.Plan{WorkerSkew: 6, ShardSkew: 2,
		Unplaced: []citus.Tenant{{ID: "abc", Share: 0.3}},
		Alerts:   []citus.Alert{{Kind: "worker-skew", Subject: w2, Value: 6, Threshold: 1.5}},
		Steps:    []citus.Step{{Action: citus.ActionMove, ShardID: 102, From: w2, To: w3, Reason: "balance"}}}
	names := layoutNames(l)
	var b bytes.Buffer
	names.Table(&b)
	printState(&b, "before", names, l, load, plan)
	printState(&b, "after", names, l, load, citus.Plan{Unplaced: plan.Unplaced})
	out := b.String()
	if strings.Contains(out, "map[") {
		t.Errorf("output has Go map syntax:\n%s", out)
	}
	for _, a := range []string{w1, w2, w3} {
		if n := len(regexp.MustCompile(regexp.QuoteMeta(a)+`(\D|$)`).FindAllString(out, -1)); n != 1 {
			t.Errorf("address %s printed %d times, want once (the workers table):\n%s", a, n, out)
		}
	}
	for _, want := range []string{
		"worker1  127.0.0.1:5433", "worker2  127.0.0.1:34731", "worker3  127.0.0.1:54330",
		"alert worker-skew: worker2 at 6.00x", "step 1: move shard 102 from worker2 to worker3",
		"tenant 7: 60.0% of cluster load", `unplaced load: 30.0% of cluster load is tagged with no value of orders's distribution column: "t:abc" 30.0%`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// One row per worker and table: name, shards, active, share, takes shards.
	for _, row := range []string{`^\s+worker2\s+2\s+3\.00\s+75\.0%\s+yes\s*$`, `^\s+worker1\s+1\s+0\.50\s+12\.5%\s+no\s*$`} {
		if n := len(regexp.MustCompile("(?m)"+row).FindAllString(out, -1)); n != 2 {
			t.Errorf("%d rows match %s, want 2 (before and after):\n%s", n, row, out)
		}
	}
}
