package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
)

const mergeUsage = `Usage: noisysim merge [flags] DIR...

Merges the outputs of the agents of one run split with noisysim run
--segment i/N --out DIR (one DIR per agent): every histogram is merged
bucket by bucket (no loss: the merged percentiles are those of one
histogram fed every agent's values), each agent's intervals placed at the
wall-clock time they ran (its interval log's BaseTime), the scenario's
assertions are evaluated on the merged figures, and the usual reports are
written, with every agent's histograms in one interval log
(histograms.hlog, absolute times).

The scenario is read from the file the agents' reports name, or --scenario;
its bytes must be those the agents ran (their scenario hash). Outputs of
different runs (another scenario, seed or --start-at), of different
numbers of segments, a segment given twice or one missing are refused
(exit 2) naming the directories.

Exit codes: 0 all assertions passed, 99 an assertion failed, 2 bad input or
usage, 1 any other error.

Flags (before or after the directories):
`

func runMerge(ctx context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), mergeUsage); fs.PrintDefaults() }
	out := fs.String("out", "", "write report.json, report.md, junit.xml and report.html into this directory")
	file := fs.String("scenario", "", "the scenario file the agents ran (default: the file their reports name)")
	top := fs.Int("top", reports.DefaultTopQuiet, "quiet tenants listed per configuration table")
	var dirs []string
	for rest := args; ; rest = fs.Args()[1:] {
		if err := parseFlags(a, fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		dirs = append(dirs, fs.Arg(0))
	}
	if len(dirs) == 0 {
		fs.Usage()
		return usagef("merge: no agents' output directories given")
	}
	if err := checkOutDir("merge", *out, 1, 0); err != nil {
		return err
	}
	if *file != "" {
		if _, err := os.Stat(*file); err != nil {
			return usagef("merge: --scenario: %v", err)
		}
	}
	var parts []harness.SegmentPart
	var errs []error
	for _, d := range dirs {
		o, err := harness.ReadSegment(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep, err := readReport(filepath.Join(d, reports.JSONFile))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d, err))
			continue
		}
		parts = append(parts, harness.SegmentPart{Output: o, Report: rep})
	}
	if err := errors.Join(errs...); err != nil {
		return usagef("merge: %v", err)
	}
	path := *file
	if path == "" {
		path = parts[0].Report.File
		if path == "" {
			return usagef("merge: %s names no scenario file: give --scenario", dirs[0])
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if *file != "" {
			return usagef("merge: --scenario: %v", err)
		}
		return usagef("merge: scenario: %v (the file %s's report names; give --scenario)", err, dirs[0])
	}
	parts, err = harness.CheckSegments(scenarioHash(b), parts)
	if err != nil {
		return err
	}
	sc, err := scenario.Load(path)
	if err != nil {
		return err
	}
	rep, err := harness.MergeSegments(sc, parts)
	if err != nil {
		return err
	}
	rep.Version = version()
	if err := reports.WriteText(a.stdout, rep, textOptions(*top, *out)); err != nil {
		return err
	}
	if *out != "" {
		if err := reports.WriteDir(*out, rep); err != nil {
			return err
		}
		if err := writeMergedLog(*out, parts); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "reports written to %s\n", *out)
	}
	if !rep.Passed {
		return fmt.Errorf("%w: scenario %s, merged from %d agents (see the assertions above)", errAssertionFailed, sc.Name, len(parts))
	}
	return nil
}

// writeMergedLog writes every agent's interval log, merged by absolute
// time (harness.MergeIntervalLogs), as out/histograms.hlog.
func writeMergedLog(out string, parts []harness.SegmentPart) error {
	var logs []*harness.IntervalLog
	for _, p := range parts {
		logs = append(logs, p.Output.Log)
	}
	f, err := os.Create(filepath.Join(out, harness.HistogramLogFile))
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = harness.WriteIntervalLog(bw, harness.MergeIntervalLogs(logs...), fmt.Sprintf("noisysim merge of %d agents", len(parts)))
	if err := errors.Join(err, bw.Flush(), f.Close()); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}

// scenarioHash names a scenario file's bytes (SHA-256, hex).
func scenarioHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// readReport reads a report.json.
func readReport(path string) (*reports.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep reports.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}
