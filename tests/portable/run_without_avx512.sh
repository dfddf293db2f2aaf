#!/usr/bin/env bash
# The portable zerodp runs on a CPU without AVX-512: a short training run under QEMU's user-mode
# emulation of a Haswell (x86-64-v3: AVX2, FMA, F16C; no AVX-512), where the kernels' run-time dispatch
# must pick their baseline copies (src/kernels/dispatch.h) and nothing else may use AVX-512 either; then
# the same runs on this CPU held to x86-64-v3 by ZERODP_MAX_CPU_ISA write the same bytes.
# Also: on a CPU below x86-64-v3 (Nehalem) the loader refuses the binary with a message, instead of a
# SIGILL somewhere later.
#
# Usage: run_without_avx512.sh ZERODP
# Exit 0: ran; 1: failed; 77 (ctest: skipped): qemu-x86_64 (Debian's qemu-user, scripts/setup/setup.sh
# --tests) is not installed, said on stdout.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 ZERODP" >&2; exit 2; }
zerodp=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v qemu-x86_64 >/dev/null; then
  echo "run_without_avx512: SKIPPED: qemu-x86_64 is not installed (apt-get install qemu-user)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# TCG warns about every Haswell feature it does not emulate (TSX, x2apic, ...): none that zerodp uses.
haswell() { qemu-x86_64 -cpu Haswell "$@" 2>>"$work/qemu-warnings.txt"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

haswell "$zerodp" info >"$work/info.txt" || { echo "zerodp info failed under a Haswell:"; cat "$work/info.txt"; exit 1; }
if ! grep -q '^ *CPU:.*f16c' "$work/info.txt" || grep -q 'avx512' "$work/info.txt"; then
  echo "the emulated CPU is not what this test needs (F16C, no AVX-512):"
  grep '^ *CPU:' "$work/info.txt"
  exit 1
fi

head -c 20000 "$root/data/tinyshakespeare.txt" >"$work/text.txt"
haswell "$zerodp" tokenize --text "$work/text.txt" --out "$work/d.bin" >/dev/null
haswell "$zerodp" init --out "$work/init.safetensors" --layers 1 --heads 2 --embd 64 --vocab 256 --ctx 32 \
  --seed 1 >/dev/null
for dtype in fp32 bf16 fp16; do
  if ! haswell "$zerodp" train --init "$work/init.safetensors" --data "$work/d.bin" --steps 2 --micro-batch 2 \
         --seq 32 --lr 1e-3 --log-every 0 --dtype "$dtype" --metrics "$work/$dtype.jsonl" \
         --out "$work/$dtype.safetensors" >"$work/$dtype.log" 2>&1; then
    echo "zerodp train --dtype $dtype failed under a Haswell:"
    tail -5 "$work/$dtype.log"
    exit 1
  fi
  loss=$(grep -o '"loss":[^,]*' "$work/$dtype.jsonl" | tail -1)
  [[ $loss =~ ^\"loss\":[0-9] ]] || { echo "no finite loss from --dtype $dtype: '$loss'"; exit 1; }
  echo "ran under a Haswell: --dtype $dtype, $loss"
done

# Runs on this CPU held to x86-64-v3 (ZERODP_MAX_CPU_ISA, OpenBLAS held to its Haswell kernels): the
# kernels' baseline copies, so a Haswell's bytes exactly. This is the switch that measures the AVX2 path
# on an AVX-512 machine (src/kernels/dispatch.h). The GEMMs go to OpenBLAS on both sides, so that an
# AMD host (OpenBLAS by default) and the emulated Intel Haswell (oneMKL by default) compare.
"$zerodp" info >"$work/no-limit-info.txt"
ZERODP_MAX_CPU_ISA=x86-64-v3 "$zerodp" info >"$work/held-info.txt"
if ! grep -q '^ *CPU:.*kernels: x86-64-v3 (held to x86-64-v3 by ZERODP_MAX_CPU_ISA)' "$work/held-info.txt" ||
   grep '^ *CPU:' "$work/held-info.txt" | grep -q avx512; then
  echo "ZERODP_MAX_CPU_ISA=x86-64-v3 did not hold zerodp info's CPU and kernels to x86-64-v3:"
  grep '^ *CPU:' "$work/held-info.txt"
  exit 1
fi
export ZERODP_GEMM32=openblas ZERODP_GEMM16=blas OPENBLAS_CORETYPE=Haswell
for dtype in fp32 bf16; do
  args=(train --init "$work/init.safetensors" --data "$work/d.bin" --steps 2 --micro-batch 2 --seq 32 --lr 1e-3
        --log-every 0 --dtype "$dtype")
  haswell "$zerodp" "${args[@]}" --out "$work/$dtype-haswell.safetensors" >"$work/$dtype-haswell.log" 2>&1 ||
    { echo "zerodp train --dtype $dtype on OpenBLAS failed under a Haswell:"; tail -5 "$work/$dtype-haswell.log"; exit 1; }
  ZERODP_MAX_CPU_ISA=x86-64-v3 "$zerodp" "${args[@]}" --out "$work/$dtype-held.safetensors" \
    >"$work/$dtype-held.log" 2>&1 ||
    { echo "zerodp train --dtype $dtype failed held to x86-64-v3:"; tail -5 "$work/$dtype-held.log"; exit 1; }
  cmp -s "$work/$dtype-haswell.safetensors" "$work/$dtype-held.safetensors" ||
    { echo "--dtype $dtype held to x86-64-v3 on this CPU does not write the Haswell's bytes"; exit 1; }
  echo "held to x86-64-v3 on this CPU ($(grep -o 'kernels: [^ ]*' "$work/no-limit-info.txt") without the" \
       "switch): --dtype $dtype writes the Haswell's bytes"
done
unset ZERODP_GEMM32 ZERODP_GEMM16 OPENBLAS_CORETYPE

# Below the baseline: the loader's message, not an illegal instruction.
if out=$(qemu-x86_64 -cpu Nehalem "$zerodp" --version 2>&1); then
  echo "zerodp ran on an emulated Nehalem (no AVX2): the executable is not marked as needing x86-64-v3"
  exit 1
fi
if ! grep -q 'ISA level' <<<"$out"; then
  echo "on an emulated Nehalem zerodp failed without the loader's ISA-level message:"
  echo "$out" | grep -v '^qemu-x86_64: warning' | tail -3
  exit 1
fi
echo "refused on a Nehalem: $(grep 'ISA level' <<<"$out" | head -1)"
