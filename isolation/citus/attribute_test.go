package citus

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestAttribute(t *testing.T) {
	ms := time.Millisecond
	workers := []Worker{{Name: "w1"}, {Name: "w2"}, {Name: "w3"}}
	placements := map[int64]string{10: "w1", 11: "w2", 12: "w2"}
	shardOf := map[string]int64{"1": 10, "2": 11, "3": 12, "4": 12, "5": 99}
	tests := []struct {
		name       string
		dbTime     map[string]time.Duration
		over       time.Duration
		wantWorker map[string]float64
		wantShard  map[int64]float64
		unplaced   []string
	}{
		{
			name:       "each tenant's DB time on its shard's worker, per second of window",
			dbTime:     map[string]time.Duration{"1": 600 * ms, "2": 200 * ms, "3": 100 * ms, "4": 100 * ms},
			over:       500 * ms,
			wantWorker: map[string]float64{"w1": 1.2, "w2": 0.8, "w3": 0},
			wantShard:  map[int64]float64{10: 1.2, 11: 0.4, 12: 0.4},
		},
		{
			name:       "tenants without a shard or placement are reported, not guessed",
			dbTime:     map[string]time.Duration{"1": 100 * ms, "5": 300 * ms, "9": 50 * ms, "warmup": 0},
			over:       time.Second,
			wantWorker: map[string]float64{"w1": 0.1, "w2": 0, "w3": 0},
			wantShard:  map[int64]float64{10: 0.1},
			unplaced:   []string{"5", "9"},
		},
		{
			name:       "an empty window is all zeros",
			dbTime:     map[string]time.Duration{"1": 100 * ms},
			over:       0,
			wantWorker: map[string]float64{"w1": 0, "w2": 0, "w3": 0},
			wantShard:  map[int64]float64{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, s, un := Attribute(workers, placements, shardOf, tc.dbTime, tc.over)
			if len(w) != len(tc.wantWorker) {
				t.Errorf("workers = %v, want %v", w, tc.wantWorker)
			}
			for k, v := range tc.wantWorker {
				if got, ok := w[k]; !ok || math.Abs(got-v) > 1e-9 {
					t.Errorf("worker %s = %v, want %v", k, got, v)
				}
			}
			if len(s) != len(tc.wantShard) {
				t.Errorf("shards = %v, want %v", s, tc.wantShard)
			}
			for k, v := range tc.wantShard {
				if math.Abs(s[k]-v) > 1e-9 {
					t.Errorf("shard %d = %v, want %v", k, s[k], v)
				}
			}
			if !slices.Equal(un, tc.unplaced) {
				t.Errorf("unplaced = %v, want %v", un, tc.unplaced)
			}
		})
	}
}

// BenchmarkAttribute attributes one interval of 100 tenants over 34 shards
// on 4 workers (the hot-shard scenario after isolation): compare with one
// pg_stat_activity sample of 4 workers (55 ms through the coordinator,
// 0.84 ms directly; see MinViaInterval).
func BenchmarkAttribute(b *testing.B) {
	workers := []Worker{{Name: "w1"}, {Name: "w2"}, {Name: "w3"}, {Name: "w4"}}
	placements := map[int64]string{}
	for id := int64(0); id < 34; id++ {
		placements[id] = workers[id%4].Name
	}
	shardOf, dbTime := map[string]int64{}, map[string]time.Duration{}
	for t := 1; t <= 100; t++ {
		id := strconv.Itoa(t)
		shardOf[id], dbTime[id] = int64(t%34), time.Duration(t)*time.Millisecond
	}
	b.ReportAllocs()
	for b.Loop() {
		Attribute(workers, placements, shardOf, dbTime, 500*time.Millisecond)
	}
}
