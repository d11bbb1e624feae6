package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/hotshard"
	"github.com/noisysim/noisysim/isolation/citus"
)

// The hot-shard output names workers worker1… (by address, ports in
// numeric order), shows each address once, prints per-worker figures as
// tables and never Go's map syntax.
func TestHotShardOutputNamesWorkers(t *testing.T) {
	const w1, w2, w3 = "127.0.0.1:5433", "127.0.0.1:34731", "127.0.0.1:54330"
	res := hotshard.Result{
		Workers:     []string{w2, w3, w1},
		DetectedOK:  true,
		Detected:    800 * time.Millisecond,
		Alerts:      []citus.Alert{{Kind: "worker-skew", Subject: w2, Value: 3, Threshold: 1.5}},
		ShardBefore: hotshard.Shard{ID: 102008, Worker: w2, Bytes: 1 << 20},
		Before:      hotshard.Window{Queries: 100, Workers: map[string]float64{w1: 0.5, w2: 2.5, w3: 0.4}, Sampled: map[string]float64{w2: 3}},
		After:       hotshard.Window{Queries: 100, Workers: map[string]float64{w1: 0.6, w2: 1.1, w3: 0.7}},
		Steps: []citus.Record{{
			Step:   citus.Step{Action: citus.ActionMove, ShardID: 102009, From: w2, To: w3, Reason: "balance"},
			Took:   time.Second,
			Before: citus.Snapshot{Shards: map[string]int{w1: 10, w2: 12, w3: 10}, Load: map[string]float64{w1: 0.5, w2: 2.5, w3: 0.4}},
			After:  citus.Snapshot{Shards: map[string]int{w1: 10, w2: 11, w3: 11}, Load: map[string]float64{w1: 0.5, w2: 1.5, w3: 1.4}},
		}},
		Writes: hotshard.Writes{Acked: 10, Errors: map[string]int{}},
	}
	var b bytes.Buffer
	printHotShard(&b, res)
	out := b.String()
	for _, bad := range []string{"map[", "errors map"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has Go map syntax %q:\n%s", bad, out)
		}
	}
	for _, a := range []string{w1, w2, w3} {
		if n := len(regexp.MustCompile(regexp.QuoteMeta(a)+`(\D|$)`).FindAllString(out, -1)); n != 1 {
			t.Errorf("address %s printed %d times, want once (the workers table):\n%s", a, n, out)
		}
	}
	for _, want := range []string{
		"worker1  127.0.0.1:5433", "worker2  127.0.0.1:34731", "worker3  127.0.0.1:54330",
		"alert worker-skew: worker2 at 3.00x", "on worker2", "move shard 102009 from worker2 to worker3",
		"errors: none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Per-worker figures are table rows: one line per worker.
	if !regexpLine(out, `^\s+worker2\s+12\s+11\s+2\.50\s+1\.50\s*$`) || !regexpLine(out, `^\s+worker2\s+2\.50\s+1\.10\s+3\.00\s*$`) {
		t.Errorf("per-worker tables missing:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 160 {
			t.Errorf("line of %d characters: %q", len(l), l)
		}
	}
	b.Reset()
	res.Writes.Errors = map[string]int{"40P01": 2, "other": 1}
	printHotShard(&b, res)
	if !strings.Contains(b.String(), "errors: 40P01 2, other 1") {
		t.Errorf("writer errors not listed:\n%s", b.String())
	}
}

func regexpLine(s, re string) bool {
	return regexp.MustCompile("(?m)" + re).MatchString(s)
}
