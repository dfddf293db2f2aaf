#!/usr/bin/env bash
# Builds the three GEMM benchmark binaries into bench/gemm/build/ with g++ directly (not part of
# the project's CMake build). Needs: libopenblas-openmp-dev and libdnnl-dev from Debian, and oneMKL
# from PyPI in a virtual environment (MKL_VENV, default /tmp/mklvenv):
#   apt-get install -y libopenblas-openmp-dev libdnnl-dev
#   python3 -m venv /tmp/mklvenv && /tmp/mklvenv/bin/pip install mkl mkl-devel mkl-include
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/build
MKL_VENV=${MKL_VENV:-/tmp/mklvenv}
mkdir -p "$out"
CXXFLAGS=(-O2 -std=c++17 -fopenmp -mf16c -Wall -Wextra)

# OpenBLAS, the OpenMP build the project links (CMakeLists.txt prefers openblas-openmp).
OB=/usr/lib/x86_64-linux-gnu/openblas-openmp
g++ "${CXXFLAGS[@]}" -DLIB_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-openmp \
  "$here/gemm_bench.cpp" -o "$out/gemm_openblas" -L"$OB" -Wl,-rpath,"$OB" -lopenblas

# oneDNN 2.6 from Debian: header <oneapi/dnnl/dnnl.hpp>, libdnnl.so (OpenMP runtime, libgomp).
g++ "${CXXFLAGS[@]}" -DLIB_DNNL "$here/gemm_bench.cpp" -o "$out/gemm_onednn" -ldnnl

# oneMKL from PyPI: the wheels ship only versioned sonames (libmkl_*.so.3, no libmkl_*.so links),
# so link by full path, as the wheel's own pkg-config file mkl-dynamic-lp64-gomp.pc does. GNU
# OpenMP threading layer (libmkl_gnu_thread), so MKL shares libgomp with zerodp's own kernels.
if [[ -d "$MKL_VENV/include" && -e "$MKL_VENV/lib/libmkl_core.so.3" ]]; then
  L=$MKL_VENV/lib
  g++ "${CXXFLAGS[@]}" -DLIB_MKL -I"$MKL_VENV/include" "$here/gemm_bench.cpp" -o "$out/gemm_mkl" \
    -Wl,--no-as-needed "$L/libmkl_intel_lp64.so.3" "$L/libmkl_gnu_thread.so.3" "$L/libmkl_core.so.3" \
    -Wl,-rpath,"$L" -lgomp -lpthread -lm -ldl
else
  echo "oneMKL not found under $MKL_VENV: gemm_mkl not built" >&2
fi
# oneDNN 3.2 from PyPI (onednn-cpu-gomp: the GNU OpenMP CPU build; the newer "onednn" wheels are
# SYCL builds that need a SYCL CPU device): optional, in DNNL3_VENV (default /tmp/dnnl32venv):
#   python3 -m venv /tmp/dnnl32venv && /tmp/dnnl32venv/bin/pip install onednn-cpu-gomp onednn-devel-cpu-gomp
DNNL3_VENV=${DNNL3_VENV:-/tmp/dnnl32venv}
if [[ -e "$DNNL3_VENV/lib/libdnnl.so.3" ]]; then
  g++ "${CXXFLAGS[@]}" -DLIB_DNNL -I"$DNNL3_VENV/include" "$here/gemm_bench.cpp" -o "$out/gemm_onednn3" \
    -L"$DNNL3_VENV/lib" -Wl,-rpath,"$DNNL3_VENV/lib" -ldnnl
else
  echo "oneDNN 3 not found under $DNNL3_VENV: gemm_onednn3 not built" >&2
fi
# The core's FMA peak (8 and 16 lanes), to read the GEMM rates against.
g++ -O2 -std=c++17 -Wall -Wextra "$here/fma_peak.cpp" -o "$out/fma_peak"
ls -l "$out"
