package promotion

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ackedWriter is a writer that acknowledged inserts of -1 (value "w1") and
// -2 ("w2"), then an update of -1 to "w3"; an update of -2 to "w4" got no
// answer (it may have committed).
func ackedWriter() *writer {
	w := &writer{acked: map[int64]string{}, possible: map[int64][]string{}}
	w.record(true, -1, "w1", 1, nil, time.Millisecond)
	w.record(true, -2, "w2", 1, nil, time.Millisecond)
	w.record(false, -1, "w3", 1, nil, time.Millisecond)
	w.record(false, -2, "w4", 0, errors.New("connection reset"), 2*time.Millisecond)
	return w
}

func TestCheckerVerdict(t *testing.T) {
	nodes := []string{"primary1", "primary2"}
	same := map[string]string{"primary1": "10/123", "primary2": "7/456"}
	for _, tc := range []struct {
		name   string
		stored []storedRow
		left   int64
		after  map[string]string
		want   func(Checker) bool
		wantOK bool
	}{
		{name: "clean", stored: []storedRow{{-1, "w3"}, {-2, "w2"}}, after: same,
			want: func(c Checker) bool { return c.Lost+c.Duplicated+c.Stale == 0 }, wantOK: true},
		{name: "unanswered update committed", stored: []storedRow{{-1, "w3"}, {-2, "w4"}}, after: same,
			want: func(c Checker) bool { return c.Stale == 0 }, wantOK: true},
		{name: "lost insert", stored: []storedRow{{-1, "w3"}}, after: same,
			want: func(c Checker) bool { return c.Lost == 1 }},
		{name: "duplicated row", stored: []storedRow{{-1, "w3"}, {-2, "w2"}, {-2, "w2"}}, after: same,
			want: func(c Checker) bool { return c.Duplicated == 1 && c.Lost == 0 }},
		{name: "row three times counts once", stored: []storedRow{{-1, "w3"}, {-1, "w3"}, {-1, "w3"}, {-2, "w2"}}, after: same,
			want: func(c Checker) bool { return c.Duplicated == 1 }},
		{name: "stale value", stored: []storedRow{{-1, "w1"}, {-2, "w2"}}, after: same,
			want: func(c Checker) bool { return c.Stale == 1 && c.Lost == 0 }},
		{name: "unknown value", stored: []storedRow{{-1, "w3"}, {-2, "x"}}, after: same,
			want: func(c Checker) bool { return c.Stale == 1 }},
		{name: "rows left at the source", stored: []storedRow{{-1, "w3"}, {-2, "w2"}}, left: 3, after: same,
			want: func(c Checker) bool { return c.LeftAtSource == 3 }},
		{name: "other tenants changed", stored: []storedRow{{-1, "w3"}, {-2, "w2"}},
			after: map[string]string{"primary1": "10/123", "primary2": "6/455"},
			want:  func(c Checker) bool { return slices.Equal(c.OthersChanged, []string{"primary2"}) }},
		{name: "other tenants' node missing", stored: []storedRow{{-1, "w3"}, {-2, "w2"}},
			after: map[string]string{"primary1": "10/123"},
			want:  func(c Checker) bool { return slices.Equal(c.OthersChanged, []string{"primary2"}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ackedWriter()
			c := w.verdict(tc.stored, tc.left, same, tc.after, nodes)
			if !tc.want(c) {
				t.Errorf("verdict %+v misses the fault", c)
			}
			if c.OK() != tc.wantOK {
				t.Errorf("OK() = %v, want %v (verdict %+v)", c.OK(), tc.wantOK, c)
			}
			if c.Inserts != 2 || c.Updates != 1 || c.Errors != 1 {
				t.Errorf("counted %d inserts, %d updates, %d errors; want 2, 1, 1", c.Inserts, c.Updates, c.Errors)
			}
		})
	}
}

// TestCheckerWriterRecord: an update of an acknowledged row that matched no row
// (routed to a node without it) is a vanished update; an update of a row
// never acknowledged that matched none is not.
func TestCheckerWriterRecord(t *testing.T) {
	w := ackedWriter()
	w.record(false, -1, "w5", 0, nil, time.Millisecond)
	w.record(false, -9, "w6", 0, nil, time.Millisecond)
	w.record(false, -2, "w7", 1, nil, 30*time.Millisecond)
	c := w.verdict([]storedRow{{-1, "w3"}, {-2, "w7"}}, 0, nil, nil, nil)
	if c.Vanished != 1 {
		t.Errorf("vanished %d, want 1", c.Vanished)
	}
	if c.OK() {
		t.Errorf("a vanished update passes the checker: %+v", c)
	}
	if c.Stale != 0 || c.Lost != 0 {
		t.Errorf("verdict %+v: want no stale or lost rows", c)
	}
	if len(w.possible[-2]) != 0 {
		t.Errorf("an acknowledged update keeps older unanswered values possible: %v", w.possible[-2])
	}
	if c.MaxWait != 0.03 {
		t.Errorf("longest write %.3f s, want 0.030", c.MaxWait)
	}
	// The value of the unanswered write acknowledged since is stale now.
	if c := w.verdict([]storedRow{{-1, "w3"}, {-2, "w4"}}, 0, nil, nil, nil); c.Stale != 1 {
		t.Errorf("an unanswered value older than the last acknowledged one passes: %+v", c)
	}
}
