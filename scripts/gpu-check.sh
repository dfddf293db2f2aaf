#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: installs what is missing, builds zerodp with CUDA for that GPU's
# architecture, runs every GPU test (ctest label gpu: each kernel, the cuBLASLt GEMMs, the NCCL /
# host-staged communicator against the CPU implementation, whole training runs through the CLI), the
# micro-benchmarks, then trains GPT-2 124M in bf16 at stages 0-3 on the GPU (W=1, and W=2 on the same
# GPU over host staging) next to PyTorch on the same model and batch (bench/gpu/run.sh) and prints the
# table of tokens/s, MFU and peak memory (bench/gpu/report.py) for docs/benchmarks.md. Without a GPU
# it says so and exits 77 (skipped).
#
# Environment: BUILD [build-gpu]  the build directory;  ARCH  CUDA architectures (default: the
# GPU's own compute capability, e.g. 90 for H100/H200);  OUT [runs/gpu-check]  where figures go.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: SKIPPED: no NVIDIA GPU here (nvidia-smi -L failed)"
  exit 77
fi
nvidia-smi -L
BUILD=${BUILD:-build-gpu}
ARCH=${ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')}

bash scripts/setup.sh --no-build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERODP_CUDA=ON -DZERODP_BUILD_BENCH=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$ARCH"
cmake --build "$BUILD" -j "$(nproc)"
"$BUILD/zerodp" info

status=0
ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 900 || status=$?
# The CPU-side tests of the CUDA code (index and tiling arithmetic, the allocator, the GEMM layout
# mapping, the communicator's plan) run everywhere; run them here too.
ctest --test-dir "$BUILD" -R "test_cuda|Tiling|CachingAllocator|GemmLayout|GpuCommPlan|CudaRuntime" \
      --output-on-failure || status=$?

OUT=${OUT:-runs/gpu-check}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; date -u
  "$BUILD/bench/micro_gpu" --benchmark_min_time=0.2; } 2>&1 | tee "$OUT/micro_gpu.txt" || status=$?

# GPT-2 124M: zerodp at stages 0-3 (W=1, W=2) and PyTorch (eager, torch.compile); B, STEPS and the
# rest through bench/gpu/run.sh's environment.
Z="$BUILD/zerodp" OUT="$OUT/train" bash bench/gpu/run.sh || status=$?
python3 bench/gpu/report.py --check "$OUT/train" | tee "$OUT/train/report.md" || status=$?
echo "gpu-check: exit $status"
exit $status
