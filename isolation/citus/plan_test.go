package citus

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSkew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		want   float64
	}{
		{"none", nil, 0},
		{"idle", []float64{0, 0, 0}, 0},
		{"even", []float64{2, 2, 2, 2}, 1},
		{"one hot of four", []float64{4, 1, 1, 1}, 4},
		{"even count median is the mean of the middle two", []float64{3, 1, 2, 2}, 1.5},
		{"odd count", []float64{9, 3, 1}, 3},
		{"median idle", []float64{5, 0, 0}, math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Skew(tc.values); got != tc.want {
				t.Fatalf("Skew(%v) = %v, want %v", tc.values, got, tc.want)
			}
		})
	}
}

// fourWorkers returns 4 shared workers w1..w4 with the given loads and 8
// shards 1..8 placed two per worker (w1: 1,2; w2: 3,4; …).
func fourWorkers(loads ...float64) State {
	s := State{Table: "orders", Placements: map[int64]string{}}
	for i, l := range loads {
		name := string(rune('1' + i))
		s.Workers = append(s.Workers, Worker{Name: "w" + name, ShouldHaveShards: true, Load: l})
		s.Placements[int64(2*i+1)] = "w" + name
		s.Placements[int64(2*i+2)] = "w" + name
	}
	return s
}

func actions(steps []Step) string {
	var out []string
	for _, s := range steps {
		switch s.Action {
		case ActionMove:
			out = append(out, "move "+itoa(s.ShardID)+" "+s.From+">"+s.To)
		case ActionDedicate:
			out = append(out, "dedicate "+s.To)
		case ActionIsolate:
			out = append(out, "isolate "+s.Tenant)
		default:
			out = append(out, string(s.Action)+" "+s.Tenant)
		}
	}
	return strings.Join(out, "; ")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  State
		th     Thresholds
		alerts []string // Kind:Subject
		steps  string
	}{
		{
			name:  "balanced and below every threshold",
			state: with(fourWorkers(1, 1, 1, 1), Tenant{ID: "7", Share: 0.05, ShardID: 3}),
			steps: "",
		},
		{
			name:   "share over 5% isolates only",
			state:  with(fourWorkers(1, 1, 1, 1), Tenant{ID: "7", Share: 0.08, ShardID: 3}),
			alerts: []string{"tenant-share:7"},
			steps:  "isolate 7",
		},
		{
			name:   "isolated tenant under 20% needs nothing more",
			state:  with(fourWorkers(1, 1, 1, 1), Tenant{ID: "7", Share: 0.19, ShardID: 3, Isolated: true}),
			alerts: []string{"tenant-share:7"},
			steps:  "",
		},
		{
			name:   "60% tenant: isolate, dedicate its worker, move the others off, recommend a cluster",
			state:  with(fourWorkers(6, 1, 0.5, 1), Tenant{ID: "1", Share: 0.6, ShardID: 1}, Tenant{ID: "2", Share: 0.02, ShardID: 5}),
			alerts: []string{"worker-skew:w1", "tenant-share:1"},
			steps:  "isolate 1; dedicate w1; move 2 w1>w3; recommend 1",
		},
		{
			name: "dedicated and alone: done (the dedicated worker is out of the skew)",
			state: func() State {
				s := with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.3, ShardID: 1, Isolated: true})
				s.Workers[0].ShouldHaveShards = false
				s.Placements[2] = "w2"
				return s
			}(),
			alerts: []string{"tenant-share:1"},
			steps:  "",
		},
		{
			name: "one worker: nothing to dedicate, add a worker",
			state: State{Table: "orders", Workers: []Worker{{Name: "w1", ShouldHaveShards: true, Load: 1}},
				Placements: map[int64]string{1: "w1", 2: "w1"}, Tenants: []Tenant{{ID: "1", Share: 0.3, ShardID: 1, Isolated: true}}},
			alerts: []string{"tenant-share:1"},
			steps:  "recommend 1",
		},
		{
			name: "the other shards go where the measured load is lowest, the most loaded first",
			state: State{Table: "orders",
				Workers:    []Worker{{Name: "w1", ShouldHaveShards: true, Load: 5}, {Name: "w2", ShouldHaveShards: true, Load: 1}, {Name: "w3", ShouldHaveShards: true, Load: 1}},
				Placements: map[int64]string{1: "w1", 2: "w1", 5: "w1", 3: "w2", 4: "w3"},
				ShardLoad:  map[int64]float64{1: 0.4, 2: 0.3, 5: 0.1, 3: 0.2},
				Tenants:    []Tenant{{ID: "1", Share: 0.4, ShardID: 1, Isolated: true}}},
			alerts: []string{"worker-skew:w1", "shard-skew:1", "tenant-share:1"},
			steps:  "dedicate w1; move 2 w1>w3; move 5 w1>w2",
		},
		{
			name: "shards without measured load spread by count, not onto the least loaded worker",
			state: State{Table: "orders",
				Workers:    []Worker{{Name: "w1", ShouldHaveShards: true, Load: 5}, {Name: "w2", ShouldHaveShards: true, Load: 1}, {Name: "w3", ShouldHaveShards: true, Load: 1}},
				Placements: map[int64]string{1: "w1", 2: "w1", 5: "w1", 6: "w1", 7: "w1", 3: "w2", 4: "w3"},
				ShardLoad:  map[int64]float64{1: 0.6, 3: 0.2},
				Tenants:    []Tenant{{ID: "1", Share: 0.6, ShardID: 1, Isolated: true}}},
			alerts: []string{"worker-skew:w1", "tenant-share:1"},
			steps:  "dedicate w1; move 2 w1>w3; move 5 w1>w2; move 6 w1>w3; move 7 w1>w2; recommend 1",
		},
		{
			name:   "custom thresholds",
			state:  with(fourWorkers(1.2, 1, 1, 1), Tenant{ID: "7", Share: 0.08, ShardID: 3}),
			th:     Thresholds{Skew: 1.1, Isolate: 0.1},
			alerts: []string{"worker-skew:w1"},
			steps:  "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.state, tc.th)
			var alerts []string
			for _, a := range p.Alerts {
				alerts = append(alerts, a.Kind+":"+a.Subject)
			}
			if !slices.Equal(alerts, tc.alerts) {
				t.Errorf("alerts = %v, want %v", alerts, tc.alerts)
			}
			if got := actions(p.Steps); got != tc.steps {
				t.Errorf("steps:\n got  %s\n want %s", got, tc.steps)
			}
		})
	}
}

