#!/usr/bin/env bash
# Training gives the bits it gave at revision REV. Builds zerodp at REV from this repository's history
# (git archive into WORK: no worktree or ref of the repository is touched; the build is kept in WORK and
# reused), then runs scripts/test/same_bits.sh on the two binaries: its matrix of world sizes, stages,
# dtypes, offload and hybrid sharding, the --out weights byte for byte and the metrics' losses and
# gradient norms (not the memory peaks, which later work may lower on purpose). REV is built with its
# own defaults, so a change of build flags (the ISA baseline) is compared against them too.
#
# A change that alters results on purpose moves REV (tests/CMakeLists.txt) to its own commit and says
# why in its message.
#
# Usage: bits_as_before.sh REV NEW_ZERODP WORK
# Exit 0: the same bits; 1: a difference, or the old revision failed to build; 77 (ctest: skipped): REV
# is not in this clone's history (a shallow clone), said on stdout.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 REV NEW_ZERODP WORK" >&2; exit 2; }
rev=$1 new=$(realpath "$2") work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! git -C "$root" cat-file -e "$rev^{commit}" 2>/dev/null; then
  echo "bits_as_before: SKIPPED: revision $rev is not in this clone's history (shallow clone?): nothing to compare against"
  exit 77
fi
mkdir -p "$work"
work=$(realpath "$work")
src=$work/src-$rev bld=$work/build-$rev
if [[ ! -x $bld/zerodp ]]; then
  echo "bits_as_before: building zerodp at $rev in $bld"
  rm -rf "$src" "$bld"
  mkdir -p "$src"
  git -C "$root" archive "$rev" | tar -x -C "$src"
  # The old build looks up its commit with git; the archive has none, and the repository around WORK
  # is not its revision: stop git at WORK.
  if ! { export GIT_CEILING_DIRECTORIES=$work; cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERODP_CUDA=OFF -DZERODP_BUILD_TESTS=OFF \
           -DZERODP_BUILD_BENCH=OFF && cmake --build "$bld" --target zerodp -j "$(nproc)"; } >"$work/build-$rev.log" 2>&1; then
    echo "bits_as_before: building $rev failed ($work/build-$rev.log):"
    tail -20 "$work/build-$rev.log"
    exit 1
  fi
  rm -rf "$src"
fi
# The GEMM kernels decide the bits, and a later revision may choose others on this CPU on purpose (OpenBLAS's
# AVX-512 set where OpenBLAS does not know the CPU, the widened fallback for bf16 on an Intel CPU without
# AMX, oneMKL's sgemm on Intel): run both binaries on the kernels REV chooses here, which REV reads from
# the same variables (a REV that predates ZERODP_GEMM32 ran OpenBLAS's sgemm).
kernels() {  # "<OpenBLAS kernel set> <bf16 GEMM> <fp16 GEMM> <fp32 GEMM>" as `zerodp info` reports them
  "$1" info 2>/dev/null | awk '
    BEGIN { g = "openblas" }
    /^ *fp32 GEMM:/ { g = /OpenBLAS/ ? "openblas" : "mkl" }
    /^ *BLAS:/ { if (match($0, /; [A-Za-z0-9]+ kernels/)) { s = substr($0, RSTART + 2, RLENGTH - 2); sub(/ kernels/, "", s); core = s } }
    /^ *(bf16|fp16) GEMM:/ { impl = /widened/ ? "blas" : /oneDNN/ ? "onednn" : /Math Kernel Library|oneMKL/ ? "mkl" : "?";
                             if ($1 == "bf16") b = impl; else f = impl }
    END { print core, b, f, g }'
}
read -r old_core old_bf16 old_fp16 old_fp32 <<<"$(kernels "$bld/zerodp")"
read -r new_core new_bf16 new_fp16 new_fp32 <<<"$(kernels "$new")"
if [[ -z ${OPENBLAS_CORETYPE:-} && -n $old_core && $old_core != "$new_core" ]]; then
  echo "bits_as_before: both on OpenBLAS's $old_core kernels (REV's choice here; the new binary would run $new_core)"
  export OPENBLAS_CORETYPE=$old_core
fi
if [[ -z ${ZERODP_GEMM16:-} && "$old_bf16 $old_fp16" != "$new_bf16 $new_fp16" ]]; then
  if [[ $old_bf16 != "$old_fp16" ]]; then
    echo "bits_as_before: REV computes bf16 with $old_bf16 and fp16 with $old_fp16 here, the new binary with $new_bf16" \
         "and $new_fp16: one ZERODP_GEMM16 cannot pin both"
    exit 1
  fi
  echo "bits_as_before: both on the $old_bf16 16-bit GEMMs (REV's choice here; the new binary would use $new_bf16/$new_fp16)"
  export ZERODP_GEMM16=$old_bf16
fi
if [[ -z ${ZERODP_GEMM32:-} && $old_fp32 != "$new_fp32" ]]; then
  echo "bits_as_before: both on the $old_fp32 fp32 GEMM (REV's choice here; the new binary would use $new_fp32)"
  export ZERODP_GEMM32=$old_fp32
fi
echo "bits_as_before: zerodp built at $rev against $("$new" --version | head -1)"
PEAKS=0 bash "$root/scripts/test/same_bits.sh" "$bld/zerodp" "$new"
