package citus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
			name: "a heavier tenant's dedicated worker: the lighter one waits for its shard to be moved off",
			state: func() State {
				s := with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.4, ShardID: 1, Isolated: true}, Tenant{ID: "2", Share: 0.3, ShardID: 2, Isolated: true})
				s.Workers[0].ShouldHaveShards = false
				return s
			}(),
			alerts: []string{"tenant-share:1", "tenant-share:2"},
			steps:  "move 2 w1>w2; recommend 2",
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

// layout builds a State of table orders from spec: space-separated
// workers "name:shard=MB,shard=MB…"; a name ending in "!" takes no shards
// (the "!" is not part of the name); a shard without "=MB" has no known
// size. Every worker's load is 1.
func layout(spec string) State {
	s := State{Table: "orders", Placements: map[int64]string{}, ShardBytes: map[int64]int64{}}
	for _, f := range strings.Fields(spec) {
		name, shards, _ := strings.Cut(f, ":")
		w := Worker{Name: strings.TrimSuffix(name, "!"), ShouldHaveShards: !strings.HasSuffix(name, "!"), Load: 1}
		s.Workers = append(s.Workers, w)
		for _, sh := range strings.Split(shards, ",") {
			if sh == "" {
				continue
			}
			id, mb, sized := strings.Cut(sh, "=")
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				panic(err)
			}
			s.Placements[n] = w.Name
			if sized {
				m, err := strconv.ParseInt(mb, 10, 64)
				if err != nil {
					panic(err)
				}
				s.ShardBytes[n] = m << 20
			}
		}
	}
	return s
}

func heavy(id string, share float64, shard int64) Tenant {
	return Tenant{ID: id, Share: share, ShardID: shard, Isolated: true}
}