func with(s State, ts ...Tenant) State {
	s.Tenants = ts
	return s
}

// simulate applies one step to s the way Citus would.
func simulate(s State, st Step) State {
	s.Placements = clone(s.Placements)
	s.Workers = slices.Clone(s.Workers)
	s.Tenants = slices.Clone(s.Tenants)
	switch st.Action {
	case ActionIsolate:
		// The shard splits into three on the same worker: the tenant's
		// own and the two remainders.
		home := s.Placements[st.ShardID]
		delete(s.Placements, st.ShardID)
		next := slices.Max(slices.Collect(mapKeys(s.Placements))) + 1
		for i := range int64(3) {
			s.Placements[next+i] = home
		}
		for i := range s.Tenants {
			if s.Tenants[i].ID == st.Tenant {
				s.Tenants[i].ShardID, s.Tenants[i].Isolated = next+1, true
			}
		}
	case ActionDedicate:
		for i := range s.Workers {
			if s.Workers[i].Name == st.To {
				s.Workers[i].ShouldHaveShards = false
			}
		}
	case ActionMove:
		s.Placements[st.ShardID] = st.To
	}
	return s
}

func clone(m map[int64]string) map[int64]string {
	out := map[int64]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mapKeys(m map[int64]string) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestDecideConverges applies the first step, re-decides, and so on, as
// Apply does: the ladder ends with the hot tenant alone on a dedicated
// worker, and deciding once more plans nothing (idempotent).
func TestDecideConverges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state State
	}{
		{"one hot tenant", with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.6, ShardID: 3}, Tenant{ID: "2", Share: 0.01, ShardID: 5})},
		{"two heavy tenants on one shard", with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.4, ShardID: 3}, Tenant{ID: "2", Share: 0.3, ShardID: 3})},
		{"two heavy tenants on two workers", with(fourWorkers(3, 3, 1, 1), Tenant{ID: "1", Share: 0.35, ShardID: 1}, Tenant{ID: "2", Share: 0.25, ShardID: 3})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.state
			for i := 0; ; i++ {
				if i > 50 {
					t.Fatalf("no convergence after 50 steps")
				}
				st, ok := firstAction(Decide(s, Thresholds{}))
				if !ok {
					break
				}
				s = simulate(s, st)
			}
			for _, ten := range s.Tenants {
				if ten.Share <= DefaultDedicate {
					continue
				}
				home := s.Placements[ten.ShardID]
				for id, w := range s.Placements {
					if w == home && id != ten.ShardID {
						t.Errorf("tenant %s: shard %d shares its worker %s", ten.ID, id, home)
					}
				}
				for _, w := range s.Workers {
					if w.Name == home && w.ShouldHaveShards {
						t.Errorf("tenant %s: worker %s still takes shards", ten.ID, home)
					}
				}
			}
		})
	}
}

func firstAction(p Plan) (Step, bool) {
	for _, s := range p.Steps {
		if s.Action != ActionRecommend {
			return s, true
		}
	}
	return Step{}, false
}
