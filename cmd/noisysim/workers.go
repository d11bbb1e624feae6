package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// workerNames names a Citus cluster's workers worker1, worker2, … in the
// order of their names (host:port), for output a person reads: each
// address is printed once, in the workers table, and the short names
// everywhere else.
type workerNames struct {
	addrs []string
	short map[string]string
	r     *strings.Replacer
}

func newWorkerNames(addrs []string) workerNames {
	n := workerNames{addrs: slices.Clone(addrs), short: map[string]string{}}
	slices.SortFunc(n.addrs, cmpAddr)
	n.addrs = slices.Compact(n.addrs)
	var pairs []string
	// Longest first: 127.0.0.1:5433 must not be replaced inside
	// 127.0.0.1:54330.
	byLen := slices.Clone(n.addrs)
	slices.SortStableFunc(byLen, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for i, a := range n.addrs {
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

// name returns w's short name, or w when it is not a worker.
func (n workerNames) name(w string) string {
	if s, ok := n.short[w]; ok {
		return s
	}
	return w
}

// rename replaces every worker address in s by its short name.
func (n workerNames) rename(s string) string { return n.r.Replace(s) }

// table prints the workers with their addresses.
func (n workerNames) table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  worker\taddress\n")
	for _, a := range n.addrs {
		fmt.Fprintf(tw, "  %s\t%s\n", n.short[a], a)
	}
	tw.Flush()
}

// counts formats per-key counts as "k1 n1, k2 n2" in key order, "none"
// when there are none (e.g. a writer's errors by SQLSTATE).
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
