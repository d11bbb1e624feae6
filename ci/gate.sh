#!/usr/bin/env bash
# gate.sh: put your service under noisysim's gate in CI.
#
#   ci/gate.sh SCENARIO [OUT_DIR]
#
# Builds noisysim (NOISYSIM_VERSION, default latest) with the go command,
# or uses the binary NOISYSIM_BIN names, runs SCENARIO with --out OUT_DIR (default gate-report) and exits with
# noisysim's code: 0 passed, 99 an assertion failed (the regression the
# gate exists for), 2 bad input (the scenario, or a service that would not
# start), 1 anything else. OUT_DIR keeps report.json, report.md,
# junit.xml and the service's logs for the CI system to collect.
#
# A CI runner is a shared machine: a run that fails on a window the machine
# disturbed (other work, hypervisor steal) is run again with the same seed,
# up to NOISYSIM_RETRY_DISTURBED more times (default 2; 0 turns it off, as a
# noisysim older than --retry-disturbed needs). A failure on undisturbed
# windows fails at once; the earlier attempts' reports are in
# OUT_DIR/attempt-K, and a failure disturbed in every attempt says so.
# A run that failed on marginal verdicts only (each failed limit inside its
# p99's 95% confidence interval: either verdict was plausible) is run again
# up to NOISYSIM_RETRY_MARGINAL more times (default 1; 0 turns it off, as a
# noisysim older than --retry-marginal needs); a clear failure is final.
#
# Needs Go and PostgreSQL's server package (initdb, postgres): on Debian or
# Ubuntu, apt-get install postgresql.
set -euo pipefail

scenario=${1:?usage: ci/gate.sh SCENARIO [OUT_DIR]}
out=${2:-gate-report}
version=${NOISYSIM_VERSION:-latest}
retries=${NOISYSIM_RETRY_DISTURBED:-2}
marginal=${NOISYSIM_RETRY_MARGINAL:-1}
for var in NOISYSIM_RETRY_DISTURBED NOISYSIM_RETRY_MARGINAL; do
  case ${!var:-0} in
    [0-9] | 10) ;;
    *) echo "gate: $var=${!var}: want a whole number 0..10 (0 turns it off)" >&2; exit 2 ;;
  esac
done

if [[ -n ${NOISYSIM_BIN:-} ]]; then
  noisysim=$NOISYSIM_BIN
else
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  GOBIN=$bin go install "github.com/noisysim/noisysim/cmd/noisysim@$version"
  noisysim=$bin/noisysim
fi

rm -rf "$out"
set +e
retry=()
if [[ $retries != 0 ]]; then
  retry=(--retry-disturbed "$retries")
fi
if [[ $marginal != 0 ]]; then
  retry+=(--retry-marginal "$marginal")
fi
"$noisysim" run --no-progress ${retry[@]+"${retry[@]}"} --out "$out" "$scenario"
code=$?
set -e
case $code in
  0)  echo "gate: passed" ;;
  99) echo "gate: FAILED: an assertion failed; see $out/report.md" ;;
  2)  echo "gate: bad input: the scenario, or a service that would not start (see the message above and $out)" ;;
  *)  echo "gate: noisysim could not complete the run (exit $code)" ;;
esac
exit $code
