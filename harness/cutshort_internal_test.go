package harness

import (
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
)

// TestCutShortShowsTheWindowReached checks an interrupted timeline's
// windows: the phase the interruption stopped ends when it stopped (its
// rate over what ran, not over its planned length), the phases after it
// keep their planned spans, and the configuration's own rows are those of
// the phase cut short when quiet_p99's window was not reached (an empty
// window shows nothing of what ran), else quiet_p99's.
func TestCutShortShowsTheWindowReached(t *testing.T) {
	windowsOf := func() []*window {
		var ws []*window
		at := time.Duration(0)
		for _, p := range []struct {
			name   string
			length time.Duration
		}{{"solo", 3 * time.Second}, {"ramp", 30 * time.Second}, {"burst", 3 * time.Second}} {
			s := &step{Phase: scenario.Phase{Name: p.name}, start: at, end: at + p.length}
			ws = append(ws, &window{step: s, start: s.start, end: s.end})
			at += p.length
		}
		return ws
	}

	ws := windowsOf()
	if got := cutShort(ws, 15*time.Second); got != 1 {
		t.Errorf("cutShort at 15s reached phase %d, want 1 (ramp)", got)
	}
	for i, want := range []struct {
		end time.Duration
		cut bool
	}{{3 * time.Second, false}, {15 * time.Second, true}, {36 * time.Second, false}} {
		if ws[i].end != want.end || ws[i].cut != want.cut {
			t.Errorf("%s: end %v cut %v, want end %v cut %v", ws[i].step.Name, ws[i].end, ws[i].cut, want.end, want.cut)
		}
	}
	ws[1].sent = 400
	if got := plannedIn(ws[1], 1200); got != 400 {
		t.Errorf("planned arrivals of the cut ramp: %d, want the 400 it sent", got)
	}
	if got := shownWindow(ws, "burst"); got != 1 {
		t.Errorf("shown window when burst was not reached: %d, want 1 (ramp, cut short)", got)
	}
	if got := shownWindow(ws, "solo"); got != 0 {
		t.Errorf("shown window when solo ran in full: %d, want 0", got)
	}

	ws = windowsOf()
	if got := cutShort(ws, 36*time.Second+time.Millisecond); got != 2 {
		t.Errorf("cutShort after the last phase reached phase %d, want 2", got)
	}
	for _, w := range ws {
		if w.cut {
			t.Errorf("%s cut by a stop after the timeline's end", w.step.Name)
		}
	}
	if got := shownWindow(ws, "burst"); got != 2 {
		t.Errorf("shown window of a timeline run to its end: %d, want 2 (burst)", got)
	}
	if got := cutShort(windowsOf(), 0); got != -1 {
		t.Errorf("cutShort at 0 reached phase %d, want -1", got)
	}
}
