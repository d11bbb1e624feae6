package workload_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/noisysim/noisysim/workload"
)

// TestSegmentsPartitionStream: the slices 1/N..N/N of a stream are
// disjoint, their union (merged by Seq) is the whole stream op for op, and
// each sender's share in each slice is its whole count / N to within one.
func TestSegmentsPartitionStream(t *testing.T) {
	quiet := func(op workload.Op) bool { return op.Tenant != 1 }
	mixed := []workload.ClassSpec{
		{Name: "interactive", Rate: 900, Arrival: workload.Poisson, Senders: workload.QuietTenants},
		{Name: "heavy", Rate: 40, Arrival: workload.Constant, Senders: workload.DominantTenant},
		{Name: "bulk", Rate: 300, Arrival: workload.Constant},
	}
	for _, n := range []int{1, 2, 3, 7} {
		for _, filter := range []func(workload.Op) bool{nil, quiet} {
			pop := mustPopulation(t, workload.PopulationConfig{Tenants: 200}, 1)
			whole := drain(mustStream(t, pop, mixed, 4*time.Second, 9, filter))
			type pair struct {
				tenant int
				class  string
			}
			wholeBy := map[pair]int{}
			for _, op := range whole {
				wholeBy[pair{op.Tenant, op.Class}]++
			}
			var union []workload.Op
			for i := 1; i <= n; i++ {
				s, err := mustStream(t, pop, mixed, 4*time.Second, 9, filter).Slice(workload.Segment{Index: i, Count: n})
				if err != nil {
					t.Fatal(err)
				}
				part := drain(s)
				if int64(len(part)) != s.Len() {
					t.Errorf("%d/%d: Len %d, drew %d", i, n, s.Len(), len(part))
				}
				if len(part) == 0 {
					t.Fatalf("%d/%d: no ops", i, n)
				}
				by := map[pair]int{}
				for _, op := range part {
					by[pair{op.Tenant, op.Class}]++
				}
				for p, w := range wholeBy {
					if got := by[p]; got < w/n || got > (w+n-1)/n {
						t.Errorf("%d/%d: tenant %d %s: %d ops of %d, want %d..%d", i, n, p.tenant, p.class, got, w, w/n, (w+n-1)/n)
					}
				}
				union = append(union, part...)
			}
			slices.SortFunc(union, func(a, b workload.Op) int { return int(a.Seq - b.Seq) })
			for i := 1; i < len(union); i++ {
				if union[i].Seq == union[i-1].Seq {
					t.Fatalf("N=%d: op %d is in two segments", n, union[i].Seq)
				}
			}
			if !slices.Equal(union, whole) {
				t.Fatalf("N=%d: the union of the segments has %d ops, the stream %d: not the same ops", n, len(union), len(whole))
			}
		}
	}
}

func TestParseSegment(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want workload.Segment
		ok   bool
	}{
		{"1/3", workload.Segment{Index: 1, Count: 3}, true},
		{"3/3", workload.Segment{Index: 3, Count: 3}, true},
		{"1/1", workload.Segment{Index: 1, Count: 1}, true},
		{"3/2", workload.Segment{}, false},
		{"0/0", workload.Segment{}, false},
		{"0/3", workload.Segment{}, false},
		{"-1/3", workload.Segment{}, false},
		{"2", workload.Segment{}, false},
		{"a/b", workload.Segment{}, false},
		{"", workload.Segment{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := workload.ParseSegment(tc.in)
			if tc.ok != (err == nil) || (tc.ok && got != tc.want) {
				t.Fatalf("ParseSegment(%q) = %v, %v", tc.in, got, err)
			}
			if err != nil && !errors.Is(err, workload.ErrSegment) {
				t.Fatalf("error %v does not wrap ErrSegment", err)
			}
		})
	}
}
