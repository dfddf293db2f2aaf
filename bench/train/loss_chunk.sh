#!/usr/bin/env bash
# The classifier in chunks (--loss-chunk N) against the whole micro-batch on the CPU: step time and the
# measured activation peak of a Llama whose vocabulary dominates (Llama 3's 128,256 tokens; L2 C256,
# 4 heads, 2 KV heads, I 688), one rank, one thread, B4 T128 (512 tokens a micro-step), fp32 and bf16.
# Each setting runs REPS [3] times, interleaved; prints the median step time over the steps after the
# first 2 and the act peak, and the ratio to the unchunked run of the same dtype, as a Markdown table.
# Environment: BUILD [build], OUT [runs/bench-loss-chunk], STEPS [8], CHUNKS ["0 512 128 32"].
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build} OUT=${OUT:-runs/bench-loss-chunk} STEPS=${STEPS:-8} REPS=${REPS:-3}
CHUNKS=${CHUNKS:-"0 512 128 32"}
Z=$(cd "$BUILD" && pwd)/zerodp
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl
export OMP_NUM_THREADS=1
head -c 400000 data/tinyshakespeare.txt >"$OUT/text.txt"
"$Z" tokenize --text "$OUT/text.txt" --out "$OUT/tokens.bin" >/dev/null
[[ -d $OUT/model ]] || "$Z" init --arch llama --out "$OUT/model" --layers 2 --heads 4 --kv-heads 2 --embd 256 \
  --intermediate 688 --vocab 128256 --ctx 128 --seed 1 >/dev/null
for ((rep = 1; rep <= REPS; rep++)); do
  for dtype in fp32 bf16; do
    for chunk in $CHUNKS; do
      echo "[rep $rep] $dtype --loss-chunk $chunk" >&2
      "$Z" train --init "$OUT/model" --data "$OUT/tokens.bin" --steps "$STEPS" --micro-batch 4 --seq 128 \
        --dtype "$dtype" --loss-chunk "$chunk" --lr 1e-4 --log-every 0 \
        --metrics "$OUT/$dtype-$chunk-$rep.jsonl" >/dev/null
    done
  done
done
python3 - "$OUT" "$CHUNKS" <<'EOF'
import glob, json, statistics, sys
out, chunks = sys.argv[1], sys.argv[2].split()
print("| dtype | --loss-chunk | step ms (median) | vs whole | act peak MB | vs whole |")
print("|---|---|---|---|---|---|")
for dtype in ("fp32", "bf16"):
    base = None
    for chunk in chunks:
        ms, act = [], []
        for path in glob.glob(f"{out}/{dtype}-{chunk}-*.jsonl"):
            recs = [json.loads(line) for line in open(path)]
            ms += [r["ms"] for r in recs if r.get("event") == "step" and r["step"] >= 2]
            act += [r["peak_bytes"]["act"] for r in recs if r.get("event") == "memory"]
        row = (statistics.median(ms), max(act) / 1e6)
        base = base or row
        print(f"| {dtype} | {chunk} | {row[0]:.1f} | {row[0] / base[0]:.2f} | {row[1]:.1f} | {row[1] / base[1]:.2f} |")
EOF
