#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: installs what is missing, builds zerodp with CUDA for that GPU's
# architecture, runs every GPU test (ctest label gpu: each kernel, the cuBLASLt GEMMs, the NCCL /
# host-staged communicator against the CPU implementation, whole training runs through the CLI), the
# micro-benchmarks, then trains GPT-2 124M in bf16 at stages 0-3 on the GPU (W=1, and W=2 on the same
# GPU over host staging) next to PyTorch on the same model and batch (bench/gpu/run.sh) and prints the
# table of tokens/s, MFU and peak memory (bench/gpu/report.py) for docs/benchmarks/gpu.md. Without a GPU
# it says so and exits 77 (skipped).
#
# Usage: scripts/gpu/gpu-check.sh [PHASE...]   PHASE: build, test, bench, train, or all (the default).
#   build  install the dependencies, configure and build everything (every other phase does this
#          first: test builds everything, bench and train only their binaries; a no-op when BUILD is
#          up to date)
#   test   ctest -L gpu, and the CPU-side tests of the CUDA code
#   bench  bench/micro_gpu into OUT/micro_gpu.txt
#   train  bench/gpu/run.sh (GPT-2 124M, zerodp stages 0-3 at W=1,2, PyTorch eager and compiled) and
#          bench/gpu/report.py into OUT/train/report.md
#
# Environment: BUILD [build-gpu]  the build directory;  ARCH  CUDA architectures (default: the
# GPU's own compute capability, e.g. 90 for H100/H200);  OUT [runs/gpu-check]  where figures go;
# ZERODP_DEPS [.gpudeps when it exists]  Debian packages fetched by scripts/gpu/gpu-deps.sh, installed
# into ZERODP_DEPS_PREFIX [/opt/zerodp-deps] instead of running scripts/setup/setup.sh (which needs apt and
# the network);  PY_TORCH  a Python with torch and numpy for the PyTorch peer (default: the first of
# /opt/torch/.venv/bin/python3 and python3 that imports both; bench/gpu/run.sh otherwise makes a venv
# from PyPI);  TEST_REGEX  narrows the test phase to the gpu tests whose names match;  TEST_JOBS [4]
# gpu tests at once (one GPU has room for them);  ZERODP_COMMIT  the commit `zerodp --version` names
# where the tree has no .git.
#
# ---- On the device machine of this workplace (no network; each command at most 10 minutes) ----------
# 1. Here, once (with network): `bash scripts/gpu/gpu-deps.sh fetch` puts the .deb files of Open MPI,
#    OpenBLAS, fmt, spdlog, GoogleTest, Google Benchmark, nlohmann-json, CLI11 and liburing (27
#    packages, about 18 MiB) into .gpudeps/, which .gitignore ignores: it travels only when carried.
# 2. Each device call: `run` with carry [".gpudeps"] and a command that keeps within the 10 minutes
#    and brings the results back in one file even when cut short (C = `git rev-parse --short HEAD`
#    here, as .git does not travel):
#        set -o pipefail; mkdir -p runs; R=$OUT; export ZERODP_COMMIT=C; OUT=runs/gpu-check timeout -k 15 540 bash scripts/gpu/gpu-check.sh build test bench 2>&1 | tee runs/gpu-check.log; s=$?; tar -czf $R/gpu-check.tgz --ignore-failed-read --exclude=data runs/gpu-check runs/gpu-check.log build-gpu/Testing/Temporary; exit $s
#    (the tool's own $OUT is the folder whose files come back, at most 8 of them and 16 MiB each:
#    hence one tarball, without the GPT-2 weights in data/; gpu-check.sh's OUT names its figures'
#    folder and is set explicitly so that the two do not mix).
# 3. Plan on a fresh machine for every call: it is given back about 30 s after a call, and the build
#    (about 250 steps, minutes on its 16 cores) is too large to carry. So: one call `build test bench`,
#    then one `train` (which builds only the zerodp binary; each run's RUN_TIMEOUT is 150 s here, and
#    STEPS=20 keeps it short; STAGES / WORLDS / PEER_MODES of bench/gpu/run.sh split it further, each split into its own OUT,
#    as run.sh clears its OUT's earlier results).
# In a sandbox that refuses cross-process memory access (gVisor: `uname -r` says 4.4.0), Open MPI's
# shared-memory transport fails with "process_vm_readv" errors: this script then sets
# OMPI_MCA_btl_vader_single_copy_mechanism=none for every mpirun.
set -euo pipefail
cd "$(dirname "$0")/../.."

phases=("$@")
((${#phases[@]})) || phases=(all)
for p in "${phases[@]}"; do
  case $p in build | test | bench | train | all) ;; *)
    echo "gpu-check: unknown phase '$p' (build, test, bench, train, all)" >&2
    exit 2 ;;
  esac
done
wants() {  # wants PHASE: whether PHASE was asked for (all: every one)
  local p
  for p in "${phases[@]}"; do [[ $p == "$1" || $p == all ]] && return 0; done
  return 1
}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed)"
  exit 77
