#!/usr/bin/env bash
# The main job: set up (packages + build), then train a small GPT-2 (L4 C128, 0.84M parameters,
# byte-level) on the Shakespeare corpus with 4 local ranks at ZeRO stage 3 for a couple of minutes,
# print the memory each rank held against plain data parallelism, and sample from the result.
# Outputs go to runs/demo/. Environment: STEPS (default 600), RANKS (4), STAGE (3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
STEPS=${STEPS:-600} RANKS=${RANKS:-4} STAGE=${STAGE:-3}
out=runs/demo
mkdir -p "$out"
build/zerodp tokenize --text data/tinyshakespeare.txt --out "$out/shakespeare.bin"
build/zerodp init --out "$out/init.safetensors" --layers 4 --heads 4 --embd 128 --vocab 256 --ctx 128 --seed 1337
mpirun -n "$RANKS" --oversubscribe build/zerodp train \
  --init "$out/init.safetensors" --data "$out/shakespeare.bin" \
  --steps "$STEPS" --micro-batch 4 --seq 128 --zero-stage "$STAGE" \
  --lr 3e-3 --lr-schedule cosine --warmup-steps 30 --min-lr 3e-4 --weight-decay 0.1 --beta2 0.95 --clip 1.0 \
  --log-every 25 --metrics "$out/metrics.jsonl" --out "$out/final.safetensors"
echo
echo "=== a sample from the trained model ==="
build/zerodp sample --model "$out/final.safetensors" --prompt "ROMEO:" --tokens 400 --temperature 0.8 --top-k 40
