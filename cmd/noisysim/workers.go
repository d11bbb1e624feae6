package main

import "github.com/noisysim/noisysim/reports"

// workerNames names a Citus cluster's workers worker1… with their
// host:port once (see reports.WorkerNames): the CLI and the run report
// name them alike.
type workerNames = reports.WorkerNames

func newWorkerNames(addrs []string) workerNames { return reports.NewWorkerNames(addrs) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
