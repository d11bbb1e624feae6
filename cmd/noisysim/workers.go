package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/noisysim/noisysim/reports"
)

// workerNames names a Citus cluster's workers worker1… with their
// host:port once (see reports.WorkerNames): the CLI and the run report
// name them alike.
type workerNames = reports.WorkerNames

func newWorkerNames(addrs []string) workerNames { return reports.NewWorkerNames(addrs) }

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