fi
nvidia-smi -L
BUILD=${BUILD:-build-gpu}
ARCH=${ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')}

# ---- dependencies --------------------------------------------------------------------------------------
# With the packages at hand (a machine without network), they are unpacked into a prefix of their own
# and its env.sh makes the build and every mpirun use it; otherwise apt installs them (setup.sh).
deps_cmake_args=()
deps=${ZERODP_DEPS:-}
[[ -z $deps && -f .gpudeps/MANIFEST ]] && deps=.gpudeps
if [[ -n $deps ]]; then
  prefix=${ZERODP_DEPS_PREFIX:-/opt/zerodp-deps}
  # install, then source: a failing install inside `source <(...)` would go unnoticed.
  bash scripts/gpu/gpu-deps.sh install "$deps" "$prefix"
  # shellcheck source=/dev/null
  source "$prefix/env.sh"
  # MPI's wrapper and OpenBLAS named outright (CMakeLists.txt would look in /usr first); no MKL
  # (ZERODP_NO_MKL=1: none was fetched, so the bf16 GEMMs on the CPU take the fp32 fallback).
  read -r -a deps_cmake_args <<<"$ZERODP_CMAKE_ARGS"
else
  bash scripts/setup/setup.sh --tests --no-build
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [[ $(uname -r) == 4.4.0 ]]; then  # gVisor's kernel: no process_vm_readv between the ranks
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  echo "gpu-check: gVisor sandbox: Open MPI's single-copy shared memory turned off"
fi

# The PyTorch peer: a Python that already has torch (the GPU image's own) rather than a venv from PyPI,
# which a machine without network cannot make.
if [[ -z ${PY_TORCH:-} ]]; then
  for py in /opt/torch/.venv/bin/python3 "$(command -v python3 || true)"; do
    if [[ -x $py ]] && "$py" -c 'import torch, numpy' >/dev/null 2>&1; then
      export PY_TORCH=$py
      break
    fi
  done
fi
echo "gpu-check: PyTorch peer: ${PY_TORCH:-none found (bench/gpu/run.sh will try a venv)}"

# NCCL: CMakeLists.txt finds it in the CUDA toolkit or the system's libraries. Where neither has it,
# the NCCL wheel next to PyTorch (nvidia-nccl) serves: its library is only libnccl.so.2, which
# find_library does not take by the name nccl, so it is named outright.
nccl_args=()
if ! compgen -G "/usr/local/cuda/lib64/libnccl.so" >/dev/null && ! compgen -G "/usr/local/cuda/lib/libnccl.so" >/dev/null &&
   ! compgen -G "/usr/lib/x86_64-linux-gnu/libnccl.so" >/dev/null && [[ -n ${PY_TORCH:-} ]]; then
  nccl_dir=$("$PY_TORCH" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  nccl_lib=$(compgen -G "$nccl_dir/lib/libnccl.so*" | head -1 || true)
  if [[ -n $nccl_dir && -n $nccl_lib && -f $nccl_dir/include/nccl.h ]]; then
    echo "gpu-check: NCCL from PyTorch's wheel: $nccl_lib"
    nccl_args=(-DZERODP_NCCL_LIBRARY="$nccl_lib" -DZERODP_NCCL_INCLUDE="$nccl_dir/include")
    LD_LIBRARY_PATH=${nccl_lib%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
  fi
fi

# ---- build (every phase: a no-op when up to date) ------------------------------------------------------
# nvcc named outright: CMakeLists.txt looks in /usr/local/cuda only when CUDA is AUTO, CMake on PATH.
nvcc=$(command -v nvcc || true)
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERODP_CUDA=ON -DZERODP_BUILD_BENCH=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$ARCH" ${nvcc:+-DCMAKE_CUDA_COMPILER="$nvcc"} "${deps_cmake_args[@]}" \
      "${nccl_args[@]}"
# Everything for the build and test phases; the other phases need only their binaries.
targets=()
if ! wants build && ! wants test; then
  targets=(--target zerodp)
  wants bench && targets+=(micro_gpu)
fi
cmake --build "$BUILD" -j "$(nproc)" "${targets[@]}"
"$BUILD/zerodp" info

status=0
OUT=${OUT:-runs/gpu-check}
mkdir -p "$OUT"

if wants test; then
  ctest --test-dir "$BUILD" -L gpu ${TEST_REGEX:+-R "$TEST_REGEX"} -j "${TEST_JOBS:-4}" --output-on-failure \
        --timeout 900 || status=$?
  # The CPU-side tests of the CUDA code (index and tiling arithmetic, the tensor-core attention's host
  # emulation, the allocator, the GEMM layout mapping, the communicator's plan) run everywhere; here
  # too, on this machine's compiler and libraries.
  if [[ -z ${TEST_REGEX:-} ]]; then
    "$BUILD/tests/test_cuda" || status=$?
    ctest --test-dir "$BUILD" -R "GpuCommPlan" --output-on-failure || status=$?
  fi
fi

if wants bench; then
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; date -u
    "$BUILD/bench/micro_gpu" --benchmark_min_time=0.2; } 2>&1 | tee "$OUT/micro_gpu.txt" || status=$?
fi

if wants train; then
  # GPT-2 124M: zerodp at stages 0-3 (W=1, W=2) and PyTorch (eager, torch.compile); B, STEPS and the
  # rest through bench/gpu/run.sh's environment.
  Z="$BUILD/zerodp" OUT="$OUT/train" RUN_TIMEOUT=${RUN_TIMEOUT:-150} bash bench/gpu/run.sh || status=$?
  PYTHONPATH="$PWD/tests/pylib${PYTHONPATH:+:$PYTHONPATH}" python3 bench/gpu/report.py --check "$OUT/train" | tee "$OUT/train/report.md" || status=$?
fi
echo "gpu-check: phases ${phases[*]}: exit $status"
exit $status
