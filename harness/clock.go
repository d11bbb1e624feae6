package harness

import (
	"context"
	"sync"
	"time"
)

// phaseClock keeps when each phase of one configuration's timeline
// starts and ends, as offsets from the timeline's start t0. A phase with a
// length ends its length after it starts; a phase with until ends when end
// is called for it (at the latest after its max, which the run loop
// enforces); every later phase starts when the one before it ends. Without
// until phases the clock gives the planned spans.
type phaseClock struct {
	steps []step
	t0    time.Time
	ctx   context.Context

	mu    sync.Mutex
	ends  []time.Duration // the end of each until phase, once known
	known []chan struct{} // closed when an until phase's end is known
}

func newPhaseClock(ctx context.Context, steps []step, t0 time.Time) *phaseClock {
	c := &phaseClock{steps: steps, t0: t0, ctx: ctx, ends: make([]time.Duration, len(steps)), known: make([]chan struct{}, len(steps))}
	for i := range steps {
		c.known[i] = make(chan struct{})
	}
	return c
}

// end sets the end of until phase i at offset at; later calls change
// nothing.
func (c *phaseClock) end(i int, at time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.known[i]:
	default:
		c.ends[i] = at
		close(c.known[i])
	}
}

// ended reports whether until phase i's end is known.
func (c *phaseClock) ended(i int) bool {
	select {
	case <-c.known[i]:
		return true
	default:
		return false
	}
}

// knownStart returns the start of phase i (i = len(steps): the timeline's end)
// if every until phase before it has ended.
func (c *phaseClock) knownStart(i int) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Duration
	for j := range i {
		if c.steps[j].Until == "" {
			at += c.steps[j].Length.Duration()
			continue
		}
		if !c.ended(j) {
			return 0, false
		}
		at = c.ends[j]
	}
	return at, true
}

// startOf waits until the start of phase i is known (every until phase
// before it ended) and returns it; false if ctx ended first.
func (c *phaseClock) startOf(i int) (time.Duration, bool) {
	for j := range i {
		if c.steps[j].Until == "" {
			continue
		}
		select {
		case <-c.known[j]:
		case <-c.ctx.Done():
			return 0, false
		}
	}
	return c.knownStart(i)
}

// endedBy waits until offset at or until phase i ends, whichever comes
// first, and reports whether phase i had ended by at (true as well when
// ctx ended).
func (c *phaseClock) endedBy(i int, at time.Duration) bool {
	timer := time.NewTimer(time.Until(c.t0.Add(at)))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-c.known[i]:
	case <-c.ctx.Done():
		return true
	}
	if !c.ended(i) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ends[i] <= at
}

// span returns phase i's start and end: as they happened, or as planned
// from its known start for a phase the run did not reach the end of.
func (c *phaseClock) span(i int) (start, end time.Duration) {
	start, ok := c.knownStart(i)
	if !ok {
		return c.steps[i].start, c.steps[i].end
	}
	if c.steps[i].Until == "" || !c.ended(i) {
		return start, start + c.steps[i].Span().Duration()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return start, c.ends[i]
}

// stepAt returns the index of the phase whose span holds offset at (the
// last one for at past the end): a phase with until holds everything from
// its start until it ends.
func (c *phaseClock) stepAt(at time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var start time.Duration
	for i, s := range c.steps {
		end := start + s.Length.Duration()
		if s.Until != "" {
			if !c.ended(i) {
				return i
			}
			end = c.ends[i]
		}
		if at < end {
			return i
		}
		start = end
	}
	return len(c.steps) - 1
}
