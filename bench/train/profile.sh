#!/usr/bin/env bash
# Where a training step's CPU time goes: `perf record` around `zerodp train` (one rank, or every rank
# of `mpirun -n W`), the samples grouped by bench/train/perf_groups.py (sgemm, AdamW, grad norm,
# zero-fill, elementwise kernels, MPI, OpenMP runtime, kernel time). Uses the inputs run.sh made.
#
#   bench/train/profile.sh one l4c256        [THREADS=2]  one rank
#   bench/train/profile.sh one gpt2-124m
#   bench/train/profile.sh w2 l4c256 STAGE   two ranks of one thread, ZeRO stage STAGE
# Environment: BUILD [build], OUT [runs/bench-train], STEPS [20], BIND [core], DELAY_MS [perf -D: skip
# start-up; default 1500 for l4c256, 6000 for gpt2-124m].
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
mode=${1:?one or w2} model=${2:?l4c256 or gpt2-124m} stage=${3:-0}
BUILD=${BUILD:-build} OUT=${OUT:-runs/bench-train} STEPS=${STEPS:-20} BIND=${BIND:-core} THREADS=${THREADS:-$(nproc)}
Z=$(cd "$BUILD" && pwd)/zerodp
data="$OUT/data"
command -v perf >/dev/null || { echo "perf is not installed; try valgrind --tool=callgrind on a short run" >&2; exit 2; }
[[ -f "$data/$model.safetensors" ]] || { echo "run bench/train/run.sh first (QUICK=1 is enough) to make $data/$model.safetensors" >&2; exit 2; }
case $model in
  l4c256) shape=(--micro-batch 8 --seq 128); delay=${DELAY_MS:-1500} ;;
  gpt2-124m) shape=(--micro-batch 1 --seq 256); delay=${DELAY_MS:-6000} ;;
  *) echo "unknown model $model" >&2; exit 2 ;;
esac
prof="$OUT/profile"
mkdir -p "$prof"
args=(train --init "$data/$model.safetensors" --data "$data/shakespeare.bin" --steps "$STEPS" "${shape[@]}"
      --lr 1e-3 --weight-decay 0.1 --clip 1.0 --log-every 0)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ $mode == one ]]; then
  tag="one-$model-${THREADS}t"
  OMP_NUM_THREADS=$THREADS perf record -q -D "$delay" -o "$prof/$tag.perf" "$Z" "${args[@]}" \
    --metrics "$prof/$tag.jsonl" >"$prof/$tag.log" 2>&1
  files=("$prof/$tag.perf")
else
  tag="w2-$model-s$stage"
  OMP_NUM_THREADS=1 mpirun -n 2 --bind-to "$BIND" -x OMP_NUM_THREADS bash -c \
    'exec perf record -q -D "$0" -o "$1.rank$OMPI_COMM_WORLD_RANK.perf" "${@:2}"' "$delay" "$prof/$tag" \
    "$Z" "${args[@]}" --zero-stage "$stage" --metrics "$prof/$tag.jsonl" >"$prof/$tag.log" 2>&1
  files=("$prof/$tag.rank0.perf" "$prof/$tag.rank1.perf")
fi
/usr/bin/python3 - "$prof/$tag.jsonl" <<'EOF'
import json, statistics, sys
steps = [j for j in map(json.loads, open(sys.argv[1])) if j.get("event") == "step"][2:]
print(f"steps after 2 warm-up: median {statistics.median(s['ms'] for s in steps):.1f} ms, "
      f"comm wait median {statistics.median(s.get('comm_wait_ms', 0) for s in steps):.1f} ms (rank 0)")
EOF
for f in "${files[@]}"; do
  echo "== $f"
  perf report -i "$f" --no-children --sort dso,symbol 2>/dev/null | grep -v '^#' | /usr/bin/python3 bench/train/perf_groups.py
done
