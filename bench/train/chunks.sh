#!/usr/bin/env bash
# Work in chunks of tokens against the whole micro-batch on the CPU: step time and the measured
# activation peak, one rank, one thread, B4 T128 (512 tokens a micro-step), fp32 and bf16.
#   KIND=loss [default]: the classifier in chunks (--loss-chunk N), on a Llama whose vocabulary dominates
#     (Llama 3's 128,256 tokens; L2 C256, 4 heads, 2 KV heads, I 688).
#   KIND=mlp: the MLPs in chunks (--mlp-chunk N), on a Llama whose MLPs dominate (L2 C256, 4 heads,
#     2 KV heads, I 2048, V 512), with and without --activation-checkpointing.
# Each setting runs REPS [3] times, interleaved; prints the median step time over the steps after the
# first 2 and the act peak, and the ratio to the unchunked run of the same dtype (and checkpointing), as a
# Markdown table.
# Environment: BUILD [build], OUT [runs/bench-<KIND>-chunk], STEPS [8], CHUNKS ["0 512 128 32"].
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
KIND=${KIND:-loss}
case "$KIND" in
  loss) dims=(--intermediate 688 --vocab 128256) checkpointing=("") ;;
  mlp) dims=(--intermediate 2048 --vocab 512) checkpointing=("" --activation-checkpointing) ;;
  *) echo "chunks.sh: KIND must be loss or mlp, not '$KIND'" >&2; exit 2 ;;
esac
BUILD=${BUILD:-build} OUT=${OUT:-runs/bench-$KIND-chunk} STEPS=${STEPS:-8} REPS=${REPS:-3}
CHUNKS=${CHUNKS:-"0 512 128 32"}
Z=$(cd "$BUILD" && pwd)/zerodp
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl
export OMP_NUM_THREADS=1
head -c 400000 data/tinyshakespeare.txt >"$OUT/text.txt"
"$Z" tokenize --text "$OUT/text.txt" --out "$OUT/tokens.bin" >/dev/null
[[ -d $OUT/model ]] || "$Z" init --arch llama --out "$OUT/model" --layers 2 --heads 4 --kv-heads 2 --embd 256 \
  "${dims[@]}" --ctx 128 --seed 1 >/dev/null
for ((rep = 1; rep <= REPS; rep++)); do
  for dtype in fp32 bf16; do
    for ckpt in "${checkpointing[@]}"; do
      for chunk in $CHUNKS; do
        echo "[rep $rep] $dtype --$KIND-chunk $chunk $ckpt" >&2
        "$Z" train --init "$OUT/model" --data "$OUT/tokens.bin" --steps "$STEPS" --micro-batch 4 --seq 128 \
          --dtype "$dtype" "--$KIND-chunk" "$chunk" ${ckpt:+"$ckpt"} --lr 1e-4 --log-every 0 \
          --metrics "$OUT/$dtype-${ckpt:+ckpt}-$chunk-$rep.jsonl" >/dev/null
      done
    done
  done
done
python3 - "$OUT" "$KIND" "$CHUNKS" <<'EOF'
import glob, json, statistics, sys
out, kind, chunks = sys.argv[1], sys.argv[2], sys.argv[3].split()
print(f"| dtype | checkpointing | --{kind}-chunk | step ms (median) | vs whole | act peak MB | vs whole |")
print("|---|---|---|---|---|---|---|")
for dtype in ("fp32", "bf16"):
    for ckpt in ("", "ckpt"):
        base = None
        for chunk in chunks:
            ms, act = [], []
            for path in glob.glob(f"{out}/{dtype}-{ckpt}-{chunk}-*.jsonl"):
                recs = [json.loads(line) for line in open(path)]
                ms += [r["ms"] for r in recs if r.get("event") == "step" and r["step"] >= 2]
                act += [r["peak_bytes"]["act"] for r in recs if r.get("event") == "memory"]
            if not ms:
                continue
            row = (statistics.median(ms), max(act) / 1e6)
            base = base or row
            print(f"| {dtype} | {'yes' if ckpt else 'no'} | {chunk} | {row[0]:.1f} | {row[0] / base[0]:.2f} | "
                  f"{row[1]:.1f} | {row[1] / base[1]:.2f} |")
EOF
