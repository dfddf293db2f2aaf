#!/usr/bin/env bash
# Training benchmarks, zerodp against PyTorch on the same cores, all in one run (issue 4 point 9,
# issue 5 point 13):
#   1. one rank, THREADS threads: GPT-2 L4 C256 H4 V256 at B8 T128 and GPT-2 small (124M, V50257) at
#      B1 T256: `zerodp train` against bench/train/torch_gpt2.py, tokens/s and GFLOP/s against the
#      cblas_sgemm peak measured in the same run (`zerodp bench-train sgemm`);
#   2. W = 2 ranks of one thread each, GPT-2 L4 C256 B8 T128 per rank: zerodp ZeRO stages 0-3 against
#      PyTorch DDP over gloo and DDP + ZeroRedundancyOptimizer, with zerodp's comm_wait_ms.
# Then prints the tables (bench/train/report.py) and rewrites the two training sections of
# docs/benchmarks/training.md (WRITE_DOCS=0 to leave it alone).
#
# Environment (defaults in brackets):
#   BUILD [build]             zerodp build directory (configured and `zerodp` built if missing)
#   OUT [runs/bench-train]    where the data, weights and results go
#   THREADS [nproc]           threads of the one-rank runs (OMP_NUM_THREADS and torch.set_num_threads)
#   STEPS [12] WARMUP [2]     steps of each L4 run, and how many of them are not timed
#   STEPS_124M [8] WARMUP_124M [2]
#   ROUNDS [2]                every run repeated this many times, interleaved; medians pool the rounds
#   BIND [core]               mpirun --bind-to (core or none); PyTorch ranks are pinned alike
#   TORCH_BLAS ["openmp pthread"]  OpenBLAS builds PyTorch runs on in the one-rank runs (Debian ships
#                             both; its default alternative is pthread); the W = 2 runs use the first
#   QUICK=1                   a short check of the scripts: 3 steps, 1 warm-up, 1 round
#   WAIT_LOAD [0]             first wait (polling every minute, at most WAIT_MAX [7200] s) until the
#                             1-minute load average is below this (0: start at once); the machine is
#                             shared, so take the figures when it is quiet
#   QUIET_BUSY [0.3]          before each measured run, wait (at most QUIET_MAX [600] s) until the CPUs
#                             were busy less than this fraction over 3 s (other people's work: nothing
#                             of ours runs then); the fraction found is recorded next to the run
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

BUILD=${BUILD:-build}
OUT=${OUT:-runs/bench-train}
THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-2}
STEPS_124M=${STEPS_124M:-8}
WARMUP_124M=${WARMUP_124M:-2}
ROUNDS=${ROUNDS:-2}
BIND=${BIND:-core}
TORCH_BLAS=${TORCH_BLAS:-openmp pthread}
WRITE_DOCS=${WRITE_DOCS:-1}
if [[ "${QUICK:-0}" == 1 ]]; then
  STEPS=3 WARMUP=1 STEPS_124M=2 WARMUP_124M=1 ROUNDS=1 WRITE_DOCS=${WRITE_DOCS_QUICK:-0}
fi
PY=/usr/bin/python3
# report.py imports zdptest (tests/pylib; torch_gpt2.py gets it through torch_env, so commands.txt names it).
export PYTHONPATH="$root/tests/pylib${PYTHONPATH:+:$PYTHONPATH}"
LR_FLAGS=(--lr 1e-3 --beta1 0.9 --beta2 0.999 --eps 1e-8 --weight-decay 0.1 --clip 1.0)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0

if [[ ! -x "$BUILD/zerodp" ]]; then
  [[ -f "$BUILD/CMakeCache.txt" ]] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" --target zerodp -j2
fi
Z=$(cd "$BUILD" && pwd)/zerodp

log() { printf '%s\n' "$*" >&2; }
load1() { cut -d' ' -f1 /proc/loadavg; }
if [[ "${WAIT_LOAD:-0}" != 0 ]]; then
  waited=0
  while awk -v l="$(load1)" -v t="$WAIT_LOAD" 'BEGIN { exit !(l >= t) }'; do
    if ((waited >= ${WAIT_MAX:-7200})); then
      log "load average still $(load1) after ${waited} s: measuring anyway (the tables show the load)"
      break
    fi
    log "load average $(load1) >= $WAIT_LOAD: waiting"
    sleep 60
    waited=$((waited + 60))
  done
fi