// TestDecideDedicatedWorker covers the choice of the worker dedicated to a
// tenant above Dedicate: the fewest bytes to move, home on a tie or
// unknown sizes, and a drain target kept whatever the sizes say.
func TestDecideDedicatedWorker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   State
		steps   string
		reasons []string // substrings of some step's Reason
	}{
		{
			name:    "home cheapest: its other shards weigh less than any other worker plus the tenant's shard",
			state:   with(layout("w1:1=10,2=5 w2:3=50 w3:4=50"), heavy("1", 0.3, 1)),
			steps:   "dedicate w1; move 2 w1>w2",
			reasons: []string{"dedicating w1 moves 5.0 MB vs 60.0 MB to dedicate worker w2"},
		},
		{
			name:  "other worker cheapest: dedicate it, empty it (home takes a shard), then move the tenant's shard",
			state: with(layout("w1:1=10,2=100 w2:3=5 w3:4=50,5=50"), heavy("1", 0.3, 1)),
			steps: "dedicate w2; move 3 w2>w1; move 1 w1>w2",
			reasons: []string{"dedicating w2 moves 15.0 MB vs 100.0 MB to dedicate its current worker w1",
				"give tenant 1 its dedicated worker w2"},
		},
		{
			name:  "other worker cheapest for a tenant not isolated yet: isolate first",
			state: with(layout("w1:1=10,2=100 w2:3=5 w3:4=50,5=50"), Tenant{ID: "1", Share: 0.3, ShardID: 1}),
			steps: "isolate 1; dedicate w2; move 3 w2>w1; move 1 w1>w2",
		},
		{
			name:    "tie: home",
			state:   with(layout("w1:1=10,2=20 w2:3=10 w3:4=50"), heavy("1", 0.3, 1)),
			steps:   "dedicate w1; move 2 w1>w2",
			reasons: []string{"dedicating w1 moves 20.0 MB vs 20.0 MB to dedicate worker w2 (a tie keeps its current worker)"},
		},
		{
			name:  "tie between other workers: the fewer shards",
			state: with(layout("w1:1=10,2=100 w2:3=3,5=2 w3:4=5"), heavy("1", 0.3, 1)),
			steps: "dedicate w3; move 4 w3>w1; move 1 w1>w3",
		},
		{
			name:    "no sizes: home",
			state:   with(layout("w1:1,2 w2:3 w3:4,5"), heavy("1", 0.3, 1)),
			steps:   "dedicate w1; move 2 w1>w2",
			reasons: []string{"shard sizes unknown: its current worker is dedicated"},
		},
		{
			name: "ShardBytes nil: home",
			state: func() State {
				s := with(layout("w1:1=10,2=100 w2:3=5 w3:4=50,5=50"), heavy("1", 0.3, 1))
				s.ShardBytes = nil
				return s
			}(),
			steps: "dedicate w1; move 2 w1>w2",
		},
		{
			name:  "one size missing: home, though w2 would be cheaper",
			state: with(layout("w1:1=10,2=100 w2:3=5 w3:4"), heavy("1", 0.3, 1)),
			steps: "dedicate w1; move 2 w1>w2",
		},
		{
			name:  "a worker holding another heavy tenant's shard is no candidate",
			state: with(layout("w1:1=10,2=100 w2:3=5 w3:4=50"), heavy("1", 0.4, 1), heavy("2", 0.3, 3)),
			steps: "dedicate w3; move 4 w3>w1; move 1 w1>w3; dedicate w2",
			reasons: []string{"dedicating w3 moves 60.0 MB vs 100.0 MB to dedicate its current worker w1",
				"no other worker can be dedicated to it"},
		},
		{
			name:  "drain target: a dedicated worker without a heavy tenant's shard is kept though home is now cheaper",
			state: with(layout("w1:1=10,2=5 w2!:3=1000 w3:4=50"), heavy("1", 0.3, 1)),
			steps: "move 3 w2>w1; move 1 w1>w2",
			reasons: []string{"worker w2 is being emptied for it (it takes no shards and holds no shard of a tenant above 20.0%); " +
				"dedicating w2 moves 1010.0 MB vs 5.0 MB to dedicate its current worker w1"},
		},
		{
			name:  "drain target emptied: the tenant's shard moves onto it",
			state: with(layout("w1:1=10,2=5 w2!: w3:4=50"), heavy("1", 0.3, 1)),
			steps: "move 1 w1>w2",
		},
		{
			name:  "drain target with unknown sizes: kept",
			state: with(layout("w1:1,2 w2!:3 w3:4"), heavy("1", 0.3, 1)),
			steps: "move 3 w2>w1; move 1 w1>w2",
		},
		{
			name:  "home the only shared worker but a drain target: the tenant moves there",
			state: with(layout("w1:1=10,2=5 w2!:"), heavy("1", 0.3, 1)),
			steps: "move 1 w1>w2",
		},
		{
			name:  "home the only shared worker and no drain target: add a worker",
			state: with(layout("w1:1=10,2=5"), heavy("1", 0.3, 1)),
			steps: "recommend 1",
		},
		{
			name: "two drain targets: the fewest bytes to the largest share",
			state: with(layout("w1:1=10,2=5 w2:3=10,4=5 w3!:5=20 w4!:6=30 w5:7=1"),
				heavy("1", 0.4, 1), heavy("2", 0.3, 3)),
			steps: "move 5 w3>w1; move 1 w1>w3; move 6 w4>w2; move 3 w2>w4",
		},
		{
			name:  "a heavy tenant alone on a dedicated worker: done, its worker is no drain target",
			state: with(layout("w1!:1=10 w2:2=5,3=5 w3:4=50"), heavy("1", 0.3, 1)),
			steps: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.state, Thresholds{})
			if got := actions(p.Steps); got != tc.steps {
				t.Errorf("steps:\n got  %s\n want %s", got, tc.steps)
			}
			for _, want := range tc.reasons {
				if !slices.ContainsFunc(p.Steps, func(s Step) bool { return strings.Contains(s.Reason, want) }) {
					t.Errorf("no step's reason has %q:\n%s", want, reasons(p.Steps))
				}
			}
		})
	}
}

func reasons(steps []Step) string {
	var out []string
	for _, s := range steps {
		out = append(out, s.String())
	}
	return strings.Join(out, "\n")
}

func TestDecideFormatsBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 kB"}, {1536, "1.5 kB"}, {1<<20 - 1, "1.0 MB"},
		{15 << 20, "15.0 MB"}, {3 << 30, "3.0 GB"}, {5 << 40, "5.0 TB"}, {2048 << 40, "2048.0 TB"},
	} {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// simulate applies one step to s the way Citus would.
func simulate(s State, st Step) State {
	s.Placements = clone(s.Placements)
	s.ShardBytes = maps.Clone(s.ShardBytes)
	s.Workers = slices.Clone(s.Workers)
	s.Tenants = slices.Clone(s.Tenants)
	switch st.Action {
	case ActionIsolate:
		// The shard splits into three on the same worker: the tenant's
		// own (half the bytes, say) and the two remainders (a quarter
		// each), where any other tenant of the shard now is.
		home := s.Placements[st.ShardID]
		b, sized := s.ShardBytes[st.ShardID]
		delete(s.Placements, st.ShardID)
		delete(s.ShardBytes, st.ShardID)
		next := slices.Max(slices.Collect(mapKeys(s.Placements))) + 1
		for i := range int64(3) {
			s.Placements[next+i] = home
			if sized {
				s.ShardBytes[next+i] = b / 4
			}
		}
		if sized {
			s.ShardBytes[next+1] = b / 2
		}
		for i := range s.Tenants {
			switch {
			case s.Tenants[i].ID == st.Tenant:
				s.Tenants[i].ShardID, s.Tenants[i].Isolated = next+1, true
			case s.Tenants[i].ShardID == st.ShardID:
				s.Tenants[i].ShardID = next
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

// sizes sets every shard's size in s to the MB given by shard (default
// def).
func sizes(s State, def int64, mb map[int64]int64) State {
	s.ShardBytes = map[int64]int64{}
	for id := range s.Placements {
		n, ok := mb[id]
		if !ok {
			n = def
		}
		s.ShardBytes[id] = n << 20
	}
	return s
}

// TestDecideConverges applies the first step, re-decides, and so on, as
// Apply does: the ladder ends with each tenant above Dedicate alone on a
// worker that takes no shards, one such worker per tenant, and deciding
// once more plans nothing (idempotent).
func TestDecideConverges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state State
		// drift, when not nil, changes the state after each step from
		// the first dedication on (sizes changing under writes).
		drift func(State) State
		// dedicated is the worker tenant 1 ends on, "" for any.
		dedicated string
	}{
		{name: "one hot tenant", state: with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.6, ShardID: 3}, Tenant{ID: "2", Share: 0.01, ShardID: 5}), dedicated: "w2"},
		{name: "two heavy tenants on one shard", state: with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.4, ShardID: 3}, Tenant{ID: "2", Share: 0.3, ShardID: 3})},
		{name: "two heavy tenants on two workers", state: with(fourWorkers(3, 3, 1, 1), Tenant{ID: "1", Share: 0.35, ShardID: 1}, Tenant{ID: "2", Share: 0.25, ShardID: 3})},
		{
			// Shard 2 (10 MB) is all home has besides the tenant's
			// 40 MB shard: after the isolation home moves 10 + 10 +
			// 10 MB, another worker 30 + 30 + 20 MB.
			name:      "sizes: home cheapest",
			state:     sizes(with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.6, ShardID: 1}, Tenant{ID: "2", Share: 0.01, ShardID: 5}), 30, map[int64]int64{1: 40, 2: 10}),
			dedicated: "w1",
		},
		{
			// Shard 2 is 200 MB: after the isolation home moves 200 +
			// 10 + 10 MB, w2 (the first of three equal workers) 80 MB.
			name:      "sizes: other worker cheapest",
			state:     sizes(with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.6, ShardID: 1}, Tenant{ID: "2", Share: 0.01, ShardID: 5}), 30, map[int64]int64{1: 40, 2: 200}),
			dedicated: "w2",
		},
		{
			// As above, but once w2 is dedicated home's other shards
			// shrink to nothing and w2's grow: home is now by far the
			// cheapest, and the plan still goes on with w2.
			name:  "sizes: other worker cheapest, then home cheaper while it is emptied",
			state: sizes(with(fourWorkers(6, 1, 1, 1), Tenant{ID: "1", Share: 0.6, ShardID: 1}, Tenant{ID: "2", Share: 0.01, ShardID: 5}), 30, map[int64]int64{1: 40, 2: 200}),
			drift: func(s State) State {
				home := s.Placements[s.Tenants[0].ShardID]
				for id, w := range s.Placements {
					switch {
					case w == home && id != s.Tenants[0].ShardID: // Tenants[0] is tenant 1
						s.ShardBytes[id] = 1
					case w == "w2":
						s.ShardBytes[id] = 1 << 30
					}
				}
				return s
			},
			dedicated: "w2",
		},
		{
			name: "sizes: two heavy tenants, each its cheapest worker",
			state: sizes(with(fourWorkers(3, 3, 1, 1), Tenant{ID: "1", Share: 0.35, ShardID: 1}, Tenant{ID: "2", Share: 0.25, ShardID: 3}),
				30, map[int64]int64{2: 500, 4: 500}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.state
			var ran []string
			drifting := false
			for i := 0; ; i++ {
				if i > 50 {
					t.Fatalf("no convergence after 50 steps:\n%s", strings.Join(ran, "\n"))
				}
				st, ok := firstAction(Decide(s, Thresholds{}))
				if !ok {
					break
				}
				ran = append(ran, st.String())
				s = simulate(s, st)
				drifting = drifting || st.Action == ActionDedicate
				if tc.drift != nil && drifting {
					s = tc.drift(s)
				}
			}
			heavyCount := 0
			for _, ten := range s.Tenants {
				if ten.Share <= DefaultDedicate {
					continue
				}
				heavyCount++
				home, ok := s.Placements[ten.ShardID]
				if !ok {
					t.Errorf("tenant %s: shard %d has no placement", ten.ID, ten.ShardID)
					continue
				}
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
				if ten.ID == "1" && tc.dedicated != "" && home != tc.dedicated {
					t.Errorf("tenant 1 ends on %s, want %s", home, tc.dedicated)
				}
			}
			var dedicated []string
			for _, w := range s.Workers {
				if !w.ShouldHaveShards {
					dedicated = append(dedicated, w.Name)
				}
			}
			if len(dedicated) != heavyCount {
				t.Errorf("dedicated workers %v, want one per tenant above %v (%d); steps:\n%s", dedicated, DefaultDedicate, heavyCount, strings.Join(ran, "\n"))
			}
			t.Logf("%d steps:\n%s", len(ran), strings.Join(ran, "\n"))
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

// execDB records the statements Exec runs ("set <host> <shouldhaveshards>",
// "move <shard> <from>><to>") and fails the one recorded as fail; it has no
// rows to query.
type execDB struct {
	ran  []string
	fail string
}

func (d *execDB) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var rec string
	switch {
	case strings.Contains(sql, "citus_set_node_property"):
		rec = fmt.Sprintf("set %v %v", args[0], strings.Contains(sql, "true"))
	case strings.Contains(sql, "citus_move_shard_placement"):
		rec = fmt.Sprintf("move %v %v>%v", args[0], args[1], args[3])
	default:
		rec = sql
	}
	d.ran = append(d.ran, rec)
	if rec == d.fail {
		return pgconn.CommandTag{}, errors.New("refused")
	}
	return pgconn.NewCommandTag("SELECT 1"), nil
}

func (d *execDB) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("no rows here")
}

