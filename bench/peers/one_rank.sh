#!/usr/bin/env bash
# One rank, zerodp against plain PyTorch 2.x (bench/peers/peer_train.py `single`: the model and
# torch.optim.AdamW, no wrapper) on the same cores, fp32 and bf16 (zerodp's 16-bit compute against
# torch.autocast("cpu", bfloat16)), issue 12's "GPT-2 124M bf16 ≥ 1.3× PyTorch bf16 autocast".
# Same initial weights (`zerodp init --seed 1337`), batches, AdamW (lr 1e-3, weight decay 0.1 on
# 2+-dimensional tensors) and clipping 1.0. Interleaved rounds; ms/step is the median of the steps
# after the warm-up, rounds pooled. Prints a markdown table (OUT/one_rank.md).
#
# Environment (defaults in brackets): BUILD [build], VENV [runs/peers-venv] (made by bench/peers/run.sh),
#   OUT [runs/bench-one-rank], THREADS [nproc], ROUNDS [2], STEPS [8] WARMUP [2],
#   MODELS ["124m l4"] (124m: GPT-2 small L12 C768 H12 V50257 at B4 T256; l4: L4 C256 H4 V256 at B8 T128),
#   KEEP_OPENBLAS_CORETYPE [0] (as in bench/peers/run.sh: by default OPENBLAS_CORETYPE is unset so that
#   OpenBLAS picks its kernels by CPUID; the table names the kernels zerodp ran)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build} VENV=${VENV:-runs/peers-venv} OUT=${OUT:-runs/bench-one-rank}
THREADS=${THREADS:-$(nproc)} ROUNDS=${ROUNDS:-2} STEPS=${STEPS:-8} WARMUP=${WARMUP:-2} MODELS=${MODELS:-124m l4}
Z=$(cd "$BUILD" && pwd)/zerodp
PY=$(cd "$VENV/bin" && pwd)/python
[[ -x "$Z" && -x "$PY" ]] || { echo "one_rank.sh: needs $BUILD/zerodp and the venv $VENV (bench/peers/run.sh makes it)" >&2; exit 2; }
# peer_train.py imports zdptest (tests/pylib): run.sh installs it in the venv; a venv made before that gets it here.
"$PY" -c 'import zdptest' >/dev/null 2>&1 || "$PY" -m pip install -q --no-build-isolation -e tests/pylib
[[ "${KEEP_OPENBLAS_CORETYPE:-0}" == 1 ]] || unset OPENBLAS_CORETYPE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=$THREADS
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.jsonl
[[ -f "$OUT/shakespeare.bin" ]] || "$Z" tokenize --text data/tinyshakespeare.txt --out "$OUT/shakespeare.bin" >&2
[[ -f "$OUT/124m.safetensors" ]] ||
  "$Z" init --out "$OUT/124m.safetensors" --layers 12 --heads 12 --embd 768 --vocab 50257 --ctx 1024 --seed 1337 >&2
[[ -f "$OUT/l4.safetensors" ]] ||
  "$Z" init --out "$OUT/l4.safetensors" --layers 4 --heads 4 --embd 256 --vocab 256 --ctx 128 --seed 1337 >&2
LR=(--lr 1e-3 --beta1 0.9 --beta2 0.999 --eps 1e-8 --weight-decay 0.1 --clip 1.0)
shape() { [[ $1 == 124m ]] && echo "--micro-batch 4 --seq 256" || echo "--micro-batch 8 --seq 128"; }
for ((r = 1; r <= ROUNDS; r++)); do
  for m in $MODELS; do
    for dt in fp32 bf16; do
      echo "[round $r] $m $dt zerodp" >&2
      # shellcheck disable=SC2046
      "$Z" train --init "$OUT/$m.safetensors" --data "$OUT/shakespeare.bin" --steps "$STEPS" $(shape "$m") \
        --dtype "$dt" "${LR[@]}" --log-every 0 --metrics "$OUT/zerodp-$m-$dt-r$r.jsonl" >/dev/null 2>"$OUT/zerodp-$m-$dt-r$r.log"
      echo "[round $r] $m $dt pytorch" >&2
      # shellcheck disable=SC2046
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + RANDOM % 2000)) "$PY" bench/peers/peer_train.py single --dtype "$dt" \
        --init "$OUT/$m.safetensors" --data "$OUT/shakespeare.bin" --steps "$STEPS" $(shape "$m") --threads "$THREADS" \
        "${LR[@]}" >"$OUT/pytorch-$m-$dt-r$r.json" 2>"$OUT/pytorch-$m-$dt-r$r.log"
    done
  done
done
/usr/bin/python3 - "$OUT" "$WARMUP" "$THREADS" "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" \
  "$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)" \
  "$("$Z" info | sed -n 's/^  BLAS:.*); //p')" <<'PY' | tee "$OUT/one_rank.md"
import glob, json, os, statistics, sys
out, warm, threads, cpu, torch_version, blas = (sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5],
                                               sys.argv[6])
def times(path):
    if path.endswith(".jsonl"):
        steps = [json.loads(l) for l in open(path) if '"ms"' in l]
        steps = [s for s in steps if s.get("event", "step") == "step"]
        return [s["ms"] for s in steps][warm:], (steps[0]["loss"] if steps else None)
    j = json.load(open(path))
    return j["ms"][warm:], j["loss"][0]
names = {"124m": "GPT-2 small 124M, B4 T256", "l4": "GPT-2 L4 C256 H4 V256, B8 T128"}
tokens = {"124m": 4 * 256, "l4": 8 * 128}
print(f"One rank, {threads} threads, {cpu}; PyTorch {torch_version}; zerodp's fp32 GEMMs: OpenBLAS's {blas}. ms/step: median over the steps after "
      f"the first {warm} of every round, rounds pooled.\n")
print("| model | dtype | zerodp ms/step | PyTorch ms/step | zerodp tokens/s | PyTorch tokens/s | zerodp / PyTorch | loss at step 0 (zerodp, PyTorch) |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for m in ("124m", "l4"):
    for dt in ("fp32", "bf16"):
        z = [times(p) for p in sorted(glob.glob(f"{out}/zerodp-{m}-{dt}-r*.jsonl"))]
        t = [times(p) for p in sorted(glob.glob(f"{out}/pytorch-{m}-{dt}-r*.json"))]
        if not z or not t:
            continue
        zm = statistics.median([x for ms, _ in z for x in ms]); tm = statistics.median([x for ms, _ in t for x in ms])
        print(f"| {names[m]} | {dt} | {zm:.1f} | {tm:.1f} | {tokens[m] / zm * 1e3:.0f} | {tokens[m] / tm * 1e3:.0f} | "
              f"{tm / zm:.2f}x | {z[0][1]:.4f}, {t[0][1]:.4f} |")
PY
