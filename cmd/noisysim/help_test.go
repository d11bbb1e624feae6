package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every command and subcommand answers -h and --help on stdout with exit
// 0, nothing on stderr; a bad flag or subcommand is exit 2 with the error
// on stderr and nothing on stdout.
func TestHelpOnStdout(t *testing.T) {
	commands := [][]string{
		{}, {"help"}, {"run"}, {"report"}, {"validate"}, {"cluster"}, {"cluster", "up"}, {"cluster", "down"},
		{"citus"}, {"citus", "plan"}, {"citus", "isolate"}, {"citus", "hot-shard"}, {"tenant"}, {"tenant", "move"}, {"bench"}, {"sweep"}, {"record"}, {"simulate"}, {"merge"},
	}
	for _, cmd := range commands {
		for _, h := range []string{"-h", "--help", "-help"} {
			args := append(append([]string(nil), cmd...), h)
			var out, errOut bytes.Buffer
			code := realMain(args, &out, &errOut)
			if code != exitOK || errOut.Len() != 0 || !strings.Contains(strings.ToLower(out.String()), "usage") {
				t.Errorf("noisysim %s: exit %d, stdout %d bytes, stderr %q; want exit 0 and usage on stdout only",
					strings.Join(args, " "), code, out.Len(), errOut.String())
			}
		}
	}
	// help CMD [SUB] is CMD [SUB] --help.
	for _, cmd := range [][]string{{"run"}, {"cluster"}, {"cluster", "up"}, {"cluster", "down"}, {"citus"}, {"citus", "hot-shard"}, {"tenant"}, {"validate"}, {"sweep"}} {
		var out, errOut bytes.Buffer
		var want, wantErr bytes.Buffer
		realMain(append(append([]string(nil), cmd...), "--help"), &want, &wantErr)
		if code := realMain(append([]string{"help"}, cmd...), &out, &errOut); code != exitOK || out.String() != want.String() || errOut.Len() != 0 {
			t.Errorf("noisysim help %s: exit %d, stderr %q; want exit 0 and the help of %[1]s --help", strings.Join(cmd, " "), code, errOut.String())
		}
	}
	for _, args := range [][]string{
		{"--nosuch"}, {"nosuch"}, {"run", "--nosuch"}, {"cluster", "nosuch"}, {"cluster", "up", "--nosuch"},
		{"cluster", "down", "--nosuch"}, {"citus", "nosuch"}, {"citus", "plan", "--nosuch"}, {"citus", "hot-shard", "--nosuch"},
		{"tenant", "nosuch"}, {"tenant", "move", "--nosuch"}, {"bench", "--nosuch"}, {"validate", "--nosuch"}, {"help", "nosuch"}, {"sweep", "--nosuch"}, {"record", "--nosuch"}, {"simulate", "--nosuch"},
	} {
		var out, errOut bytes.Buffer
		if code := realMain(args, &out, &errOut); code != exitUsage || out.Len() != 0 || errOut.Len() == 0 {
			t.Errorf("noisysim %s: exit %d, stdout %q, stderr %d bytes; want exit 2 and the error on stderr only",
				strings.Join(args, " "), code, out.String(), errOut.Len())
		}
	}
}
