#!/usr/bin/env bash
# W = 2, one thread a rank, GPT-2 L4 C256 B8 T128 per rank: how zerodp's step time and comm wait
# depend on where the communication worker thread runs and how it waits. For ZeRO stages 0 and 3:
#   mpirun --bind-to core (each rank's compute thread and MPI worker share one core) or none;
#   ZERODP_COMM_PROGRESS=block (a blocking MPI collective, OpenMPI busy-polls with sched_yield) or
#   poll (non-blocking collectives tested with sleeps in between);
#   --overlap-comm (stage 3 prefetches the next unit's all-gather) or --no-overlap-comm.
# Every variant runs REPS [3] times, interleaved; prints the median over all steps after the first 2.
# Uses the inputs of bench/train/run.sh. Environment: BUILD [build], OUT [runs/bench-train], STEPS [16].
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
BUILD=${BUILD:-build} OUT=${OUT:-runs/bench-train} STEPS=${STEPS:-16} REPS=${REPS:-3}
Z=$(cd "$BUILD" && pwd)/zerodp
data="$OUT/data"
[[ -f "$data/l4c256.safetensors" ]] || { echo "run bench/train/run.sh first (QUICK=1 is enough)" >&2; exit 2; }
dir="$OUT/w2-variants"
mkdir -p "$dir"
rm -f "$dir"/*.jsonl
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
variants=(
  "0 core block overlap" "0 core poll overlap" "0 none block overlap"
  "3 core block overlap" "3 core poll overlap" "3 core block no-overlap" "3 none block overlap"
)
for ((rep = 1; rep <= REPS; rep++)); do
  for v in "${variants[@]}"; do
    read -r stage bind progress overlap <<<"$v"
    tag="s$stage-$bind-$progress-$overlap"
    echo "[rep $rep] $tag" >&2
    env OMP_NUM_THREADS=1 ZERODP_COMM_PROGRESS="$progress" mpirun -n 2 --bind-to "$bind" \
      -x OMP_NUM_THREADS -x ZERODP_COMM_PROGRESS "$Z" train --init "$data/l4c256.safetensors" \
      --data "$data/shakespeare.bin" --steps "$STEPS" --micro-batch 8 --seq 128 --zero-stage "$stage" \
      --lr 1e-3 --weight-decay 0.1 --clip 1.0 --log-every 0 "--$overlap-comm" \
      --metrics "$dir/$tag-r$rep.jsonl" >"$dir/$tag-r$rep.log" 2>&1
  done
done
/usr/bin/python3 - "$dir" "${variants[@]}" <<'EOF'
import glob, json, statistics, sys
d = sys.argv[1]
print("| stage | bind | progress | overlap | ms/step | reps' medians | comm wait ms/step (median) |")
print("|---|---|---|---|---|---|---|")
for v in sys.argv[2:]:
    stage, bind, progress, overlap = v.split()
    ms, waits, reps = [], [], []
    for path in sorted(glob.glob(f"{d}/s{stage}-{bind}-{progress}-{overlap}-r*.jsonl")):
        steps = [j for j in map(json.loads, open(path)) if j.get("event") == "step"][2:]
        ms += [s["ms"] for s in steps]
        waits += [s["comm_wait_ms"] for s in steps]
        reps.append(statistics.median(s["ms"] for s in steps))
    print(f"| {stage} | {bind} | {progress} | {overlap} | {statistics.median(ms):.1f} | "
          f"{'/'.join(f'{r:.0f}' for r in reps)} | {statistics.median(waits):.1f} |")
EOF
