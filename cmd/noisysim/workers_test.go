package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/isolation/citus"
)

// The ladder's steps (citus plan --apply) name workers worker1… (by
// address, ports in numeric order), show each address once, in the workers
// table, and print per-worker figures as table rows, never Go's map syntax.
func TestRecordsNameWorkers(t *testing.T) {
	const w1, w2, w3 = "127.0.0.1:5433", "127.0.0.1:34731", "127.0.0.1:54330"
	recs := []citus.Record{{
		Step:   citus.Step{Action: citus.ActionMove, ShardID: 102009, From: w2, To: w3, Reason: "balance"},
		Took:   time.Second,
		Before: citus.Snapshot{Shards: map[string]int{w1: 10, w2: 12, w3: 10}, Load: map[string]float64{w1: 0.5, w2: 2.5, w3: 0.4}},
		After:  citus.Snapshot{Shards: map[string]int{w1: 10, w2: 11, w3: 11}, Load: map[string]float64{w1: 0.5, w2: 1.5, w3: 1.4}},
	}}
	names := newWorkerNames([]string{w2, w3, w1})
	var b bytes.Buffer
	names.Table(&b)
	printRecords(&b, names, recs)
	out := b.String()
	if strings.Contains(out, "map[") {
		t.Errorf("output has Go map syntax:\n%s", out)
	}
	for _, a := range []string{w1, w2, w3} {
		if n := len(regexp.MustCompile(regexp.QuoteMeta(a)+`(\D|$)`).FindAllString(out, -1)); n != 1 {
			t.Errorf("address %s printed %d times, want once (the workers table):\n%s", a, n, out)
		}
	}
	for _, want := range []string{"worker1  127.0.0.1:5433", "worker2  127.0.0.1:34731", "worker3  127.0.0.1:54330",
		"move shard 102009 from worker2 to worker3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexpLine(out, `^\s+worker2\s+12\s+11\s+2\.50\s+1\.50\s*$`) {
		t.Errorf("per-worker table missing:\n%s", out)
	}
}

func regexpLine(s, re string) bool {
	return regexp.MustCompile("(?m)" + re).MatchString(s)
}
