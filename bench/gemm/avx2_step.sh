#!/usr/bin/env bash
# The fp32 GEMMs of one bench/peers step (GPT-2 L4 C256 V256, B·T = 1024 tokens a rank: each block's
# four linear layers forward, input gradient and weight gradient, and the tied LM head), one thread,
# under every fp32 GEMM library zerodp could call, on the CPU's own path and held to AVX2 (as an AMD
# Zen 2/3 or an older Xeon runs): issue 50 asks which library and kernels the AVX2 path should use,
# measured rather than assumed. Sums each library's median per GEMM into a step's GEMM time and
# reads it against the core's FMA peak (fma_peak). Configurations are interleaved within each round.
#   bash bench/gemm/avx2_step.sh                 ROUNDS [3], MIN_TIME [0.3] s a GEMM, OUT_DIR [bench/gemm/results]
# Needs what build.sh needs (oneMKL from PyPI in MKL_VENV; oneDNN 2.6 from Debian).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT_DIR:-$here/results}
ROUNDS=${ROUNDS:-3} MIN_TIME=${MIN_TIME:-0.3}
mkdir -p "$out"
bash "$here/build.sh" >/dev/null
b=$here/build
csv=$out/avx2_step.csv peak=$out/avx2_step_peak.txt
# config | environment | binary | extra flags
configs=(
  "mkl-strict|MKL_ENABLE_INSTRUCTIONS=|gemm_mkl|--cbwr strict"
  "mkl-avx2-strict|MKL_ENABLE_INSTRUCTIONS=AVX2|gemm_mkl|--cbwr strict"
  "mkl-avx2-auto|MKL_ENABLE_INSTRUCTIONS=AVX2|gemm_mkl|--cbwr auto"
  "mkl-avx2-off|MKL_ENABLE_INSTRUCTIONS=AVX2|gemm_mkl|--cbwr off"
  "openblas|OPENBLAS_CORETYPE=|gemm_openblas|"
  "openblas-haswell|OPENBLAS_CORETYPE=Haswell|gemm_openblas|"
  "openblas-zen|OPENBLAS_CORETYPE=Zen|gemm_openblas|"
  "onednn|DNNL_MAX_CPU_ISA=ALL|gemm_onednn|"
  "onednn-avx2|DNNL_MAX_CPU_ISA=AVX2|gemm_onednn|"
)
echo "round,config,$("$b/gemm_openblas" --set none --dtypes f32)" > "$csv"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$peak"
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round: $("$b/fma_peak" | tr '\n' ' ')" >> "$peak"
  for c in "${configs[@]}"; do
    IFS='|' read -r name env bin flags <<<"$c"
    [[ -x $b/$bin ]] || continue
    # shellcheck disable=SC2086  # flags are words
    env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ${env:+"$env"} \
      "$b/$bin" --set l4step --dtypes f32 --threads 1 --min-time "$MIN_TIME" --no-header $flags |
      sed "s/^/$round,$name,/" >> "$csv"
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$peak"
python3 - "$csv" "$peak" <<'PY'
import csv, re, statistics, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1])))
peaks = [float(m) for m in re.findall(r"avx2 ([0-9.]+)", open(sys.argv[2]).read())]
step = defaultdict(lambda: defaultdict(float))  # config -> round -> ms of one step's GEMMs
flops = defaultdict(float)
for r in rows:
    times = 1 if r["case"].startswith("step.head") else 4  # four blocks, one head
    step[r["config"]][r["round"]] += times * float(r["ms_median"])
    if r["round"] == "1":
        flops[r["config"]] += times * 2.0 * int(r["M"]) * int(r["N"]) * int(r["K"])
ref = "mkl-avx2-strict"
best_ref = min(step[ref].values()) if ref in step else None
print(f"AVX2 FMA peak of one core (fma_peak, per round): {', '.join(f'{p:.1f}' for p in peaks)} GFLOP/s\n")
print("| configuration | step's GEMMs, ms (best round; rounds) | GFLOP/s (best) | of the AVX2 peak | against mkl-avx2-strict |")
print("|---|---:|---:|---:|---:|")
for name, per_round in step.items():
    best = min(per_round.values())
    gf = flops[name] / best * 1e-6
    held = any(k in name for k in ("avx2", "haswell", "zen"))
    peak = f"{gf / max(peaks):.0%}" if peaks and held else ""
    rel = f"{best_ref / best:.3f}x" if best_ref else ""
    rounds = "/".join(f"{per_round[k]:.0f}" for k in sorted(per_round))
    print(f"| {name} | {best:.1f} ({rounds}) | {gf:.1f} | {peak} | {rel} |")
PY
