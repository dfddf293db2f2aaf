#!/usr/bin/env bash
# Installs every Debian package zerodp needs (idempotent), then configures and builds.
# Usage: scripts/setup/setup.sh [--no-build] [--tests] [--cli]
#   --tests   also the packages of the tests, benchmarks and fuzzing, the tokenizer tests' venv and the
#             transformers reference's venv (tests/reference's Llama-family tests)
#   --cli     build the zerodp command only, without the tests and benchmarks (what the demo needs)
set -euo pipefail
cd "$(dirname "$0")/../.."

# What building zerodp and running it (the demo) need.
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libopenmpi-dev openmpi-bin
  libopenblas-dev libopenblas-openmp-dev libdnnl-dev liburing-dev
  # Tokenizers' pre-tokenization regexes (\p{L}, \p{N}, lookahead), with its JIT.
  libpcre2-dev
  # Tokenizers' Unicode normalizers (NFC, NFKC).
  libutf8proc-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  # The demo's loss curve (scripts/plot_metrics.py).
  python3 python3-matplotlib
)
# What the tests, benchmarks and fuzzing add (--tests).
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev
  # The multi-host tests: network namespaces (ip), traffic shaping (tc), hostnames of their own (unshare).
  iproute2 util-linux
  # The Slurm test (tests/cli/slurm_test.sh): a one-node cluster with munge authentication; srun's
  # mpi/pmix plugin (slurm-wlm-basic-plugins) loads libpmix from libpmix-dev.
  slurmctld slurmd slurm-client munge libpmix-dev procps
  # The PyTorch reference (tests/reference) and the tokenizer tests' venv (tokenizers, tiktoken from PyPI).
  python3-pip python3-numpy python3-torch python3-venv
  # pytest, to run the Python tests one case at a time (pytest.ini; ctest runs them all).
  python3-pytest
  # The portable build's tests (tests/portable): a CPU without AVX-512 (and one below x86-64-v3) under
  # QEMU's user-mode emulation.
  qemu-user
  # The sanitized build and its fuzz targets (scripts/test_sanitized.sh, scripts/fuzz.sh): Clang 14 with
  # libFuzzer and the sanitizer runtimes, its OpenMP, and llvm-symbolizer for the reports' stacks.
  clang-14 libclang-rt-14-dev libomp-14-dev llvm-14
)

build=1 tests=0 cli_only=0
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --tests) tests=1 ;;
    --cli) cli_only=1 ;;
    *) echo "setup.sh: unknown argument '$arg' (expected --no-build, --tests, --cli)" >&2; exit 2 ;;
  esac
done
((tests)) && PACKAGES+=("${TEST_PACKAGES[@]}")

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
# shared by every clone (scripts/setup/install_mkl.sh). ZERODP_NO_MKL=1 skips it: bf16/fp16 GEMMs then
# run on the fp32 fallback.
mkl_args=()
if [ "${ZERODP_NO_MKL:-0}" != 1 ]; then
  mkl_dir=$(bash scripts/setup/install_mkl.sh)
  mkl_args=(-DZERODP_MKL_DIR="$mkl_dir/lib")
fi

# The tokenizer tests' Python venv (tokenizers and tiktoken from PyPI), outside the source tree.
if ((tests)) && [ -f scripts/setup/tokenizer_venv.sh ]; then
  bash scripts/setup/tokenizer_venv.sh >/dev/null
fi
# The Llama-family reference's venv (transformers from PyPI over Debian's torch), outside the source
# tree: made here so that the tests find it rather than each making it on first use.
if ((tests)) && [ -f scripts/setup/transformers_venv.sh ]; then
  bash scripts/setup/transformers_venv.sh >/dev/null
fi

if ((build)); then
  # ZERODP_CUDA=ON (as .ci/run sets) fails the configure when nvcc is missing instead of leaving the
  # CUDA backend out (AUTO, the default).
  if ((cli_only)); then
    # A build directory that already has the tests keeps them (a later test run then rebuilds nothing).
    if grep -q '^ZERODP_BUILD_TESTS:BOOL=ON' build/CMakeCache.txt 2>/dev/null; then
      cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERODP_CUDA="${ZERODP_CUDA:-AUTO}" "${mkl_args[@]}"
    else
      cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERODP_CUDA="${ZERODP_CUDA:-AUTO}" "${mkl_args[@]}" \
        -DZERODP_BUILD_TESTS=OFF -DZERODP_BUILD_BENCH=OFF
    fi
    cmake --build build -j "$(nproc)" --target zerodp
  else
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZERODP_CUDA="${ZERODP_CUDA:-AUTO}" "${mkl_args[@]}" \
      -DZERODP_BUILD_TESTS=ON -DZERODP_BUILD_BENCH=ON
    cmake --build build -j "$(nproc)"
  fi
fi
