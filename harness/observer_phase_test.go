package harness

import (
	"testing"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

type phaseRecorder struct{ got [][2]string }

func (p *phaseRecorder) Outcome(Outcome)             {}
func (p *phaseRecorder) Point(string, reports.Point) {}
func (p *phaseRecorder) Phase(configuration, phase string) {
	p.got = append(p.got, [2]string{configuration, phase})
}

// An Observer's configuration label names a configuration or nothing:
// calibrating the class "report" is not a configuration "report".
func TestObserverPhaseNamesOnlyConfigurations(t *testing.T) {
	rec := &phaseRecorder{}
	r := &runner{sc: &scenario.Scenario{Configurations: []scenario.Configuration{{Name: "naive"}, {Name: "isolated"}}},
		opts: Options{Observer: rec}}
	r.setPhase(PhaseLoad, "", 0)
	r.setPhase("calibrate", "report", 0)
	r.setPhase("run", "isolated", 0)
	want := [][2]string{{"", PhaseLoad}, {"", "calibrate (report)"}, {"isolated", "run"}}
	if len(rec.got) != len(want) {
		t.Fatalf("got %v, want %v", rec.got, want)
	}
	for i := range want {
		if rec.got[i] != want[i] {
			t.Errorf("phase %d: got %v, want %v", i, rec.got[i], want[i])
		}
	}
}
