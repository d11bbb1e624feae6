package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// templateFormat changes whenever what goes into a template changes, so old
// caches are not reused.
const templateFormat = "1"

// initdbArgs are the initdb arguments of every template. Authentication is
// rewritten per node, so the template's pg_hba.conf does not matter, and the
// template holds no password.
var initdbArgs = []string{"-U", superuser, "-E", "UTF8", "--locale=C", "--auth-local=peer", "--auth-host=scram-sha-256", "--no-sync"}

// templateMarker is written into a template's directory once it is complete.
const templateMarker = "noisysim-template-ok"

// defaultCacheDir returns where templates are cached: $XDG_CACHE_HOME/noisysim
// (or ~/.cache/noisysim) for an unprivileged user, /var/tmp/noisysim-cache
// when root (root's home is not reachable by the server user).
func defaultCacheDir() string {
	if os.Geteuid() != 0 {
		if d, err := os.UserCacheDir(); err == nil {
			return filepath.Join(d, "noisysim")
		}
	}
	return "/var/tmp/noisysim-cache"
}

// templateKey identifies a template by PostgreSQL version, initdb arguments
// and template format.
func templateKey(bin Binaries) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", templateFormat, bin.Version, strings.Join(initdbArgs, " "))
	return fmt.Sprintf("pg%d-%s", bin.Major, hex.EncodeToString(h.Sum(nil))[:12])
}

// ensureTemplate returns the data directory of a template for bin, creating
// it with initdb if needed. Concurrent callers (threads or processes) are
// serialised by a lock file; the template appears by an atomic rename. The
// boolean is true when this call ran initdb.
func ensureTemplate(ctx context.Context, cacheDir string, bin Binaries, u osUser) (string, bool, error) {
	final := filepath.Join(cacheDir, templateKey(bin))
	data := filepath.Join(final, "data")
	if _, err := os.Stat(filepath.Join(final, templateMarker)); err == nil {
		return data, false, nil
	}
	if err := ensureCacheDir(cacheDir, u); err != nil {
		return "", false, err
	}
	unlock, err := lockFile(ctx, filepath.Join(cacheDir, ".lock"))
	if err != nil {
		return "", false, err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(final, templateMarker)); err == nil {
		return data, false, nil
	}
	// Under the lock any temporary template is a leftover of a killed run.
	if old, _ := filepath.Glob(filepath.Join(cacheDir, "tmp-*")); len(old) > 0 {
		for _, o := range old {
			os.RemoveAll(o)
		}
	}
	os.RemoveAll(final) // incomplete: no marker
	tmp, err := os.MkdirTemp(cacheDir, "tmp-")
	if err != nil {
		return "", false, fmt.Errorf("create template dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := u.chown(tmp); err != nil {
		return "", false, err
	}
	args := append([]string{"-D", filepath.Join(tmp, "data")}, initdbArgs...)
	cmd := u.command(exec.CommandContext(ctx, bin.Path("initdb"), args...), tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return "", false, fmt.Errorf("run initdb: %w", ctx.Err())
		}
		return "", false, fmt.Errorf("run initdb: %w\n%s", err, tail(string(out), 20))
	}
	syscall.Sync() // initdb ran with --no-sync; a template must survive a crash
	if err := os.WriteFile(filepath.Join(tmp, templateMarker), []byte(bin.Version+"\n"), 0o644); err != nil {
		return "", false, fmt.Errorf("write template marker: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", false, fmt.Errorf("install template: %w", err)
	}
	return data, true, nil
}

// ensureCacheDir creates cacheDir owned by u, or checks that an existing one
// is owned by u (or by the caller) and not writable by others: a template
// from someone else could run code as the server user.
func ensureCacheDir(dir string, u osUser) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("check cache dir: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if u.switchTo && sys.Uid == 0 {
		// Freshly created by root: hand it to the server user, who runs initdb in it.
		if err := u.chown(dir); err != nil {
			return err
		}
		sys.Uid = uint32(u.uid)
	}
	if int(sys.Uid) != u.uid && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("check cache dir: %s is owned by uid %d, not %s; remove it or choose another cache dir", dir, sys.Uid, u.name)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("check cache dir: %s is writable by group or others (mode %v); remove it or choose another cache dir", dir, st.Mode().Perm())
	}
	return nil
}

// lockFile takes an exclusive flock on path, polling so ctx can cancel it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// copyTree copies the directory src to dst (which must not exist), keeping
// modes and giving every entry to u.
func copyTree(ctx context.Context, src, dst string, u osUser) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("copy %s: unexpected file type %v", path, d.Type())
		}
		return u.chown(target)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil { // copy_file_range where the kernel has it
		out.Close()
		return err
	}
	return out.Close()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
