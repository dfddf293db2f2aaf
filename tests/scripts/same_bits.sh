#!/usr/bin/env bash
# Do two zerodp builds train bit for bit alike? For refactorings that must not change results (issue
# 12: "fp32 results bitwise as before"): build the old revision somewhere (e.g. `git worktree add
# /tmp/ref REV && cmake -S /tmp/ref -B /tmp/ref/build -G Ninja -DCMAKE_BUILD_TYPE=Release
# -DZERODP_BUILD_TESTS=OFF -DZERODP_BUILD_BENCH=OFF && ninja -C /tmp/ref/build zerodp`), then
#   tests/scripts/same_bits.sh /tmp/ref/build/zerodp build/zerodp
# Trains GPT-2 L4 C256 for 3 steps of G = 2 micro-steps at W = 1, 2, 3, stages 0-3, with and without
# activation checkpointing (DTYPES, default fp32), and compares the --out weights byte for byte and
# the metrics' losses, gradient norms and memory peaks (PEAKS=0: not the peaks, for a change that is
# meant to use less memory). Exit 1 on the first difference.
# Not a ctest: it needs a second build, and results are only comparable on one machine.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_ZERODP NEW_ZERODP" >&2; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$new" tokenize --text "$root/data/tinyshakespeare.txt" --out "$work/d.bin" >/dev/null
"$new" init --out "$work/init.safetensors" --layers 4 --heads 4 --embd 256 --vocab 256 --ctx 128 --seed 1337 >/dev/null
fields() {
  if [[ ${PEAKS:-1} == 0 ]]; then grep -o '"loss":[^,]*\|"grad_norm":[^,]*' "$1"
  else grep -o '"loss":[^,]*\|"grad_norm":[^,]*\|"peak_bytes":{[^}]*}' "$1"; fi
}
for dt in ${DTYPES:-fp32}; do
  for W in 1 2 3; do
    for s in 0 1 2 3; do
      for ck in --no-activation-checkpointing --activation-checkpointing; do
        for side in old new; do
          bin=$old; [[ $side == new ]] && bin=$new
          timeout 300 mpirun -n "$W" --oversubscribe "$bin" train --init "$work/init.safetensors" --data "$work/d.bin" \
            --steps 3 --micro-batch 2 --seq 64 --accum 2 --dtype "$dt" --zero-stage "$s" --lr 1e-3 --clip 1.0 \
            --log-every 0 "$ck" --metrics "$work/$side.jsonl" --out "$work/$side.safetensors" >"$work/$side.log" 2>&1 ||
            { echo "$side failed: $dt W=$W stage $s $ck" >&2; tail -5 "$work/$side.log" >&2; exit 1; }
        done
        what="$dt W=$W stage $s $ck"
        cmp -s "$work/old.safetensors" "$work/new.safetensors" || { echo "DIFFERENT weights: $what"; exit 1; }
        diff -q <(fields "$work/old.jsonl") <(fields "$work/new.jsonl") >/dev/null ||
          { echo "DIFFERENT losses, norms or peaks: $what"; exit 1; }
        echo "same bits: $what"
      done
    done
  done
done
