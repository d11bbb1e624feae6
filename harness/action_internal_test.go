package harness

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
)

// TestActionNotStarted: an action whose time never came (the run was
// interrupted before it) is reported as not started, at the time it was
// due, not as one that ran and failed.
func TestActionNotStarted(t *testing.T) {
	ar := &actionRun{env: ActionEnv{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, t0: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &step{Phase: scenario.Phase{Name: "faults"}}
	s.Actions = []scenario.Action{{Type: scenario.ActionFault, At: scenario.Duration(4 * time.Second),
		Config: &scenario.NodeFault{Fault: scenario.FaultPause, Duration: scenario.Duration(time.Second)}}}
	ar.start(ctx, s)
	out := ar.finish()
	if len(out) != 1 {
		t.Fatalf("results %+v, want one", out)
	}
	r := out[0]
	if !r.NotStarted || !strings.HasPrefix(r.Detail, "not started: the run stopped before its time") || r.Error != "" || r.At < 3.9 || r.At > 4.5 || r.Took != 0 {
		t.Errorf("result %+v, want not started, due at 4 s", r)
	}
}
