#!/usr/bin/env bash
# A/B of two zerodp builds' collectives (e.g. MPI's own reductions before commit 060422a against the
# rank-ordered ones after), interleaved round by round so that the machine's load hits both alike.
# Prints a markdown table of the median time per collective and size over the rounds.
#
# usage: bench/comm/reduction_ab.sh OLD_ZERODP NEW_ZERODP      environment: RANKS ["2 4"], DTYPES
#        ["fp32 bf16"], ROUNDS [3], MIN [64KiB], MAX [64MiB], STEP [4], ITERS [10]
set -euo pipefail
old=$1 new=$2
RANKS=${RANKS:-"2 4"} DTYPES=${DTYPES:-"fp32 bf16"} ROUNDS=${ROUNDS:-3}
MIN=${MIN:-64KiB} MAX=${MAX:-64MiB} STEP=${STEP:-4} ITERS=${ITERS:-10}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
out=$(mktemp -d)
for ((r = 1; r <= ROUNDS; r++)); do
  for w in $RANKS; do
    for dt in $DTYPES; do
      for side in old new; do
        bin=$old; [[ $side == new ]] && bin=$new
        timeout 600 mpirun -n "$w" --oversubscribe -x OMP_NUM_THREADS "$bin" bench comm --json --progress block \
          --min-bytes "$MIN" --max-bytes "$MAX" --step "$STEP" --iters "$ITERS" --dtype "$dt" \
          >"$out/$side-w$w-$dt-r$r.json" 2>/dev/null
      done
    done
  done
done
python3 - "$out" "$RANKS" "$DTYPES" <<'PY'
import glob, json, statistics, sys
out, ranks, dtypes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(side, w, dt):
    times = {}
    for path in glob.glob(f"{out}/{side}-w{w}-{dt}-r*.json"):
        doc = json.loads(open(path).read())
        for row in doc["collectives"]:
            times.setdefault((row["collective"], row["bytes"]), []).append(row["time_us"])
    return {k: statistics.median(v) for k, v in times.items()}
print("| W | dtype | collective | buffer | MPI's reduction µs | ordered µs | ordered / MPI |")
print("|---:|---|---|---:|---:|---:|---:|")
for w in ranks:
    for dt in dtypes:
        a, b = load("old", w, dt), load("new", w, dt)
        for key in sorted(a, key=lambda k: (k[0], k[1])):
            if key[0] == "all_gather" or key not in b:
                continue
            kib = key[1] // 1024
            size = f"{kib // 1024} MiB" if kib >= 1024 else f"{kib} KiB"
            print(f"| {w} | {dt} | {key[0]} | {size} | {a[key]:.0f} | {b[key]:.0f} | {b[key] / a[key]:.2f} |")
PY
rm -rf "$out"
