package harness

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/workload"
)

// TestSegmentsPartitionTimeline: on a shipped scenario's timeline, the
// slices 1/3, 2/3, 3/3 are disjoint and together are the whole timeline:
// the same tenants, classes and intended starts, op for op.
func TestSegmentsPartitionTimeline(t *testing.T) {
	sc, err := scenario.Load("../scenarios/noisy-neighbor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Backend.Kind = scenario.BackendExternal // agents share an existing database
	if err := SegmentProblems(sc); err != nil {
		t.Fatalf("noisy-neighbor.yaml on an external backend cannot be segmented: %v", err)
	}
	r := &runner{sc: sc}
	if err := r.plan(); err != nil {
		t.Fatal(err)
	}
	type arrival struct {
		tenant int
		class  string
		at     int64
	}
	draw := func(seg workload.Segment) []arrival {
		ts, err := newTimelineSource(r.pop, r.steps, sc.Seed, seg)
		if err != nil {
			t.Fatal(err)
		}
		var out []arrival
		for op, ok := ts.Next(); ok; op, ok = ts.Next() {
			out = append(out, arrival{op.Tenant, op.Class, int64(op.At)})
		}
		if int64(len(out)) != ts.Len() {
			t.Fatalf("%v: Len %d, drew %d", seg, ts.Len(), len(out))
		}
		return out
	}
	cmpArrival := func(a, b arrival) int {
		switch {
		case a.at != b.at:
			return int(a.at - b.at)
		case a.class != b.class:
			if a.class < b.class {
				return -1
			}
			return 1
		}
		return a.tenant - b.tenant
	}
	whole := draw(workload.Segment{})
	slices.SortFunc(whole, cmpArrival)
	var union []arrival
	for i := 1; i <= 3; i++ {
		part := draw(workload.Segment{Index: i, Count: 3})
		if n := len(part); n < len(whole)/3-200 || n > len(whole)/3+200 {
			t.Errorf("segment %d/3 has %d ops of %d", i, n, len(whole))
		}
		union = append(union, part...)
	}
	slices.SortFunc(union, cmpArrival)
	if len(whole) == 0 || !slices.Equal(union, whole) {
		t.Fatalf("the segments' union has %d ops, the timeline %d: not the same ops", len(union), len(whole))
	}
}

// TestSegmentProblems: what cannot run as one agent of many is refused,
// every problem named.
func TestSegmentProblems(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"../scenarios/hot-shard.yaml", []string{"has a watch", "checked writer", "topology citus"}},
		{"../scenarios/replay-incident.yaml", []string{"replay"}},
		{"../scenarios/noisy-neighbor.yaml", []string{"noisy-neighbor.yaml:22:3: backend.kind local: each agent would start a database of its own (local PostgreSQL processes)", "by DSN"}},
		{"../scenarios/app-instances.yaml", []string{"app-instances.yaml:25:3: backend.kind local", "app-instances.yaml:80:25: configuration global: app.limiter global without app.redis_url"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sc, err := scenario.Load(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			err = SegmentProblems(sc)
			if !errors.Is(err, scenario.ErrInvalid) {
				t.Fatalf("SegmentProblems = %v, want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
		})
	}
}
