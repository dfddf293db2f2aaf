#!/usr/bin/env bash
# Two builds of zerodp side by side: the step time of `zerodp train` at W = 2 (one thread a rank, fp32),
# GPT-2 124M (L12 H12 C768 V50257) and a Llama of about its size (L12 H12 KV4 C768 I2048 V32000), B = 1,
# T = SEQ, at each ZeRO stage of STAGES, in paired rounds whose order turns every round, so that the
# machine's drift falls on both. Prints each round's medians (the steps after the first 3) and the median
# over the rounds of the per-round ratio NEW / BASE, and checks that both builds end on the same loss
# and gradient norm (a change meant to keep the bits).
#   BASE=/path/to/old/build bash bench/train/ab_step.sh
# Environment: BASE (a build folder holding zerodp; required), NEW [build], OUT [runs/bench-ab], MODELS
# [gpt2 llama], STAGES [1 2], ROUNDS [3], STEPS [14], SEQ [64].
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
: "${BASE:?set BASE to the build folder of the revision to compare against}"
NEW=${NEW:-build} OUT=${OUT:-runs/bench-ab} MODELS=${MODELS:-gpt2 llama} STAGES=${STAGES:-1 2}
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-14} SEQ=${SEQ:-64}
declare -A bin=([base]=$(cd "$BASE" && pwd)/zerodp [new]=$(cd "$NEW" && pwd)/zerodp)
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
declare -A shape=(
  [gpt2]="--layers 12 --heads 12 --embd 768 --vocab 50257 --ctx 1024"
  [llama]="--arch llama --layers 12 --heads 12 --kv-heads 4 --embd 768 --intermediate 2048 --vocab 32000 --ctx 1024"
)
declare -A vocab=([gpt2]=50257 [llama]=32000)
for model in $MODELS; do
  init=$OUT/$model-init
  [[ $model == gpt2 ]] && init=$init.safetensors
  # shellcheck disable=SC2086  # the shape is words
  [[ -e $init ]] || "${bin[new]}" init --out "$init" --seed 1 ${shape[$model]} >/dev/null
  [[ -f $OUT/$model-tokens.bin ]] || python3 -c "
import random, struct, sys
rng = random.Random(1); n = 2 * $SEQ * ($STEPS + 1) + 1
sys.stdout.buffer.write(struct.pack(f'<{n}H', *(rng.randrange(${vocab[$model]}) for _ in range(n))))" \
    >"$OUT/$model-tokens.bin"
done
rm -f "$OUT"/*.jsonl
for ((round = 1; round <= ROUNDS; round++)); do
  order="base new"
  ((round % 2 == 0)) && order="new base"
  for model in $MODELS; do
    init=$OUT/$model-init
    [[ $model == gpt2 ]] && init=$init.safetensors
    for stage in $STAGES; do
      for b in $order; do
        m=$OUT/$model-s$stage-$b-$round.jsonl
        timeout 1800 mpirun -n 2 --bind-to core -x OMP_NUM_THREADS "${bin[$b]}" train --init "$init" \
          --data "$OUT/$model-tokens.bin" --steps "$STEPS" --micro-batch 1 --seq "$SEQ" --zero-stage "$stage" \
          --lr 1e-4 --log-every 0 --metrics "$m" >"${m%.jsonl}.log" 2>&1 || { echo "failed: see ${m%.jsonl}.log" >&2; exit 1; }
      done
    done
  done
  echo "round $round done" >&2
done
python3 - "$OUT" "$ROUNDS" "$MODELS" "$STAGES" <<'EOF'
import json, statistics, sys
out, rounds, models, stages = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
def steps(f):
    return [j for j in map(json.loads, open(f)) if j.get("event") == "step"]
print("| model | stage | base ms (rounds) | new ms (rounds) | new / base per round | median |")
print("|---|---|---|---|---|---|")
for model in models:
    for stage in stages:
        b, n, r = [], [], []
        for k in range(1, rounds + 1):
            sb, sn = (steps(f"{out}/{model}-s{stage}-{x}-{k}.jsonl") for x in ("base", "new"))
            if (sb[-1]["loss"], sb[-1].get("grad_norm")) != (sn[-1]["loss"], sn[-1].get("grad_norm")):
                sys.exit(f"{model} stage {stage} round {k}: the builds end on different losses or norms")
            b.append(statistics.median(s["ms"] for s in sb[3:]))
            n.append(statistics.median(s["ms"] for s in sn[3:]))
            r.append(n[-1] / b[-1])
        print(f"| {model} | {stage} | {'/'.join(f'{x:.0f}' for x in b)} | {'/'.join(f'{x:.0f}' for x in n)} | "
              f"{'/'.join(f'{x:.3f}' for x in r)} | {statistics.median(r):.3f} |")
EOF
