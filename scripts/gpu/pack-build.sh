#!/usr/bin/env bash
# Here (no GPU, with network): packs the binaries of a CUDA build made on this machine for the GPU
# machine, so that a device call spends its minutes on tests and measurements instead of a build
# (about 250 steps; with a 15-minute lease the build alone would take a third of it).
#
#   bash scripts/gpu/pack-build.sh [BUILD]     BUILD [build]: a Release build with ZERODP_CUDA on and
#                                            CMAKE_CUDA_ARCHITECTURES holding 90 (the default)
#
# Writes .gpubin/ (ignored by git; it travels only when carried): build.tar.xz with BUILD's zerodp,
# its GPU test binaries and micro_gpu under the path build/, and lib.tar.xz with the shared libraries
# those binaries need that scripts/gpu/gpu-deps.sh does not bring (oneDNN and the OpenCL loader it links).
# scripts/gpu/device-run.sh unpacks both on the GPU machine. Together with .gpudeps/ (about 20 MiB) the
# carried paths stay under the tool's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
die() { printf 'pack-build: %s\n' "$*" >&2; exit 1; }
[[ -x $BUILD/zerodp ]] || die "no $BUILD/zerodp: build first"
# The architectures the build was configured with, else CMakeLists.txt's default (90).
archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
[[ -n $archs ]] || archs=$(sed -n 's/.*set(CMAKE_CUDA_ARCHITECTURES \([0-9a-z;]*\)).*/\1/p' CMakeLists.txt)
[[ ";$archs;" == *";90;"* || ";$archs;" == *";90a;"* ]] || die "$BUILD is built for CUDA architectures '$archs', not 90"
ldd "$BUILD/zerodp" | grep -q libcudart || die "$BUILD/zerodp has no CUDA backend (ZERODP_CUDA=ON)"
mkdir -p .gpubin
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/tests/cuda_gpu" "$stage/build/bench" "$stage/lib"
cp "$BUILD/zerodp" "$stage/build/"
cp "$BUILD"/tests/cuda_gpu/gpu_* "$stage/build/tests/cuda_gpu/"
[[ -x $BUILD/bench/micro_gpu ]] && cp "$BUILD/bench/micro_gpu" "$stage/build/bench/"
# The libraries outside gpu-deps.sh's set, by the name the loader asks for.
for so in libdnnl.so.2 libOpenCL.so.1; do
  p=$(ldd "$BUILD/zerodp" | awk -v n="$so" '$1 == n { print $3 }')
  [[ -n $p ]] && cp -L "$p" "$stage/lib/$so"
done
git rev-parse --short HEAD >"$stage/build/COMMIT"
tar -C "$stage" -cf - build | xz -T0 -6 >.gpubin/build.tar.xz
tar -C "$stage" -cf - lib | xz -T0 -6 >.gpubin/lib.tar.xz
ls -la .gpubin >&2
du -sh .gpubin .gpudeps 2>/dev/null >&2 || true
