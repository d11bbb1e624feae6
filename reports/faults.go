package reports

import (
	"bufio"
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// Fault is one node fault injected during a configuration's noisy phase and
// what it did: the error burst per tenant and the time to recover.
type Fault struct {
	// Node and Action say what was done: e.g. "replica1", "stop".
	Node   string `json:"node"`
	Action string `json:"action"`
	// At is when the fault was injected and Restored when the node was
	// restored (its restore returned), in seconds from the phase start.
	At       float64 `json:"at_s"`
	Restored float64 `json:"restored_s"`
	// Recovered reports whether, after the restore, an operation of a class
	// that failed during the fault succeeded before the phase ended (or no
	// operation failed at all).
	Recovered bool `json:"recovered"`
	// TimeToRecover is the time from the restore to the end of that first
	// success, in ms; 0 when nothing failed.
	TimeToRecover float64 `json:"time_to_recover_ms"`
	// Errors is the number of operations that failed from the injection
	// until recovery (or the phase end), over all tenants.
	Errors int64 `json:"errors"`
	// Tenants is the error burst per tenant, tenants with errors only, most
	// errors first.
	Tenants []FaultTenant `json:"tenants,omitempty"`
	// Error is why the fault could not be injected or restored, if so.
	Error string `json:"error,omitempty"`
}

// FaultTenant is one tenant's errors during a fault's burst.
type FaultTenant struct {
	Tenant string `json:"tenant"`
	Errors int64  `json:"errors"`
	// ByClass splits Errors by workload class.
	ByClass map[string]int64 `json:"by_class,omitempty"`
}

// faultTenantsShown bounds the tenants listed per fault in text and
// Markdown; report.json has them all.
const faultTenantsShown = 10

// sortedFaultTenants returns ts by errors (most first), then tenant.
func sortedFaultTenants(ts []FaultTenant) []FaultTenant {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b FaultTenant) int {
		if c := cmp.Compare(b.Errors, a.Errors); c != 0 {
			return c
		}
		return natural(a.Tenant, b.Tenant)
	})
	return out
}

// faultSummary is one line saying what a fault did.
func faultSummary(f Fault) string {
	s := fmt.Sprintf("%s %s at %s, restored at %s: %d errors over %d tenants", f.Action, f.Node,
		fmtSeconds(f.At), fmtSeconds(f.Restored), f.Errors, len(f.Tenants))
	switch {
	case f.Error != "":
		s += "; fault failed: " + f.Error
	case !f.Recovered:
		s += "; not recovered before the phase ended"
	default:
		s += "; recovered " + fmtMS(f.TimeToRecover) + " ms after the restore"
	}
	return s
}

func (t *textWriter) faults(c Configuration) {
	if len(c.Faults) == 0 {
		return
	}
	t.p("faults:\n")
	for _, f := range c.Faults {
		t.p("  %s\n", faultSummary(f))
		ts := sortedFaultTenants(f.Tenants)
		if len(ts) == 0 {
			continue
		}
		tw := t.table()
		row(tw, "    tenant", "errors", "by class")
		for _, ft := range ts[:min(len(ts), faultTenantsShown)] {
			row(tw, "    "+t.label(ft.Tenant), strconv.FormatInt(ft.Errors, 10), fmtCounts(ft.ByClass))
		}
		tw.Flush()
		if more := len(ts) - faultTenantsShown; more > 0 {
			t.p("    %d more tenants with errors in report.json\n", more)
		}
	}
}

func mdFaults(w *bufio.Writer, c Configuration) {
	if len(c.Faults) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n### Faults\n\n| Node | Action | At | Restored | Errors | Tenants with errors | Time to recover ms |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, f := range c.Faults {
		ttr := fmtMS(f.TimeToRecover)
		switch {
		case f.Error != "":
			ttr = "failed: " + md(f.Error)
		case !f.Recovered:
			ttr = "not recovered"
		}
		p("| %s | %s | %s | %s | %d | %d | %s |\n", md(f.Node), md(f.Action), fmtSeconds(f.At), fmtSeconds(f.Restored),
			f.Errors, len(f.Tenants), ttr)
	}
	for _, f := range c.Faults {
		ts := sortedFaultTenants(f.Tenants)
		if len(ts) == 0 {
			continue
		}
		p("\nError burst of %s %s:\n\n| Tenant | Errors | By class |\n|---|--:|---|\n", md(f.Action), md(f.Node))
		for _, ft := range ts[:min(len(ts), faultTenantsShown)] {
			p("| %s | %d | %s |\n", md(ft.Tenant), ft.Errors, md(fmtCounts(ft.ByClass)))
		}
		if more := len(ts) - faultTenantsShown; more > 0 {
			p("\n%d more tenants with errors in report.json.\n", more)
		}
	}
}
