package main

import (
	"bytes"
	"strings"
	"testing"
)

// A flag value that does not parse is named with its flag and what the flag
// accepts, exit 2, in every command: not the flag package's bare "parse
// error".
func TestBadFlagValueSaysWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		// A number without a unit: the newcomer's case.
		{[]string{"bench", "--memory-duration", "-1"}, `bench: --memory-duration "-1": want a duration with a unit (ms, s, m or h), e.g. 500ms, 90s, 10m or 1h30m (length of the memory step; negative skips it)`},
		{[]string{"bench", "--duration", "10"}, `bench: --duration "10": want a duration with a unit`},
		{[]string{"bench", "--search-step", "3x"}, `bench: --search-step "3x": want a duration with a unit`},
		{[]string{"bench", "--sustain-p99", "100"}, `bench: --sustain-p99 "100": want a duration with a unit`},
		{[]string{"bench", "--sample-every", "ten"}, `bench: --sample-every "ten": want a duration with a unit`},
		{[]string{"bench", "--memory-warmup", "1"}, `bench: --memory-warmup "1": want a duration with a unit`},
		{[]string{"bench", "--pool", "8.5"}, `bench: --pool "8.5": want a whole number (pgbench clients (-c) and noisysim's pool size)`},
		{[]string{"bench", "--search-steps", "99999999999999999999"}, `bench: --search-steps "99999999999999999999": want a whole number (value out of range)`},
		{[]string{"bench", "--rate", "20k"}, `bench: --rate "20k": want a number`},
		{[]string{"bench", "--seed", "x"}, `bench: --seed "x": want a whole number`},
		{[]string{"bench", "--check=maybe"}, `bench: --check "maybe": want true or false`},
		{[]string{"run", "--repeat", "five"}, `run: --repeat "five": want a whole number`},
		{[]string{"run", "--max-foreign-cpu", "half"}, `run: --max-foreign-cpu "half": want a number`},
		{[]string{"record", "--for", "10"}, `record: --for "10": want a duration with a unit (ms, s, m or h), e.g. 500ms, 90s, 10m or 1h30m (how long to record, e.g. 10m)`},
		{[]string{"citus", "plan", "--for", "5"}, `citus plan: --for "5": want a duration with a unit`},
		{[]string{"citus", "hot-shard", "--max-pause", "2"}, `citus hot-shard: --max-pause "2": want a duration with a unit`},
		{[]string{"tenant", "move", "--grace", "30"}, `tenant move: --grace "30": want a duration with a unit`},
		{[]string{"cluster", "up", "--port", "x"}, `cluster up: --port "x": want a whole number`},
		{[]string{"sweep", "--trials", "1.5"}, `sweep: --trials "1.5": want a whole number`},
		{[]string{"simulate", "--cores", "two"}, `simulate: --cores "two": want a number`},
		// Values that parse but cannot be used are named by the command.
		{[]string{"bench", "--memory-warmup", "-5s"}, `--memory-warmup) = -5s: must be ≥ 0`},
		{[]string{"bench", "--memory-duration", "1m", "--memory-warmup", "1m"}, `must be shorter than the memory step`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := realMain(tc.args, &out, &errOut)
			if code != exitUsage || !strings.Contains(errOut.String(), tc.says) || strings.Contains(errOut.String(), "parse error") {
				t.Errorf("exit %d, want 2 saying %q (and not \"parse error\"); stderr:\n%s", code, tc.says, errOut.String())
			}
		})
	}
	// The usage still names the flags' types and a bool flag still takes
	// no value once the values were explained.
	var out, errOut bytes.Buffer
	realMain([]string{"bench", "--memory-duration", "-1"}, &out, &errOut)
	if !strings.Contains(errOut.String(), "-memory-duration duration") {
		t.Errorf("the usage after the error lacks the flag's type:\n%s", errOut.String())
	}
	if code := realMain([]string{"bench", "--check", "--memory-duration", "0"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "--memory-duration: must not be 0") {
		t.Errorf("--check without a value: exit %d; stderr:\n%s", code, errOut.String())
	}
}
