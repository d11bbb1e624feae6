package scenario

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

const shardsBase = `name: promo
backend: {kind: local, topology: shards, spare_nodes: 1}
classes:
  - {name: interactive, query: lookup, rate: 10}
configurations:
  - {name: sharded, mode: shared}
assertions: {quiet_p99: {window: after, baseline: before}}
timeline:
  - {name: before, length: 2s}
`

const promoteMove = `  - name: move
    until: actions_done
    max: 30s
    watch: {policy: promote, target: primary4}
  - {name: after, length: 2s}
`

func TestShardsPromoteWriterParse(t *testing.T) {
	src := strings.Replace(shardsBase, "assertions: {quiet_p99: {window: after, baseline: before}}",
		"assertions: {quiet_p99: {window: after, baseline: before}, zero_loss: true, write_pause: {max: 1s}}", 1) + promoteMove + "writer: {rate: 50}\n"
	s, err := Parse([]byte(src), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Backend.Spec(); got.Topology != backend.TopologyPrimaries || got.Nodes != DefaultShards || s.Backend.SpareNodes != 1 {
		t.Errorf("Spec() = %+v, spare %d; want %d primaries, 1 spare", got, s.Backend.SpareNodes, DefaultShards)
	}
	if n := s.Backend.ShardNames(); len(n) != 4 || n[3] != "primary4" {
		t.Errorf("ShardNames() = %v", n)
	}
	w := s.Writer
	if w == nil || w.Tenant != DominantTenant || w.Rate != 50 || w.UpdateShare != DefaultWriterUpdateShare {
		t.Errorf("writer = %+v, want tenant 1 (default), rate 50, update share %v (default)", w, DefaultWriterUpdateShare)
	}
	if !s.Assertions.ZeroLoss || s.Assertions.WritePause.Max != Duration(time.Second) {
		t.Errorf("assertions = %+v, want zero_loss and write_pause max 1s", s.Assertions)
	}
	p, ok := s.Steps()[1].Watch.Config.(*Promote)
	if !ok || p.Tenant != DominantTenant || p.Threshold != DefaultPromoteShare || p.Window != DefaultPromoteWindow ||
		p.MaxPause != DefaultMoveMaxPause || p.BatchRows != DefaultMoveBatchRows || p.Target != "primary4" {
		t.Errorf("promote = %+v, want the defaults and target primary4", s.Steps()[1].Watch.Config)
	}
	if m := p.Move(); m.Tenant != 1 || m.Target != "primary4" || m.Grace != DefaultMoveGrace {
		t.Errorf("Move() = %+v", m)
	}
}

func TestShardsBadInput(t *testing.T) {
	single := strings.Replace(shardsBase, "topology: shards, spare_nodes: 1", "topology: single", 1)
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"spare nodes", strings.Replace(shardsBase, "spare_nodes: 1", "spare_nodes: 4", 1) + "  - {name: after, length: 2s}\n",
			`p.yaml:2:42: backend.spare_nodes: must be in 0..3 (at least one node takes the tenants), got 4`},
		{"spare nodes without shards", strings.Replace(shardsBase, "topology: shards", "topology: single", 1) + "  - {name: after, length: 2s}\n",
			`p.yaml:2:42: backend.spare_nodes: only for topology shards`},
		{"shards range", strings.Replace(shardsBase, "topology: shards", "topology: shards, shards: 1", 1) + "  - {name: after, length: 2s}\n",
			`p.yaml:2:42: backend.shards: must be in 2..16, got 1`},
		{"removed promotion section", shardsBase + "  - {name: after, length: 2s}\npromotion:\n  threshold: 0.3\n",
			`p.yaml:11:1: promotion: the promotion section is gone: a promotion is a timeline now`},
		{"promote on a single node", single + promoteMove,
			`p.yaml:13:5: timeline[1].watch: needs backend.topology shards`},
		{"promote target", strings.Replace(shardsBase+promoteMove, "target: primary4", "target: primary9, threshold: 1.5", 1),
			`p.yaml:13:30: timeline[1].watch.target: unknown node "primary9"; the shards are primary1..primary4`},
		{"promote threshold", strings.Replace(shardsBase+promoteMove, "target: primary4", "target: primary4, threshold: 1.5", 1),
			`p.yaml:13:48: timeline[1].watch.threshold: must be in (0, 1): the policy fires when the tenant's share of DB time is above it, got 1.5`},
		{"promote threshold 1 never fires", strings.Replace(shardsBase+promoteMove, "target: primary4", "target: primary4, threshold: 1", 1),
			`p.yaml:13:48: timeline[1].watch.threshold: must be in (0, 1): the policy fires when the tenant's share of DB time is above it, got 1`},
		{"promote unknown key", strings.Replace(shardsBase+promoteMove, "target: primary4", "target: primary4, treshold: 0.3", 1),
			`p.yaml:13:48: timeline[1].watch.treshold: unknown key "treshold" of policy promote; its keys are policy, every, batch_rows, detect_within, grace, max_pause, target, tenant, threshold, window`},
		{"promote detect_within", strings.Replace(shardsBase+promoteMove, "target: primary4", "target: primary4, detect_within: 1s", 1),
			`p.yaml:13:48: timeline[1].watch.detect_within: must be at least window (2s): the share must stay above the threshold that long, got 1s`},
		{"move_tenant", shardsBase + "  - name: move\n    length: 5s\n    actions: [{type: move_tenant, tenant: 99, max_pause: 0s}]\n  - {name: after, length: 2s}\n",
			"p.yaml:12:15: timeline[1].actions[0].target: required: the node the tenant moves to, one of primary1..primary4\np.yaml:12:35: timeline[1].actions[0].tenant: no such tenant 99: ids run from 1 to tenants.count (50)\np.yaml:12:47: timeline[1].actions[0].max_pause: must be a duration > 0, got 0s"},
		{"writer rate", shardsBase + "  - {name: after, length: 2s}\nwriter: {rate: 0, update_share: 1}\n",
			`p.yaml:11:10: writer.rate: must be in (0, 5000] writes/s, got 0`},
		{"writer tenant", shardsBase + "  - {name: after, length: 2s}\nwriter: {tenant: 77}\n",
			`p.yaml:11:10: writer.tenant: no such tenant 77`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "p.yaml")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
	// zero_loss and write_pause read the writer.
	src := strings.Replace(shardsBase, "assertions: {quiet_p99: {window: after, baseline: before}}",
		"assertions: {quiet_p99: {window: after, baseline: before}, zero_loss: true, write_pause: {max: 1s}}", 1) + "  - {name: after, length: 2s}\n"
	_, err := Parse([]byte(src), "p.yaml")
	for _, want := range []string{"p.yaml:7:60: assertions.zero_loss: needs a writer section", "p.yaml:7:77: assertions.write_pause: needs a writer section"} {
		if !strings.Contains(fmt4(err), want) {
			t.Errorf("error:\n%v\nwant it to contain:\n%s", err, want)
		}
	}
}

// TestWritePauseFromUnknown: write_pause.from must name a phase.
func TestWritePauseFromUnknown(t *testing.T) {
	src := strings.Replace(shardsBase, "assertions: {quiet_p99: {window: after, baseline: before}}",
		"assertions: {quiet_p99: {window: after, baseline: before}, zero_loss: true, write_pause: {max: 1s, from: nosuch}}", 1) + promoteMove + "writer: {rate: 50}\n"
	_, err := Parse([]byte(src), "p.yaml")
	if want := `assertions.write_pause.from: unknown phase "nosuch", want one of`; !strings.Contains(fmt4(err), want) {
		t.Errorf("error:\n%v\nwant it to contain:\n%s", err, want)
	}
	if _, err := Parse([]byte(strings.Replace(src, "from: nosuch", "from: after", 1)), "p.yaml"); err != nil {
		t.Errorf("from: after: %v", err)
	}
}

func fmt4(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
