package citus

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// balanced is a state after a dedication: w1 holds tenant 1's shard alone
// and takes no shards; w2..w4 share the rest, w2 with a power law's second
// tenant on shard 10.
func balanced(loads map[int64]float64, placements map[int64]string) State {
	s := State{Table: "orders", Placements: placements, ShardLoad: loads,
		Workers: []Worker{{Name: "w1"}, {Name: "w2", ShouldHaveShards: true}, {Name: "w3", ShouldHaveShards: true}, {Name: "w4", ShouldHaveShards: true}}}
	return s
}

func TestBalance(t *testing.T) {
	tests := []struct {
		name     string
		state    State
		want     string // "" for no step, else "shard from>to"
		inReason string
	}{
		{
			name: "the most loaded shared worker gives the shard that leaves it and the least loaded closest",
			state: balanced(map[int64]float64{1: 0.6, 10: 0.3, 11: 0.1, 12: 0.05, 20: 0.1, 30: 0.1},
				map[int64]string{1: "w1", 10: "w2", 11: "w2", 12: "w2", 20: "w3", 30: "w4"}),
			want: "11 w2>w3", inReason: "w2 0.450 → 0.350, w3 0.100 → 0.200",
		},
		{
			name: "a shard that would make the least loaded the most loaded does not move",
			state: balanced(map[int64]float64{10: 0.4, 20: 0.1, 30: 0.1},
				map[int64]string{10: "w2", 20: "w3", 30: "w4"}),
		},
		{
			name: "within the skew threshold nothing moves",
			state: balanced(map[int64]float64{10: 0.14, 20: 0.1, 30: 0.1},
				map[int64]string{10: "w2", 20: "w3", 30: "w4"}),
		},
		{
			name:  "no measured load, nothing moves",
			state: balanced(map[int64]float64{}, map[int64]string{10: "w2", 20: "w3", 30: "w4"}),
		},
		{
			name: "the dedicated worker's load is not balanced",
			state: balanced(map[int64]float64{1: 5, 10: 0.1, 20: 0.1, 30: 0.1},
				map[int64]string{1: "w1", 10: "w2", 20: "w3", 30: "w4"}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.state, Thresholds{})
			got := ""
			for _, st := range p.Steps {
				if st.Action != ActionRecommend {
					got = itoa(st.ShardID) + " " + st.From + ">" + st.To
					if !strings.Contains(st.Reason, tc.inReason) {
						t.Errorf("reason %q lacks %q", st.Reason, tc.inReason)
					}
					break
				}
			}
			if got != tc.want {
				t.Errorf("step %q, want %q (plan %v)", got, tc.want, p.Steps)
			}
		})
	}
}

// TestBalanceWaitsForTenantSteps: while a tenant above the thresholds is
// not where its share says, its steps come first and no balancing move is
// planned.
func TestBalanceWaitsForTenantSteps(t *testing.T) {
	s := balanced(map[int64]float64{10: 0.45, 11: 0.1, 20: 0.1, 30: 0.1},
		map[int64]string{10: "w2", 11: "w2", 20: "w3", 30: "w4"})
	s.Tenants = []Tenant{{ID: "2", Share: 0.08, ShardID: 10}}
	p := Decide(s, Thresholds{})
	if len(p.Steps) != 1 || p.Steps[0].Action != ActionIsolate {
		t.Fatalf("steps %v, want the isolation of tenant 2 alone", p.Steps)
	}
}

// TestBalanceConverges: deciding again after each move ends with the
// shared workers within the skew threshold, or with no move that helps,
// in fewer moves than there are shards, and never moves a shard back.
func TestBalanceConverges(t *testing.T) {
	loads := map[int64]float64{1: 5}
	placements := map[int64]string{1: "w1"}
	// w2 holds a heavy quiet tenant and many shards; w3, w4 few.
	for id := int64(10); id < 30; id++ {
		loads[id], placements[id] = 0.01*float64(id%7+1), "w2"
	}
	loads[10] = 0.3
	placements[30], loads[30] = "w3", 0.02
	placements[40], loads[40] = "w4", 0.01
	s := balanced(loads, placements)
	moved := map[int64]string{}
	for i := 0; ; i++ {
		if i > len(placements) {
			t.Fatalf("still moving after %d moves", i)
		}
		p := Decide(s, Thresholds{})
		if len(p.Steps) == 0 {
			break
		}
		st := p.Steps[0]
		if st.Action != ActionMove || st.From == "w1" || st.To == "w1" {
			t.Fatalf("step %v: want a move between shared workers", st)
		}
		if moved[st.ShardID] == st.To {
			t.Fatalf("shard %d moved back to %s", st.ShardID, st.To)
		}
		moved[st.ShardID] = st.From
		s = simulate(s, st)
	}
	per := map[string]float64{}
	for id, w := range s.Placements {
		per[w] += s.ShardLoad[id]
	}
	skew := Skew([]float64{per["w2"], per["w3"], per["w4"]})
	if skew > DefaultSkew+1e-9 {
		t.Errorf("shared workers end at %v (skew %.2fx > %.2fx)", per, skew, DefaultSkew)
	}
	if math.Abs(per["w1"]-5) > 1e-9 || len(moved) == 0 {
		t.Errorf("w1 ends at %v, %d shards moved: want the dedicated worker untouched and some moves", per["w1"], len(moved))
	}
}

// TestBalanceDeterministic: workers whose loads are equal but summed from
// shards in another order (0.1+0.2+0.3 is not 0.3+0.2+0.1 in float64)
// get the same move on every Decide.
func TestBalanceDeterministic(t *testing.T) {
	s := State{Table: "orders",
		Placements: map[int64]string{1: "w2", 2: "w2", 3: "w2", 4: "w3", 5: "w3", 6: "w3", 7: "w4", 8: "w5"},
		ShardLoad:  map[int64]float64{1: 0.1, 2: 0.2, 3: 0.3, 4: 0.3, 5: 0.2, 6: 0.1, 7: 0.1, 8: 0.1},
		Workers: []Worker{{Name: "w2", ShouldHaveShards: true}, {Name: "w3", ShouldHaveShards: true},
			{Name: "w4", ShouldHaveShards: true}, {Name: "w5", ShouldHaveShards: true}}}
	first := fmt.Sprint(Decide(s, Thresholds{}).Steps)
	for range 100 {
		if got := fmt.Sprint(Decide(s, Thresholds{}).Steps); got != first {
			t.Fatalf("Decide gave %s, then %s", first, got)
		}
	}
}

// TestBalanceStopsWhenFutile: a shard whose load alone is above Skew × the
// median keeps the skew up whatever else moves; balancing moves it once at
// most and then stops instead of copying tiny shards one by one.
func TestBalanceStopsWhenFutile(t *testing.T) {
	loads := map[int64]float64{1: 5, 10: 0.098}
	placements := map[int64]string{1: "w1", 10: "w2"}
	for id := int64(100); id < 400; id++ {
		loads[id] = 0.001
		placements[id] = []string{"w2", "w3", "w4"}[id%3]
	}
	s := balanced(loads, placements)
	moves := 0
	for ; moves < 50; moves++ {
		p := Decide(s, Thresholds{})
		if len(p.Steps) == 0 {
			break
		}
		s = simulate(s, p.Steps[0])
	}
	if moves > 3 {
		t.Errorf("%d balancing moves, want at most 3: the big shard alone sets the skew", moves)
	}
}
