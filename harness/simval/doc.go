// Package simval compares noisysim simulate with real runs of the same
// scenario: the runs noisysim run --repeat N --out DIR wrote, each simulated
// at its own seed from a calibration on another run (noisysim simulate
// SCENARIO --against DIR).
//
// A single real run's quiet p99 is a noisy sample (on a quiet 2-core machine
// the isolated quiet p99 of ci-gate varied 4× between undisturbed runs a seed
// apart), so each figure is compared as the median over the runs, with the
// real runs' spread beside it:
//
//  1. FiguresOf reads, per configuration, the quiet (all) p99 of each quiet
//     class in the quiet_p99 window, the achieved rate and the rejections
//     (reports.Configuration's QuietAll and Stats: that window's).
//  2. Compare pairs each real run with its simulation. A real run whose
//     machine guard marked a window of a configuration DISTURBED (or a
//     window of no configuration, as the report class's calibration) is
//     left out of that configuration's medians, and so is its simulation:
//     both medians are over the same seeds.
//  3. A figure is within the tolerance when the simulated median over the
//     real median lies in [1−tol, 1+tol]; a median of 0 against 0 is a
//     ratio of 1, anything against 0 has none and is outside.
//
// A real sweep (noisysim simulate SCENARIO --against SWEEPDIR) is compared
// the same way per point and configuration: CompareSweep pairs each trial of
// its sweep.json with the same sweep run again in virtual time (the same
// points and seeds), leaves the trials marked disturbed out of both medians,
// and judges quiet_p99_ms (the simulated p99 of each real trial's
// quiet_class) and throughput_per_s, each counted apart (a Tally: an open
// loop's throughput matches by construction); a point whose every trial is
// disturbed is unjudged, in neither count; quiet_over_solo is shown, not
// judged. CheckSweep first refuses a sweep.json that does not fit the
// scenario (its recorded shape, a trial's configurations, quiet class and
// figures, duplicate points and seeds), each problem naming its field.
//
// Example:
//
//	res := simval.Compare(runs, simval.DefaultTolerance)
//	simval.WriteText(os.Stdout, res)
//
//	sres, err := simval.CompareSweep(realDoc, simulatedTrials, "", simval.DefaultTolerance)
package simval
