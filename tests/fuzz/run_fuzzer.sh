#!/usr/bin/env bash
# Runs one libFuzzer target for a while and says what it did: the corpus it ended with, executions
# per second, total executions, and the finding if there was one (libFuzzer saves the input that
# crashed under WORKDIR/artifacts/). Exit status: the fuzzer's (0: no finding).
# Usage: run_fuzzer.sh BINARY SECONDS WORKDIR SEED_CORPUS_DIR [DICTIONARY]
# New inputs go to WORKDIR/corpus, never into the seed corpus of the repository.
set -uo pipefail
binary=$1 seconds=$2 workdir=$3 seeds=$4 dict=${5:-}
name=$(basename "$binary")
[ -x "$binary" ] || { echo "$name: FAIL: $binary is not built" >&2; exit 2; }
[ -d "$seeds" ] && [ -n "$(ls -A "$seeds")" ] || { echo "$name: FAIL: no seed corpus in $seeds" >&2; exit 2; }
mkdir -p "$workdir/corpus" "$workdir/artifacts"
args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
      -artifact_prefix="$workdir/artifacts/")
[ -n "$dict" ] && args+=(-dict="$dict")
log="$workdir/last-run.log"
start=$SECONDS
"$binary" "${args[@]}" "$workdir/corpus" "$seeds" >"$log" 2>&1
rc=$?
elapsed=$((SECONDS - start))
stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
execs=$(stat number_of_executed_units)
rate=$(stat average_exec_per_sec)
# libFuzzer's last status line carries the corpus it holds in memory: "corp: N/SIZE".
corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //')
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
echo "$name: ${elapsed}s, ${execs:-?} executions, ${rate:-?} exec/s, corpus ${corp:-?} (inputs/bytes), coverage ${cov:-?} edges, seeds $(ls "$seeds" | wc -l), saved $(ls "$workdir/corpus" | wc -l)"
if [ "$rc" -ne 0 ]; then
  echo "$name: FINDING (exit code $rc); the input is under $workdir/artifacts/; log $log:"
  # The report: from the first sanitizer, libFuzzer or target error line on (else the log's end).
  pattern='^==[0-9]+==ERROR|runtime error|^fuzz_[a-z_]+: |deadly signal|out-of-memory|timeout after|^ERROR|^Parse'
  first=$(grep -n -m1 -E "$pattern" "$log" | cut -d: -f1)
  if [ -n "$first" ]; then sed -n "${first},\$p" "$log" | head -80; else tail -40 "$log"; fi
fi
exit "$rc"