mkdir -p "$OUT/data" "$OUT/results"
res="$OUT/results"
rm -f "$res"/*.json "$res"/*.jsonl "$res"/*.txt

# The fraction of all CPUs busy over the next 3 s, from /proc/stat (idle and iowait count as idle).
cpu_busy() {
  local a b
  a=$(head -1 /proc/stat)
  sleep 3
  b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x); split(b, y); total = 0
    for (i = 2; i <= n; i++) total += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6])
    printf "%.2f", (total > 0) ? 1 - idle / total : 0 }'
}

# Waits until other people's work leaves the CPUs mostly idle (QUIET_BUSY), at most QUIET_MAX s;
# prints the busy fraction last seen.
quiet_gate() {
  local busy waited=0
  busy=$(cpu_busy)
  while awk -v b="$busy" -v t="${QUIET_BUSY:-0.3}" 'BEGIN { exit !(b >= t) }' && ((waited < ${QUIET_MAX:-600})); do
    log "  CPUs $busy busy before the run: waiting"
    sleep 10
    waited=$((waited + 13))
    busy=$(cpu_busy)
  done
  echo "$busy"
}

# CPU ticks: "busy total" of the whole machine (/proc/stat) and the ticks this shell's waited-for
# children (every measured run) have used (/proc/$$/stat cutime + cstime).
machine_ticks() { head -1 /proc/stat | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }'; }
children_ticks() { sed 's/.*) //' /proc/$$/stat | awk '{ print $14 + $15 }'; }

# Runs a measured command: waits for the CPUs to be quiet (quiet_gate), runs it, and measures what
# other people's work took of the machine meanwhile (the machine's busy ticks less ours). When that
# is more than RETRY_OTHERS [0.15] of the machine, the run is repeated, RETRIES [2] times at most
# (its output files are rewritten; text outputs keep every attempt, the last one counts). Records
# the command, the load average, the busy fraction before and the others' fraction during the run.
run() {
  local name=$1 busy attempt=0 m0 m1 c0 c1 others load; shift
  while :; do
    busy=$(quiet_gate)
    load=$(cut -d' ' -f1 /proc/loadavg)
    read -r -a m0 < <(machine_ticks)
    c0=$(children_ticks)
    "$@"
    read -r -a m1 < <(machine_ticks)
    c1=$(children_ticks)
    others=$(awk -v b="$((m1[0] - m0[0]))" -v t="$((m1[1] - m0[1]))" -v mine="$((c1 - c0))" \
      'BEGIN { o = (t > 0) ? (b - mine) / t : 0; if (o < 0) o = 0; printf "%.2f", o }')
    if awk -v o="$others" -v t="${RETRY_OTHERS:-0.15}" 'BEGIN { exit !(o > t) }' && ((attempt < ${RETRIES:-2})); then
      attempt=$((attempt + 1))
      log "  other work took $others of the machine during $name: measuring it again ($attempt)"
      continue
    fi
    break
  done
  printf '%s\t%s\n' "$name" "$*" | sed "s|$root/||g; s|$OUT/||g" >>"$res/commands.txt"
  printf '%s\t%s\t%s\t%s\n' "$name" "$load" "$busy" "$others" >>"$res/loads.txt"
}

torch_env() {  # the environment PyTorch runs in for OpenBLAS build $1 (and zdptest, named in commands.txt)
  case $1 in
    openmp) echo "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp PYTHONPATH=$root/tests/pylib" ;;
    pthread) echo "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread PYTHONPATH=$root/tests/pylib" ;;
    *) log "unknown TORCH_BLAS entry '$1' (openmp or pthread)"; exit 2 ;;
  esac
}

# ---- inputs -----------------------------------------------------------------------------------------
data="$OUT/data"
[[ -f "$data/shakespeare.bin" ]] || "$Z" tokenize --text data/tinyshakespeare.txt --out "$data/shakespeare.bin"
[[ -f "$data/l4c256.safetensors" ]] ||
  "$Z" init --out "$data/l4c256.safetensors" --layers 4 --heads 4 --embd 256 --vocab 256 --ctx 128 --seed 1337
[[ -f "$data/gpt2-124m.safetensors" ]] ||
  "$Z" init --out "$data/gpt2-124m.safetensors" --layers 12 --heads 12 --embd 768 --vocab 50257 --ctx 1024 --seed 1337

# ---- machine and versions ---------------------------------------------------------------------------
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
  echo "cores=$(nproc)"
  echo "zerodp=$("$Z" --version 2>/dev/null | head -1) ($(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet 2>/dev/null || echo ', uncommitted changes'))"
  echo "compiler=$("$Z" info | sed -n '1s/.*build, \(.*\))$/\1/p')"
  echo "blas=$("$Z" info | sed -n 's/^  BLAS:[[:space:]]*//p' | sed 's/ ([0-9]* threads)//')"
  echo "mpi=$("$Z" info | sed -n 's/^  MPI:[[:space:]]*//p')"
  echo "torch=$($PY -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  echo "python=$($PY -c 'import sys; print(sys.version.split()[0])')"
  echo "threads=$THREADS bind=$BIND rounds=$ROUNDS steps=$STEPS warmup=$WARMUP steps_124m=$STEPS_124M warmup_124m=$WARMUP_124M"
  echo "torch_blas=$TORCH_BLAS"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$res/env.txt"
