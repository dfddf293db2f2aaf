#!/usr/bin/env bash
# Do two zerodp builds train bit for bit alike? For refactorings that must not change results:
#   scripts/test/same_bits.sh OLD_ZERODP NEW_ZERODP
# (scripts/test/bits_as_before.sh builds OLD from a revision of this repository's history.)
# Trains GPT-2 L4 C256 for 3 steps of G = 2 micro-steps on each binary, over a matrix of cases (below:
# world sizes 1-4, stages 0-3, fp32, bf16 and fp16, activation checkpointing, cpu and nvme offload of
# the optimizer and of the parameters, hybrid sharding), and compares the --out weights byte for byte
# and the metrics' losses, gradient norms and memory peaks (PEAKS=0: not the peaks, for a change that
# is meant to use less memory). CASES=fp32 runs only the fp32 cases without offload. Exit 1 on the first
# difference.
# Both binaries run on this machine with this environment, so the BLAS kernel set (which decides
# fp32's bits) is the same on both sides.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 OLD_ZERODP NEW_ZERODP" >&2; exit 2; }
old=$(realpath "$1") new=$(realpath "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$new" tokenize --text "$root/data/tinyshakespeare.txt" --out "$work/d.bin" >/dev/null
"$new" init --out "$work/init.safetensors" --layers 4 --heads 4 --embd 256 --vocab 256 --ctx 128 --seed 1337 >/dev/null
mkdir -p "$work/nvme"
fields() {
  if [[ ${PEAKS:-1} == 0 ]]; then grep -o '"loss":[^,]*\|"grad_norm":[^,]*' "$1"
  else grep -o '"loss":[^,]*\|"grad_norm":[^,]*\|"peak_bytes":{[^}]*}' "$1"; fi
}
# One case a line: the world size, then the flags that make it.
fp32_cases=(
  "1 --dtype fp32 --zero-stage 0"
  "1 --dtype fp32 --zero-stage 3 --activation-checkpointing"
  "2 --dtype fp32 --zero-stage 0 --activation-checkpointing"
  "2 --dtype fp32 --zero-stage 1"
  "2 --dtype fp32 --zero-stage 2"
  "2 --dtype fp32 --zero-stage 3"
  "3 --dtype fp32 --zero-stage 1 --activation-checkpointing"
  "3 --dtype fp32 --zero-stage 2"
  "3 --dtype fp32 --zero-stage 3 --activation-checkpointing"
)
other_cases=(
  "2 --dtype bf16 --zero-stage 0"
  "2 --dtype bf16 --zero-stage 3 --reduce-dtype fp32"
  "3 --dtype bf16 --zero-stage 2 --no-fp32-grad-accum"
  "2 --dtype bf16 --zero-stage 1 --no-fp32-grad-accum"
  "1 --dtype fp16 --zero-stage 0 --no-fp32-grad-accum"
  "2 --dtype fp16 --zero-stage 1"
  "3 --dtype fp16 --zero-stage 3 --activation-checkpointing"
  "2 --dtype bf16 --zero-stage 2 --offload-optimizer cpu --sub-group-size 100000"
  "2 --dtype fp32 --zero-stage 3 --offload-optimizer cpu --offload-param cpu"
  "2 --dtype bf16 --zero-stage 3 --offload-optimizer nvme --offload-param nvme --nvme-path $work/nvme"
  "4 --dtype fp32 --zero-stage 1 --shard-group-size 2"
  "4 --dtype bf16 --zero-stage 3 --shard-group-size 2"
)
cases=("${fp32_cases[@]}")
[[ ${CASES:-all} == fp32 ]] || cases+=("${other_cases[@]}")
for case in "${cases[@]}"; do
  read -r W flags <<<"$case"
  for side in old new; do
    bin=$old; [[ $side == new ]] && bin=$new
    # shellcheck disable=SC2086  # the case's flags split into words
    timeout 300 mpirun -n "$W" --oversubscribe "$bin" train --init "$work/init.safetensors" --data "$work/d.bin" \
      --steps 3 --micro-batch 2 --seq 64 --accum 2 --lr 1e-3 --clip 1.0 --log-every 0 $flags \
      --metrics "$work/$side.jsonl" --out "$work/$side.safetensors" >"$work/$side.log" 2>&1 ||
      { echo "$side failed: W=$W $flags" >&2; tail -5 "$work/$side.log" >&2; exit 1; }
  done
  what="W=$W ${flags/$work/WORK}"
  cmp -s "$work/old.safetensors" "$work/new.safetensors" || { echo "DIFFERENT weights: $what"; exit 1; }
  diff -q <(fields "$work/old.jsonl") <(fields "$work/new.jsonl") >/dev/null ||
    { echo "DIFFERENT losses, norms or peaks: $what"; exit 1; }
  echo "same bits: $what"
done
