package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/noisysim/noisysim/reports"
)

const reportUsage = `Usage: noisysim report [flags] report.json --html

Renders a run's report.json (schema_version 2) again. With --html it writes
report.html (one self-contained page: the plots of every configuration side
by side, the actions, the assertions, the verdict and the run's identity)
beside report.json, or to -o FILE. It does not overwrite an existing file
unless --force.

Exit codes: 0 written, 2 bad usage or a file that is not a report.json of
this version, 1 any other error.

Flags (before or after the file):
`

func runReport(_ context.Context, a *app, args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), reportUsage); fs.PrintDefaults() }
	html := fs.Bool("html", false, "write report.html")
	out := fs.String("o", "", "the page's path (default: report.html beside report.json)")
	force := fs.Bool("force", false, "overwrite the page if it exists")
	file, err := parseInterspersed(a, fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		fs.Usage()
		return usagef("report: missing report.json")
	}
	if !*html {
		return usagef("report: say what to render: --html")
	}
	if st, err := os.Stat(file); err == nil && st.IsDir() {
		return usagef("report: %s is a directory: give the report.json in it (%s)", file, filepath.Join(file, reports.JSONFile))
	}
	r, err := reports.ReadFile(file)
	if err != nil {
		return usagef("report: %v", err)
	}
	path := *out
	if path == "" {
		path = filepath.Join(filepath.Dir(file), reports.HTMLFile)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usagef("report: -o %s is a directory: give a file name in it (e.g. %s)", path, filepath.Join(path, reports.HTMLFile))
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return usagef("report: -o %s: no directory %s", path, filepath.Dir(path))
	}
	if _, err := os.Lstat(path); err == nil && !*force {
		return usagef("report: %s exists; noisysim does not overwrite it without --force", path)
	}
	var buf bytes.Buffer
	if err := reports.WriteHTML(&buf, r); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	fmt.Fprintf(a.stdout, "report.html: %s\n", path)
	return nil
}

// version is noisysim's module version and VCS revision as built, or "".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += " (modified)"
		}
	}
	return v + " " + bi.GoVersion
}
