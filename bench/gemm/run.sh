#!/usr/bin/env bash
# Builds and runs the GEMM library comparison (see docs/gemm_library.md), writing CSVs into
# bench/gemm/results/ (or $OUT_DIR) and printing Markdown tables (summarize.py).
#   bash bench/gemm/run.sh              # everything: 3 libraries × dtypes × 33 cases × 1, 2 threads × 2 rounds
#   MIN_TIME=0.3 ROUNDS=1 bash bench/gemm/run.sh # shorter
# Set-up it expects (build.sh says the same):
#   apt-get install -y libopenblas-openmp-dev libdnnl-dev
#   python3 -m venv /tmp/mklvenv && /tmp/mklvenv/bin/pip install mkl mkl-devel mkl-include
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT_DIR:-$here/results}
MIN_TIME=${MIN_TIME:-0.5}
THREADS=${THREADS:-"1 2"}
mkdir -p "$out"
bash "$here/build.sh" >/dev/null
b=$here/build

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus"
  echo "amx: $(grep -o -w 'amx_bf16\|amx_tile\|avx512_bf16\|avx512_fp16\|amx_fp16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "kernel: $(uname -r)"
  echo "g++: $(g++ --version | head -1)"
  echo "openblas: $(dpkg-query -W -f='${Version}' libopenblas0-openmp 2>/dev/null)"
  echo "onednn: $(dpkg-query -W -f='${Version}' libdnnl2 2>/dev/null)"
  echo "mkl: $("${MKL_VENV:-/tmp/mklvenv}/bin/pip" show mkl 2>/dev/null | sed -n 's/^Version: //p')"
  echo "onednn3 (PyPI onednn-cpu-gomp): $("${DNNL3_VENV:-/tmp/dnnl32venv}/bin/pip" show onednn-cpu-gomp 2>/dev/null | sed -n 's/^Version: //p')"
} > "$out/machine.txt"
cat "$out/machine.txt"

log_load() { echo "$(date -u +%H:%M:%S) $1 load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }
: > "$out/load.txt"

# 1. The main table: every library, dtype, case and thread count, ROUNDS times with the libraries
#    interleaved; summarize.py keeps each case's best round (this 2-core machine is shared with
#    other jobs, whose load the rounds log into load.txt).
ROUNDS=${ROUNDS:-2}
main=$out/main.csv
echo "round,$("$b/gemm_openblas" --set none --dtypes f32)" > "$main"  # header only
for round in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    for lib in openblas mkl onednn onednn3; do
      [[ -x $b/gemm_$lib ]] || continue
      log_load "round $round $lib t=$t start"
      OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t \
        "$b/gemm_$lib" --threads "$t" --min-time "$MIN_TIME" --no-header | sed "s/^/$round,/" >> "$main"
      log_load "round $round $lib t=$t end"
    done
  done
done

# 2. Fallback paths, emulated on this CPU by capping the ISA each library may use (1 thread):
#    no AMX but AVX-512 BF16 (Cooper Lake, AMD Zen 4), AVX-512 without BF16 (Skylake/Ice Lake),
#    AVX2 only (AMD Zen 2/3). This caps features only: it cannot show MKL's behaviour on a CPU
#    whose vendor string is not GenuineIntel.
fb=$out/fallback.csv
echo "cap,$("$b/gemm_openblas" --set none --dtypes f32)" > "$fb"
for cap in AVX512_E4:AVX512_CORE_AMX AVX512_E3:AVX512_CORE_BF16 AVX512:AVX512_CORE AVX2:AVX2; do
  mkl_cap=${cap%%:*}
  dnnl_cap=${cap##*:}
  log_load "fallback $cap start"
  OMP_NUM_THREADS=1 MKL_ENABLE_INSTRUCTIONS=$mkl_cap \
    "$b/gemm_mkl" --set square --min-time "$MIN_TIME" --no-header | sed "s/^/$dnnl_cap,/" >> "$fb"
  OMP_NUM_THREADS=1 MKL_ENABLE_INSTRUCTIONS=$mkl_cap \
    "$b/gemm_mkl" --set l4 --only fc. --min-time "$MIN_TIME" --no-header | sed "s/^/$dnnl_cap,/" >> "$fb"
  OMP_NUM_THREADS=1 DNNL_MAX_CPU_ISA=$dnnl_cap \
    "$b/gemm_onednn" --set square --min-time "$MIN_TIME" --no-header | sed "s/^/$dnnl_cap,/" >> "$fb"
  OMP_NUM_THREADS=1 DNNL_MAX_CPU_ISA=$dnnl_cap \
    "$b/gemm_onednn" --set l4 --only fc. --min-time "$MIN_TIME" --no-header | sed "s/^/$dnnl_cap,/" >> "$fb"
  if [[ -x $b/gemm_onednn3 ]]; then
    OMP_NUM_THREADS=1 ONEDNN_MAX_CPU_ISA=$dnnl_cap \
      "$b/gemm_onednn3" --set square --min-time "$MIN_TIME" --no-header | sed "s/^/$dnnl_cap,/" >> "$fb"
  fi
done
log_load "fallback end"

# 3. oneDNN primitive creation with the primitive cache disabled (every creation is cold).
nc=$out/onednn_nocache.csv
OMP_NUM_THREADS=1 DNNL_PRIMITIVE_CACHE_CAPACITY=0 ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 \
  "$b/gemm_onednn" --set l4 --dtypes f32,bf16 --min-time 0.05 > "$nc"

# 4. What each library says it dispatched to (2048³ NN, bf16).
{
  OMP_NUM_THREADS=1 MKL_VERBOSE=1 "$b/gemm_mkl" --set square --dtypes bf16 --min-time 0.05 \
    --no-header 2>&1 | grep -m1 'oneMKL'
  OMP_NUM_THREADS=1 DNNL_VERBOSE=1 "$b/gemm_onednn" --set square --dtypes bf16 --min-time 0.05 \
    --no-header 2>&1 | grep -E 'verbose,info|verbose,exec' | head -8
  [[ -x $b/gemm_onednn3 ]] && OMP_NUM_THREADS=1 ONEDNN_VERBOSE=1 "$b/gemm_onednn3" --set square \
    --dtypes bf16,f16 --min-time 0.05 --no-header 2>&1 | grep -E 'verbose,info|verbose,exec' | head -12
} > "$out/verbose.txt" || true

python3 "$here/summarize.py" "$out"
