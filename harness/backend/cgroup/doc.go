// Package cgroup gives processes a CPU budget through the kernel's CFS
// bandwidth control, so that one machine behaves like several smaller ones:
// a node given 0.4 CPU gets 40 ms of CPU time every 100 ms period, however
// idle the machine is.
//
// It works on cgroup v1 (the cpu controller's cpu.cfs_quota_us and
// cpu.cfs_period_us) and v2 (cpu.max), found with Detect. Writing needs
// root (or a delegated hierarchy); where it cannot write, Detect and Create
// return an *UnavailableError.
//
//	h, err := cgroup.Detect()
//	g, err := h.Create("noisysim/run-1/primary")
//	lim, err := cgroup.LimitFor(0.4, 0) // 40000 µs every 100000 µs
//	err = g.Set(lim)                  // checked against the ancestors, read back
//	err = g.Start(cmd, (*exec.Cmd).Start)
//	…
//	err = g.Remove()
//
// Budgets are written as the kernel takes them: the quota is cpus × period
// rounded to the nearest µs and at least 1000 µs (0.01 CPU at the default
// 100 ms period; less is refused, never silently clamped); a group is never
// set above its tightest ancestor (checked before writing); on v1 the quota
// and period are written in the order that never passes through a larger
// limit, which the kernel would refuse with EINVAL.
package cgroup
