package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCitusBadNumbers: values the flag package accepts but no run can use
// (NaN, infinities, rates beyond the scenario bounds, non-positive bounds
// that would silently take a default) are exit 2 with one line naming the
// flag, before any cluster is started or any DSN dialled.
func TestCitusBadNumbers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"citus", "hot-shard", "--rate", "NaN"}, "--rate"},
		{[]string{"citus", "hot-shard", "--rate", "1e9"}, "--rate"},
		{[]string{"citus", "hot-shard", "--hot-share", "NaN"}, "--hot-share"},
		{[]string{"citus", "hot-shard", "--tenants", "1000000000"}, "--tenants"},
		{[]string{"citus", "hot-shard", "--detect-within", "0s"}, "--detect-within"},
		{[]string{"citus", "hot-shard", "--max-pause", "-1s"}, "--max-pause"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--skew", "NaN"}, "--skew"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--skew", "+Inf"}, "--skew"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--isolate", "NaN"}, "--isolate"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--isolate", "2"}, "--isolate"},
		{[]string{"citus", "plan", "--dsn", "host=127.0.0.1 port=1", "--isolate", "0.5", "--dedicate-share", "0.1"}, "--isolate <= --dedicate-share <= --cluster"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := realMain(tc.args, &out, &errOut); got != exitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", got, errOut.String())
			}
			msg := strings.TrimSpace(errOut.String())
			if !strings.Contains(msg, tc.msg) || strings.Contains(msg, "\n") {
				t.Errorf("stderr is not one line naming %q:\n%s", tc.msg, msg)
			}
		})
	}
}