cat "$res/env.txt" >&2

peak() {  # $1 = tag, $2 = threads
  run "peak-$1" env OMP_NUM_THREADS="$2" "$Z" bench-train sgemm --size 2048 --reps 8 >"$res/peak-$1.json"
}

one_rank() {  # $1 = config tag, $2 = round; the rest: steps, init, B, T
  local tag=$1 r=$2 steps=$3 init=$4 B=$5 T=$6 v
  log "[round $r] one rank, $tag: zerodp"
  run "one-$tag-zerodp" env OMP_NUM_THREADS="$THREADS" "$Z" train --init "$init" --data "$data/shakespeare.bin" \
    --steps "$steps" --micro-batch "$B" --seq "$T" "${LR_FLAGS[@]}" --log-every 0 \
    --metrics "$res/one-$tag-zerodp-r$r.jsonl" >"$res/one-$tag-zerodp-r$r.log" 2>&1
  for v in $TORCH_BLAS; do
    log "[round $r] one rank, $tag: pytorch ($v OpenBLAS)"
    run "one-$tag-torch-$v" env $(torch_env "$v") OMP_NUM_THREADS="$THREADS" $PY bench/train/torch_gpt2.py single \
      --init "$init" --data "$data/shakespeare.bin" --steps "$steps" --micro-batch "$B" --seq "$T" \
      --threads "$THREADS" "${LR_FLAGS[@]}" >"$res/one-$tag-torch-$v-r$r.json" 2>"$res/one-$tag-torch-$v-r$r.log"
  done
}

two_ranks() {  # $1 = round
  local r=$1 s mode pin=() v
  v=${TORCH_BLAS%% *}
  [[ "$BIND" == core ]] && pin=(--pin)
  for s in 0 1 2 3; do
    log "[round $r] W=2: zerodp stage $s"
    run "w2-zerodp-s$s" env OMP_NUM_THREADS=1 mpirun -n 2 --bind-to "$BIND" -x OMP_NUM_THREADS "$Z" train \
      --init "$data/l4c256.safetensors" --data "$data/shakespeare.bin" --steps "$STEPS" --micro-batch 8 --seq 128 \
      --zero-stage "$s" "${LR_FLAGS[@]}" --log-every 0 --metrics "$res/w2-zerodp-s$s-r$r.jsonl" \
      >"$res/w2-zerodp-s$s-r$r.log" 2>&1
  done
  for mode in ddp zero1; do
    log "[round $r] W=2: pytorch $mode"
    run "w2-torch-$mode" env $(torch_env "$v") OMP_NUM_THREADS=1 $PY bench/train/torch_gpt2.py "$mode" --world 2 \
      "${pin[@]}" --init "$data/l4c256.safetensors" --data "$data/shakespeare.bin" --steps "$STEPS" \
      --micro-batch 8 --seq 128 --threads 1 "${LR_FLAGS[@]}" >"$res/w2-torch-$mode-r$r.json" \
      2>"$res/w2-torch-$mode-r$r.log"
  done
}

for ((r = 1; r <= ROUNDS; r++)); do
  # The peak is the best over all of these (a busy moment only lowers one of them).
  peak "${THREADS}t-r$r" "$THREADS"
  peak "1t-r$r" 1
  one_rank l4c256 "$r" "$STEPS" "$data/l4c256.safetensors" 8 128
  one_rank gpt2-124m "$r" "$STEPS_124M" "$data/gpt2-124m.safetensors" 1 256
  two_ranks "$r"
done
peak "${THREADS}t-end" "$THREADS"
peak 1t-end 1
echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/env.txt"

docs=()
[[ "$WRITE_DOCS" == 1 ]] && docs=(--write-docs docs/benchmarks/training.md)
$PY bench/train/report.py "$res" --threads "$THREADS" --warmup "$WARMUP" --warmup-124m "$WARMUP_124M" "${docs[@]}"
