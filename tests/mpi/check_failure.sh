#!/usr/bin/env bash
# Runs a program on 3 ranks in which rank 1 fails while the others wait in a collective, and asserts
# that the job ends within 30 s (no hang), with the expected exit code, that stderr names the
# failing rank and the failure, and that no rank is left running.
# Usage: check_failure.sh EXPECTED_CODE EXPECTED_TEXT MPIRUN PROGRAM [ARGS...]
set -u
expected_code=$1 expected_text=$2 mpirun=$3
shift 3
mode="$*"
err=$(mktemp)
trap 'rm -f "$err"' EXIT
start=$(date +%s%N)
timeout -k 5 30 "$mpirun" -n 3 --oversubscribe "$@" >/dev/null 2>"$err"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
fail() {
  echo "FAIL ($mode): $*"
  echo "---- stderr ----"
  cat "$err"
  exit 1
}
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the job did not end within 30 s"
[ "$rc" -eq "$expected_code" ] || fail "exit code $rc, expected $expected_code"
grep -qF "[rank 1] error:" "$err" || fail "stderr lacks '[rank 1] error:'"
grep -qF -- "$expected_text" "$err" || fail "stderr lacks '$expected_text'"
if pgrep -fx -- "$*" >/dev/null; then fail "ranks of the job are still running"; fi
echo "ok ($mode): exit code $rc after ${elapsed_ms} ms"
