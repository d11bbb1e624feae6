package workload

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Segment is one agent's slice of a schedule when N agents share the load:
// agent Index of Count (1-based, 1 ≤ Index ≤ Count). The zero value, and
// 1/1, is the whole schedule.
//
// The slice is taken inside each (class, tenant) sender's own arrivals:
// the sender's k-th arrival (k = 0, 1, ...) goes to the agent with
// (k + s) mod Count = Index − 1, s being the sender's position in the
// generator (classes by name, then tenants in population order). So every
// agent gets every sender's arrivals in turn, every Count-th one, and each
// tenant's rate in each agent is its rate / Count to within one op; the
// offset s spreads the remainders of short senders over the agents
// instead of giving them all to agent 1. The slices of 1/N..N/N are
// disjoint and their union is the whole schedule, with the same Seq, At,
// tenant and class per op. k6's execution segments slice a rate the same
// way (lib/execution_segment.go: equal segments of a striped sequence).
type Segment struct {
	Index, Count int
}

// ErrSegment marks a segment that is not i/N with 1 ≤ i ≤ N.
var ErrSegment = errors.New("invalid segment")

// ParseSegment reads "i/N" (1 ≤ i ≤ N, both decimal integers).
//
// Errors: ErrSegment (wrapped), naming what is wrong.
func ParseSegment(s string) (Segment, error) {
	is, ns, ok := strings.Cut(s, "/")
	if !ok {
		return Segment{}, fmt.Errorf("%w %q: want i/N, e.g. 1/3", ErrSegment, s)
	}
	i, err1 := strconv.Atoi(strings.TrimSpace(is))
	n, err2 := strconv.Atoi(strings.TrimSpace(ns))
	if err1 != nil || err2 != nil {
		return Segment{}, fmt.Errorf("%w %q: want i/N with whole numbers, e.g. 1/3", ErrSegment, s)
	}
	seg := Segment{Index: i, Count: n}
	if err := seg.check(); err != nil {
		return Segment{}, err
	}
	return seg, nil
}

// Validate reports whether seg is the zero value or 1 ≤ Index ≤ Count.
func (seg Segment) Validate() error {
	if seg == (Segment{}) {
		return nil
	}
	return seg.check()
}

func (seg Segment) check() error {
	switch {
	case seg.Count < 1:
		return fmt.Errorf("%w %d/%d: the number of segments must be at least 1", ErrSegment, seg.Index, seg.Count)
	case seg.Index < 1 || seg.Index > seg.Count:
		return fmt.Errorf("%w %d/%d: the segment must be in 1..%d (segments are numbered from 1)", ErrSegment, seg.Index, seg.Count, seg.Count)
	}
	return nil
}

// Whole reports whether seg is the whole schedule (zero or 1/1).
func (seg Segment) Whole() bool { return seg.Count <= 1 }

// String returns "i/N", or "" for the zero value.
func (seg Segment) String() string {
	if seg == (Segment{}) {
		return ""
	}
	return fmt.Sprintf("%d/%d", seg.Index, seg.Count)
}

// keeps reports whether the k-th arrival of the sender at position s is
// in seg.
func (seg Segment) keeps(s int, k int64) bool {
	if seg.Whole() {
		return true
	}
	n := int64(seg.Count)
	return (k%n+int64(s)%n)%n == int64(seg.Index-1)
}
