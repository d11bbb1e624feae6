//go:build !linux

package runlock

import "os"

// flockers would return the processes holding an flock on the file fi
// describes; without /proc/locks it cannot tell.
func flockers(os.FileInfo) ([]int, bool) { return nil, false }

// command would return the command name of process pid.
func command(int) string { return "" }
