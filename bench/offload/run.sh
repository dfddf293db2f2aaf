#!/usr/bin/env bash
# Offload benchmark (issue 13): in one run on one machine,
#   1. the step time of each offload mode against no offload (zerodp train, W ranks x 1 thread,
#      stage 3, the same model, data and batch; median of the steps after the warm-up), and the
#      NVMe optimizer offload's achieved bandwidth during its updates (the trainer's log line);
#   2. the disk's O_DIRECT bandwidth raw (pwrite/pread, and io_uring with 64 requests in flight)
#      next to zerodp's offload file driven in the optimizer's pattern (bench/offload/direct_io_bench.cpp),
#      on the file system of NVME_DIR.
# Prints a markdown report (and writes it to $OUT/report.md).
#
# usage: bench/offload/run.sh    env: BUILD (build), OUT (runs/bench-offload), NVME_DIR ($OUT/nvme),
#        W (2), STEPS (8), WARMUP (3), LAYERS (6), EMBD (512), SUB_GROUP (elements, 500000), IO_MIB (1024),
#        REPEAT (3: every mode runs this many times, the modes interleaved, so that the VM's and the disk's
#        drift falls on all of them alike; the report gives the median and the range)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-runs/bench-offload}
NVME_DIR=${NVME_DIR:-$OUT/nvme}
W=${W:-2}
STEPS=${STEPS:-8}
WARMUP=${WARMUP:-3}
LAYERS=${LAYERS:-6}
EMBD=${EMBD:-512}
SUB_GROUP=${SUB_GROUP:-500000}
IO_MIB=${IO_MIB:-1024}
REPEAT=${REPEAT:-3}
Z=$BUILD/zerodp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mkdir -p "$OUT" "$NVME_DIR"
[ -x "$Z" ] && [ -x "$BUILD/bench/direct_io_bench" ] || { echo "build first: cmake --build $BUILD" >&2; exit 2; }

head -c 2000000 data/tinyshakespeare.txt >"$OUT/text.txt"
$Z tokenize --text "$OUT/text.txt" --out "$OUT/tokens.bin" >/dev/null
$Z init --out "$OUT/init.safetensors" --layers "$LAYERS" --heads 8 --embd "$EMBD" --vocab 256 --ctx 128 --seed 1 >/dev/null

base=(train --init "$OUT/init.safetensors" --data "$OUT/tokens.bin" --micro-batch 4 --seq 128 --lr 1e-4
      --steps "$STEPS" --log-every 0 --zero-stage 3 --dtype bf16 --sub-group-size "$SUB_GROUP")
declare -a names=(none opt-cpu opt-cpu-inline opt-nvme-4 opt-nvme-1 param-cpu opt-cpu+param-cpu opt-nvme+param-cpu
                  opt-nvme+param-nvme)
declare -A extra=(
  [none]=""
  [opt-cpu]="--offload-optimizer cpu"
  [opt-cpu-inline]="--offload-optimizer cpu"
  [opt-nvme-4]="--offload-optimizer nvme --nvme-path $NVME_DIR"
  [opt-nvme-1]="--offload-optimizer nvme --nvme-path $NVME_DIR --config $OUT/one-slot.json"
  [param-cpu]="--offload-param cpu"
  [opt-cpu+param-cpu]="--offload-optimizer cpu --offload-param cpu"
  [opt-nvme+param-cpu]="--offload-optimizer nvme --nvme-path $NVME_DIR --offload-param cpu"
  [opt-nvme+param-nvme]="--offload-optimizer nvme --nvme-path $NVME_DIR --offload-param nvme"
)
echo '{"zero_optimization": {"offload_optimizer": {"buffer_count": 1}}}' >"$OUT/one-slot.json"
# opt-cpu-inline: the gradients down and the parameters up on the calling thread (no transfer thread),
# to show what the overlap of device/transfer_queue.h gives.
declare -A env=([opt-cpu-inline]="-x ZERODP_TRANSFER_THREAD=0")

