#!/usr/bin/env bash
# The main job, end to end: set up (the packages the CLI needs, then build it), tokenize the
# Shakespeare corpus with the repository's small BPE tokenizer (data/tokenizers/, a vocabulary of
# 1,024 made by scripts/make_tokenizer.py) into a validation shard and training shards, train a small
# GPT-2 (L4 C128, 0.9M parameters) on 4 local ranks at ZeRO stage 3 with the validation loss every
# 100 steps, print the memory each rank held against plain data parallelism, evaluate the result,
# draw the loss curve and print a decoded sample.
# Outputs go to runs/demo/. Environment: STEPS (default 600), RANKS (4), STAGE (3), DTYPE (fp32),
# ARCH (gpt2; llama: a Llama-family model of the same size, L4 C128 with 4 query and 2 key/value
# heads, untied head, written as a Hugging Face directory that `transformers` loads as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup/setup.sh --cli
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
STEPS=${STEPS:-600} RANKS=${RANKS:-4} STAGE=${STAGE:-3} ARCH=${ARCH:-gpt2} DTYPE=${DTYPE:-fp32}
tokenizer=data/tokenizers/shakespeare-bpe-1024/tokenizer.json
out=runs/demo
mkdir -p "$out"
rm -f "$out"/shakespeare_*.bin

echo "=== tokenize: $tokenizer"
build/zerodp tokenize --tokenizer "$tokenizer" --text data/tinyshakespeare.txt \
  --out-prefix "$out/shakespeare" --val-tokens 32768 --shard-tokens 131072
case "$ARCH" in
  gpt2) init="$out/init.safetensors" final="$out/final.safetensors" model="GPT-2 L4 C128"
        build/zerodp init --out "$init" --layers 4 --heads 4 --embd 128 --vocab 1024 --ctx 128 --seed 1337 ;;
  llama) init="$out/init-llama" final="$out/final-llama" model="Llama L4 C128 GQA 4/2"
         build/zerodp init --arch llama --out "$init" --layers 4 --heads 4 --kv-heads 2 --embd 128 --vocab 1024 \
           --ctx 128 --seed 1337 ;;
  *) echo "ARCH must be gpt2 or llama, got '$ARCH'" >&2; exit 2 ;;
esac

echo
echo "=== train $model: $RANKS ranks, ZeRO stage $STAGE, $DTYPE, validation loss every 100 steps"
mpirun -n "$RANKS" --oversubscribe build/zerodp train --dtype "$DTYPE" \
  --init "$init" --data "$out/shakespeare_train_*.bin" \
  --val-data "$out/shakespeare_val_000000.bin" --eval-every 100 --eval-tokens 32640 \
  --steps "$STEPS" --micro-batch 4 --seq 128 --zero-stage "$STAGE" \
  --lr 3e-3 --lr-schedule wsd --warmup-steps $((STEPS / 20)) --decay-steps $((STEPS / 5)) --min-lr 3e-4 \
  --weight-decay 0.1 --beta2 0.95 --clip 1.0 \
  --log-every 50 --metrics "$out/metrics.jsonl" --out "$final"

echo
echo "=== evaluate the trained model on the validation shard"
build/zerodp eval --model "$final" --data "$out/shakespeare_val_000000.bin" --tokens 32640 --seq 128
python3 scripts/plot_metrics.py "$out/metrics.jsonl" --out "$out/loss.png" --title "demo: $model, $RANKS ranks, ZeRO-$STAGE, $DTYPE" \
  && echo "loss curve: $out/loss.png"

echo
echo "=== a sample from the trained model"
build/zerodp sample --model "$final" --tokenizer "$tokenizer" --prompt "ROMEO:" --tokens 300 \
  --temperature 0.8 --top-k 40
