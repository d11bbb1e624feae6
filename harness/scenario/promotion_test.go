package scenario

import (
	"errors"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
)

const promotionBase = `name: promo
backend: {kind: local, topology: shards}
classes:
  - {name: interactive, query: lookup, rate: 10}
configurations:
  - {name: sharded, mode: shared}
`

func TestPromotionDefaults(t *testing.T) {
	s, err := Parse([]byte(promotionBase+"promotion: {trigger: ledger}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Promotion
	if !s.Promoting() || p.Tenant != DominantTenant || p.Threshold != DefaultPromotionThreshold ||
		p.Window != DefaultPromotionWindow || p.MaxPause != DefaultPromotionMaxPause || p.Skew != DefaultPromotionSkew {
		t.Errorf("defaults not applied: %+v", p)
	}
	if got := s.Backend.Spec(); got.Topology != backend.TopologyPrimaries || got.Nodes != DefaultShards {
		t.Errorf("Spec() = %+v, want %d primaries", got, DefaultShards)
	}
	if n := s.Backend.ShardNames(); len(n) != 4 || n[3] != "primary4" {
		t.Errorf("ShardNames() = %v", n)
	}
	plain, err := Parse([]byte(strings.Replace(promotionBase, "topology: shards", "topology: single", 1)), "q.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Promoting() || plain.Backend.Shards != 0 {
		t.Errorf("a scenario without promotion: Promoting %v, shards %d", plain.Promoting(), plain.Backend.Shards)
	}
}

func TestPromotionBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"shards without promotion", promotionBase, `p.yaml:2:24: backend.topology: shards needs a promotion section`},
		{"promotion without shards", strings.Replace(promotionBase, "topology: shards", "topology: single", 1) + "promotion: {tenant: 1}\n",
			`p.yaml:7:1: promotion: needs backend.topology shards`},
		{"threshold", promotionBase + "promotion:\n  threshold: 1.5\n", `p.yaml:8:3: promotion.threshold: must be in (0, 1], got 1.5`},
		{"target", promotionBase + "promotion:\n  target: primary9\n", `p.yaml:8:3: promotion.target: unknown node "primary9"`},
		{"window", promotionBase + "promotion:\n  window: 9s\n  before: 5s\n", `p.yaml:8:3: promotion.window: must be shorter than promotion.before`},
		{"shards range", strings.Replace(promotionBase, "topology: shards}", "topology: shards, shards: 1}", 1) + "promotion: {}\n",
			`p.yaml:2:42: backend.shards: must be in 2..16, got 1`},
		{"unknown key", promotionBase + "promotion:\n  treshold: 0.3\n", `p.yaml:8:3: promotion.treshold: unknown key "treshold"; did you mean "threshold"?`},
		{"writer rate", promotionBase + "promotion:\n  writer_rate: 0\n", `promotion.writer_rate: must be in (0, 5000] writes/s, got 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "p.yaml")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}
