#!/usr/bin/env bash
# On the lent GPU machine, in one device call: unpacks the build that scripts/gpu/pack-build.sh packed
# here and the Debian packages of scripts/gpu/gpu-deps.sh, then runs, each phase within a share of one
# deadline so that the call ends in time and brings back what it has:
#   info    nvidia-smi, `zerodp info`, any library the binaries cannot find
#   unit    the GPU test binaries (each kernel, cuBLASLt's GEMMs, the models against the CPU device),
#           three at a time
#   bench   GPT-2 124M bf16 T=1024 on the one GPU: zerodp at the stages of $BENCH_STAGES (W=1) beside
#           PyTorch eager and torch.compile (bench/gpu/run.sh)
#   train   the NCCL / host-staged communicator test (2 ranks) and the whole-run tests through the CLI
#           (tests/cuda_gpu/train_gpu_tests.py: stages, resume, offload, sgd, refusals)
#   profile the GPU time of each kernel-table entry in 10 GPT-2 124M steps (ZERODP_GPU_PROFILE), with
#           the fused classifier and then the unfused one (ZERODP_GPU_CLASSIFIER)
#   llama   the Llama 3.2 1B shape, bf16 T=2048 B=$LLAMA_B [4]: zerodp at the stages of $LLAMA_STAGES
#           ["0 3"] beside PyTorch eager and torch.compile (bench/gpu/run.sh ARCH=llama; about 4 minutes)
#   w2      GPT-2 124M at W = 2 on the one GPU (host-staged collectives), stages 0 and 3
#   micro   bench/micro_gpu
# The same as ctest -L gpu runs, without ctest: the CTest files name this machine's paths.
#
# Device call (carry [".gpudeps", ".gpubin"]):
#   bash scripts/gpu/device-run.sh [PHASE...]       PHASE: info unit bench train profile llama w2 micro
#                                                 (default: all but profile, llama and w2, in that order)
# Environment: DEADLINE_S [500] seconds from the start for everything; RESULTS [$OUT] where
# device.tgz (logs and figures) goes; BENCH_STAGES ["0 3"]; BENCH_STEPS [20]; UNIT_REGEX (a grep -E
# pattern narrowing the unit binaries); TRAIN_CASES ["stages resume offload sgd refusals llama"].
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
t_start=$(date +%s)
DEADLINE_S=${DEADLINE_S:-500}
RESULTS=${RESULTS:-${OUT:-/tmp/device-results}}
logs=runs/device
mkdir -p "$logs" "$RESULTS"
phases=("$@")
((${#phases[@]})) || phases=(info unit bench train micro)
left() { echo $((t_start + DEADLINE_S - $(date +%s))); }
note() { printf '[device-run %4ss] %s\n' "$(($(date +%s) - t_start))" "$*"; }
pack() { tar -czf "$RESULTS/device.tgz" --exclude='data' --exclude='*.safetensors' --exclude='tokens.bin' "$logs" runs/gpu-check 2>/dev/null || true; }
trap pack EXIT

# ---- unpack: binaries, libraries, Open MPI and the rest -------------------------------------------------
[[ -f .gpubin/build.tar.xz ]] || { note "no .gpubin/build.tar.xz: run scripts/gpu/pack-build.sh here and carry .gpubin"; exit 2; }
# Here, build/ is a real build (its CMakeCache.txt): unpacking over it would put the packed, older
# binaries in place of the ones ninja made.
[[ -f build/CMakeCache.txt ]] && { note "build/ is a build directory here: device-run.sh is for the GPU machine"; exit 2; }
tar -xJf .gpubin/build.tar.xz
mkdir -p build/.devlib && tar -xJf .gpubin/lib.tar.xz -C build/.devlib --strip-components=1
export ZERODP_COMMIT=$(cat build/COMMIT)
bash scripts/gpu/gpu-deps.sh install .gpudeps /opt/zerodp-deps >"$logs/deps.log" 2>&1 || { note "gpu-deps install failed"; tail -5 "$logs/deps.log"; }
# shellcheck source=/dev/null
source /opt/zerodp-deps/env.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
[[ $(uname -r) == 4.4.0 ]] && export OMPI_MCA_btl_vader_single_copy_mechanism=none
# CUDA's libraries: the toolkit's, else the ones next to PyTorch (nvidia-* wheels: NCCL is there only).
PY=$(command -v /opt/torch/.venv/bin/python3 || command -v python3)
libdirs=$root/build/.devlib
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && libdirs+=:$d
done
while read -r d; do [[ -n $d ]] && libdirs+=:$d; done < <("$PY" - <<'PYEOF' 2>/dev/null
import glob, os, nvidia
for base in nvidia.__path__:
    for lib in sorted(glob.glob(os.path.join(base, "*", "lib"))) + sorted(glob.glob(os.path.join(base, "cu13", "lib"))):
        if glob.glob(os.path.join(lib, "lib*.so*")): print(lib)
PYEOF
)
export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$root/tests/pylib${PYTHONPATH:+:$PYTHONPATH}
export PY_TORCH=$PY
Z=$root/build/zerodp

wants() { local p; for p in "${phases[@]}"; do [[ $p == "$1" ]] && return 0; done; return 1; }
# cap S: the lesser of S seconds and what is left before the deadline (at least 5)
cap() { local l; l=$(left); ((l < $1)) && echo $((l > 5 ? l : 5)) || echo "$1"; }

if wants info; then
  note "phase info"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_cap --format=csv | tee "$logs/smi.txt"
  uname -r
  for b in build/zerodp build/tests/cuda_gpu/gpu_test_gemm; do
    ldd "$b" | grep -i 'not found' && note "$b: libraries not found (above)"
  done
  "$Z" info 2>&1 | tee "$logs/info.txt"
fi

if wants unit; then
  note "phase unit ($(left) s left)"
  budget=$(cap 150)
  ls build/tests/cuda_gpu/gpu_test_* | grep -E "${UNIT_REGEX:-.}" |
    xargs -P 3 -I{} bash -c 'n=$(basename {}); s=$(date +%s); timeout -k 5 '"$budget"' {} >'"$logs"'/$n.log 2>&1; rc=$?; echo "$n rc=$rc $(( $(date +%s) - s ))s" | tee -a '"$logs"'/unit.txt'
  for f in "$logs"/gpu_test_*.log; do
    n=$(basename "$f" .log)
    grep -q "rc=0 " <(grep "^$n " "$logs/unit.txt") && continue
    echo "---- $n (last lines)"; grep -E '\[  FAILED  \]|Failure|error|Error|Expected|Which is|SKIPPED' "$f" | head -25; tail -4 "$f"
  done
fi

if wants bench; then
  note "phase bench ($(left) s left)"
  Z=$Z OUT=runs/gpu-check/train RUN_TIMEOUT=$(cap 100) STEPS=${BENCH_STEPS:-20} WARMUP=5 WORLDS=1 \
    STAGES="${BENCH_STAGES:-0 3}" PEER_MODES="eager compile" timeout -k 5 "$(cap 260)" bash bench/gpu/run.sh \
    >"$logs/bench.log" 2>&1
  echo "bench rc=$?"
  tail -5 "$logs/bench.log"; cat runs/gpu-check/train/status.txt 2>/dev/null
  for f in runs/gpu-check/train/*.jsonl; do [[ -f $f ]] && { echo "$f"; tail -2 "$f" | cut -c1-400; }; done
  for f in runs/gpu-check/train/torch-*.json; do [[ -s $f ]] && { echo "$f"; cut -c1-600 "$f"; }; done
  "$PY" bench/gpu/report.py runs/gpu-check/train 2>&1 | tail -30
fi

if wants train; then
  note "phase train ($(left) s left)"
  s=$(date +%s)
  timeout -k 5 "$(cap 90)" mpiexec -n 2 --oversubscribe --timeout 80 -x LD_LIBRARY_PATH build/tests/cuda_gpu/gpu_mpi_test_nccl \
    >"$logs/gpu_mpi_test_nccl.log" 2>&1
  echo "gpu_mpi_test_nccl rc=$? $(($(date +%s) - s))s" | tee -a "$logs/train.txt"
  grep -E '\[  FAILED  \]|PASSED' "$logs/gpu_mpi_test_nccl.log" | head
  for c in ${TRAIN_CASES:-stages resume offload sgd refusals llama}; do
    (($(left) < 15)) && { echo "train $c: not run (deadline)" | tee -a "$logs/train.txt"; continue; }
    s=$(date +%s)
    OMP_NUM_THREADS=1 timeout -k 5 "$(cap 200)" "$PY" tests/cuda_gpu/train_gpu_tests.py "$Z" "$c" >"$logs/train_$c.log" 2>&1
    echo "train $c rc=$? $(($(date +%s) - s))s" | tee -a "$logs/train.txt"
    grep -iE 'fail|error|mismatch|differ' "$logs/train_$c.log" | head -12
    tail -3 "$logs/train_$c.log"
  done
fi

if wants profile; then
  # The GPU time of each kernel-table entry in a GPT-2 124M run at stage 0 ($ZERODP_GPU_PROFILE: the
  # table is logged when the run ends); Nsight Compute replays every kernel, far too slow for a lease.
  note "phase profile ($(left) s left)"
  d=runs/gpu-check/profile
  mkdir -p "$d"
  "$Z" init --out "$d/init.safetensors" --layers 12 --heads 12 --embd 768 --vocab 50304 --ctx 1024 \
    --seed 1337 >/dev/null 2>&1
  "$Z" tokenize --text data/tinyshakespeare.txt --out "$d/tokens.bin" >/dev/null 2>&1
  # The classifier both ways in one run (ZERODP_GPU_CLASSIFIER: the same bits, the time apart).
  for cls in ${PROFILE_CLASSIFIERS:-fused unfused}; do
    ZERODP_GPU_CLASSIFIER=$cls ZERODP_GPU_PROFILE=1 timeout -k 5 "$(cap 90)" "$Z" train --init "$d/init.safetensors" \
      --data "$d/tokens.bin" --steps ${PROFILE_STEPS:-10} --micro-batch 8 --seq 1024 --zero-stage ${PROFILE_STAGE:-0} \
      --device cuda --dtype bf16 --lr 1e-3 --weight-decay 0.1 --clip 1.0 --metrics "$logs/profile-$cls.jsonl" \
      >"$logs/profile-$cls.log" 2>&1
    echo "profile $cls rc=$?"
    tail -1 "$logs/profile-$cls.jsonl" 2>/dev/null | cut -c1-300
    sed -n '/GPU time by entry/,$p' "$logs/profile-$cls.log" | head -${PROFILE_LINES:-40}
  done
fi

if wants llama; then
  note "phase llama ($(left) s left)"
  Z=$Z ARCH=llama OUT=runs/gpu-check/train-llama RUN_TIMEOUT=$(cap 150) B=${LLAMA_B:-4} STEPS=${LLAMA_STEPS:-12} \
    WARMUP=4 WORLDS=1 STAGES="${LLAMA_STAGES:-0 3}" PEER_MODES="eager compile" timeout -k 5 "$(cap 420)" \
    bash bench/gpu/run.sh >"$logs/bench-llama.log" 2>&1
  echo "bench llama rc=$?"
  tail -3 "$logs/bench-llama.log"; cat runs/gpu-check/train-llama/status.txt 2>/dev/null
  "$PY" bench/gpu/report.py runs/gpu-check/train-llama 2>&1 | tail -16
fi

if wants w2; then
  # W = 2 on the one GPU (host-staged collectives), stages 0 and 3.
  note "phase w2 ($(left) s left)"
  Z=$Z OUT=runs/gpu-check/train-w2 RUN_TIMEOUT=$(cap 60) STEPS=${BENCH_STEPS:-20} WARMUP=5 WORLDS=2 \
    STAGES="0 3" PEER_MODES="" timeout -k 5 "$(cap 130)" bash bench/gpu/run.sh >"$logs/bench-w2.log" 2>&1
  echo "bench w2 rc=$?"; cat runs/gpu-check/train-w2/status.txt 2>/dev/null
fi

if wants micro && (($(left) > 30)); then
  note "phase micro ($(left) s left)"
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
    timeout -k 5 "$(cap 120)" build/bench/micro_gpu --benchmark_min_time=0.05s; } >"$logs/micro_gpu.txt" 2>&1
  tail -40 "$logs/micro_gpu.txt"
fi
note "done"
