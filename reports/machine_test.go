package reports

import "testing"

// Why names each rule a window broke once: the foreign bound is on other
// work plus steal, so with steal in it both parts are said; the steal rule
// is on the steal's share of the CPU the machine ran.
func TestWhySteal(t *testing.T) {
	m := &Machine{MaxForeignCPU: 0.5, MaxStealShare: 0.05}
	cases := []struct {
		name string
		w    WindowLoad
		want string
	}{
		{"other work only", WindowLoad{ForeignCPU: 0.9, OwnCPU: 0.3, Disturbed: true},
			"0.90 CPU used outside the run (above 0.50)"},
		{"both rules", WindowLoad{ForeignCPU: 0.35, StealCPU: 0.2, OwnCPU: 0.3, Disturbed: true},
			"0.55 CPU used outside the run (0.35 by other work, 0.20 stolen; above 0.50) and the hypervisor took 0.20 CPU, 24% of the CPU the machine ran (above 5%)"},
		{"steal only", WindowLoad{StealCPU: 0.1, OwnCPU: 0.6, Disturbed: true},
			"the hypervisor took 0.10 CPU, 14% of the CPU the machine ran (above 5%)"},
	}
	for _, c := range cases {
		if got := m.Why(c.w); got != c.want {
			t.Errorf("%s: Why = %q, want %q", c.name, got, c.want)
		}
		if !m.CPUDisturbed(c.w) {
			t.Errorf("%s: CPUDisturbed false", c.name)
		}
	}
	// Below the floor a share is no evidence.
	if w := (WindowLoad{StealCPU: 0.01, OwnCPU: 0.05}); StealDisturbs(w, 0.05) {
		t.Errorf("0.01 CPU of steal (%.0f%%) disturbs: want the 0.02 CPU floor", 100*w.StealShare())
	}
}
