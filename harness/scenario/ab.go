package scenario

import (
	"fmt"
	"strings"
)

// Defaults of QuietP99AB.
const (
	DefaultABBlock  = Duration(5e9) // 5s
	DefaultABSettle = Duration(1e9) // 1s
	// MaxABBlocks bounds QuietP99AB.Blocks.
	MaxABBlocks = 100
)

// QuietP99AB is the matched-block check (assertions.quiet_p99_ab): Blocks
// pairs of short windows follow the timeline, each an A block (the quiet
// tenants alone) then a B block (everyone), so that whatever else loads
// the machine at the time weighs on both halves of a pair alike. Per quiet
// class, each pair's ratio is the quiet tenants' merged p99 in B over
// quiet_p99.factor × their p99 in A + quiet_p99.slack; the check passes
// when the median ratio over the pairs is <= 1.
type QuietP99AB struct {
	// Blocks is the number of A/B pairs, 2..MaxABBlocks; 0 (default) is
	// off.
	Blocks int `yaml:"blocks"`
	// Block is the length of each measured block, > 0. Default 5s.
	Block Duration `yaml:"block"`
	// Settle is the unmeasured gap before each block (quiet before A, so
	// that the noise of the B before drains; everyone before B), >= 0.
	// Default 1s.
	Settle Duration `yaml:"settle"`
}

// ABPhase names the phases of A/B pair i (1-based): the settle before A,
// A, the settle before B, B.
func ABPhase(i int, part string) string { return fmt.Sprintf("ab%d_%s", i, part) }

// Parts of an A/B pair, as ABPhase names them.
const (
	ABSettleA = "settle_a"
	ABA       = "a"
	ABSettleB = "settle_b"
	ABB       = "b"
)

// abPhases returns the phases q appends to the timeline.
func (q QuietP99AB) abPhases() []Phase {
	var out []Phase
	for i := 1; i <= q.Blocks; i++ {
		add := func(part string, d Duration, senders Senders, measure bool) {
			if d > 0 {
				out = append(out, Phase{Name: ABPhase(i, part), Length: d, Senders: PhaseSenders{Set: senders}, Measure: measure})
			}
		}
		add(ABSettleA, q.Settle, SendersQuiet, false)
		add(ABA, q.Block, SendersQuiet, true)
		add(ABSettleB, q.Settle, SendersAll, false)
		add(ABB, q.Block, SendersAll, true)
	}
	return out
}

// checkAB checks assertions.quiet_p99_ab.
func (c *checker) checkAB(s *Scenario) {
	q := s.Assertions.QuietP99AB
	const f = "assertions.quiet_p99_ab"
	if q.Blocks == 0 {
		return
	}
	if q.Blocks < 2 || q.Blocks > MaxABBlocks {
		c.add(f+".blocks", "must be 0 (off) or 2..%d pairs of blocks, got %d", MaxABBlocks, q.Blocks)
	}
	if q.Block <= 0 || q.Block > MaxPhase {
		c.add(f+".block", "must be a duration > 0 and at most %s, got %s", MaxPhase, q.Block)
	}
	if q.Settle < 0 || q.Settle > MaxPhase {
		c.add(f+".settle", "must be a duration >= 0 and at most %s, got %s", MaxPhase, q.Settle)
	}
	for i, p := range s.Timeline {
		if strings.HasPrefix(p.Name, "ab") && strings.Contains(p.Name, "_") {
			c.add(fmt.Sprintf("timeline[%d].name", i), "%q: names ab<N>_* are the A/B blocks' (assertions.quiet_p99_ab)", p.Name)
		}
	}
}
