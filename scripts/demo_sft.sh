#!/usr/bin/env bash
# The fine-tuning job, end to end (the main demo's variant): a small Llama pretrained on Shakespeare
# (scripts/demo.sh ARCH=llama, run first when its output is missing) made a published-style model
# directory (config.json, safetensors, tokenizer.json and a tokenizer_config.json with a chat
# template); conversations from the plays in TRL's {"messages"} format (scripts/make_sft_data.py: a
# speech, and the reply that follows it), 5% held out; `zerodp tokenize --sft` renders them with the
# template and marks the assistant's tokens; training on 4 ranks at ZeRO stage 3 with examples packed
# into sequences and the held-out loss (over the assistant's tokens only) every 50 steps; then a reply
# sampled with the chat template, from the Hugging Face directory it wrote.
# Outputs go to runs/sft/. Environment: STEPS (default 300), RANKS (4), STAGE (3), DTYPE (fp32),
# PRETRAIN_STEPS (600: scripts/demo.sh's STEPS when it has to run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup/setup.sh --cli
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
STEPS=${STEPS:-300} RANKS=${RANKS:-4} STAGE=${STAGE:-3} DTYPE=${DTYPE:-fp32}
pretrained=runs/demo/final-llama
out=runs/sft
if [ ! -f "$pretrained/config.json" ]; then
  echo "=== pretrain first: ARCH=llama scripts/demo.sh"
  ARCH=llama STEPS=${PRETRAIN_STEPS:-600} RANKS=$RANKS bash scripts/demo.sh
fi

echo
echo "=== the model directory, with its tokenizer and chat template, and the conversations"
mkdir -p "$out"
rm -rf "$out/base"
cp -r "$pretrained" "$out/base"
python3 scripts/make_sft_data.py data/tinyshakespeare.txt "$out"
cp data/tokenizers/shakespeare-bpe-1024/tokenizer.json "$out/tokenizer_config.json" "$out/base/"
for part in train val; do
  build/zerodp tokenize --tokenizer "$out/base/tokenizer.json" --sft "$out/$part.jsonl" --out "$out/$part.bin"
done

echo
echo "=== fine-tune: $RANKS ranks, ZeRO stage $STAGE, $DTYPE, packed, held-out loss every 50 steps"
rm -rf "$out/tuned"
mpirun -n "$RANKS" --oversubscribe build/zerodp train --dtype "$DTYPE" \
  --init "$out/base" --data "$out/train.bin" --packing --val-data "$out/val.bin" --eval-every 50 \
  --steps "$STEPS" --micro-batch 4 --seq 128 --zero-stage "$STAGE" \
  --lr 1e-3 --lr-schedule wsd --warmup-steps $((STEPS / 20)) --decay-steps $((STEPS / 5)) --min-lr 1e-4 \
  --weight-decay 0.1 --beta2 0.95 --clip 1.0 \
  --log-every 50 --metrics "$out/metrics.jsonl" --out "$out/tuned"
python3 scripts/plot_metrics.py "$out/metrics.jsonl" --out "$out/loss.png" \
  --title "fine-tune: Llama L4 C128, $RANKS ranks, ZeRO-$STAGE, packed" && echo "loss curve: $out/loss.png"

echo
echo "=== a reply, sampled with the chat template from $out/tuned"
line="But soft, what light through yonder window breaks?"
echo "user: $line"
build/zerodp sample --model "$out/tuned" --tokenizer "$out/tuned/tokenizer.json" --chat "$line" --tokens 60 \
  --temperature 0.7 --top-k 40
