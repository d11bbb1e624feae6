//go:build linux

package runlock

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// flockers returns the pids of the processes holding an flock on the file
// fi describes, as /proc/locks lists them: each the pid of the process that
// took the lock (it may have exited while a process it started keeps the
// file open). In a pid namespace other than the machine's, a lock whose
// taker has exited or runs outside it is not listed. ok is false when
// /proc/locks cannot be read.
func flockers(fi os.FileInfo) (pids []int, ok bool) {
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat {
		return nil, false
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, false
	}
	// "1: FLOCK  ADVISORY  WRITE 1492 fe:00:770086 0 EOF": major and minor
	// in hex, then the inode; a request still waiting has "->" after the
	// number, and is not a holder.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != file {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// command returns the command name of process pid, "" if unknown.
func command(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
