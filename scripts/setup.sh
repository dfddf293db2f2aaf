#!/usr/bin/env bash
# Installs every Debian package zerodp needs (idempotent), then configures and builds.
# Usage: scripts/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  # The multi-host tests: network namespaces (ip), traffic shaping (tc), hostnames of their own (unshare).
  iproute2 util-linux
  # The Slurm test (tests/cli/slurm_test.sh): a one-node cluster with munge authentication; srun's
  # mpi/pmix plugin (slurm-wlm-basic-plugins) loads libpmix from libpmix-dev.
  slurmctld slurmd slurm-client munge libpmix-dev procps
  libopenmpi-dev openmpi-bin
  libopenblas-dev libopenblas-openmp-dev libdnnl-dev liburing-dev
  # Tokenizers' pre-tokenization regexes (\p{L}, \p{N}, lookahead), with its JIT.
  libpcre2-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-pip python3-numpy python3-torch python3-matplotlib
  # The fuzz build (scripts/fuzz.sh): Clang 14 with libFuzzer and the sanitizer runtimes, its OpenMP,
  # and llvm-symbolizer for the reports' stacks.
  clang-14 libclang-rt-14-dev libomp-14-dev llvm-14
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# oneMKL's runtime from PyPI, for the 16-bit GEMMs (AMX / AVX-512 BF16); outside the source tree,
# shared by every clone (scripts/install_mkl.sh). ZERODP_NO_MKL=1 skips it: bf16/fp16 GEMMs then
# run on the fp32 fallback.
mkl_args=()
if [ "${ZERODP_NO_MKL:-0}" != 1 ]; then
  mkl_dir=$(bash scripts/install_mkl.sh)
  mkl_args=(-DZERODP_MKL_DIR="$mkl_dir/lib")
fi

if [ "${1:-}" != "--no-build" ]; then
  # ZERODP_CUDA=ON (as .ci/run sets) fails the configure when nvcc is missing instead of leaving the
  # CUDA backend out (AUTO, the default).
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERODP_CUDA="${ZERODP_CUDA:-AUTO}" "${mkl_args[@]}"
  cmake --build build -j "$(nproc)"
fi
