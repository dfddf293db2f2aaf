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
#        W (2), STEPS (8), WARMUP (3), LAYERS (6), EMBD (512), SUB_GROUP (elements, 500000), IO_MIB (1024)
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

for n in "${names[@]}"; do
  echo "== $n" >&2
  # shellcheck disable=SC2086
  mpirun -n "$W" --oversubscribe --timeout 1200 ${env[$n]:-} "$Z" "${base[@]}" ${extra[$n]} --metrics "$OUT/$n.jsonl" \
    >"$OUT/$n.out" 2>"$OUT/$n.err"
done
"$BUILD/bench/direct_io_bench" "$NVME_DIR" "$IO_MIB" 64 4 >"$OUT/direct_io.json"

python3 - "$OUT" "$WARMUP" "${names[@]}" <<'EOF' | tee "$OUT/report.md"
import json, os, re, statistics, sys
out, warmup, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def recs(n, ev):
    return [r for r in map(json.loads, open(os.path.join(out, f"{n}.jsonl"))) if r.get("event") == ev]
base = None
d = json.load(open(os.path.join(out, "direct_io.json")))
raw = d["raw_read_write_MBps"]
print("| mode | step ms (median) | vs none | device peak MiB | host peak MiB | nvme MiB | the updates' NVMe I/O (rank 0) |")
print("|---|---|---|---|---|---|---|")
for n in names:
    ms = statistics.median(r["ms"] for r in recs(n, "step")[warmup:])
    base = base or ms
    mem = [r for r in recs(n, "memory") if r["rank"] == 0][0]
    io = ""
    m = re.search(r"the updates moved (.+?) in ([0-9.]+) s \(([0-9.]+) MB/s\)", open(os.path.join(out, f"{n}.out")).read()
                  + open(os.path.join(out, f"{n}.err")).read())
    if m:
        io = f"{m.group(1)} in {m.group(2)} s: {m.group(3)} MB/s, {100 * float(m.group(3)) / raw:.0f}% of the raw disk"
    print(f"| {n} | {ms:.1f} | {ms / base:.2f}x | {mem['peak_bytes']['total'] / 2**20:.1f} | "
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
