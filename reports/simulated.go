package reports

import "fmt"

// simulatedLine says where a simulated report's figures come from: the
// model and the real run's report.json the service times were read from;
// "" for a real run's report.
func simulatedLine(r *Report) string {
	s := r.Simulated
	if s == nil {
		return ""
	}
	line := "SIMULATED in virtual time"
	if s.Cores != "" {
		line += " (cores: " + s.Cores + ")"
	}
	line += fmt.Sprintf(": service times from %s, a real run of scenario %s, seed %d", s.Calibration, s.CalibrationScenario, s.CalibrationSeed)
	return line
}

// SimulatedLines returns the lines the text report of a simulated run
// gives after "simulated ": each class's draws ("report: the model draws
// ... from ...") and the interference; nil for a real run.
func SimulatedLines(r *Report) []string { return simulatedClassLines(r) }

// simulatedClassLines say what the model draws for each class and where
// it was read from (SimulatedLines).
func simulatedClassLines(r *Report) []string {
	if r.Simulated == nil {
		return nil
	}
	var out []string
	for _, c := range r.Simulated.Classes {
		out = append(out, fmt.Sprintf("%s: the model draws %s ms mean (p50 %s ms) from %s", c.Class, fmtMS(c.MeanMs), fmtMS(c.P50Ms), c.From))
	}
	if s := r.Simulated; s.Machines != "" || s.InterferenceFrom != "" {
		out = append(out, fmt.Sprintf("interference: %.3g per busy core beyond one (a call beside one other busy core takes %.3g× its work), %s; %s",
			s.Interference, 1+s.Interference, s.InterferenceFrom, s.Machines))
	}
	if s := r.Simulated; s.SliceFrom != "" {
		out = append(out, fmt.Sprintf("scheduler wait: a call that starts while its node's cores are all busy waits 0–%s ms for one, %s", fmtMS(s.SliceMs), s.SliceFrom))
	}
	return out
}
