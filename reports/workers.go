package reports

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WorkerNames names a Citus cluster's workers worker1, worker2, … in the
// order of their names (host:port), for output a person reads: each
// address is printed once, in the workers table, and the short names
// everywhere else.
type WorkerNames struct {
	// Addrs are the workers' addresses in name order (worker1 first).
	Addrs []string
	short map[string]string
	r     *strings.Replacer
}

// NewWorkerNames names the workers of addrs (duplicates counted once).
func NewWorkerNames(addrs []string) WorkerNames {
	n := WorkerNames{Addrs: slices.Clone(addrs), short: map[string]string{}}
	slices.SortFunc(n.Addrs, cmpAddr)
	n.Addrs = slices.Compact(n.Addrs)
	var pairs []string
	// Longest first: 127.0.0.1:5433 must not be replaced inside
	// 127.0.0.1:54330.
	byLen := slices.Clone(n.Addrs)
	slices.SortStableFunc(byLen, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for i, a := range n.Addrs {
		n.short[a] = "worker" + strconv.Itoa(i+1)
	}
	for _, a := range byLen {
		pairs = append(pairs, a, n.short[a])
	}
	n.r = strings.NewReplacer(pairs...)
	return n
}

// cmpAddr orders host:port names by host, then by port as a number.
func cmpAddr(a, b string) int {
	ha, pa, _ := strings.Cut(a, ":")
	hb, pb, _ := strings.Cut(b, ":")
	na, _ := strconv.Atoi(pa)
	nb, _ := strconv.Atoi(pb)
	return cmp.Or(cmp.Compare(ha, hb), cmp.Compare(na, nb), cmp.Compare(a, b))
}

// Name returns w's short name, or w when it is not a worker.
func (n WorkerNames) Name(w string) string {
	if s, ok := n.short[w]; ok {
		return s
	}
	return w
}

// Rename replaces every worker address in s by its short name.
func (n WorkerNames) Rename(s string) string {
	if n.r == nil {
		return s
	}
	return n.r.Replace(s)
}

// List is the workers with their addresses on one line, "worker1
// 127.0.0.1:5433, worker2 127.0.0.1:5434", for a report's notes.
func (n WorkerNames) List() string {
	parts := make([]string, len(n.Addrs))
	for i, a := range n.Addrs {
		parts[i] = n.short[a] + " " + a
	}
	return strings.Join(parts, ", ")
}

// Table prints the workers with their addresses.
func (n WorkerNames) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  worker\taddress\n")
	for _, a := range n.Addrs {
		fmt.Fprintf(tw, "  %s\t%s\n", n.short[a], a)
	}
	tw.Flush()
}
