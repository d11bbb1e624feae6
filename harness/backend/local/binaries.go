package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// EnvBinDir names the environment variable that, when set, is the only
// directory searched for PostgreSQL's server binaries.
const EnvBinDir = "NOISYSIM_PG_BINDIR"

// Binaries is a directory holding PostgreSQL's server programs.
type Binaries struct {
	// Dir holds postgres, initdb, pg_ctl and pg_basebackup.
	Dir string
	// Version is the output of `postgres --version`, e.g.
	// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)".
	Version string
	// Major is the major version, e.g. 15.
	Major int
	// Source says where Dir was found: "option", EnvBinDir, "pg_config",
	// "/usr/lib/postgresql" or "PATH".
	Source string
}

// Path returns the path of program name in b.Dir.
func (b Binaries) Path(name string) string { return filepath.Join(b.Dir, name) }

// requiredPrograms must all be present in a server binaries directory.
var requiredPrograms = []string{"postgres", "initdb", "pg_ctl", "pg_basebackup"}

// FindBinaries locates PostgreSQL's server binaries. A non-empty dir is the
// only place searched. Otherwise it searches, in order, $NOISYSIM_PG_BINDIR
// (alone, when set), `pg_config --bindir`, the newest
// /usr/lib/postgresql/*/bin and PATH; a directory qualifies when it holds
// postgres, initdb, pg_ctl and pg_basebackup of PostgreSQL 12 or newer. It
// returns a *BinariesNotFoundError (ErrBinariesNotFound,
// backend.ErrNotInstalled) when none qualifies, or ctx.Err() wrapped.
func FindBinaries(ctx context.Context, dir string) (Binaries, error) {
	var searched []string
	try := func(source, d string) (Binaries, bool) {
		if missing := missingPrograms(d); len(missing) > 0 {
			searched = append(searched, fmt.Sprintf("%s: %s (no %s)", source, d, strings.Join(missing, ", ")))
			return Binaries{}, false
		}
		b, err := probeVersion(ctx, d)
		if err != nil {
			searched = append(searched, fmt.Sprintf("%s: %s (%v)", source, d, err))
			return Binaries{}, false
		}
		b.Source = source
		return b, true
	}
	notFound := func() error {
		if ctx.Err() != nil {
			return fmt.Errorf("find binaries: %w", ctx.Err())
		}
		return &BinariesNotFoundError{Searched: searched}
	}

	if dir != "" {
		if b, ok := try("option", dir); ok {
			return b, nil
		}
		return Binaries{}, notFound()
	}
	if d := os.Getenv(EnvBinDir); d != "" {
		if b, ok := try(EnvBinDir, d); ok {
			return b, nil
		}
		return Binaries{}, notFound()
	}
	if out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output(); err == nil {
		if b, ok := try("pg_config", strings.TrimSpace(string(out))); ok {
			return b, nil
		}
	} else {
		searched = append(searched, "pg_config: not runnable")
	}
	if d := newestDebianBinDir("/usr/lib/postgresql"); d != "" {
		if b, ok := try("/usr/lib/postgresql", d); ok {
			return b, nil
		}
	} else {
		searched = append(searched, "/usr/lib/postgresql/*/bin: none")
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if b, ok := try("PATH", filepath.Dir(p)); ok {
			return b, nil
		}
	} else {
		searched = append(searched, "PATH: no postgres")
	}
	return Binaries{}, notFound()
}

func missingPrograms(dir string) []string {
	var missing []string
	for _, name := range requiredPrograms {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	return missing
}

// newestDebianBinDir returns root/<newest major>/bin, or "" if none exists.
func newestDebianBinDir(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	type cand struct {
		v   float64
		dir string
	}
	var cands []cand
	for _, e := range entries {
		v, err := strconv.ParseFloat(e.Name(), 64)
		if err != nil {
			continue
		}
		d := filepath.Join(root, e.Name(), "bin")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			cands = append(cands, cand{v, d})
		}
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].v > cands[j].v })
	return cands[0].dir
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

func probeVersion(ctx context.Context, dir string) (Binaries, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("run postgres --version: %w", err)
	}
	v := strings.TrimSpace(string(out))
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return Binaries{}, fmt.Errorf("parse version %q", v)
	}
	major, _ := strconv.Atoi(m[1])
	if major < 12 {
		return Binaries{}, fmt.Errorf("PostgreSQL %d is too old (need 12 or newer)", major)
	}
	return Binaries{Dir: dir, Version: v, Major: major}, nil
}