func (d *execDB) QueryRow(context.Context, string, ...any) pgx.Row { return nil }

// TestDecidedMoveOntoDedicatedWorker: a planned move onto a dedicated
// worker (the tenant's shard arriving) lifts shouldhaveshards for the move,
// which Citus refuses otherwise, and sets it back, also when the move
// fails; other moves are the move alone.
func TestDecidedMoveOntoDedicatedWorker(t *testing.T) {
	from := Worker{Name: "a:5432", Host: "a", Port: 5432, ShouldHaveShards: true}
	shared := Worker{Name: "b:5432", Host: "b", Port: 5432, ShouldHaveShards: true}
	dedicated := Worker{Name: "c:5432", Host: "c", Port: 5432}
	around := []string{"set c true", "move 7 a>c", "set c false"}
	for _, tc := range []struct {
		name    string
		to      Worker
		fail    string
		ran     []string
		wantErr string
	}{
		{name: "onto a shared worker", to: shared, ran: []string{"move 7 a>b"}},
		{name: "onto a dedicated worker", to: dedicated, ran: around},
		{name: "onto a dedicated worker, the move fails: marked again", to: dedicated, fail: "move 7 a>c", ran: around,
			wantErr: "move shard 7 from a:5432 to c:5432: refused"},
		{name: "onto a dedicated worker, the mark cannot be lifted: no move", to: dedicated, fail: "set c true", ran: around[:1],
			wantErr: "let the dedicated worker take it: refused"},
		{name: "onto a dedicated worker, the mark cannot be set back: said so", to: dedicated, fail: "set c false", ran: around,
			wantErr: "worker c:5432 takes shards again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &execDB{fail: tc.fail}
			err := moveShard(context.Background(), db, 7, from, tc.to, TransferLogical)
			if !slices.Equal(db.ran, tc.ran) {
				t.Errorf("ran %v, want %v", db.ran, tc.ran)
			}
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestSplitPoints(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi string
		hash   int32
		want   []string
	}{
		{"inside", "-100", "100", 7, []string{"6", "7"}},
		{"at the range's first value", "-100", "100", -100, []string{"-100"}},
		{"at its last value", "-100", "100", 100, []string{"99"}},
		{"the whole int32 range", "-2147483648", "2147483647", 0, []string{"-1", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitPoints(tc.lo, tc.hi, tc.hash)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("splitPoints(%s, %s, %d) = %v, %v; want %v", tc.lo, tc.hi, tc.hash, got, err, tc.want)
			}
		})
	}
	for _, bad := range [][3]string{{"-100", "100", "101"}, {"5", "5", "5"}, {"x", "100", "0"}} {
		h, _ := strconv.Atoi(bad[2])
		if got, err := splitPoints(bad[0], bad[1], int32(h)); err == nil {
			t.Errorf("splitPoints(%s, %s, %d) = %v, want an error", bad[0], bad[1], h, got)
		}
	}
}

func TestSplitTarget(t *testing.T) {
	l := Layout{Workers: []Worker{{Name: "a:1", ShouldHaveShards: true}, {Name: "b:1", ShouldHaveShards: true}, {Name: "c:1", ShouldHaveShards: true},
		{Name: "d:1"}},
		Placements: map[int64]string{1: "a:1", 2: "b:1", 3: "b:1", 4: "c:1"},
		GroupBytes: map[int64]int64{1: 100, 2: 10, 3: 10, 4: 50}}
	for _, tc := range []struct {
		name, to, want string
		wantErr        bool
	}{
		{"the fewest bytes, not the shard's nor a dedicated worker", "", "b:1", false},
		{"named", "c:1", "c:1", false},
		{"named: the shard's own", "a:1", "", true},
		{"named: no such worker", "e:1", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := splitTarget(l, 1, tc.to)
			if (err != nil) != tc.wantErr || w.Name != tc.want {
				t.Errorf("splitTarget(shard 1, %q) = %q, %v; want %q (error %v)", tc.to, w.Name, err, tc.want, tc.wantErr)
			}
		})
	}
	one := Layout{Workers: []Worker{{Name: "a:1", ShouldHaveShards: true}}, Placements: map[int64]string{1: "a:1"}}
	if _, err := splitTarget(one, 1, ""); err == nil || !strings.Contains(err.Error(), "block_writes") {
		t.Errorf("one worker: %v, want an error pointing to block_writes", err)
	}
}