for rep in $(seq 1 "$REPEAT"); do
  for n in "${names[@]}"; do
    echo "== $n ($rep/$REPEAT)" >&2
    # shellcheck disable=SC2086
    mpirun -n "$W" --oversubscribe --timeout 1200 ${env[$n]:-} "$Z" "${base[@]}" ${extra[$n]} \
      --metrics "$OUT/$n.$rep.jsonl" >"$OUT/$n.$rep.out" 2>"$OUT/$n.$rep.err"
  done
done
"$BUILD/bench/direct_io_bench" "$NVME_DIR" "$IO_MIB" 64 4 >"$OUT/direct_io.json"

python3 - "$OUT" "$WARMUP" "$REPEAT" "${names[@]}" <<'EOF' | tee "$OUT/report.md"
import json, os, re, statistics, sys
out, warmup, repeat, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def recs(n, rep, ev):
    return [r for r in map(json.loads, open(os.path.join(out, f"{n}.{rep}.jsonl"))) if r.get("event") == ev]
reps = range(1, repeat + 1)
d = json.load(open(os.path.join(out, "direct_io.json")))
raw = d["raw_read_write_MBps"]
# Each run's median step; a mode's figure is the median over its runs, its ratio the median of the
# per-round ratios against that round's run without offload.
step = {n: [statistics.median(r["ms"] for r in recs(n, rep, "step")[warmup:]) for rep in reps] for n in names}
print(f"Medians over {repeat} runs of each mode (range in brackets).")
print()
print("| mode | step ms | vs none | device peak MiB | host peak MiB | nvme MiB | the updates' NVMe I/O (rank 0): MB/s, % of the raw disk |")
print("|---|---|---|---|---|---|---|")
for n in names:
    ratios = [a / b for a, b in zip(step[n], step[names[0]])]
    mem = [r for r in recs(n, 1, "memory") if r["rank"] == 0][0]
    rates = []
    for rep in reps:
        text = open(os.path.join(out, f"{n}.{rep}.out")).read() + open(os.path.join(out, f"{n}.{rep}.err")).read()
        m = re.search(r"the updates moved (.+?) in ([0-9.]+) s \(([0-9.]+) MB/s\)", text)
        if m:
            rates.append(float(m.group(3)))
    io = ""
    if rates:
        io = (f"{statistics.median(rates):.0f} [{min(rates):.0f}-{max(rates):.0f}], "
              f"{100 * statistics.median(rates) / raw:.0f}% [{100 * min(rates) / raw:.0f}-{100 * max(rates) / raw:.0f}%]")
    print(f"| {n} | {statistics.median(step[n]):.1f} [{min(step[n]):.0f}-{max(step[n]):.0f}] | "
          f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] | {mem['peak_bytes']['total'] / 2**20:.1f} | "
          f"{mem['host_bytes']['total'] / 2**20:.1f} | {mem['nvme_bytes']['total'] / 2**20:.1f} | {io} |")
print()
print(f"Disk under {out} (O_DIRECT, best of 3 passes of {d['bytes_per_pass'] >> 20} MiB):")
print()
print("| path | write MB/s | read MB/s |")
print("|---|---|---|")
print(f"| raw pwrite/pread, 8 MiB blocks | {d['raw_sync_write_MBps']:.0f} | {d['raw_sync_read_MBps']:.0f} |")
print(f"| raw io_uring, 64 x 1 MiB in flight | {d['raw_uring_write_MBps']:.0f} | {d['raw_uring_read_MBps']:.0f} |")
print()
print(f"zerodp's offload file in the optimizer's pattern ({d['slots']} slots of {d['sub_group_bytes'] >> 20} MiB, "
      f"read and written back): {d['zerodp_pattern_MBps']:.0f} MB/s against {d['raw_read_write_MBps']:.0f} MB/s "
      f"for the best raw write and read of the same bytes, one after the other: {100 * d['fraction']:.0f}% "
      f"(above 100% where the disk serves reads and writes in flight together). \"% of the raw disk\" above "
      f"holds each run's update I/O (bytes read and written during its offloaded updates over their time, "
      f"AdamW included) against that same {raw:.0f} MB/s.")
EOF
