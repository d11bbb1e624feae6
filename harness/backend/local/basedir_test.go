package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/local"
)

// A base dir the clusters cannot live in is the caller's input: a clear
// error naming it (backend.ErrBadInput), before anything is created.
func TestBaseDirUnusable(t *testing.T) {
	needPostgres(t)
	outer := privateBase(t)
	file := filepath.Join(outer, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, dir, msg string }{
		{"missing", filepath.Join(outer, "missing"), "does not exist"},
		{"a file", file, "not a directory"},
	}
	if os.Geteuid() == 0 {
		private := filepath.Join(outer, "private")
		if err := os.Mkdir(private, 0o700); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, dir, msg string }{"not reachable by the server user", private, local.DefaultServerUser})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := local.Start(t.Context(), backend.Spec{}, local.WithBaseDir(tc.dir))
			if err == nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			var bde *local.BaseDirError
			if !errors.As(err, &bde) || !errors.Is(err, backend.ErrBadInput) {
				t.Errorf("error %q is not a *BaseDirError wrapping ErrBadInput", err)
			}
			if !strings.Contains(err.Error(), tc.dir) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not name %s and say %q", err, tc.dir, tc.msg)
			}
			if dirs, procs := leftovers(t, outer); len(procs) > 0 || len(dirs) > len(cases) {
				t.Errorf("left behind: dirs %v, processes %v", dirs, procs)
			}
		})
	}
}

// A relative base dir works: every path handed to the servers is absolute.
func TestBaseDirRelative(t *testing.T) {
	needPostgres(t)
	base := privateBase(t)
	t.Chdir(filepath.Dir(base))
	c, err := local.Start(t.Context(), backend.Spec{}, local.WithBaseDir(filepath.Base(base)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !filepath.IsAbs(c.Dir()) || filepath.Dir(c.Dir()) != base {
		t.Errorf("Dir() = %s, want an absolute dir under %s", c.Dir(), base)
	}
	connect(t, c.Nodes()[0].DSN()).Close(t.Context())
}
