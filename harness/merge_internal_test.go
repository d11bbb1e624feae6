package harness

import (
	"errors"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/scenario"
)

// TestCheckSegments: outputs that do not make one whole run are refused,
// naming the directories.
func TestCheckSegments(t *testing.T) {
	part := func(dir string, i, n int, seed int64, hash string) SegmentPart {
		return SegmentPart{Output: &SegmentOutput{Dir: dir, Meta: SegmentMeta{Scenario: "s", ScenarioHash: hash, Seed: seed,
			ScheduleHash: "h", Index: i, Count: n}}}
	}
	ok := []SegmentPart{part("c", 3, 3, 1, "x"), part("a", 1, 3, 1, "x"), part("b", 2, 3, 1, "x")}
	sorted, err := CheckSegments("x", ok)
	if err != nil {
		t.Fatal(err)
	}
	if sorted[0].Output.Dir != "a" || sorted[2].Output.Dir != "c" {
		t.Errorf("not sorted by segment: %s %s %s", sorted[0].Output.Dir, sorted[1].Output.Dir, sorted[2].Output.Dir)
	}
	for _, tc := range []struct {
		name  string
		hash  string
		parts []SegmentPart
		want  string
	}{
		{"missing", "x", ok[:2], "segment 2/3 is missing"},
		{"twice", "x", append(ok[:3:3], part("d", 2, 3, 1, "x")), "segment 2/3 is given twice: b, d"},
		{"seed", "x", []SegmentPart{ok[1], ok[2], part("c", 3, 3, 2, "x")}, "a and c ran different seeds (1, 2)"},
		{"scenario", "x", []SegmentPart{ok[1], ok[2], part("c", 3, 3, 1, "y")}, "a and c ran different scenarios"},
		{"count", "x", []SegmentPart{ok[1], ok[2], part("c", 3, 4, 1, "x")}, "different numbers of segments (3, 4)"},
		{"file", "z", ok, "another scenario file than the one given"},
		{"run", "x", []SegmentPart{ok[1], ok[2], func() SegmentPart {
			p := part("c", 3, 3, 1, "x")
			p.Output.Meta.StartAt = "2026-01-02T15:04:05Z"
			return p
		}()},
			"a and c are agents of different runs (--start-at none, 2026-01-02T15:04:05Z)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckSegments(tc.hash, tc.parts)
			if !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckSegments = %v, want ErrInvalid saying %q", err, tc.want)
			}
			// The scenario may well be valid: the outputs are the bad input.
			if !strings.HasPrefix(err.Error(), "merge: ") {
				t.Errorf("CheckSegments = %q, want it to read merge: ..., not invalid scenario", err)
			}
		})
	}
}
