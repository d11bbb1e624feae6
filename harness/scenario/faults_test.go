package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

const faultHead = "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\nconfigurations: [{name: a, mode: shared}]\nphases: {warmup: 1s, run: 10s}\n"

func TestFaultsValid(t *testing.T) {
	src := faultHead + "backend: {kind: docker, topology: replica, image: pg:15, images: {replica: pg:16}}\n" +
		"faults:\n  - {node: replica1, action: stop, at: 3s, for: 2s}\n  - {node: primary, action: pause, for: 1s, configurations: [a]}\n"
	s, err := Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != 2 || s.Faults[0].At.Duration() != 3*time.Second || s.Faults[1].At != 0 || s.Faults[1].Action != FaultPause {
		t.Errorf("faults = %+v", s.Faults)
	}
	if !s.Faults[0].Applies("a") || !s.Faults[1].Applies("a") || s.Faults[1].Applies("b") {
		t.Errorf("Applies is wrong")
	}
	if s.Backend.Image != "pg:15" || s.Backend.Images[backend.RoleReplica] != "pg:16" {
		t.Errorf("images = %q %v", s.Backend.Image, s.Backend.Images)
	}
}

func TestFaultsInvalid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // "line:col field: msg fragment"
	}{
		{"needs docker", faultHead + "faults: [{node: primary, action: stop, for: 1s}]\n", []string{
			`6:1 faults: need backend kind docker`,
		}},
		{"fields", faultHead + "backend: {kind: docker}\nfaults:\n" +
			"  - {node: replica1, action: kill, at: -1s, for: 0s}\n" +
			"  - {action: pause, at: 11s, for: 1s, configurations: [b]}\n" +
			"  - {node: primary, action: disconnect, at: 9s, for: 3s}\n", []string{
			`8:6 faults[0].node: unknown node "replica1"; topology single has primary`,
			`8:22 faults[0].action: unknown fault action "kill"; want stop, pause or disconnect`,
			`8:36 faults[0].at: must be a duration >= 0, got -1s`,
			`8:45 faults[0].for: must be a duration > 0, got 0s`,
			`9:5 faults[1].node: required: one of primary`,
			`9:21 faults[1].at: must be < phases.warmup + phases.run (11s), got 11s`,
			`9:56 faults[1].configurations[0]: unknown configuration "b"`,
			`10:49 faults[2].for: at + for (12s) must be <= phases.warmup + phases.run (11s)`,
		}},
		{"overlap on one node", strings.Replace(faultHead, "[{name: a, mode: shared}]", "[{name: a, mode: shared}, {name: b, mode: isolated}]", 1) +
			"backend: {kind: docker, topology: replica}\nfaults:\n" +
			"  - {node: primary, action: stop, at: 1s, for: 1s}\n" +
			"  - {node: replica1, action: pause, at: 1500ms, for: 1s}\n" +
			"  - {node: primary, action: pause, at: 1500ms, for: 1s, configurations: [a]}\n" +
			"  - {node: primary, action: disconnect, at: 2s, for: 1s}\n" +
			"  - {node: primary, action: stop, at: 2500ms, for: 1s, configurations: [b]}\n" +
			"  - {node: primary, action: stop, at: 2500ms, for: 1s, configurations: [a]}\n", []string{
			`10:36 faults[2].at: overlaps faults[0] (stop primary from 1s to 2s) in configuration a: faults on one node must not overlap`,
			`11:41 faults[3].at: overlaps faults[2] (pause primary from 1.5s to 2.5s) in configuration a`,
			`12:35 faults[4].at: overlaps faults[3] (disconnect primary from 2s to 3s) in configuration b`,
			`13:35 faults[5].at: overlaps faults[3] (disconnect primary from 2s to 3s) in configuration a`,
		}},
		{"images", faultHead + "backend: {kind: local, image: pg, images: {primary: pg}}\n", []string{
			`6:24 backend.image: only for kind docker`,
			`6:35 backend.images: only for kind docker`,
		}},
		{"image roles", faultHead + "backend: {kind: docker, images: {boss: pg, primary: ''}}\n", []string{
			`6:34 backend.images.boss: unknown node role "boss"`,
			`6:44 backend.images.primary: empty image`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProblems(t, tc.yaml, tc.want)
		})
	}
}
