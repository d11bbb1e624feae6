package reports

import (
	"bufio"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Fault is one node fault injected during a configuration's noisy phase and
// what it did: the errors, stalled operations and worst latency per tenant,
// and the time to recover.
//
// The fault window runs from the injection (At) to the restore (Restored).
// An operation is stalled when it was in flight or issued during the window
// and finished (succeeded or failed) after the restore began, held across it,
// with a latency above 2x its class's median latency before the fault
// (above the whole window when the class finished no operation before it):
// the symptom of a pause, where nothing fails and requests hang. Recovery is the first operation issued after the
// restore that succeeds with a latency within 2x its class's median latency
// before the fault (any success when the class finished no operation before
// it); TimeToRecover runs from the restore to that operation's end.
type Fault struct {
	// Node and Action say what was done: e.g. "replica1", "stop".
	Node   string `json:"node"`
	Action string `json:"action"`
	// Phase is the timeline phase the fault's times count from.
	Phase string `json:"phase,omitempty"`
	// At is when the fault was injected and Restored when the node was
	// restored (its restore returned), in seconds from Phase's start.
	At       float64 `json:"at_s"`
	Restored float64 `json:"restored_s"`
	// Recovered reports whether an operation recovered (see Fault) before
	// the phase ended and the fault was injected and restored without
	// error.
	Recovered bool `json:"recovered"`
	// TimeToRecover is the time from the restore to the end of the
	// recovering operation, in ms; 0 when not Recovered.
	TimeToRecover float64 `json:"time_to_recover_ms"`
	// Errors is the number of operations that failed from the injection
	// until recovery (or the phase end), over all tenants. Limiter
	// rejections are not counted.
	Errors int64 `json:"errors"`
	// Stalled is the number of stalled operations (see Fault), over all
	// tenants. A stalled operation that failed is also among Errors when it
	// ended before recovery.
	Stalled int64 `json:"stalled"`
	// WorstLatency is the longest latency of an operation in flight or
	// issued during the fault window, in ms; 0 when there was none.
	WorstLatency float64 `json:"worst_latency_ms"`
	// Tenants are the tenants with errors or stalled operations, by tenant
	// id.
	Tenants []FaultTenant `json:"tenants,omitempty"`
	// Error is why the fault could not be injected or restored, if so.
	Error string `json:"error,omitempty"`
}

// FaultTenant is what one fault did to one tenant.
type FaultTenant struct {
	Tenant string `json:"tenant"`
	// Errors and Stalled count the tenant's operations as Fault's do.
	Errors  int64 `json:"errors"`
	Stalled int64 `json:"stalled"`
	// WorstLatency is the longest latency of the tenant's operations in
	// flight or issued during the fault window, in ms.
	WorstLatency float64 `json:"worst_latency_ms"`
	// ByClass splits Errors by workload class.
	ByClass map[string]int64 `json:"by_class,omitempty"`
}

// faultLegend defines the fault figures for text and Markdown.
const faultLegend = "stalled: operations in flight or issued during the fault that finished after the restore began, " +
	"slower than 2x their class's median latency before the fault (than the fault window, injection to restore, " +
	"when the class had none); recovered: from the restore to the end of the first " +
	"operation issued after it that succeeded within 2x its class's median latency before the fault"

// faultTenantsShown bounds the tenants listed per fault in text and
// Markdown; report.json has them all.
const faultTenantsShown = 10

// sortedFaultTenants returns ts by errors, then stalled operations (most
// first), then tenant.
func sortedFaultTenants(ts []FaultTenant) []FaultTenant {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b FaultTenant) int {
		if c := cmp.Compare(b.Errors, a.Errors); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Stalled, a.Stalled); c != 0 {
			return c
		}
		return natural(a.Tenant, b.Tenant)
	})
	return out
}

// faultSummary is one line saying what a fault did.
func faultSummary(f Fault) string {
	s := fmt.Sprintf("%s %s at %s, restored at %s: %s, %d stalled over %s, worst latency %s ms", f.Action, f.Node,
		fmtSeconds(f.At), fmtSeconds(f.Restored), plural(int(f.Errors), "error"), f.Stalled, plural(len(f.Tenants), "tenant"), fmtMS(f.WorstLatency))
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
		row(tw, "    tenant", "errors", "stalled", "worst ms", "errors by class")
		for _, ft := range ts[:min(len(ts), faultTenantsShown)] {
			row(tw, "    "+t.label(ft.Tenant), strconv.FormatInt(ft.Errors, 10), strconv.FormatInt(ft.Stalled, 10),
				fmtMS(ft.WorstLatency), classCounts(ft.ByClass))
		}
		tw.Flush()
		if more := len(ts) - faultTenantsShown; more > 0 {
			t.p("    %d more tenants with errors or stalls in %s\n", more, t.opts.fullReport())
		}
	}
	t.p("  %s\n", faultLegend)
}

func mdFaults(w *bufio.Writer, c Configuration) {
	if len(c.Faults) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n### Faults\n\n| Node | Action | At | Restored | Errors | Stalled | Worst latency ms | Tenants hit | Time to recover ms |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, f := range c.Faults {
		ttr := fmtMS(f.TimeToRecover)
		switch {
		case f.Error != "":
			ttr = "failed: " + md(f.Error)
		case !f.Recovered:
			ttr = "not recovered"
		}
		p("| %s | %s | %s | %s | %d | %d | %s | %d | %s |\n", md(f.Node), md(f.Action), fmtSeconds(f.At), fmtSeconds(f.Restored),
			f.Errors, f.Stalled, fmtMS(f.WorstLatency), len(f.Tenants), ttr)
	}
	p("\n%s.\n", strings.ToUpper(faultLegend[:1])+faultLegend[1:])
	for _, f := range c.Faults {
		ts := sortedFaultTenants(f.Tenants)
		if len(ts) == 0 {
			continue
		}
		p("\nTenants hit by %s %s at %s:\n\n| Tenant | Errors | Stalled | Worst latency ms | Errors by class |\n|---|--:|--:|--:|---|\n", md(f.Action), md(f.Node), fmtSeconds(f.At))
		for _, ft := range ts[:min(len(ts), faultTenantsShown)] {
			p("| %s | %d | %d | %s | %s |\n", md(ft.Tenant), ft.Errors, ft.Stalled, fmtMS(ft.WorstLatency), md(classCounts(ft.ByClass)))
		}
		if more := len(ts) - faultTenantsShown; more > 0 {
			p("\n%d more tenants with errors or stalls in report.json.\n", more)
		}
	}
}

// classCounts is fmtCounts, or "-" when there are none.
func classCounts(m map[string]int64) string {
	if s := fmtCounts(m); s != "" {
		return s
	}
	return "-"
}
